package export

import (
	"fmt"
	"math"

	"github.com/da3-go/da3-go/lens"
)

// DistortView maps a view computed on an undistorted image back to the distorted image it came from:
// u's undistorted (pinhole) view, the view's maps covering it at any resolution. The result has maps of
// the same size covering the distorted image (its camera rescaled to that size, u.Backward), in that
// camera's frame: depth is z-depth in both cameras (they share centre and axes), so each map is
// resampled along the pixels' rays (bilinearly); pixels whose ray leaves the undistorted view or is at
// or beyond 90° from the axis get NaN depth, confidence and sky, and black RGB. The view's camera keeps
// its pose and gets u.Distorted as its Lens (COLMAP exports write that model) with its pinhole part as
// the intrinsics; its original size becomes the distorted image's.
func DistortView(v View, u *lens.Undistorter) (View, error) {
	if err := v.check(0, false, true); err != nil {
		return View{}, err
	}
	w, h := v.Width, v.Height
	rm := u.Backward(w, h, w, h)
	nan := float32(math.NaN())
	out := v
	var err error
	if out.Depth, err = rm.Floats(v.Depth, nan); err != nil {
		return View{}, fmt.Errorf("view %s: depth: %w", v.Name, err)
	}
	if v.Conf != nil {
		if out.Conf, err = rm.Floats(v.Conf, nan); err != nil {
			return View{}, fmt.Errorf("view %s: confidence: %w", v.Name, err)
		}
	}
	if v.Sky != nil {
		if out.Sky, err = rm.Floats(v.Sky, nan); err != nil {
			return View{}, fmt.Errorf("view %s: sky: %w", v.Name, err)
		}
	}
	if v.RGB != nil {
		if out.RGB, err = rm.RGB(v.RGB); err != nil {
			return View{}, fmt.Errorf("view %s: RGB: %w", v.Name, err)
		}
	}
	d := u.Distorted
	out.OrigWidth, out.OrigHeight = d.Width, d.Height
	if v.Camera != nil {
		c := *v.Camera
		ko := d.K()
		sx, sy := float64(w)/float64(d.Width), float64(h)/float64(d.Height)
		c.IntrinsicsOriginal = ko
		c.Intrinsics = [3][3]float64{{ko[0][0] * sx, 0, ko[0][2] * sx}, {0, ko[1][1] * sy, ko[1][2] * sy}, {0, 0, 1}}
		c.Lens = d
		out.Camera = &c
	}
	return out, nil
}
