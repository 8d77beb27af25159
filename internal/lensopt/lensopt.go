// Package lensopt reads the lens options the server and the C ABI share (camera_model, camera_params,
// keep_undistorted, undistort_balance, undistort_fov) into package lens's undistorters, with messages
// that name those fields.
package lensopt

import (
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/lens"
)

// Options are the lens options of a request or a call.
type Options struct {
	// Model is COLMAP's camera model name as lens.ParseModel takes it ("" for pinhole images), Params
	// its parameters in COLMAP's order, in pixels of the input images.
	Model  string
	Params []float64
	// Keep leaves the outputs in the undistorted pinhole views.
	Keep bool
	// Balance and FOV choose the pinhole view (lens.PinholeOptions's Balance and MaxFOV; 0: defaults).
	Balance, FOV float64
}

// Set reports whether a camera model is given.
func (o Options) Set() bool { return o.Model != "" || o.Params != nil }

// Undistorters checks the options and returns the lens's undistorters, nil when no camera model is
// given.
func (o Options) Undistorters() (*lens.Undistorters, error) {
	if !o.Set() {
		if o.Keep || o.Balance != 0 || o.FOV != 0 {
			return nil, errors.New("keep_undistorted, undistort_balance and undistort_fov need camera_model and camera_params")
		}
		return nil, nil
	}
	switch {
	case o.Model == "":
		return nil, errors.New("camera_params needs camera_model")
	case o.Params == nil:
		return nil, errors.New("camera_model needs camera_params (COLMAP's order, in pixels of the input images)")
	}
	m, err := lens.ParseModel(o.Model)
	if err != nil {
		return nil, fmt.Errorf("camera_model: %w", err)
	}
	c, err := lens.New(m, 0, 0, o.Params)
	if err != nil {
		return nil, fmt.Errorf("camera_params: %w", err)
	}
	if err := (lens.PinholeOptions{Balance: o.Balance}).Check(); err != nil {
		return nil, fmt.Errorf("undistort_%w", err)
	}
	if err := (lens.PinholeOptions{MaxFOV: o.FOV}).Check(); err != nil {
		return nil, fmt.Errorf("undistort_fov %g: want degrees above 0, at most 179 (0: %d)", o.FOV, lens.DefaultMaxFOV)
	}
	return lens.NewUndistorters(c, lens.PinholeOptions{Balance: o.Balance, MaxFOV: o.FOV})
}

// CheckMethod refuses the centre-crop resize methods (process_res_method method) unless the outputs stay
// undistorted: cropped maps cannot be mapped back.
func (o Options) CheckMethod(method string) error {
	if o.Set() && !o.Keep && (method == "upper_bound_crop" || method == "lower_bound_crop") {
		return fmt.Errorf("%s with camera_model: centre-cropped maps cannot be mapped back to the input images' pixels; use upper_bound_resize or lower_bound_resize, or keep_undistorted", method)
	}
	return nil
}

// PinholeOnlyExports are the exports that need pinhole views: with a camera model they are made only
// when the outputs stay undistorted.
var PinholeOnlyExports = []string{"colmap_tracks", "mesh_ply", "mesh_glb", "mesh_points"}

// CheckExport refuses an export of PinholeOnlyExports unless the outputs stay undistorted.
func (o Options) CheckExport(name string) error {
	if !o.Set() || o.Keep {
		return nil
	}
	for _, e := range PinholeOnlyExports {
		if e == name {
			return fmt.Errorf("export %s with camera_model: it needs pinhole views, and the views are mapped back to the lens; add keep_undistorted (the outputs then stay in the undistorted pinhole views)", name)
		}
	}
	return nil
}
