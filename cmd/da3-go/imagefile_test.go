package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/imagefile"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/testutil"
)

// The public decoder gives library users the pixels the command feeds the model: on a real photo and
// on a sideways one, with and without the Exif rotation.
func TestPublicDecoderIsTheCommands(t *testing.T) {
	for _, p := range []string{filepath.Join("..", "..", "internal", "jpeg", "testdata", "exif_o6.jpg"), "shared:nyu/rgb_00000.jpg"} {
		if rel, ok := strings.CutPrefix(p, "shared:"); ok {
			p = filepath.Join(testutil.SharedData(t), rel) // skips the rest when the shared data is absent
		}
		for _, rotate := range []bool{false, true} {
			cli, err := decodeOriented(p, rotate)
			require.NoError(t, err)
			lib, err := imagefile.DecodeFile(p, imagefile.Options{ExifRotate: rotate})
			require.NoError(t, err)
			assert.Equal(t, cli.Bounds(), lib.Bounds(), "%s rotate %v", p, rotate)
			assert.Equal(t, imgproc.FromImage(cli).Pix, imgproc.FromImage(lib).Pix, "%s rotate %v", p, rotate)
		}
	}
}
