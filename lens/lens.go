// Package lens implements COLMAP's camera models: projection of camera-frame points to pixels, the
// inverse (pixel to ray, Newton's method on the distortion with convergence checks), the choice of a
// pinhole camera for an undistorted view and the remap tables between the two frames.
//
// The formulas are those of COLMAP (src/colmap/sensor/models): a point (u, v, w) of the camera frame
// (OpenCV axes: x right, y down, z forward) goes to the normalised plane (u/w, v/w); perspective models
// distort it there, fisheye models first map it to the equidistant plane (θ·u/r, θ·v/r) with
// θ = atan(r), r = |(u/w, v/w)|, and distort that; the pixel is then (fx·x + cx, fy·y + cy).
//
// Pixel coordinates are COLMAP's: continuous, with the centre of the top-left pixel at (0.5, 0.5), so
// pixel (column, row) has its centre at (column + 0.5, row + 0.5). The grid functions (Remap, the
// Undistorter) sample at pixel centres.
//
// The package is a leaf: it depends on the standard library only.
package lens

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Model is a COLMAP camera model id (the ids of COLMAP's models.h and of cameras.bin).
type Model int32

// The camera models this package implements (COLMAP's ids). The others COLMAP defines (FOV, thin-prism,
// division, EUCM) are refused by New.
const (
	SimplePinhole       Model = 0  // f, cx, cy
	Pinhole             Model = 1  // fx, fy, cx, cy
	SimpleRadial        Model = 2  // f, cx, cy, k
	Radial              Model = 3  // f, cx, cy, k1, k2
	OpenCV              Model = 4  // fx, fy, cx, cy, k1, k2, p1, p2
	OpenCVFisheye       Model = 5  // fx, fy, cx, cy, k1, k2, k3, k4
	FullOpenCV          Model = 6  // fx, fy, cx, cy, k1, k2, p1, p2, k3, k4, k5, k6
	SimpleRadialFisheye Model = 8  // f, cx, cy, k
	RadialFisheye       Model = 9  // f, cx, cy, k1, k2
	SimpleFisheye       Model = 14 // f, cx, cy
	Fisheye             Model = 15 // fx, fy, cx, cy
)

type modelInfo struct {
	name    string
	params  string
	nParams int
	single  bool // one focal length f
	fisheye bool // equidistant projection before the distortion
}

var models = map[Model]modelInfo{
	SimplePinhole:       {"SIMPLE_PINHOLE", "f,cx,cy", 3, true, false},
	Pinhole:             {"PINHOLE", "fx,fy,cx,cy", 4, false, false},
	SimpleRadial:        {"SIMPLE_RADIAL", "f,cx,cy,k", 4, true, false},
	Radial:              {"RADIAL", "f,cx,cy,k1,k2", 5, true, false},
	OpenCV:              {"OPENCV", "fx,fy,cx,cy,k1,k2,p1,p2", 8, false, false},
	OpenCVFisheye:       {"OPENCV_FISHEYE", "fx,fy,cx,cy,k1,k2,k3,k4", 8, false, true},
	FullOpenCV:          {"FULL_OPENCV", "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,k5,k6", 12, false, false},
	SimpleRadialFisheye: {"SIMPLE_RADIAL_FISHEYE", "f,cx,cy,k", 4, true, true},
	RadialFisheye:       {"RADIAL_FISHEYE", "f,cx,cy,k1,k2", 5, true, true},
	SimpleFisheye:       {"SIMPLE_FISHEYE", "f,cx,cy", 3, true, true},
	Fisheye:             {"FISHEYE", "fx,fy,cx,cy", 4, false, true},
}

// otherNames are COLMAP's models that the package does not implement.
var otherNames = map[Model]string{7: "FOV", 10: "THIN_PRISM_FISHEYE", 11: "RAD_TAN_THIN_PRISM_FISHEYE", 12: "SIMPLE_DIVISION",
	13: "DIVISION", 16: "EUCM", 17: "EQUIRECTANGULAR"}

// aliases are the lower-case names ParseModel takes besides COLMAP's.
var aliases = map[string]Model{"fisheye": OpenCVFisheye, "equidistant": Fisheye}

// String returns COLMAP's name of the model.
func (m Model) String() string {
	if i, ok := models[m]; ok {
		return i.name
	}
	if n, ok := otherNames[m]; ok {
		return n
	}
	return fmt.Sprintf("Model(%d)", int32(m))
}

// Supported reports whether the package implements the model.
func (m Model) Supported() bool { _, ok := models[m]; return ok }

// NumParams returns the model's parameter count (0 for a model the package does not implement).
func (m Model) NumParams() int { return models[m].nParams }

// ParamNames returns the model's parameters in COLMAP's order, e.g. "fx,fy,cx,cy,k1,k2,p1,p2".
func (m Model) ParamNames() string { return models[m].params }

// IsFisheye reports an equidistant (fisheye) projection.
func (m Model) IsFisheye() bool { return models[m].fisheye }

// ParseModel parses a model name: COLMAP's exactly (OPENCV, OPENCV_FISHEYE, FISHEYE, …), else the
// lower-case "fisheye" for OPENCV_FISHEYE (the usual fisheye calibration) and "equidistant" for FISHEYE,
// else COLMAP's in any case (opencv, full_opencv, …).
func ParseModel(s string) (Model, error) {
	s = strings.TrimSpace(s)
	for m, i := range models {
		if i.name == s {
			return m, nil
		}
	}
	if m, ok := aliases[strings.ToLower(s)]; ok {
		return m, nil
	}
	for m, i := range models {
		if strings.EqualFold(i.name, s) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown or unsupported camera model %q (%s)", s, ModelNames())
}

// ModelNames lists the supported models' names, lower case, in id order.
func ModelNames() string {
	var names []string
	for id := Model(0); id <= Fisheye; id++ {
		if i, ok := models[id]; ok {
			names = append(names, strings.ToLower(i.name))
		}
	}
	return strings.Join(names, ", ")
}

// Camera is a camera model with its parameters, for images of Width × Height pixels.
type Camera struct {
	Model         Model
	Width, Height int
	// Params in COLMAP's order (Model.ParamNames).
	Params []float64
}

// New returns a camera, checking the model, the parameter count, that every parameter is finite and the
// focal lengths positive. A size of 0 × 0 means "not known yet" (see WithSize).
func New(m Model, width, height int, params []float64) (*Camera, error) {
	i, ok := models[m]
	if !ok {
		return nil, fmt.Errorf("camera model %v is not supported (%s)", m, ModelNames())
	}
	if len(params) != i.nParams {
		return nil, fmt.Errorf("camera model %s takes %d parameters (%s), got %d", i.name, i.nParams, i.params, len(params))
	}
	if width < 0 || height < 0 || (width == 0) != (height == 0) {
		return nil, fmt.Errorf("camera: invalid image size %dx%d", width, height)
	}
	for k, p := range params {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("camera %s: parameter %d is not finite", i.name, k)
		}
	}
	c := &Camera{Model: m, Width: width, Height: height, Params: append([]float64(nil), params...)}
	if fx, fy := c.Focal(); !(fx > 0 && fy > 0) {
		return nil, fmt.Errorf("camera %s: focal lengths %g, %g must be positive", i.name, fx, fy)
	}
	return c, nil
}

// NewPinhole returns a PINHOLE camera.
func NewPinhole(width, height int, fx, fy, cx, cy float64) (*Camera, error) {
	return New(Pinhole, width, height, []float64{fx, fy, cx, cy})
}

// WithSize returns a copy of c for images of width × height (the parameters unchanged).
func (c *Camera) WithSize(width, height int) *Camera {
	d := *c
	d.Width, d.Height, d.Params = width, height, append([]float64(nil), c.Params...)
	return &d
}

// Focal returns the focal lengths in pixels.
func (c *Camera) Focal() (fx, fy float64) {
	if models[c.Model].single {
		return c.Params[0], c.Params[0]
	}
	return c.Params[0], c.Params[1]
}

// PrincipalPoint returns (cx, cy) in pixels.
func (c *Camera) PrincipalPoint() (cx, cy float64) {
	if models[c.Model].single {
		return c.Params[1], c.Params[2]
	}
	return c.Params[2], c.Params[3]
}

// K returns the pinhole part of the camera: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]].
func (c *Camera) K() [3][3]float64 {
	fx, fy := c.Focal()
	cx, cy := c.PrincipalPoint()
	return [3][3]float64{{fx, 0, cx}, {0, fy, cy}, {0, 0, 1}}
}

// extra returns the distortion parameters.
func (c *Camera) extra() []float64 {
	if models[c.Model].single {
		return c.Params[3:]
	}
	return c.Params[4:]
}

// IsPinhole reports a camera that a pinhole matrix describes exactly: a pinhole model, or a perspective
// model whose distortion parameters are all zero. Fisheye models are never pinhole.
func (c *Camera) IsPinhole() bool {
	if models[c.Model].fisheye {
		return false
	}
	for _, k := range c.extra() {
		if k != 0 {
			return false
		}
	}
	return true
}

// Rescaled returns the camera for the same lens on an image resized to width × height, as COLMAP's
// Camera::Rescale: fx, cx scale by width/Width and fy, cy by height/Height (a single focal length by the
// mean of the two); distortion parameters are unchanged.
func (c *Camera) Rescaled(width, height int) *Camera {
	sx, sy := float64(width)/float64(c.Width), float64(height)/float64(c.Height)
	d := c.WithSize(width, height)
	if models[c.Model].single {
		d.Params[0] *= 0.5 * (sx + sy)
		d.Params[1] *= sx
		d.Params[2] *= sy
	} else {
		d.Params[0] *= sx
		d.Params[1] *= sy
		d.Params[2] *= sx
		d.Params[3] *= sy
	}
	return d
}

// String formats the camera as a cameras.txt line without the id: MODEL WIDTH HEIGHT PARAMS.
func (c *Camera) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %d %d", c.Model, c.Width, c.Height)
	for _, p := range c.Params {
		fmt.Fprintf(&b, " %g", p)
	}
	return b.String()
}

