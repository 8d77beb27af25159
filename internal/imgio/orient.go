package imgio

import (
	"image"

	"github.com/da3-go/da3-go/internal/imgproc"
)

// Orientation is an Exif orientation (tag 0x0112): how the stored pixels must be flipped and rotated to
// show the scene upright. Phones store photos as the sensor read them and record the camera's rotation
// here.
//
// The reference pipelines differ: cv2.imread, which Depth Anything V2's code uses, applies it by default;
// PIL's Image.open, which Depth Anything 3's InputProcessor uses, does not.
type Orientation int

// The eight orientations. The names give what Orient does to the stored image.
const (
	OrientNormal      Orientation = 1 // as stored
	OrientFlipH       Orientation = 2 // mirrored left-right
	OrientRotate180   Orientation = 3
	OrientFlipV       Orientation = 4 // mirrored top-bottom
	OrientTranspose   Orientation = 5 // mirrored about the main diagonal
	OrientRotate90CW  Orientation = 6
	OrientTransverse  Orientation = 7 // mirrored about the anti-diagonal
	OrientRotate90CCW Orientation = 8
)

// Orient returns img flipped and rotated as o says (cv2.imread's ApplyExifOrientation and PIL's
// ImageOps.exif_transpose do the same). Orientation 1 and values outside 1–8 return img unchanged.
// Grey images stay grey; anything else becomes an opaque *image.RGBA (alpha dropped, as PIL's
// convert("RGB") does).
func Orient(img image.Image, o Orientation) image.Image {
	if o <= OrientNormal || o > OrientRotate90CCW {
		return img
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	ow, oh := w, h
	if o >= OrientTranspose {
		ow, oh = h, w
	}
	// src maps an output pixel to the stored pixel it shows.
	src := func(x, y int) (int, int) {
		switch o {
		case OrientFlipH:
			return w - 1 - x, y
		case OrientRotate180:
			return w - 1 - x, h - 1 - y
		case OrientFlipV:
			return x, h - 1 - y
		case OrientTranspose:
			return y, x
		case OrientRotate90CW:
			return y, h - 1 - x
		case OrientTransverse:
			return w - 1 - y, h - 1 - x
		default: // OrientRotate90CCW
			return w - 1 - y, x
		}
	}
	if g, ok := img.(*image.Gray); ok {
		out := image.NewGray(image.Rect(0, 0, ow, oh))
		for y := range oh {
			for x := range ow {
				sx, sy := src(x, y)
				out.Pix[y*out.Stride+x] = g.Pix[g.PixOffset(b.Min.X+sx, b.Min.Y+sy)]
			}
		}
		return out
	}
	rgb := imgproc.FromImage(img)
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	for y := range oh {
		for x := range ow {
			sx, sy := src(x, y)
			s, d := rgb.Pix[3*(sy*w+sx):], out.Pix[y*out.Stride+4*x:]
			d[0], d[1], d[2], d[3] = s[0], s[1], s[2], 255
		}
	}
	return out
}
