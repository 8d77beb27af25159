package lens

import (
	"errors"
	"fmt"
	"image"
	"math"
)

// PinholeOptions choose the pinhole camera of an undistorted view (PinholeFor).
type PinholeOptions struct {
	// Width, Height of the undistorted view; 0 × 0: the distorted image's size.
	Width, Height int
	// Balance between filling the frame (0: every pixel of the view sees the image, the largest
	// rectangle inside the undistorted image; nothing is black, the rim of a strongly distorted image
	// is cut off) and keeping the whole image (1: the smallest rectangle holding the undistorted image
	// border; corners are black). Between the two the focal length is interpolated linearly, as OpenCV's
	// fisheye::estimateNewCameraMatrixForUndistortRectify does.
	Balance float64
	// MaxFOV caps the view's field of view, in degrees from edge to edge through the axis (default 150;
	// at most 179): the image border's rays are taken no further than MaxFOV/2 from the optical axis.
	// Only fisheye images reach it; a pinhole view cannot show 180°.
	MaxFOV float64
}

// DefaultMaxFOV is PinholeOptions.MaxFOV's default, in degrees.
const DefaultMaxFOV = 150

// PinholeFor chooses the PINHOLE camera of an undistorted view of images from c.
//
// The border of c's image (64 points per side) is unprojected to the normalised plane, each ray taken
// at most MaxFOV/2 from the axis (points beyond the fold of a strong distortion are moved towards the
// principal point until they unproject). The inner rectangle (left = the largest x of the left side,
// right = the smallest x of the right side, likewise top and bottom) is where every direction is seen;
// the outer rectangle holds every border point. The focal lengths keep c's ratio fy/fx: f_fill is the
// smallest that makes the view fit in the inner rectangle, f_all the largest that fits the outer one
// in the view, f = f_fill + Balance·(f_all − f_fill), and the principal point puts the centre of the
// interpolated rectangle at the centre of the view.
//
// For a pinhole camera (IsPinhole) it returns c's own pinhole part (rescaled to the asked size).
func PinholeFor(c *Camera, opt PinholeOptions) (*Camera, error) {
	if c.Width <= 0 || c.Height <= 0 {
		return nil, fmt.Errorf("pinhole view: the camera has no image size")
	}
	w, h := opt.Width, opt.Height
	if w == 0 && h == 0 {
		w, h = c.Width, c.Height
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("pinhole view: invalid size %dx%d", w, h)
	}
	if !(opt.Balance >= 0 && opt.Balance <= 1) {
		return nil, fmt.Errorf("pinhole view: balance %g not in [0, 1]", opt.Balance)
	}
	fov := opt.MaxFOV
	if fov == 0 {
		fov = DefaultMaxFOV
	}
	if !(fov > 0 && fov <= 179) {
		return nil, fmt.Errorf("pinhole view: max field of view %g° not in (0°, 179°]", fov)
	}
	if c.IsPinhole() {
		k := c.Rescaled(w, h).K()
		return NewPinhole(w, h, k[0][0], k[1][1], k[0][2], k[1][2])
	}
	in, out, err := c.borderRects(math.Tan(fov / 2 * math.Pi / 180))
	if err != nil {
		return nil, err
	}
	fx, fy := c.Focal()
	rho := fy / fx
	W, H := float64(w), float64(h)
	fFill := max(W/(in.r-in.l), H/((in.b-in.t)*rho))
	fAll := min(W/(out.r-out.l), H/((out.b-out.t)*rho))
	b := opt.Balance
	f := fFill + b*(fAll-fFill)
	mx := (1-b)*(in.l+in.r)/2 + b*(out.l+out.r)/2
	my := (1-b)*(in.t+in.b)/2 + b*(out.t+out.b)/2
	return NewPinhole(w, h, f, f*rho, W/2-f*mx, H/2-f*rho*my)
}

type rect struct{ l, r, t, b float64 }

// borderRects returns the inner and outer rectangles of the image border on the normalised plane, the
// rays taken at most atan(maxTan) from the axis.
func (c *Camera) borderRects(maxTan float64) (in, out rect, err error) {
	const n = 64
	in = rect{math.Inf(-1), math.Inf(1), math.Inf(-1), math.Inf(1)}
	out = rect{math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)}
	W, H := float64(c.Width), float64(c.Height)
	for i := 0; i <= n; i++ {
		s := float64(i) / n
		for side, p := range [4][2]float64{{0, s * H}, {W, s * H}, {s * W, 0}, {s * W, H}} {
			x, y, ok := c.borderPoint(p[0], p[1], maxTan)
			if !ok {
				return in, out, errors.New("pinhole view: the image border has no rays (are the distortion parameters right?)")
			}
			switch side {
			case 0:
				in.l = max(in.l, x)
			case 1:
				in.r = min(in.r, x)
			case 2:
				in.t = max(in.t, y)
			case 3:
				in.b = min(in.b, y)
			}
			out.l, out.r, out.t, out.b = min(out.l, x), max(out.r, x), min(out.t, y), max(out.b, y)
		}
	}
	if !(in.r > in.l && in.b > in.t) {
		return in, out, errors.New("pinhole view: the undistorted image holds no rectangle around the principal point")
	}
	return in, out, nil
}

