package server

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// fisheyeParams is the fisheye lens of the tests' 64×48 images.
var fisheyeParams = testutil.FisheyeParams

// fisheyePNG renders a textured plane through the test fisheye lens into a 64×48 PNG.
func fisheyePNG(t *testing.T, seed float64) []byte {
	t.Helper()
	img, err := testutil.FisheyeImage(seed)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// lensLibrary is the library path of a fisheye request, done directly with package lens: each image
// undistorted to the pinhole view (balance 0), the model run on the views as one scene at the processed
// size, the export views mapped back with export.DistortView; the results are left at the processed size.
type lensLibrary struct {
	u     *lens.Undistorter
	res   []model.Result
	views []export.View // mapped back
	keep  []export.View // the pinhole views'
}

func runLensLibrary(t *testing.T, path string, pngs [][]byte, names []string, processRes int) lensLibrary {
	t.Helper()
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, fisheyeParams)
	require.NoError(t, err)
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{})
	require.NoError(t, err)
	u, err := lens.NewUndistorter(c, pin)
	require.NoError(t, err)
	var imgs []image.Image
	for i, b := range pngs {
		img, _, err := imgio.DecodeBytes(b, names[i])
		require.NoError(t, err)
		view, err := u.Image(img)
		require.NoError(t, err)
		imgs = append(imgs, view)
	}
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()
	res, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: processRes, ProcessedSize: true})
	require.NoError(t, err)
	keep, err := model.Views(res, names)
	require.NoError(t, err)
	out := lensLibrary{u: u, res: res, keep: keep}
	for _, v := range keep {
		d, err := export.DistortView(v, u)
		require.NoError(t, err)
		out.views = append(out.views, d)
	}
	return out
}

// sameFloats asserts equal maps, NaN where want is NaN.
func sameFloats(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for k := range want {
		if math.IsNaN(float64(want[k])) {
			require.True(t, math.IsNaN(float64(got[k])), "%s: pixel %d is %g, want NaN", msg, k, got[k])
			continue
		}
		require.Equal(t, want[k], got[k], "%s: pixel %d", msg, k)
	}
}

// unzipCOLMAP extracts a colmap export into a folder and reads it.
func unzipCOLMAP(t *testing.T, data string) (*export.COLMAPModel, map[string][]byte) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(data)
	require.NoError(t, err)
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		files[filepath.Base(f.Name)] = data
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f.Name)), data, 0o644))
	}
	m, err := export.ReadCOLMAP(dir)
	require.NoError(t, err)
	return m, files
}

