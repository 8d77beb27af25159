package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/da3-go/da3-go/model/camera"
)

// Errors of the optional DA3 outputs and inputs: the model file lacks the
// part a run option needs.
var (
	// ErrNoRayHead: RunOptions.RayPose with a file without the auxiliary
	// ray head.
	ErrNoRayHead = errors.New("model has no auxiliary ray head")
	// ErrNoCameraEncoder: given cameras with a file without the camera
	// encoder.
	ErrNoCameraEncoder = errors.New("model has no camera encoder")
	// ErrNoGaussianHead: RunOptions.Gaussians with a model other than
	// DA3-GIANT.
	ErrNoGaussianHead = errors.New("model has no Gaussian head")
)

// checkParts refuses options the model cannot honour (the parts of a run
// it lacks) or inputs that do not fit n images.
func (m *Model) checkParts(n int, opt RunOptions) (err error) {
	defer func() { err = invalid(err) }()
	anyView := m.cfg.Arch == DA3 && !m.cfg.NestedMetric
	if opt.RayPose && (!anyView || !m.cfg.Head.Aux) {
		return fmt.Errorf("%w: %s cannot estimate poses from rays: ray pose needs a DA3 any-view file converted with the auxiliary ray head", ErrNoRayHead, m.describe())
	}
	if opt.Gaussians && m.gsHead == nil {
		return fmt.Errorf("%w: %s cannot predict 3D Gaussians; they need DA3-GIANT (or the any-view file of the nested model)", ErrNoGaussianHead, m.describe())
	}
	if opt.Extrinsics == nil && opt.ViewIntrinsics == nil {
		return nil
	}
	if !anyView || m.camEnc == nil {
		return fmt.Errorf("%w: %s cannot take given cameras; they need a DA3 any-view file converted by this version of the converter (older files and the C++ engine's lack the camera encoder: re-convert)", ErrNoCameraEncoder, m.describe())
	}
	if len(opt.Extrinsics) != n || len(opt.ViewIntrinsics) != n {
		return fmt.Errorf("given cameras: %d extrinsics and %d intrinsics for %d images (one of each per image)", len(opt.Extrinsics), len(opt.ViewIntrinsics), n)
	}
	for i, e := range opt.Extrinsics {
		if err := checkPose(e); err != nil {
			return fmt.Errorf("given camera %d: %w", i, err)
		}
		k := opt.ViewIntrinsics[i]
		if !(k.Fx > 0) || !(k.Fy > 0) || math.IsInf(k.Fx, 0) || math.IsInf(k.Fy, 0) || !finite64(k.Cx, k.Cy) {
			return fmt.Errorf("given camera %d: intrinsics fx %g, fy %g, cx %g, cy %g are not a camera (positive focal lengths, finite principal point, in pixels)", i, k.Fx, k.Fy, k.Cx, k.Cy)
		}
	}
	return nil
}

// checkPose accepts a world-to-camera [R | t] whose R is a rotation.
func checkPose(e [3][4]float64) error {
	for i := range e {
		if !finite64(e[i][:]...) {
			return fmt.Errorf("extrinsics %v are not finite", e)
		}
	}
	r := camera.Rotation(e)
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			var d float64
			for k := 0; k < 3; k++ {
				d += r[i][k] * r[j][k]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(d-want) > 1e-3 {
				return fmt.Errorf("extrinsics rotation %v is not orthonormal (R·Rᵀ differs from I by %.2g)", r, math.Abs(d-want))
			}
		}
	}
	if d := r[0][0]*(r[1][1]*r[2][2]-r[1][2]*r[2][1]) - r[0][1]*(r[1][0]*r[2][2]-r[1][2]*r[2][0]) + r[0][2]*(r[1][0]*r[2][1]-r[1][1]*r[2][0]); d < 0 {
		return fmt.Errorf("extrinsics rotation %v is a reflection (det %.3g)", r, d)
	}
	return nil
}

func finite64(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