// ErrNotProjectable reports a point the camera cannot see or a pixel without a ray.
var ErrNotProjectable = errors.New("not projectable")

// Project returns the pixel (x, y) of the camera-frame point p (COLMAP's ImgFromCam). ok is false for
// points at or behind the camera plane (z < machine epsilon), as in COLMAP, except for fisheye models,
// whose equidistant projection also takes points at and behind the plane (θ = atan2(r, z), up to π),
// which COLMAP refuses.
func (c *Camera) Project(p [3]float64) (x, y float64, ok bool) {
	var u, v float64
	if models[c.Model].fisheye {
		r := math.Hypot(p[0], p[1])
		if r == 0 {
			if !(p[2] > 0) {
				return 0, 0, false
			}
		} else {
			theta := math.Atan2(r, p[2])
			u, v = p[0]*theta/r, p[1]*theta/r
		}
	} else {
		if !(p[2] >= epsilon) {
			return 0, 0, false
		}
		u, v = p[0]/p[2], p[1]/p[2]
	}
	du, dv, _ := c.distortion(u, v, false)
	x, y = c.fromPlane(u+du, v+dv)
	return x, y, !math.IsNaN(x) && !math.IsNaN(y) && !math.IsInf(x, 0) && !math.IsInf(y, 0)
}

