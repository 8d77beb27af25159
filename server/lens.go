package server

import (
	"github.com/da3-go/da3-go/internal/lensopt"
)

// lensOptions are the request's lens options.
func (p *parsed) lensOptions() lensopt.Options {
	q := &p.req
	return lensopt.Options{Model: q.CameraModel, Params: q.CameraParams, Keep: q.KeepUndistorted,
		Balance: q.UndistortBalance, FOV: q.UndistortFOV}
}

// validateLens checks camera_model, camera_params and the undistortion's
// options, refuses what they do not go with (as da3-go depth and reconstruct
// do) and sets p.lens.
func (p *parsed) validateLens() *apiError {
	q := &p.req
	lo := p.lensOptions()
	if lo.Set() {
		switch {
		case len(q.Cameras) > 0:
			return badRequest("camera_model with cameras: the given cameras are pinhole cameras of the input images; give one of the two")
		case q.Intrinsics != nil:
			return badRequest("camera_model with intrinsics: camera_params holds the intrinsics; drop intrinsics")
		case len(q.AlignPoints) > 0 && !lo.Keep:
			return badRequest("align_points with camera_model: the measurements are in the input images' pixels, the model's maps in the undistorted views'; add keep_undistorted and give the measurements in those views")
		}
	}
	var err error
	if p.lens, err = lo.Undistorters(); err != nil {
		return badRequest("%v", err)
	}
	if err := lo.CheckMethod(q.ProcessResMethod); err != nil {
		return badRequest("process_res_method %v", err)
	}
	for _, e := range q.Exports {
		if err := lo.CheckExport(e); err != nil {
			return badRequest("%v", err)
		}
	}
	return nil
}
