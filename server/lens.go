package server

import (
	"slices"
	"strings"

	"github.com/da3-go/da3-go/lens"
)

// lensRefusedExports need pinhole views: with a lens they are made only
// from the undistorted views (keep_undistorted).
var lensRefusedExports = []string{"colmap_tracks", "mesh_ply", "mesh_glb"}

// validateLens checks camera_model, camera_params and the undistortion's
// options, refuses what they do not go with (as da3-go depth and reconstruct
// do) and sets p.lens.
func (p *parsed) validateLens() *apiError {
	q := &p.req
	if q.CameraModel == "" && q.CameraParams == nil {
		if q.KeepUndistorted || q.UndistortBalance != 0 || q.UndistortFOV != 0 {
			return badRequest("keep_undistorted, undistort_balance and undistort_fov need camera_model and camera_params")
		}
		return nil
	}
	switch {
	case q.CameraModel == "":
		return badRequest("camera_params needs camera_model")
	case q.CameraParams == nil:
		return badRequest("camera_model needs camera_params (COLMAP's order, in pixels of the input images)")
	case len(q.Cameras) > 0:
		return badRequest("camera_model with cameras: the given cameras are pinhole cameras of the input images; give one of the two")
	case q.Intrinsics != nil:
		return badRequest("camera_model with intrinsics: camera_params holds the intrinsics; drop intrinsics")
	}
	m, err := lens.ParseModel(q.CameraModel)
	if err != nil {
		return badRequest("camera_model: %v", err)
	}
	c, err := lens.New(m, 0, 0, q.CameraParams)
	if err != nil {
		return badRequest("camera_params: %v", err)
	}
	if err := (lens.PinholeOptions{Balance: q.UndistortBalance}).Check(); err != nil {
		return badRequest("undistort_%v", err)
	}
	if err := (lens.PinholeOptions{MaxFOV: q.UndistortFOV}).Check(); err != nil {
		return badRequest("undistort_fov %g: want degrees above 0, at most 179 (0: %d)", q.UndistortFOV, lens.DefaultMaxFOV)
	}
	if p.lens, err = lens.NewUndistorters(c, lens.PinholeOptions{Balance: q.UndistortBalance, MaxFOV: q.UndistortFOV}); err != nil {
		return badRequest("camera_model: %v", err)
	}
	if q.KeepUndistorted {
		return nil
	}
	if len(q.AlignPoints) > 0 {
		return badRequest("align_points with camera_model: the measurements are in the input images' pixels, the model's maps in the undistorted views'; add keep_undistorted and give the measurements in those views")
	}
	if strings.HasSuffix(q.ProcessResMethod, "_crop") {
		return badRequest("process_res_method %s with camera_model: centre-cropped maps cannot be mapped back to the input images' pixels; use upper_bound_resize or lower_bound_resize, or keep_undistorted", q.ProcessResMethod)
	}
	for _, e := range q.Exports {
		if slices.Contains(lensRefusedExports, e) {
			return badRequest("export %s with camera_model: it needs pinhole views, and the views are mapped back to the lens; add keep_undistorted (the outputs then stay in the undistorted pinhole views)", e)
		}
	}
	return nil
}
