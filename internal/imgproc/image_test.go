package imgproc

import (
	"image"
	"image/color"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckSize(t *testing.T) {
	tests := []struct {
		name string
		w, h int
		ok   bool
	}{
		{"normal", 640, 480, true},
		{"max side", MaxSide, 100, true},
		{"zero width", 0, 10, false},
		{"negative", 10, -1, false},
		{"side too long", MaxSide + 1, 1, false},
		{"too many pixels", 16000, 16000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSize(tc.w, tc.h)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestProgrammerErrorsPanic(t *testing.T) {
	img := NewRGB8(4, 4)
	assert.Panics(t, func() { ResizeCubicU8(img, 0, 3) })
	assert.Panics(t, func() { ResizeCubicU8IPP(&RGB8{W: 4, H: 4, Pix: make([]uint8, 5)}, 2, 2) })
	assert.Panics(t, func() { ResizeAreaU8(img, 5, 4) }, "area upscaling is not implemented")
	assert.Panics(t, func() { img.Crop(2, 2, 3, 1) })
	assert.Panics(t, func() { BilinearAlignCorners(make([]float32, 3), 2, 2, 4, 4) })
	assert.Panics(t, func() { ResizeCubicF64(&Planar64{W: 2, H: 2, C: 3, Pix: make([]float64, 4)}, 3, 3) })
}

func TestSameSizeCopies(t *testing.T) {
	img := &RGB8{W: 3, H: 2, Pix: noiseU8(1, 18)}
	for _, f := range []func(*RGB8, int, int) *RGB8{ResizeCubicU8, ResizeCubicU8IPP, ResizeAreaU8} {
		out := f(img, 3, 2)
		assert.Equal(t, img.Pix, out.Pix)
		out.Pix[0]++
		assert.NotEqual(t, img.Pix[0], out.Pix[0], "result must not alias the source")
	}
}

func TestCrop(t *testing.T) {
	img := &RGB8{W: 4, H: 3, Pix: make([]uint8, 36)}
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	c := img.Crop(1, 1, 2, 2)
	assert.Equal(t, []uint8{15, 16, 17, 18, 19, 20, 27, 28, 29, 30, 31, 32}, c.Pix)
}

func TestFromImage(t *testing.T) {
	nrgba := image.NewNRGBA(image.Rect(10, 20, 12, 21))  // non-zero origin
	nrgba.SetNRGBA(10, 20, color.NRGBA{200, 100, 50, 0}) // alpha dropped, colour kept (PIL convert)
	nrgba.SetNRGBA(11, 20, color.NRGBA{1, 2, 3, 255})
	assert.Equal(t, []uint8{200, 100, 50, 1, 2, 3}, FromImage(nrgba).Pix)

	gray := image.NewGray(image.Rect(0, 0, 1, 1))
	gray.Pix[0] = 77
	assert.Equal(t, []uint8{77, 77, 77}, FromImage(gray).Pix)

	pal := image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.RGBA{9, 8, 7, 255}, color.RGBA{1, 1, 1, 255}})
	pal.Pix[1] = 0
	pal.Pix[0] = 1
	assert.Equal(t, []uint8{1, 1, 1, 9, 8, 7}, FromImage(pal).Pix)

	g16 := image.NewRGBA64(image.Rect(0, 0, 1, 1))
	g16.SetRGBA64(0, 0, color.RGBA64{0xABCD, 0x1234, 0xFFFF, 0xFFFF})
	assert.Equal(t, []uint8{0xAB, 0x12, 0xFF}, FromImage(g16).Pix)

	ycc := image.NewYCbCr(image.Rect(0, 0, 2, 2), image.YCbCrSubsampleRatio420)
	for i := range ycc.Y {
		ycc.Y[i] = 120
	}
	ycc.Cb[0], ycc.Cr[0] = 90, 200
	r, g, b := color.YCbCrToRGB(120, 90, 200)
	got := FromImage(ycc)
	require.Len(t, got.Pix, 12)
	assert.Equal(t, []uint8{r, g, b}, got.Pix[9:12])
}
