package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/imgio"
)

// TestDepthTiled runs the tiny models tiled on a small image with small
// tiles: the maps (depth, and DA3's confidence) are at the image size and
// finite, and the log names the tiles.
func TestDepthTiled(t *testing.T) {
	for _, tc := range []struct {
		name, res, size string
		model           func(*testing.T) string
		img             string
		conf            bool
		w, h            int
	}{
		{"da2", "84", "64", tinyDA2, "da2-tiny/image.png", false, 160, 120},
		{"da3", "56", "24", tinyDA3, "da3-tiny/one/images/view0.png", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, img := tc.model(t), fixtureImage(t, tc.img)
			src, err := imgio.Decode(img)
			require.NoError(t, err)
			w, h := src.Bounds().Dx(), src.Bounds().Dy()
			out := t.TempDir()
			args := []string{"depth", "-model", m, "-process-res", tc.res, "-tile", "on", "-tile-size", tc.size, "-format", "npy", "-o", out, img}
			if tc.conf {
				args = append(args, "-conf")
			}
			code, stdout, stderr := runCLI(args...)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, stderr, "tiles of "+tc.size+" pixels")
			base := filepath.Base(img[:len(img)-len(filepath.Ext(img))])
			maps := []string{base + "_depth.npy"}
			if tc.conf {
				maps = append(maps, base+"_conf.npy")
			}
			for _, name := range maps {
				assert.Contains(t, stdout, name)
				d, shape, err := imgio.ReadNPY(filepath.Join(out, name))
				require.NoError(t, err)
				assert.Equal(t, []int{h, w}, shape, "%s at the image size", name)
				for i, v := range d {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s: value %d is %g", name, i, v)
					}
				}
			}
		})
	}
}

// TestDepthTileFlags: -tile's values and the flags it does not go with are
// usage errors.
func TestDepthTileFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tile", "yes"}, `-tile "yes": want on, auto or off`},
		{[]string{"-tile", "on", "-processed-size"}, "-processed-size"},
		{[]string{"-tile", "on", "-tile-overlap", "0.7"}, "-tile-overlap 0.7"},
		{[]string{"-tile", "on", "-tile-size", "3"}, "-tile-size 3"},
		{[]string{"-tile", "on", "-tile-fit", "cubic"}, `-tile-fit "cubic"`},
		{[]string{"-tile", "auto", "-stream"}, "-stream"},
	} {
		code, _, stderr := runCLI(append(append([]string{"depth", "-model", "m.gguf"}, tc.args...), "a.png")...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
}

// TestTileAuto: -tile auto tiles the images whose longer side is at least
// four times the process resolution.
func TestTileAuto(t *testing.T) {
	f := tileFlags{mode: tileAuto}
	assert.True(t, f.tiles(4000, 3000, 504))
	assert.True(t, f.tiles(2016, 100, 504))
	assert.False(t, f.tiles(2015, 1500, 504))
	assert.False(t, (&tileFlags{}).tiles(8000, 6000, 504), "off")
	assert.True(t, (&tileFlags{mode: tileOn}).tiles(100, 100, 504), "on")
}
