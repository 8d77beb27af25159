package lensopt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptions(t *testing.T) {
	us, err := Options{}.Undistorters()
	require.NoError(t, err)
	assert.Nil(t, us, "no camera model: pinhole images")
	fisheye := Options{Model: "fisheye", Params: []float64{30, 30, 32, 24, 0.05, -0.01, 0.002, -0.0003}}
	us, err = fisheye.Undistorters()
	require.NoError(t, err)
	u, err := us.For(64, 48)
	require.NoError(t, err)
	assert.Equal(t, "OPENCV_FISHEYE", u.Distorted.Model.String())

	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Keep: true}, "need camera_model"},
		{Options{Model: "opencv"}, "camera_model needs camera_params"},
		{Options{Params: []float64{1}}, "camera_params needs camera_model"},
		{Options{Model: "opencv", Params: []float64{1, 2, 3}}, "camera_params: camera model OPENCV takes 8 parameters"},
		{Options{Model: "nope", Params: []float64{1}}, "camera_model: unknown or unsupported"},
		{Options{Model: fisheye.Model, Params: fisheye.Params, Balance: -1}, "undistort_balance -1"},
		{Options{Model: fisheye.Model, Params: fisheye.Params, FOV: 200}, "undistort_fov 200"},
	} {
		_, err := c.o.Undistorters()
		assert.ErrorContains(t, err, c.want, "%+v", c.o)
	}

	assert.ErrorContains(t, fisheye.CheckMethod("upper_bound_crop"), "centre-cropped")
	assert.NoError(t, fisheye.CheckMethod("lower_bound_resize"))
	assert.ErrorContains(t, fisheye.CheckExport("mesh_glb"), "export mesh_glb with camera_model")
	assert.NoError(t, fisheye.CheckExport("colmap"))
	keep := fisheye
	keep.Keep = true
	assert.NoError(t, keep.CheckMethod("upper_bound_crop"))
	assert.NoError(t, keep.CheckExport("colmap_tracks"))
	assert.NoError(t, Options{}.CheckExport("mesh_ply"), "pinhole images make meshes")
}
