// Package imgproc reproduces the image resampling that the reference Python pipelines perform with OpenCV
// (cv2.resize) and PyTorch (F.interpolate), in pure Go and bit for bit where the reference is deterministic.
//
// Layouts:
//   - RGB8 is interleaved 8-bit RGB, row-major, top row first (HWC), exactly the numpy array cv2 receives.
//   - Planar32 / Planar64 are channel-planar (CHW) float images.
//
// Parity notes (measured against opencv-python-headless 5.0.0 on x86-64, see testdata/gen.py):
//   - ResizeCubicU8 and ResizeCubicF32 are OpenCV's own code paths (fixed point for 8 bit). They are
//     bit-exact with cv2 when Intel IPP is disabled (cv2.ipp.setUseIPP(False)), on builds without IPP, and
//     for sources narrower or shorter than 4 pixels, where the IPP path declines.
//   - The default x86-64 opencv-python wheels route 8-bit and float32 INTER_CUBIC through Intel IPP
//     (float arithmetic): ResizeCubicU8IPP emulates that path (≈2e-5 of the values differ by 1 LSB, each
//     a value within float32 rounding of a .5 tie). IPP picks its code by the CPU's features and its
//     SSE4.2, AVX2 and AVX-512 variants round such values differently from one another (1.0–1.6e-5 of
//     the values of noise images, pairwise), so cv2's own output is not the same on every CPU.
//   - INTER_AREA (ResizeAreaU8) and float64 INTER_CUBIC (ResizeCubicF64) never go through IPP and are
//     bit-exact.
//
// Programmer errors (non-positive sizes, buffers of the wrong length) panic; sizes coming from untrusted
// files must be validated first with CheckSize.
package imgproc

import (
	"fmt"
	"image"
	"image/color"
)

// Limits for image sizes accepted from untrusted input.
const (
	MaxSide   = 16384     // pixels on either side
	MaxPixels = 100 << 20 // total pixels (about 100 Mpx)
)

// CheckSize reports whether a w×h image is acceptable: both sides positive, neither above MaxSide and the
// area not above MaxPixels.
func CheckSize(w, h int) error {
	switch {
	case w <= 0 || h <= 0:
		return fmt.Errorf("image size %dx%d: empty image", w, h)
	case w > MaxSide || h > MaxSide:
		return fmt.Errorf("image size %dx%d: a side exceeds %d pixels", w, h, MaxSide)
	case int64(w)*int64(h) > MaxPixels:
		return fmt.Errorf("image size %dx%d: %d pixels exceeds the limit of %d", w, h, int64(w)*int64(h), MaxPixels)
	}
	return nil
}

// RGB8 is an interleaved 8-bit RGB image: Pix[(y*W+x)*3+c], top row first.
type RGB8 struct {
	W, H int
	Pix  []uint8
}

// NewRGB8 allocates a black w×h image. It panics if a side is not positive.
func NewRGB8(w, h int) *RGB8 {
	mustPositive("NewRGB8", w, h)
	return &RGB8{W: w, H: h, Pix: make([]uint8, w*h*3)}
}

// Crop returns a copy of the w×h window whose top-left corner is (x, y). It panics if the window does not
// lie inside the image.
func (m *RGB8) Crop(x, y, w, h int) *RGB8 {
	if x < 0 || y < 0 || w <= 0 || h <= 0 || x+w > m.W || y+h > m.H {
		panic(fmt.Sprintf("imgproc: crop %dx%d+%d+%d outside %dx%d image", w, h, x, y, m.W, m.H))
	}
	out := NewRGB8(w, h)
	for r := 0; r < h; r++ {
		copy(out.Pix[r*w*3:(r+1)*w*3], m.Pix[((y+r)*m.W+x)*3:((y+r)*m.W+x+w)*3])
	}
	return out
}

// Clone returns a deep copy.
func (m *RGB8) Clone() *RGB8 {
	return &RGB8{W: m.W, H: m.H, Pix: append([]uint8(nil), m.Pix...)}
}

func (m *RGB8) check(op string) {
	if m == nil {
		panic("imgproc: " + op + ": nil image")
	}
	mustPositive(op, m.W, m.H)
	if len(m.Pix) != m.W*m.H*3 {
		panic(fmt.Sprintf("imgproc: %s: %dx%d RGB image has %d bytes, want %d", op, m.W, m.H, len(m.Pix), m.W*m.H*3))
	}
}

// Planar32 is a channel-planar float32 image: Pix[(c*H+y)*W+x].
type Planar32 struct {
	W, H, C int
	Pix     []float32
}

// Planar64 is a channel-planar float64 image: Pix[(c*H+y)*W+x].
type Planar64 struct {
	W, H, C int
	Pix     []float64
}

func checkPlanar(op string, w, h, c, n int) {
	mustPositive(op, w, h)
	if c <= 0 || n != w*h*c {
		panic(fmt.Sprintf("imgproc: %s: %dx%dx%d planar image has %d values", op, w, h, c, n))
	}
}

func mustPositive(op string, w, h int) {
	if w <= 0 || h <= 0 {
		panic(fmt.Sprintf("imgproc: %s: size %dx%d is not positive", op, w, h))
	}
}

// FromImage converts img to 8-bit RGB the way PIL's Image.convert("RGB") does for the common decoder
// outputs: alpha is dropped (not composited), grey is replicated, palettes are looked up, 16-bit samples
// keep their high byte. YCbCr and CMYK go through Go's colour conversions (libjpeg, used by PIL, may differ
// by 1 LSB). The image's bounds origin is ignored. It panics on an empty image: validate with CheckSize.
func FromImage(img image.Image) *RGB8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := NewRGB8(w, h)
	p := out.Pix
	switch src := img.(type) {
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				copy(p[(y*w+x)*3:(y*w+x)*3+3], row[x*4:x*4+3])
			}
		}
	case *image.RGBA:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				r, g, bb, a := row[x*4], row[x*4+1], row[x*4+2], row[x*4+3]
				if a != 255 { // premultiplied: recover the straight colour PIL would have stored
					c := color.NRGBAModel.Convert(color.RGBA{r, g, bb, a}).(color.NRGBA)
					r, g, bb = c.R, c.G, c.B
				}
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = r, g, bb
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = row[x], row[x], row[x]
			}
		}
	case *image.Paletted:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				var c color.NRGBA
				if int(row[x]) < len(src.Palette) {
					c = color.NRGBAModel.Convert(src.Palette[row[x]]).(color.NRGBA)
				}
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = c.R, c.G, c.B
			}
		}
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi, ci := src.YOffset(b.Min.X+x, b.Min.Y+y), src.COffset(b.Min.X+x, b.Min.Y+y)
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride:]
			for x := 0; x < w; x++ {
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = color.CMYKToRGB(row[x*4], row[x*4+1], row[x*4+2], row[x*4+3])
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBA64Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				o := (y*w + x) * 3
				p[o], p[o+1], p[o+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			}
		}
	}
	return out
}
