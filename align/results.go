package align

import (
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/model"
)

// ErrCropped reports a view whose map does not cover its whole image (a crop
// resize method, or views of different sizes), so measurements of the image
// cannot be placed on it.
var ErrCropped = errors.New("the view was cropped, so its map does not cover the image the measurements are of (use upper_bound_resize or lower_bound_resize and same-size images)")

// Results brings the results of one scene (or one image) to metres with one
// fit over all their measurements: samples[i] are rs[i]'s, in pixels of its
// original image when their Width is 0 (points given in the input image),
// and a zero Samples means none for that view. Depth becomes metres and the
// cameras' translations are scaled with it (a depth fit; a disparity fit
// leaves them, as they have no metric meaning then).
func Results(rs []*model.Result, samples []Samples, opts Options) (Alignment, error) {
	if len(samples) != len(rs) {
		return Alignment{}, fmt.Errorf("%d sample sets for %d views", len(samples), len(rs))
	}
	var views []View
	for i, r := range rs {
		s := samples[i]
		if s.Len() == 0 {
			continue
		}
		if r.Cropped {
			return Alignment{}, fmt.Errorf("view %d: %w", i, ErrCropped)
		}
		if s.Width == 0 {
			s.Width, s.Height = r.OrigWidth, r.OrigHeight
		}
		views = append(views, View{
			Pred:    Map{Width: r.Width, Height: r.Height, Values: r.Depth, Conf: r.Conf, Disparity: r.Unit == model.Disparity},
			Samples: s,
		})
	}
	if len(views) == 0 {
		return Alignment{}, fmt.Errorf("%w: no view has measurements", ErrTooFewSamples)
	}
	fit, err := Fit(views, opts)
	if err != nil {
		return Alignment{}, err
	}
	for _, r := range rs {
		r.Depth, r.Unit = fit.Apply(r.Depth), model.Metres
		if c := r.Camera; c != nil && !fit.Disparity {
			for k := range 3 {
				c.Extrinsics[k][3] *= fit.Scale
			}
		}
	}
	return fit, nil
}