const epsilon = 2.220446049250313e-16

// fromPlane maps distorted plane coordinates to pixels.
func (c *Camera) fromPlane(u, v float64) (x, y float64) {
	fx, fy := c.Focal()
	cx, cy := c.PrincipalPoint()
	return fx*u + cx, fy*v + cy
}

// Unproject returns the unit ray of pixel (x, y) in the camera frame (COLMAP's CamRayFromImg), inverting
// the distortion by Newton's method. ok is false when the iteration does not converge or lands where
// the distortion folds over (its Jacobian is not positive: beyond the radius where a strong barrel
// distortion turns back, no ray maps to the pixel). Fisheye rays may reach and pass 90° from the axis
// (z ≤ 0), which COLMAP's normalised coordinates cannot express.
func (c *Camera) Unproject(x, y float64) (ray [3]float64, ok bool) {
	fx, fy := c.Focal()
	cx, cy := c.PrincipalPoint()
	u, v, ok := c.undistort((x-cx)/fx, (y-cy)/fy)
	if !ok {
		return ray, false
	}
	if models[c.Model].fisheye {
		theta := math.Hypot(u, v)
		if theta > math.Pi {
			return ray, false
		}
		s := 1.0
		if theta > 0 {
			s = math.Sin(theta) / theta
		}
		return [3]float64{u * s, v * s, math.Cos(theta)}, true
	}
	n := math.Sqrt(u*u + v*v + 1)
	return [3]float64{u / n, v / n, 1 / n}, true
}

