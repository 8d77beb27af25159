package main

import (
	"errors"
	"fmt"
	"image"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/lensopt"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// setLens checks the call's lens options (camera_model, ...) against the
// others and keeps them in r.
func (r *runOptions) setLens(lo lensopt.Options) error {
	if lo.Set() && r.opt.Extrinsics != nil {
		return errors.New("camera_model with given cameras: the given cameras are pinhole cameras of the input images; give one of the two")
	}
	us, err := lo.Undistorters()
	if err != nil {
		return err
	}
	if err := lo.CheckMethod(r.opt.Method.String()); err != nil {
		return fmt.Errorf("method %w", err)
	}
	r.lensOpt, r.lens = lo, us
	return nil
}

// undistort undistorts the images for a run with a lens, each to its
// pinhole view. ks are, for a model that needs intrinsics (DA3
// metric-large) and was given none, each view's intrinsics, else nil; back
// is, per image, the undistorter its outputs are mapped back with (nil:
// none, or keep_undistorted).
func (s scene) undistort(imgs []image.Image, o runOptions) (out []image.Image, ks []*model.Intrinsics, back []*lens.Undistorter, err error) {
	if o.lens == nil {
		return imgs, nil, nil, nil
	}
	out, back = make([]image.Image, len(imgs)), make([]*lens.Undistorter, len(imgs))
	caps := s.Capabilities()
	needK := caps.NeedsIntrinsics && !caps.Nested && o.opt.Intrinsics == nil
	for i, img := range imgs {
		b := img.Bounds()
		u, err := o.lens.For(b.Dx(), b.Dy())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("image %d: camera_model: %w", i, err)
		}
		out[i], back[i] = img, u
		k := o.lens.Camera().K()
		if u != nil {
			if out[i], err = u.Image(img); err != nil {
				return nil, nil, nil, fmt.Errorf("image %d: %w", i, err)
			}
			k = u.Pinhole.K()
		}
		if needK {
			ks = append(ks, &model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]})
		}
	}
	if o.lensOpt.Keep {
		back = nil
	}
	return out, ks, back, nil
}

// mapBack maps the maps and cameras of res back to the input images' pixels
// (model.Result.MapBack) where back has an undistorter.
func mapBack(res []model.Result, back []*lens.Undistorter) error {
	for i, u := range back {
		if u == nil || i >= len(res) {
			continue
		}
		if err := res[i].MapBack(u); err != nil {
			return fmt.Errorf("image %d: %w", i, lensError(err))
		}
	}
	return nil
}

// sceneViews are res as export views, mapped back to the input images'
// pixels where back has an undistorter (model.DistortViews).
func sceneViews(res []model.Result, back []*lens.Undistorter) ([]export.View, error) {
	views, err := model.Views(res, nil)
	if err != nil {
		return nil, err
	}
	if err := model.DistortViews(views, res, back); err != nil {
		return nil, lensError(err)
	}
	return views, nil
}

// lensError names what to change when undistorted views cannot be mapped back.
func lensError(err error) error {
	if errors.Is(err, model.ErrCroppedLens) {
		return fmt.Errorf("%w: use upper_bound_resize or lower_bound_resize, images of one size, or keep_undistorted", err)
	}
	return err
}
