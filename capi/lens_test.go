package main

import (
	"context"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// fisheyeParams is the fisheye lens of the tests' 64×48 images.
var fisheyeParams = testutil.FisheyeParams

// fisheyeRGB renders a textured plane through the test fisheye lens: 64×48 interleaved RGB.
func fisheyeRGB(t *testing.T, seed float64) []byte {
	t.Helper()
	img, err := testutil.FisheyeImage(seed)
	require.NoError(t, err)
	px := make([]byte, 0, 3*64*48)
	for k := 0; k < len(img.Pix); k += 4 {
		px = append(px, img.Pix[k], img.Pix[k+1], img.Pix[k+2])
	}
	return px
}

// lensOpt returns da3go_options with the fisheye lens; the C strings are freed when the test ends.
func lensOpt(t *testing.T, modelName string, params []float64) *_Ctype_da3go_options {
	t.Helper()
	o := &_Ctype_da3go_options{process_res: 56}
	if modelName != "" {
		s := cString(modelName)
		t.Cleanup(func() { da3go_free_string(s) })
		o.camera_model = s
	}
	if params != nil {
		o.camera_params = (*_Ctype_double)(unsafe.Pointer(&params[0]))
	}
	return o
}

// fisheyeUndistorter is the undistortion the library does by default (balance 0).
func fisheyeUndistorter(t *testing.T) *lens.Undistorter {
	t.Helper()
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, fisheyeParams)
	require.NoError(t, err)
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{})
	require.NoError(t, err)
	u, err := lens.NewUndistorter(c, pin)
	require.NoError(t, err)
	return u
}