// Normalized returns the normalised coordinates (X/Z, Y/Z) of pixel (x, y) (COLMAP's CamFromImg); ok is
// false where Unproject fails or the ray is at or beyond 90° from the axis.
func (c *Camera) Normalized(x, y float64) (u, v float64, ok bool) {
	r, ok := c.Unproject(x, y)
	if !ok || !(r[2] > epsilon) {
		return 0, 0, false
	}
	return r[0] / r[2], r[1] / r[2], true
}

// distortion returns COLMAP's Distortion (du, dv) at plane point (u, v) and, with jac, the Jacobian of
// (u + du, v + dv).
func (c *Camera) distortion(u, v float64, jac bool) (du, dv float64, j [2][2]float64) {
	k := c.extra()
	j = [2][2]float64{{1, 0}, {0, 1}}
	switch c.Model {
	case SimpleRadial, Radial, SimpleRadialFisheye, RadialFisheye, OpenCVFisheye:
		// radial(r²) = Σ k_i r^(2i); (du, dv) = (u, v)·radial. For the fisheye models r = θ.
		r2 := u*u + v*v
		radial, dradial, p := 0.0, 0.0, 1.0
		for i, ki := range k {
			dradial += float64(i+1) * ki * p // d radial / d r²
			p *= r2
			radial += ki * p
		}
		du, dv = u*radial, v*radial
		if jac {
			j = [2][2]float64{
				{1 + radial + 2*u*u*dradial, 2 * u * v * dradial},
				{2 * u * v * dradial, 1 + radial + 2*v*v*dradial},
			}
		}
	case OpenCV, FullOpenCV:
		k1, k2, p1, p2 := k[0], k[1], k[2], k[3]
		var k3, k4, k5, k6 float64
		if c.Model == FullOpenCV {
			k3, k4, k5, k6 = k[4], k[5], k[6], k[7]
		}
		u2, v2, uv := u*u, v*v, u*v
		r2 := u2 + v2
		r4, r6 := r2*r2, r2*r2*r2
		num := 1 + k1*r2 + k2*r4 + k3*r6
		den := 1 + k4*r2 + k5*r4 + k6*r6
		radial := num / den
		du = u*radial + 2*p1*uv + p2*(r2+2*u2) - u
		dv = v*radial + 2*p2*uv + p1*(r2+2*v2) - v
		if jac {
			dnum := k1 + 2*k2*r2 + 3*k3*r4 // d/dr²
			dden := k4 + 2*k5*r2 + 3*k6*r4
			drad := (dnum*den - num*dden) / (den * den) // d radial / d r²
			j = [2][2]float64{
				{radial + 2*u*u*drad + 2*p1*v + 6*p2*u, 2*u*v*drad + 2*p1*u + 2*p2*v},
				{2*u*v*drad + 2*p2*v + 2*p1*u, radial + 2*v*v*drad + 2*p2*u + 6*p1*v},
			}
		}
	}
	return du, dv, j
}

// undistort inverts (u, v) ↦ (u, v) + distortion(u, v) at (xd, yd) by Newton's method with COLMAP's
// trust region (a step at most 0.1·max(|x|, 1)), up to 100 iterations. It succeeds when the last step is
// below 1e-12·max(|x|, 1), the residual below 1e-10·max(|xd|, 1) and the Jacobian's determinant positive.
func (c *Camera) undistort(xd, yd float64) (u, v float64, ok bool) {
	if len(c.extra()) == 0 {
		return xd, yd, true
	}
	u, v = xd, yd
	for range 100 {
		du, dv, j := c.distortion(u, v, true)
		ru, rv := u+du-xd, v+dv-yd
		det := j[0][0]*j[1][1] - j[0][1]*j[1][0]
		if det == 0 || math.IsNaN(det) {
			return u, v, false
		}
		su := (j[1][1]*ru - j[0][1]*rv) / det
		sv := (j[0][0]*rv - j[1][0]*ru) / det
		n := math.Hypot(su, sv)
		if lim := 0.1 * max(math.Hypot(u, v), 1); n > lim {
			su, sv = su*lim/n, sv*lim/n
		}
		u, v = u-su, v-sv
		if n < 1e-12*max(math.Hypot(u, v), 1) {
			du, dv, j = c.distortion(u, v, true)
			res := math.Hypot(u+du-xd, v+dv-yd)
			det = j[0][0]*j[1][1] - j[0][1]*j[1][0]
			return u, v, res <= 1e-10*max(math.Hypot(xd, yd), 1) && det > 0
		}
	}
	return u, v, false
}
