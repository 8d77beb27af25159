package imagefile_test

import (
	"bytes"
	"image"
	_ "image/jpeg" // image.Decode's JPEG decoder, to show the difference
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/imagefile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/testutil"
)

// nyuJPEG is a real photo of the shared test data (read in place; the test skips without it).
func nyuJPEG(t *testing.T) string {
	p := filepath.Join(testutil.SharedData(t), "nyu", "rgb_00000.jpg")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared photo: %v", err)
	}
	return p
}

// rgb is img's RGB bytes as preprocessing reads them.
func rgb(img image.Image) []uint8 { return imgproc.FromImage(img).Pix }

// The public decoder is the command's and the server's: the same pixels on a real photo, whichever
// orientation handling (imgio.DecodeWithOrientation + Orient for the command, DecodeBytes for the
// server), and the same from a file, a reader or bytes.
func TestSamePixelsAsCommandAndServer(t *testing.T) {
	path := nyuJPEG(t)
	cli, o, err := imgio.DecodeWithOrientation(path)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	srv, _, err := imgio.DecodeBytes(data, "upload")
	require.NoError(t, err)
	for _, rotate := range []bool{false, true} {
		want := cli
		if rotate {
			want = imgio.Orient(cli, o)
		}
		got, err := imagefile.DecodeFile(path, imagefile.Options{ExifRotate: rotate})
		require.NoError(t, err)
		assert.Equal(t, want.Bounds(), got.Bounds())
		assert.Equal(t, rgb(want), rgb(got), "DecodeFile, ExifRotate %v", rotate)
		fromReader, err := imagefile.Decode(bytes.NewReader(data), imagefile.Options{ExifRotate: rotate})
		require.NoError(t, err)
		assert.Equal(t, rgb(want), rgb(fromReader), "Decode, ExifRotate %v", rotate)
	}
	assert.Equal(t, rgb(srv), rgb(cli), "the server's decode")
}

// The reason the package exists: image.Decode's JPEG pixels are not libjpeg-turbo's, which the
// references read (and this decoder gives).
func TestDiffersFromImageDecodeOnJPEG(t *testing.T) {
	path := nyuJPEG(t)
	ours, err := imagefile.DecodeFile(path, imagefile.Options{})
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	std, format, err := image.Decode(f)
	require.NoError(t, err)
	require.Equal(t, "jpeg", format)
	require.Equal(t, std.Bounds(), ours.Bounds())
	a, b := rgb(ours), rgb(std)
	differ, maxDiff := 0, 0
	for i := range a {
		if d := max(int(a[i])-int(b[i]), int(b[i])-int(a[i])); d > 0 {
			differ++
			maxDiff = max(maxDiff, d)
		}
	}
	t.Logf("image.Decode differs in %d of %d values, by up to %d levels", differ, len(a), maxDiff)
	assert.Greater(t, differ, len(a)/10, "image/jpeg differs from libjpeg-turbo on many values")
	assert.Greater(t, maxDiff, 10)
}

// On the JPEG fixtures with libjpeg-turbo's decode beside them (cv2.imread, orientation applied),
// ExifRotate gives the reference's pixels exactly.
func TestMatchesLibjpegTurbo(t *testing.T) {
	for _, name := range []string{"exif_o1", "exif_o6", "exif_o8", "baseline_420"} {
		jpg := filepath.Join("..", "internal", "jpeg", "testdata", name+".jpg")
		got, err := imagefile.DecodeFile(jpg, imagefile.Options{ExifRotate: true})
		require.NoError(t, err, name)
		want := testutil.ReadPNG(t, filepath.Join("..", "internal", "jpeg", "testdata", name+".png"))
		assert.Equal(t, want.Bounds().Size(), got.Bounds().Size(), name)
		assert.Equal(t, rgb(want), rgb(got), name)
	}
}

func TestPixelBudget(t *testing.T) {
	jpg := filepath.Join("..", "internal", "jpeg", "testdata", "baseline_420.jpg")
	hd, err := imgio.DecodeHeader(jpg)
	require.NoError(t, err)
	n := int64(hd.Width * hd.Height)
	_, err = imagefile.DecodeFile(jpg, imagefile.Options{MaxPixels: n - 1})
	require.ErrorIs(t, err, imagefile.ErrTooManyPixels)
	assert.ErrorContains(t, err, "imagefile.Options.MaxPixels")
	_, err = imagefile.DecodeFile(jpg, imagefile.Options{MaxPixels: n})
	assert.NoError(t, err, "a budget of exactly the image's pixels")

	data, err := os.ReadFile(jpg)
	require.NoError(t, err)
	_, err = imagefile.Decode(bytes.NewReader(data), imagefile.Options{MaxPixels: n - 1})
	assert.ErrorIs(t, err, imagefile.ErrTooManyPixels)
	// The process budget the command sets (-max-image-pixels) does not apply to library calls.
	prev := imgio.SetMaxPixels(1)
	defer imgio.SetMaxPixels(prev)
	_, err = imagefile.DecodeFile(jpg, imagefile.Options{})
	assert.NoError(t, err)
}

func TestNotAnImage(t *testing.T) {
	_, err := imagefile.Decode(bytes.NewReader([]byte("not an image at all")), imagefile.Options{})
	assert.ErrorContains(t, err, "unknown format")
	_, err = imagefile.Decode(bytes.NewReader(nil), imagefile.Options{})
	assert.ErrorContains(t, err, "empty")
}
