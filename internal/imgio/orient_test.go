package imgio

import (
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
)

// JPEG fixtures of internal/jpeg (tests/oracle/jpeg_fixtures.py): exif_o<k>.jpg carries Exif orientation
// k; exif_o<k>.png is cv2.imread's decode with its default orientation handling (equal to PIL's
// ImageOps.exif_transpose, checked by the script).
const jpegTestdata = "../jpeg/testdata"

func requireSamePixels(t *testing.T, want, got image.Image, msg string) {
	t.Helper()
	require.Equal(t, want.Bounds().Size(), got.Bounds().Size(), msg)
	wb, gb := want.Bounds(), got.Bounds()
	for y := range wb.Dy() {
		for x := range wb.Dx() {
			w := color.NRGBAModel.Convert(want.At(wb.Min.X+x, wb.Min.Y+y)).(color.NRGBA)
			g := color.NRGBAModel.Convert(got.At(gb.Min.X+x, gb.Min.Y+y)).(color.NRGBA)
			require.Equal(t, [3]uint8{w.R, w.G, w.B}, [3]uint8{g.R, g.G, g.B}, "%s: pixel (%d,%d)", msg, x, y)
		}
	}
}

func TestExifOrientationMatchesReferences(t *testing.T) {
	for k := 1; k <= 8; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			path := filepath.Join(jpegTestdata, fmt.Sprintf("exif_o%d.jpg", k))
			img, o, err := DecodeWithOrientation(path)
			require.NoError(t, err)
			assert.Equal(t, Orientation(k), o)
			assert.Equal(t, image.Pt(24, 16), img.Bounds().Size(), "Decode returns the pixels as stored")
			want := testutil.ReadPNG(t, filepath.Join(jpegTestdata, fmt.Sprintf("exif_o%d.png", k)))
			requireSamePixels(t, want, Orient(img, o), "oriented")

			b, err := os.ReadFile(path)
			require.NoError(t, err)
			fromBytes, ob, err := DecodeBytes(b, "upload")
			require.NoError(t, err)
			assert.Equal(t, o, ob, "DecodeBytes reads the same orientation")
			assert.Equal(t, img, fromBytes)
			hd, err := DecodeHeaderBytes(b, "upload")
			require.NoError(t, err)
			assert.Equal(t, Header{Width: 24, Height: 16, Format: "jpeg", Orientation: Orientation(k)}, hd)
		})
	}
}

func TestOrientGrey(t *testing.T) {
	g := image.NewGray(image.Rect(0, 0, 3, 2))
	copy(g.Pix, []uint8{1, 2, 3, 4, 5, 6})
	for o, want := range map[Orientation][]uint8{
		OrientNormal:      {1, 2, 3, 4, 5, 6},
		OrientFlipH:       {3, 2, 1, 6, 5, 4},
		OrientRotate180:   {6, 5, 4, 3, 2, 1},
		OrientFlipV:       {4, 5, 6, 1, 2, 3},
		OrientTranspose:   {1, 4, 2, 5, 3, 6},
		OrientRotate90CW:  {4, 1, 5, 2, 6, 3},
		OrientTransverse:  {6, 3, 5, 2, 4, 1},
		OrientRotate90CCW: {3, 6, 2, 5, 1, 4},
	} {
		out := Orient(g, o).(*image.Gray)
		assert.Equal(t, want, out.Pix, "orientation %d", o)
	}
}

func TestDecodeJPEGIsLibjpegTurbo(t *testing.T) {
	for _, name := range []string{"baseline_420", "progressive_422", "grey_baseline"} {
		img, o, err := DecodeWithOrientation(filepath.Join(jpegTestdata, name+".jpg"))
		require.NoError(t, err)
		assert.Equal(t, OrientNormal, o)
		requireSamePixels(t, testutil.ReadPNG(t, filepath.Join(jpegTestdata, name+".png")), img, name)
	}
}
