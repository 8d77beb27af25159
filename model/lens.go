package model

import (
	"fmt"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/lens"
)

// ErrCroppedLens: the maps of a centre-cropped view (crop resize methods, or views of different sizes
// in one scene) do not cover the undistorted view, so they cannot be mapped back to the distorted
// image. It wraps ErrInvalidInput.
var ErrCroppedLens = fmt.Errorf("%w: undistorted views cannot be mapped back from centre-cropped maps (crop resize methods, or views of different sizes)", ErrInvalidInput)

// MapBackMap maps one of r's maps (data, w × h: r's maps as they are or as OriginalMap resizes them),
// computed on an image undistorted by the undistorter of m (lens.Undistorter.BackMapper), back to the
// pixels of the distorted image at the same size: NaN where the pixel's ray leaves the undistorted
// view. nil stays nil; a cropped result is refused (ErrCroppedLens).
func (r *Result) MapBackMap(m *lens.BackMapper, data []float32, w, h int) ([]float32, error) {
	if data == nil {
		return nil, nil
	}
	if r.Cropped {
		return nil, ErrCroppedLens
	}
	return m.Floats(data, w, h)
}

// MapBack maps r's Depth, Conf and Sky, computed on an image undistorted by u, back to the pixels of the
// distorted image at the maps' size (see MapBackMap), in place, and gives r's camera the lens's pinhole
// part as its intrinsics (IntrinsicsOriginal; Intrinsics scaled to the processed size), as
// export.DistortView gives a view's; the pose is the one predicted for the undistorted view (the two
// cameras share centre and axes). RGB and Gaussians are left as they are.
func (r *Result) MapBack(u *lens.Undistorter) error {
	m := u.BackMapper()
	for _, p := range []*[]float32{&r.Depth, &r.Conf, &r.Sky} {
		d, err := r.MapBackMap(m, *p, r.Width, r.Height)
		if err != nil {
			return err
		}
		*p = d
	}
	if r.Camera != nil {
		c := *r.Camera
		d := u.Distorted
		ko := d.K()
		sx, sy := float64(r.ProcessedWidth)/float64(d.Width), float64(r.ProcessedHeight)/float64(d.Height)
		c.IntrinsicsOriginal = ko
		c.Intrinsics = [3][3]float64{{ko[0][0] * sx, 0, ko[0][2] * sx}, {0, ko[1][1] * sy, ko[1][2] * sy}, {0, 0, 1}}
		r.Camera = &c
	}
	return nil
}

// DistortViews maps views[i] (of results[i], model.Views), computed on an image undistorted by us[i],
// back to the distorted image's pixels with export.DistortView, in place: the maps at the same size, the
// camera with the lens (points follow its rays, COLMAP writes its model). A nil us[i] leaves the view as
// it is; us may be shorter than views. A cropped result is refused (ErrCroppedLens).
func DistortViews(views []export.View, results []Result, us []*lens.Undistorter) error {
	if len(views) != len(results) {
		return fmt.Errorf("%d views for %d results", len(views), len(results))
	}
	for i, u := range us {
		if u == nil || i >= len(views) {
			continue
		}
		if results[i].Cropped {
			return fmt.Errorf("%s: %w", views[i].Name, ErrCroppedLens)
		}
		v, err := export.DistortView(views[i], u)
		if err != nil {
			return err
		}
		views[i] = v
	}
	return nil
}