// A fisheye request: the maps come back at the input size, NaN exactly where the lens's rays leave the
// pinhole view (the rim), equal to the library path's; the cameras carry the lens's pinhole part; the
// COLMAP export holds the OPENCV_FISHEYE camera and is what package export writes for the library's
// mapped-back views. keep_undistorted returns the pinhole views' maps, cameras and PINHOLE cameras.
func TestDepthFisheye(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	da3, _ := fixtures(t)
	pngs := [][]byte{fisheyePNG(t, 0), fisheyePNG(t, 0.4)}
	names := []string{"0", "1"}
	lib := runLensLibrary(t, da3, pngs, names, 56)
	req := DepthRequest{Images: []string{enc64(pngs[0]), enc64(pngs[1])}, ProcessRes: 56, CameraModel: "fisheye", CameraParams: fisheyeParams,
		IncludeDepth: true, IncludeConfidence: true, IncludePose: true, Exports: []string{"colmap", "ply"}}
	resp, body := postJSON(t, ts.URL, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	require.Len(t, r.Views, 2)
	back := lib.u.Backward(64, 48, 64, 48)
	for i, v := range r.Views {
		assert.Equal(t, [2]int{64, 48}, [2]int{v.Width, v.Height}, "the input size")
		want := lib.res[i]
		want.ToOriginalSize()
		wantDepth, err := back.Floats(want.Depth, float32(math.NaN()))
		require.NoError(t, err)
		depth := f32s(t, v.Depth.F32)
		sameFloats(t, wantDepth, depth, "depth")
		wantConf, err := back.Floats(want.Conf, float32(math.NaN()))
		require.NoError(t, err)
		sameFloats(t, wantConf, f32s(t, v.Confidence.F32), "confidence")
		nan := 0
		for k, d := range depth {
			x, y := k%64, k/64
			if math.IsNaN(float64(d)) {
				nan++
				assert.False(t, back.Valid(k), "NaN only where the ray leaves the pinhole view (%d, %d)", x, y)
				assert.False(t, x >= 16 && x < 48 && y >= 12 && y < 36, "NaN only on the rim (%d, %d)", x, y)
			} else {
				assert.Positive(t, d)
			}
		}
		assert.Positive(t, nan, "balance 0 cuts the fisheye's rim off")
		assert.Less(t, nan, 64*48/2)

		require.NotNil(t, v.Undistorted)
		assert.True(t, v.Undistorted.MappedBack)
		assert.Equal(t, lib.u.Pinhole.K(), v.Undistorted.Intrinsics)
		assert.Equal(t, [2]int{64, 48}, [2]int{v.Undistorted.Width, v.Undistorted.Height})
		require.NotNil(t, v.Extrinsics)
		assert.Equal(t, want.Camera.Extrinsics, *v.Extrinsics, "the pose predicted for the pinhole view")
		assert.Equal(t, lib.u.Distorted.K(), *v.IntrinsicsOriginal, "the lens's pinhole part")
		assert.Equal(t, lib.views[i].Camera.Intrinsics, *v.Intrinsics)
	}

	sparse, files := unzipCOLMAP(t, r.Exports["colmap"].Data)
	require.Len(t, sparse.Cameras, 2)
	for _, c := range sparse.Cameras {
		assert.Equal(t, export.OpenCVFisheye, c.Model)
		assert.Equal(t, fisheyeParams, c.Params)
		assert.Equal(t, [2]uint64{64, 48}, [2]uint64{c.Width, c.Height})
	}
	assert.NotEmpty(t, sparse.Points)
	dir := t.TempDir()
	pc, err := export.NewPointCloud(lib.views, export.COLMAPOptions())
	require.NoError(t, err)
	require.NoError(t, export.WriteCOLMAP(dir, pc, lib.views, false))
	for name, got := range files {
		assert.Equal(t, readFile(t, filepath.Join(dir, name)), got, "%s is export's for the library's mapped-back views", name)
	}
	pcd, err := export.NewPointCloud(lib.views, export.DefaultOptions())
	require.NoError(t, err)
	var ply bytes.Buffer
	require.NoError(t, export.EncodePLY(&ply, pcd))
	assert.Equal(t, enc64(ply.Bytes()), r.Exports["ply"].Data, "points along the lens's rays")

	// keep_undistorted: the pinhole views' maps and cameras; PINHOLE in COLMAP.
	req.KeepUndistorted = true
	req.Exports = []string{"colmap"}
	resp, body = postJSON(t, ts.URL, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	for i, v := range r.Views {
		want := lib.res[i]
		want.ToOriginalSize()
		assert.Equal(t, want.Depth, f32s(t, v.Depth.F32), "the pinhole view's depth")
		require.NotNil(t, v.Undistorted)
		assert.False(t, v.Undistorted.MappedBack)
		assert.Equal(t, want.Camera.Intrinsics, *v.Intrinsics)
		assert.Equal(t, want.Camera.IntrinsicsOriginal, *v.IntrinsicsOriginal)
	}
	sparse, _ = unzipCOLMAP(t, r.Exports["colmap"].Data)
	assert.Equal(t, export.Pinhole, sparse.Cameras[0].Model)

	// The same as a multipart form, with the view filling less (balance 0.5).
	ct, mp := multipartBody(t, map[string][]byte{"a.png": pngs[0]}, []string{"a.png"}, map[string]string{
		"process_res": "56", "camera_model": "OPENCV_FISHEYE", "camera_params": "30,30,32.2,23.7,0.05,-0.01,0.002,-0.0003",
		"undistort_balance": "0.5", "include_depth": "true"})
	resp, body = post(t, ts.URL+"/v1/depth", ct, mp)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, fisheyeParams)
	require.NoError(t, err)
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{Balance: 0.5})
	require.NoError(t, err)
	assert.Equal(t, pin.K(), r.Views[0].Undistorted.Intrinsics)
	assert.Less(t, pin.K()[0][0], lib.u.Pinhole.K()[0][0], "balance 0.5 shows more of the image")
}

// The DA3 metric model run through a lens takes the pinhole view's focal length: metres, as the
// library gives them with the view's intrinsics.
func TestDepthFisheyeMetric(t *testing.T) {
	metric, _ := metricFixtures(t)
	_, ts := newTestServer(t, Options{Models: []ModelSpec{{Name: "metric", Path: metric}}})
	b := fisheyePNG(t, 0)
	resp, body := postJSON(t, ts.URL, DepthRequest{Image: enc64(b), ProcessRes: 56, CameraModel: "opencv_fisheye", CameraParams: fisheyeParams, KeepUndistorted: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	assert.Equal(t, "metres", r.Unit)
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, fisheyeParams)
	require.NoError(t, err)
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{})
	require.NoError(t, err)
	u, err := lens.NewUndistorter(c, pin)
	require.NoError(t, err)
	img, _, err := imgio.DecodeBytes(b, "0")
	require.NoError(t, err)
	view, err := u.Image(img)
	require.NoError(t, err)
	m, err := model.Load(context.Background(), metric, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()
	k := pin.K()
	want, err := m.Depth(context.Background(), view, model.RunOptions{ProcessRes: 56, Intrinsics: &model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]}})
	require.NoError(t, err)
	assert.Equal(t, want.Depth, f32s(t, r.Views[0].Depth.F32))
}