// borderPoint unprojects pixel (x, y) to the normalised plane, capped at maxTan from the axis; a pixel
// beyond the distortion's fold is moved towards the principal point (bisection) until it unprojects.
func (c *Camera) borderPoint(x, y, maxTan float64) (u, v float64, ok bool) {
	cx, cy := c.PrincipalPoint()
	ray, ok := c.Unproject(x, y)
	if !ok {
		lo, hi := 0.0, 1.0 // fraction of the way from the principal point that unprojects / does not
		for range 50 {
			m := (lo + hi) / 2
			if _, ok := c.Unproject(cx+m*(x-cx), cy+m*(y-cy)); ok {
				lo = m
			} else {
				hi = m
			}
		}
		if ray, ok = c.Unproject(cx+lo*(x-cx), cy+lo*(y-cy)); !ok {
			return 0, 0, false
		}
	}
	r := math.Hypot(ray[0], ray[1])
	if r == 0 {
		return 0, 0, true
	}
	t := math.Min(r/ray[2], maxTan) // tan of the angle from the axis
	if !(ray[2] > 0) {
		t = maxTan
	}
	return ray[0] / r * t, ray[1] / r * t, true
}

// Remap is a resampling table: for each pixel of a Width × Height destination, the position in a
// SrcWidth × SrcHeight source grid to sample, in index coordinates (the centre of source pixel (i, j)
// is at (i, j)), NaN where the destination pixel has no source. Sampling is bilinear; positions within
// half a pixel outside the grid take the edge pixels.
type Remap struct {
	Width, Height       int
	SrcWidth, SrcHeight int
	X, Y                []float32
}

// newRemap fills the table with at(x, y): the source position (pixel coordinates) of the destination
// pixel centre (x, y).
func newRemap(w, h, sw, sh int, at func(x, y float64) (float64, float64, bool)) *Remap {
	r := &Remap{Width: w, Height: h, SrcWidth: sw, SrcHeight: sh, X: make([]float32, w*h), Y: make([]float32, w*h)}
	nan := float32(math.NaN())
	for j := range h {
		for i := range w {
			k := j*w + i
			sx, sy, ok := at(float64(i)+0.5, float64(j)+0.5)
			sx, sy = sx-0.5, sy-0.5
			if !ok || !(sx >= -0.5 && sx <= float64(sw)-0.5 && sy >= -0.5 && sy <= float64(sh)-0.5) {
				r.X[k], r.Y[k] = nan, nan
				continue
			}
			r.X[k], r.Y[k] = float32(sx), float32(sy)
		}
	}
	return r
}

// Valid reports whether destination pixel k has a source.
func (r *Remap) Valid(k int) bool { return !math.IsNaN(float64(r.X[k])) }