// TestLensDepth: with camera_model, da3go_depth_rgb and da3go_run_scenes return maps at the input size,
// equal to the lens package's undistortion, the model on the pinhole view and the map back, NaN exactly
// where the rays leave the view, with the lens's pinhole part as the camera's intrinsics;
// keep_undistorted returns the pinhole view's maps and camera.
func TestLensDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model: skipped in -short mode")
	}
	h := batchFixture(t)
	s, err := lookup(h)
	require.NoError(t, err)
	u := fisheyeUndistorter(t)
	rgbs := [][]byte{fisheyeRGB(t, 0), fisheyeRGB(t, 0.4)}
	var views []image.Image
	for _, px := range rgbs {
		v, err := u.Image(rgbImage(px, 64, 48))
		require.NoError(t, err)
		views = append(views, v)
	}
	back := u.Backward(64, 48, 64, 48)
	mapped := func(d []float32) []float32 {
		out, err := back.Floats(d, float32(math.NaN()))
		require.NoError(t, err)
		return out
	}
	opt := lensOpt(t, "fisheye", fisheyeParams)

	// One image alone.
	var out *_Ctype_float
	var ow, oh _Ctype_int
	var cerr *_Ctype_char
	rc := da3go_depth_rgb(h, (*_Ctype_uchar)(&rgbs[0][0]), 64, 48, opt, &out, &ow, &oh, &cerr)
	require.Zero(t, int(rc), "da3go_depth_rgb: %s", errText(cerr))
	got := append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(out)), int(ow*oh))...)
	da3go_free_buffer(unsafe.Pointer(out))
	require.Equal(t, [2]int{64, 48}, [2]int{int(ow), int(oh)})
	alone, err := s.Depth(context.Background(), views[0], model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	want := mapped(alone.Depth)
	nan := 0
	for k := range want {
		if !back.Valid(k) {
			nan++
			require.True(t, math.IsNaN(float64(got[k])), "pixel %d: NaN beyond the pinhole view", k)
			continue
		}
		require.Equal(t, want[k], got[k], "pixel %d", k)
	}
	assert.Positive(t, nan, "the fisheye's rim")
	assert.Less(t, nan, 64*48/2)

	// Two images as one scene, in memory.
	ptrs := []*_Ctype_uchar{(*_Ctype_uchar)(&rgbs[0][0]), (*_Ctype_uchar)(&rgbs[1][0])}
	ws, hs, counts := []_Ctype_int{64, 64}, []_Ctype_int{48, 48}, []_Ctype_int{2}
	runScenes := func(o *_Ctype_da3go_options) []model.Result {
		var vs *_Ctype_da3go_view
		var n _Ctype_int
		rc := da3go_run_scenes(h, &ptrs[0], &ws[0], &hs[0], &counts[0], 1, o, &vs, &n, &cerr)
		require.Zero(t, int(rc), "da3go_run_scenes: %s", errText(cerr))
		return takeViews(vs, int(n))
	}
	scene, err := s.MultiView(context.Background(), views, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	res := runScenes(opt)
	require.Len(t, res, 2)
	for i, r := range res {
		assert.Equal(t, [2]int{64, 48}, [2]int{r.Width, r.Height})
		want := mapped(scene[i].Depth)
		for k := range want {
			if math.IsNaN(float64(want[k])) {
				require.True(t, math.IsNaN(float64(r.Depth[k])))
			} else {
				require.Equal(t, want[k], r.Depth[k])
			}
		}
		require.NotNil(t, r.Camera)
		assert.Equal(t, scene[i].Camera.Extrinsics, r.Camera.Extrinsics, "the pose predicted for the pinhole view")
		assert.Equal(t, u.Distorted.K(), r.Camera.IntrinsicsOriginal, "the lens's pinhole part")
	}

	// keep_undistorted: the pinhole views' maps and cameras.
	opt.keep_undistorted = 1
	res = runScenes(opt)
	for i, r := range res {
		assert.Equal(t, scene[i].Depth, r.Depth)
		assert.Equal(t, scene[i].Camera.IntrinsicsOriginal, r.Camera.IntrinsicsOriginal)
	}
}

// TestLensExport: da3go_export's COLMAP model carries the OPENCV_FISHEYE cameras (PINHOLE with
// keep_undistorted); the exports that need pinhole views are refused unless keep_undistorted, and bad
// lens options are errors naming the field.
func TestLensExport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model: skipped in -short mode")
	}
	h := batchFixture(t)
	dir := t.TempDir()
	var files []*_Ctype_char
	for i, seed := range []float64{0, 0.4} {
		img := rgbImage(fisheyeRGB(t, seed), 64, 48)
		p := filepath.Join(dir, []string{"a.png", "b.png"}[i])
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, png.Encode(f, img))
		require.NoError(t, f.Close())
		cs := cString(p)
		t.Cleanup(func() { da3go_free_string(cs) })
		files = append(files, cs)
	}
	paths := (**_Ctype_da3go_cchar)(unsafe.Pointer(&files[0]))
	exportTo := func(o *_Ctype_da3go_options, format, out string) string {
		f, op := cString(format), cString(out)
		defer da3go_free_string(f)
		defer da3go_free_string(op)
		var cerr *_Ctype_char
		da3go_export(h, paths, 2, o, (*_Ctype_da3go_cchar)(unsafe.Pointer(f)), (*_Ctype_da3go_cchar)(unsafe.Pointer(op)), &cerr)
		return errText(cerr)
	}
	opt := lensOpt(t, "OPENCV_FISHEYE", fisheyeParams)
	out := filepath.Join(t.TempDir(), "sparse")
	require.Empty(t, exportTo(opt, "colmap", out))
	m, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.Len(t, m.Cameras, 2)
	for _, c := range m.Cameras {
		assert.Equal(t, export.OpenCVFisheye, c.Model)
		assert.Equal(t, fisheyeParams, c.Params)
		assert.Equal(t, [2]uint64{64, 48}, [2]uint64{c.Width, c.Height})
	}
	assert.NotEmpty(t, m.Points)
	assert.Contains(t, exportTo(opt, "colmap_tracks", filepath.Join(t.TempDir(), "t")), "export colmap_tracks with camera_model")
	assert.Contains(t, exportTo(opt, "mesh_ply", filepath.Join(t.TempDir(), "m.ply")), "add keep_undistorted")

	opt.keep_undistorted = 1
	out = filepath.Join(t.TempDir(), "sparse")
	require.Empty(t, exportTo(opt, "colmap", out))
	m, err = export.ReadCOLMAP(out)
	require.NoError(t, err)
	assert.Equal(t, export.Pinhole, m.Cameras[0].Model)
	require.Empty(t, exportTo(opt, "mesh_ply", filepath.Join(t.TempDir(), "m.ply")))

	crop := cString("upper_bound_crop")
	defer da3go_free_string(crop)
	ext, ixt := make([]float64, 24), make([]float64, 8)
	for _, c := range []struct {
		name string
		opt  *_Ctype_da3go_options
		want string
	}{
		{"no params", lensOpt(t, "fisheye", nil), "camera_model needs camera_params"},
		{"unknown model", lensOpt(t, "fov", fisheyeParams), "camera_model: unknown or unsupported camera model"},
		{"no model", lensOpt(t, "", fisheyeParams), "camera_params needs camera_model"},
		{"keep alone", &_Ctype_da3go_options{keep_undistorted: 1}, "need camera_model and camera_params"},
		{"balance", func() *_Ctype_da3go_options {
			o := lensOpt(t, "fisheye", fisheyeParams)
			o.undistort_balance = 3
			return o
		}(), "undistort_balance 3"},
		{"crop", func() *_Ctype_da3go_options { o := lensOpt(t, "fisheye", fisheyeParams); o.method = crop; return o }(), "upper_bound_crop with camera_model"},
		{"given cameras", func() *_Ctype_da3go_options {
			o := lensOpt(t, "fisheye", fisheyeParams)
			o.given_extrinsics, o.given_intrinsics = (*_Ctype_double)(unsafe.Pointer(&ext[0])), (*_Ctype_double)(unsafe.Pointer(&ixt[0]))
			return o
		}(), "camera_model with given cameras"},
	} {
		assert.Contains(t, exportTo(c.opt, "ply", filepath.Join(t.TempDir(), "p.ply")), c.want, c.name)
	}
}

// TestCameraModelParams: the parameter count of a camera model, as lens knows it; an unknown model fails.
func TestCameraModelParams(t *testing.T) {
	for name, want := range map[string]int{"fisheye": 8, "OPENCV": 8, "full_opencv": 12, "SIMPLE_RADIAL": 4, "FISHEYE": 4, "pinhole": 4} {
		s := cString(name)
		var n _Ctype_int
		var cerr *_Ctype_char
		rc := da3go_camera_model_params((*_Ctype_da3go_cchar)(unsafe.Pointer(s)), &n, &cerr)
		da3go_free_string(s)
		require.Zero(t, int(rc), "%s: %s", name, errText(cerr))
		assert.Equal(t, want, int(n), name)
	}
	s := cString("fov")
	defer da3go_free_string(s)
	var n _Ctype_int
	var cerr *_Ctype_char
	assert.Equal(t, -1, int(da3go_camera_model_params((*_Ctype_da3go_cchar)(unsafe.Pointer(s)), &n, &cerr)))
	assert.Contains(t, errText(cerr), "unknown or unsupported camera model")
	assert.Equal(t, -1, int(da3go_camera_model_params(nil, &n, &cerr)))
	assert.Contains(t, errText(cerr), "must not be NULL")
}