// Bad lens requests are refused before anything runs, naming the field.
func TestDepthLensBadRequests(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxRequestMemory: 96 << 20})
	img := enc64(fisheyePNG(t, 0))
	big := enc64(pngOf(t, 1500, 1500))
	// Without the lens the big image fits the budget; its undistortion does not.
	resp, body := postJSON(t, ts.URL, DepthRequest{Image: big, ProcessRes: 56, IncludeDepth: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	base := func() DepthRequest {
		return DepthRequest{Image: img, ProcessRes: 56, CameraModel: "fisheye", CameraParams: fisheyeParams}
	}
	with := func(f func(*DepthRequest)) DepthRequest { q := base(); f(&q); return q }
	for _, tc := range []struct {
		name   string
		req    DepthRequest
		status int
		want   string
	}{
		{"no params", with(func(q *DepthRequest) { q.CameraParams = nil }), 400, "camera_model needs camera_params"},
		{"no model", with(func(q *DepthRequest) { q.CameraModel = "" }), 400, "camera_params needs camera_model"},
		{"param count", with(func(q *DepthRequest) { q.CameraModel, q.CameraParams = "opencv", []float64{1, 2, 3} }), 400, "camera_params: camera model OPENCV takes 8 parameters"},
		{"unknown model", with(func(q *DepthRequest) { q.CameraModel = "fov" }), 400, "camera_model: unknown or unsupported camera model \"fov\""},
		{"focal", with(func(q *DepthRequest) { q.CameraParams = []float64{0, 30, 32, 24, 0, 0, 0, 0} }), 400, "focal lengths"},
		{"intrinsics", with(func(q *DepthRequest) { q.Intrinsics = []float64{30, 30, 32, 24} }), 400, "drop intrinsics"},
		{"cameras", with(func(q *DepthRequest) {
			q.Cameras = []GivenCamera{{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: [4]float64{30, 30, 32, 24}}}
		}), 400, "camera_model with cameras"},
		{"align", with(func(q *DepthRequest) { q.AlignPoints = []AlignPoint{{X: 10, Y: 10, Depth: 2}} }), 400, "add keep_undistorted"},
		{"crop", with(func(q *DepthRequest) { q.ProcessResMethod = "upper_bound_crop" }), 400, "process_res_method upper_bound_crop with camera_model"},
		{"tracks", with(func(q *DepthRequest) { q.Exports = []string{"colmap_tracks"} }), 400, "export colmap_tracks with camera_model"},
		{"mesh", with(func(q *DepthRequest) { q.Exports = []string{"mesh_glb"} }), 400, "export mesh_glb with camera_model"},
		{"balance", with(func(q *DepthRequest) { q.UndistortBalance = 2 }), 400, "undistort_balance 2"},
		{"fov", with(func(q *DepthRequest) { q.UndistortFOV = 180 }), 400, "undistort_fov 180"},
		{"keep alone", DepthRequest{Image: img, KeepUndistorted: true}, 400, "need camera_model and camera_params"},
		// Views of different sizes in one scene are centre-cropped: they cannot be mapped back.
		{"cropped views", with(func(q *DepthRequest) { q.Images = []string{enc64(pngOf(t, 84, 28))} }), 422, "centre-cropped"},
		{"budget", with(func(q *DepthRequest) {
			q.Image, q.CameraParams, q.IncludeDepth = big, []float64{700, 700, 750, 750, 0.05, 0, 0, 0}, true
		}), 413, "undistortion 64 MiB"},
	} {
		resp, body := postJSON(t, ts.URL, tc.req)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, truncate(body))
		t.Logf("%s: %s", tc.name, decodeError(t, body).Message)
		assert.Contains(t, decodeError(t, body).Message, tc.want, tc.name)
	}
	// With keep_undistorted the crop methods and the pinhole-only exports run.
	resp, body = postJSON(t, ts.URL, with(func(q *DepthRequest) {
		q.KeepUndistorted, q.ProcessResMethod, q.Exports = true, "upper_bound_crop", []string{"colmap_tracks", "mesh_ply"}
	}))
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.Len(t, decodeResponse(t, body).Exports, 2)
}