// weights returns the four source indices and bilinear weights of destination pixel k.
func (r *Remap) weights(k int) (idx [4]int, wt [4]float64) {
	x, y := float64(r.X[k]), float64(r.Y[k])
	x0, y0 := math.Floor(x), math.Floor(y)
	fx, fy := x-x0, y-y0
	xi0, yi0 := int(x0), int(y0)
	xi1, yi1 := min(xi0+1, r.SrcWidth-1), min(yi0+1, r.SrcHeight-1)
	xi0, yi0 = max(xi0, 0), max(yi0, 0)
	idx = [4]int{yi0*r.SrcWidth + xi0, yi0*r.SrcWidth + xi1, yi1*r.SrcWidth + xi0, yi1*r.SrcWidth + xi1}
	wt = [4]float64{(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy}
	return idx, wt
}

// Floats resamples a source map (SrcWidth·SrcHeight values, row-major) bilinearly; pixels without a
// source get fill. NaN source values are left out of the interpolation (their weight given to the
// others); a pixel whose four neighbours are all NaN gets NaN.
func (r *Remap) Floats(src []float32, fill float32) ([]float32, error) {
	if len(src) != r.SrcWidth*r.SrcHeight {
		return nil, fmt.Errorf("remap: %d values for a %dx%d map", len(src), r.SrcWidth, r.SrcHeight)
	}
	out := make([]float32, r.Width*r.Height)
	for k := range out {
		if !r.Valid(k) {
			out[k] = fill
			continue
		}
		idx, wt := r.weights(k)
		var s, ws float64
		for q := range 4 {
			if v := float64(src[idx[q]]); !math.IsNaN(v) && wt[q] > 0 {
				s += wt[q] * v
				ws += wt[q]
			}
		}
		if ws == 0 {
			out[k] = float32(math.NaN())
			continue
		}
		out[k] = float32(s / ws)
	}
	return out, nil
}

// RGB resamples an 8-bit HWC RGB image (3·SrcWidth·SrcHeight values) bilinearly; pixels without a
// source are black.
func (r *Remap) RGB(src []uint8) ([]uint8, error) {
	if len(src) != 3*r.SrcWidth*r.SrcHeight {
		return nil, fmt.Errorf("remap: %d RGB values for a %dx%d image", len(src), r.SrcWidth, r.SrcHeight)
	}
	out := make([]uint8, 3*r.Width*r.Height)
	for k := range r.Width * r.Height {
		if !r.Valid(k) {
			continue
		}
		idx, wt := r.weights(k)
		for ch := range 3 {
			s := 0.0
			for q := range 4 {
				s += wt[q] * float64(src[3*idx[q]+ch])
			}
			out[3*k+ch] = uint8(min(255, max(0, math.Round(s))))
		}
	}
	return out, nil
}

// Image resamples img (SrcWidth × SrcHeight) into an RGBA image, bilinearly per channel; pixels
// without a source are opaque black.
func (r *Remap) Image(img image.Image) (*image.RGBA, error) {
	b := img.Bounds()
	if b.Dx() != r.SrcWidth || b.Dy() != r.SrcHeight {
		return nil, fmt.Errorf("remap: a %dx%d image for a %dx%d table", b.Dx(), b.Dy(), r.SrcWidth, r.SrcHeight)
	}
	rgb := RGBOf(img)
	res, err := r.RGB(rgb)
	if err != nil {
		return nil, err
	}
	out := image.NewRGBA(image.Rect(0, 0, r.Width, r.Height))
	for k := range r.Width * r.Height {
		copy(out.Pix[4*k:4*k+3], res[3*k:3*k+3])
		out.Pix[4*k+3] = 255
	}
	return out, nil
}

// RGBOf returns an image's 8-bit RGB pixels, HWC, row-major (alpha dropped).
func RGBOf(img image.Image) []uint8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]uint8, 3*w*h)
	if m, ok := img.(*image.RGBA); ok {
		for k := range w * h {
			x, y := k%w, k/w
			o := m.PixOffset(b.Min.X+x, b.Min.Y+y)
			copy(out[3*k:3*k+3], m.Pix[o:o+3])
		}
		return out
	}
	for y := range h {
		for x := range w {
			cr, cg, cb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			k := 3 * (y*w + x)
			out[k], out[k+1], out[k+2] = uint8(cr>>8), uint8(cg>>8), uint8(cb>>8)
		}
	}
	return out
}

// Undistorter maps between a distorted camera's images and the views of a pinhole camera with the same
// centre and axes: undistortion of images and maps (Forward), and the mapping of maps computed on the
// pinhole view back to the distorted image's pixels (Backward).
type Undistorter struct {
	// Distorted is the camera of the input images, Pinhole that of the undistorted views.
	Distorted, Pinhole *Camera
	fwd                *Remap
}

// NewUndistorter builds the undistortion of images from the camera distorted into views of pinhole
// (PinholeFor chooses one). Both must have an image size.
func NewUndistorter(distorted, pinhole *Camera) (*Undistorter, error) {
	if distorted.Width <= 0 || pinhole.Width <= 0 {
		return nil, errors.New("undistorter: both cameras need an image size")
	}
	if !pinhole.IsPinhole() {
		return nil, fmt.Errorf("undistorter: the output camera %v is not a pinhole camera", pinhole.Model)
	}
	u := &Undistorter{Distorted: distorted, Pinhole: pinhole}
	u.fwd = newRemap(pinhole.Width, pinhole.Height, distorted.Width, distorted.Height, func(x, y float64) (float64, float64, bool) {
		ray, ok := pinhole.Unproject(x, y)
		if !ok {
			return 0, 0, false
		}
		return distorted.Project(ray)
	})
	return u, nil
}

// Forward is the table that undistorts: for each pixel of the pinhole view, where to sample the
// distorted image.
func (u *Undistorter) Forward() *Remap { return u.fwd }

// Image undistorts an image of the distorted camera's size into the pinhole view (bilinear; pixels
// that see nothing of the image are black).
func (u *Undistorter) Image(img image.Image) (*image.RGBA, error) { return u.fwd.Image(img) }

// Backward is the table that maps back: for each pixel of a w × h image of the distorted camera (the
// camera rescaled to that size), where to sample a mw × mh map of the pinhole view (the pinhole camera
// rescaled to that size). A distorted pixel has no source when its ray does not unproject, is at or
// beyond 90° from the axis, or leaves the pinhole view.
//
// The two cameras share their centre and axes, so the z-depth of a pinhole map sampled along a pixel's
// ray is that pixel's z-depth in the distorted camera too: a depth map maps back by resampling alone.
// Its 3D point is ray·z/ray_z (see Camera.Unproject).
func (u *Undistorter) Backward(w, h, mw, mh int) *Remap {
	d := u.Distorted.Rescaled(w, h)
	p := u.Pinhole.Rescaled(mw, mh)
	return newRemap(w, h, mw, mh, func(x, y float64) (float64, float64, bool) {
		ray, ok := d.Unproject(x, y)
		if !ok || !(ray[2] > epsilon) {
			return 0, 0, false
		}
		return p.Project(ray)
	})
}
