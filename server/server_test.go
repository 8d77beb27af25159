package server

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/tsdf"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// libraryRun runs the library directly on the same files, for comparison.
func libraryRun(t *testing.T, path string, files []string, opt model.RunOptions) []model.Result {
	t.Helper()
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()
	var imgs []image.Image
	for _, f := range files {
		img, err := imgio.Decode(f)
		require.NoError(t, err)
		imgs = append(imgs, img)
	}
	res, err := m.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	return res
}

func TestDepthJSONEqualsLibrary(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	da3, _ := fixtures(t)
	resp, body := postJSON(t, ts.URL, DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	r := decodeResponse(t, body)
	want := libraryRun(t, da3, []string{view0}, model.RunOptions{ProcessRes: 56})
	require.Len(t, r.Views, 1)
	v := r.Views[0]
	assert.Equal(t, "da3-tiny", r.Model)
	assert.Equal(t, "relative", r.Unit)
	assert.False(t, r.IsMetric)
	assert.Equal(t, [4]int{want[0].Width, want[0].Height, want[0].ProcessedWidth, want[0].ProcessedHeight},
		[4]int{v.Width, v.Height, v.ProcessedWidth, v.ProcessedHeight})
	assert.Equal(t, want[0].Depth, f32s(t, v.Depth.F32), "depth is the library's, bit for bit")
	assert.Equal(t, want[0].Conf, f32s(t, v.Confidence.F32), "confidence is the library's")
	require.NotNil(t, v.Extrinsics)
	assert.Equal(t, want[0].Camera.Extrinsics, *v.Extrinsics)
	assert.Equal(t, want[0].Camera.Intrinsics, *v.Intrinsics)
	assert.Equal(t, want[0].Camera.IntrinsicsOriginal, *v.IntrinsicsOriginal)
	assert.Nil(t, v.Sky, "DA3 any-view models have no sky")
	assert.Zero(t, r.NumPoints, "points only on request")
	assert.Greater(t, r.Timing.Total, 0.0)
}

func TestDepthMultipartTwoViews(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	da3, _ := fixtures(t)
	imgs := map[string][]byte{"a.png": readFile(t, view0), "b.png": readFile(t, view1)}
	ct, body := multipartBody(t, imgs, []string{"a.png", "b.png"}, map[string]string{
		"process_res": "56", "processed_size": "true", "map_formats": "f32,npy,png,png16", "include_depth": "true",
		"include_confidence": "1", "include_pose": "true", "include_points": "true", "points_conf_thresh": "1.5",
	})
	resp, out := post(t, ts.URL+"/v1/depth", ct, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(out))
	r := decodeResponse(t, out)
	want := libraryRun(t, da3, []string{view0, view1}, model.RunOptions{ProcessRes: 56, ProcessedSize: true})
	require.Len(t, r.Views, 2)
	for i, v := range r.Views {
		w := want[i]
		assert.Equal(t, w.Depth, f32s(t, v.Depth.F32), "view %d: one scene, as the library runs it", i)
		assert.Equal(t, *v.Extrinsics, w.Camera.Extrinsics)
		// The other encodings hold the same map.
		npy, err := base64.StdEncoding.DecodeString(v.Depth.NPY)
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, imgio.EncodeNPY(&want, w.Depth, w.Height, w.Width))
		assert.Equal(t, want.Bytes(), npy)
		for _, enc := range []string{v.Depth.PNG, v.Depth.PNG16, v.Confidence.PNG} {
			b, err := base64.StdEncoding.DecodeString(enc)
			require.NoError(t, err)
			img, err := png.Decode(bytes.NewReader(b))
			require.NoError(t, err)
			assert.Equal(t, image.Rect(0, 0, w.Width, w.Height), img.Bounds())
		}
		b16, err := base64.StdEncoding.DecodeString(v.Depth.PNG16)
		require.NoError(t, err)
		d16, err := export.DecodeDepthPNG16(bytes.NewReader(b16))
		require.NoError(t, err)
		assert.Equal(t, w.Unit.String(), d16.Unit, "png16 says the unit")
		lo, hi := slices.Min(w.Depth), slices.Max(w.Depth)
		for j, x := range w.Depth {
			require.InDelta(t, x, d16.Depth[j], float64(hi-lo)/65535/2+1e-6, "png16 keeps the values (pixel %d)", j)
		}
		col, err := imgio.Colorize(w.Depth, w.Width, w.Height, imgio.Turbo, true)
		require.NoError(t, err)
		b, _ := base64.StdEncoding.DecodeString(v.Depth.PNG)
		got, _ := png.Decode(bytes.NewReader(b))
		r0, g0, b0, _ := got.At(3, 2).RGBA()
		r1, g1, b1, _ := col.At(3, 2).RGBA()
		assert.Equal(t, [3]uint32{r1, g1, b1}, [3]uint32{r0, g0, b0}, "png is the CLI's turbo colouring (near = warm)")
	}
	// The point cloud: the pixels with confidence ≥ 1.5, at the processed size.
	views, err := model.Views(want, []string{"a.png", "b.png"})
	require.NoError(t, err)
	o := export.DefaultOptions()
	o.ConfThreshold, o.ConfPercentile, o.EnsurePercentile = 1.5, 0, 100
	pc, err := export.NewPointCloud(views, o)
	require.NoError(t, err)
	require.NotZero(t, pc.Len())
	assert.Equal(t, pc.Len(), r.NumPoints)
	assert.Equal(t, pc.Points, f32s(t, r.Points))
	colours, err := base64.StdEncoding.DecodeString(r.PointColors)
	require.NoError(t, err)
	assert.Equal(t, pc.Colors, colours)
	var n int
	for _, w := range want {
		for _, c := range w.Conf {
			if c >= 1.5 {
				n++
			}
		}
	}
	assert.Equal(t, n, r.NumPoints, "confidence threshold applied")
}

// TestExports checks every scene export against package export's encoders
// on the library's results.
func TestExports(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	da3, _ := fixtures(t)
	names := exportsFor(s.pools[0].info)
	resp, body := postJSON(t, ts.URL, DepthRequest{Images: []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))}, ProcessRes: 56, Exports: names})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	want := libraryRun(t, da3, []string{view0, view1}, model.RunOptions{ProcessRes: 56, ProcessedSize: true})
	views, err := model.Views(want, []string{"0", "1"})
	require.NoError(t, err)
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	wantBytes := map[string]func(w io.Writer) error{
		"glb":      func(w io.Writer) error { return export.EncodeGLB(w, pc, views, export.DefaultGLBOptions()) },
		"ply":      func(w io.Writer) error { return export.EncodePLY(w, pc) },
		"npz":      func(w io.Writer) error { return export.EncodeNPZ(w, views, false) },
		"mini_npz": func(w io.Writer) error { return export.EncodeNPZ(w, views, true) },
	}
	mesh, _, err := export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: export.DefaultOptions(), Volume: tsdf.Options{MaxBlocks: meshBlocks}})
	require.NoError(t, err)
	wantBytes["mesh_ply"] = func(w io.Writer) error { return export.EncodeMeshPLY(w, mesh) }
	wantBytes["mesh_glb"] = func(w io.Writer) error { return export.EncodeMeshGLB(w, mesh, views, export.DefaultGLBOptions()) }
	wantBytes["mesh_points"] = func(w io.Writer) error { return export.EncodePLY(w, export.MeshCloud(mesh)) }
	assert.ElementsMatch(t, []string{"colmap", "colmap_tracks", "glb", "mesh_glb", "mesh_ply", "mesh_points", "mini_npz", "npz", "ply"}, names)
	for _, name := range names {
		e, ok := r.Exports[name]
		require.True(t, ok, name)
		got, err := base64.StdEncoding.DecodeString(e.Data)
		require.NoError(t, err)
		assert.Equal(t, exporters[name].mediaType, e.MediaType)
		if enc, ok := wantBytes[name]; ok {
			var buf bytes.Buffer
			require.NoError(t, enc(&buf))
			assert.Equal(t, buf.Bytes(), got, "%s is what package export writes for the library's results", name)
			continue
		}
		// colmap: a zip of the binary model, as export.WriteCOLMAP writes it (WriteCOLMAPTracks for colmap_tracks).
		dir := t.TempDir()
		cpc, err := export.NewPointCloud(views, export.COLMAPOptions())
		require.NoError(t, err)
		if name == "colmap_tracks" {
			require.NoError(t, export.WriteCOLMAPTracks(dir, cpc, views, false, export.TrackOptions{}))
		} else {
			require.NoError(t, export.WriteCOLMAP(dir, cpc, views, false))
		}
		zr, err := zip.NewReader(bytes.NewReader(got), int64(len(got)))
		require.NoError(t, err)
		require.Len(t, zr.File, 3)
		for _, f := range zr.File {
			rc, err := f.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			assert.Equal(t, readFile(t, filepath.Join(dir, filepath.Base(f.Name))), b, f.Name)
		}
	}

	// NPZ needs no camera: DA2 models export it; GLB needs one.
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, view0)), ProcessRes: 84, Exports: []string{"npz"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.NotEmpty(t, decodeResponse(t, body).Exports["npz"].Data)
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, view0)), Exports: []string{"glb"}})
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Contains(t, decodeError(t, body).Message, "the glb export needs a DA3 any-view model")
	// Views of different sizes run independently cannot share one NPZ.
	resp, body = postJSON(t, ts.URL, DepthRequest{Images: []string{enc64(readFile(t, view0)), enc64(pngOfSize(t, 84, 28))}, Independent: true, ProcessRes: 56, Exports: []string{"npz"}})
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Contains(t, decodeError(t, body).Message, "export npz")
}

func TestDepthIndependentAndModelChoice(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	da3, da2 := fixtures(t)
	resp, body := postJSON(t, ts.URL, DepthRequest{Images: []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))}, ProcessRes: 56, Independent: true, IncludeDepth: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	for i, f := range []string{view0, view1} {
		want := libraryRun(t, da3, []string{f}, model.RunOptions{ProcessRes: 56})
		assert.Equal(t, want[0].Depth, f32s(t, r.Views[i].Depth.F32), "view %d alone", i)
		assert.Nil(t, r.Views[i].Confidence, "only depth was asked for")
		assert.Nil(t, r.Views[i].Extrinsics)
	}

	// The DA2 model by name: disparity, no confidence or camera.
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "da2-tiny", Image: "data:image/png;base64," + enc64(readFile(t, view0)), ProcessRes: 84})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	assert.Equal(t, "disparity", r.Unit)
	want := libraryRun(t, da2, []string{view0}, model.RunOptions{ProcessRes: 84})
	assert.Equal(t, want[0].Depth, f32s(t, r.Views[0].Depth.F32))
	assert.Nil(t, r.Views[0].Confidence)
	assert.Nil(t, r.Views[0].Extrinsics)
}

func TestExifRotate(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	photo := enc64(readFile(t, "../internal/jpeg/testdata/exif_o6.jpg")) // 24×16 stored, upright 16×24
	size := func(req DepthRequest) [2]int {
		t.Helper()
		resp, body := postJSON(t, ts.URL, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
		r := decodeResponse(t, body)
		return [2]int{r.Width, r.Height}
	}
	yes, no := true, false
	assert.Equal(t, [2]int{24, 16}, size(DepthRequest{Image: photo, ProcessRes: 28}), "DA3: stored pixels, as its reference reads them")
	assert.Equal(t, [2]int{16, 24}, size(DepthRequest{Image: photo, ProcessRes: 28, ExifRotate: &yes}))
	assert.Equal(t, [2]int{16, 24}, size(DepthRequest{Model: "da2-tiny", Image: photo, ProcessRes: 28}), "DA2: upright, as cv2.imread reads them")
	assert.Equal(t, [2]int{24, 16}, size(DepthRequest{Model: "da2-tiny", Image: photo, ProcessRes: 28, ExifRotate: &no}))
	ct, body := multipartBody(t, map[string][]byte{"p.jpg": readFile(t, "../internal/jpeg/testdata/exif_o6.jpg")}, []string{"p.jpg"}, map[string]string{"exif_rotate": "true", "process_res": "28"})
	resp, out := post(t, ts.URL+"/v1/depth", ct, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(out))
	assert.Equal(t, 16, decodeResponse(t, out).Width, "exif_rotate as a form field")
}

// pngOfSize encodes a w×h PNG.
func pngOfSize(t testing.TB, w, h int) []byte {
	var buf bytes.Buffer
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func TestDepthErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxBodyBytes: 1 << 20, MaxViews: 3, MaxPixels: 300 * 300, MaxProcessRes: 600})
	good := enc64(readFile(t, view0))
	huge := readFile(t, view0)
	huge = append(huge, bytes.Repeat([]byte{0}, 1<<20)...)
	truncated := readFile(t, view0)
	truncated = truncated[:len(truncated)/2]
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		kind, says  string
	}{
		{"bad JSON", "application/json", `{"image": `, 400, kindBadRequest, "invalid JSON"},
		{"unknown field", "application/json", `{"imag": "x"}`, 400, kindBadRequest, `"imag"`},
		{"trailing data", "application/json", `{"image": "` + good + `"} {}`, 400, kindBadRequest, "after the JSON"},
		{"empty body", "application/json", ``, 400, kindBadRequest, "empty request body"},
		{"no image", "application/json", `{"process_res": 56}`, 400, kindBadRequest, "no image"},
		{"bad base64", "application/json", `{"image": "!!!"}`, 400, kindBadRequest, "base64"},
		{"URL", "application/json", `{"image": "https://example.com/a.png"}`, 400, kindBadRequest, "URLs are not fetched"},
		{"bad data URI", "application/json", `{"image": "data:image/png,abc"}`, 400, kindBadRequest, "data URI"},
		{"process_res", "application/json", `{"image": "` + good + `", "process_res": 100000}`, 400, kindBadRequest, "process_res"},
		{"method", "application/json", `{"image": "` + good + `", "process_res_method": "stretch"}`, 400, kindBadRequest, "stretch"},
		{"ref view", "application/json", `{"image": "` + good + `", "ref_view": "last"}`, 400, kindBadRequest, "ref_view"},
		{"map format", "application/json", `{"image": "` + good + `", "map_formats": ["exr"]}`, 400, kindBadRequest, "exr"},
		{"colormap", "application/json", `{"image": "` + good + `", "colormap": "jet"}`, 400, kindBadRequest, "jet"},
		{"export", "application/json", `{"image": "` + good + `", "exports": ["obj"]}`, 400, kindBadRequest, "colmap, colmap_tracks, glb, gs_ply, gs_video, mesh_glb, mesh_ply, mesh_points, mini_npz, npz, ply"},
		{"negative threshold", "application/json", `{"image": "` + good + `", "points_conf_thresh": -1}`, 400, kindBadRequest, "points_conf_thresh"},
		{"unknown model", "application/json", `{"image": "` + good + `", "model": "nope"}`, 404, kindNotFound, "da3-tiny, da2-tiny"},
		{"garbage image", "application/json", `{"image": "` + enc64([]byte("not an image at all")) + `"}`, 422, kindUnprocessable, "image 0: unknown format"},
		{"truncated image", "application/json", `{"image": "` + enc64(truncated) + `"}`, 422, kindUnprocessable, "image 0"},
		{"no confidence", "application/json", `{"image": "` + good + `", "model": "da2-tiny", "include_confidence": true}`, 422, kindUnprocessable, "no confidence"},
		{"intrinsics", "application/json", `{"image": "` + good + `", "intrinsics": [50, 60, 22, 30]}`, 422, kindUnprocessable, "does not use intrinsics"},
		{"bad intrinsics", "application/json", `{"image": "` + good + `", "intrinsics": [50, 60, 22]}`, 400, kindBadRequest, "[fx, fy, cx, cy]"},
		{"no sky", "application/json", `{"image": "` + good + `", "include_sky": true}`, 422, kindUnprocessable, "no sky"},
		{"no camera", "application/json", `{"image": "` + good + `", "model": "da2-tiny", "include_points": true}`, 422, kindUnprocessable, "camera"},
		{"aspect ratio", "application/json", `{"image": "` + enc64(pngOfSize(t, 280, 1)) + `", "process_res": 28}`, 422, kindUnprocessable, "aspect ratio"},
		{"too many pixels", "application/json", `{"image": "` + enc64(pngOfSize(t, 400, 300)) + `"}`, 413, kindTooLarge, "-max-pixels"},
		{"too many views", "application/json", `{"images": ["` + good + `","` + good + `","` + good + `","` + good + `"]}`, 413, kindTooLarge, "-max-views"},
		{"body too large", "application/json", `{"image": "` + enc64(huge) + `"}`, 413, kindTooLarge, "-max-body"},
		{"content type", "text/plain", `hello`, 415, kindMediaType, "text/plain"},
		{"bad multipart", "multipart/form-data; boundary=xyz", "--xyz\r\nbroken", 400, kindBadRequest, "multipart"},
		{"multipart without boundary", "multipart/form-data", "", 400, kindBadRequest, "boundary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, ts.URL+"/v1/depth", tc.contentType, []byte(tc.body))
			assert.Equal(t, tc.status, resp.StatusCode, truncate(body))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			e := decodeError(t, body)
			assert.Equal(t, tc.status, e.Code)
			assert.Equal(t, tc.kind, e.Type)
			assert.Contains(t, e.Message, tc.says)
		})
	}
	t.Run("multipart fields", func(t *testing.T) {
		ct, body := multipartBody(t, map[string][]byte{"a.png": readFile(t, view0)}, []string{"a.png"}, map[string]string{"process_res": "big"})
		resp, out := post(t, ts.URL+"/v1/depth", ct, body)
		assert.Equal(t, 400, resp.StatusCode)
		assert.Contains(t, decodeError(t, out).Message, `"process_res"`)
		ct, body = multipartBody(t, map[string][]byte{"a.png": readFile(t, view0)}, []string{"a.png"}, map[string]string{"colour": "red"})
		resp, out = post(t, ts.URL+"/v1/depth", ct, body)
		assert.Equal(t, 400, resp.StatusCode)
		assert.Contains(t, decodeError(t, out).Message, `unknown field "colour"`)
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(ts.URL + "/v1/depth")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
	})
}

// hold takes the model's only instance so that requests queue behind it.
func hold(t *testing.T, s *Server) (release func()) {
	in, err := s.pools[0].acquire(context.Background())
	require.NoError(t, err)
	return func() { s.pools[0].release(in) }
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQueueFullAndTimeout(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxQueue: 1, Timeout: 2 * time.Second})
	release := hold(t, s)
	req := DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56}
	done := make(chan int)
	go func() {
		b, _ := json.Marshal(req)
		resp, err := http.Post(ts.URL+"/v1/depth", "application/json", bytes.NewReader(b))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, "a queued request", func() bool { return s.pools[0].waiting.Load() == 1 })
	resp, body := postJSON(t, ts.URL, req)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, kindQueueFull, decodeError(t, body).Type)
	release()
	assert.Equal(t, http.StatusOK, <-done, "the queued request runs once the instance is free")

	// A request that waits past the timeout.
	release = hold(t, s)
	start := time.Now()
	resp, body = postJSON(t, ts.URL, req)
	release()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	e := decodeError(t, body)
	assert.Equal(t, kindTimeout, e.Type)
	assert.Contains(t, e.Message, "timed out after 2s")
	assert.Less(t, time.Since(start), 8*time.Second)
	assert.Zero(t, s.pools[0].waiting.Load())
}

func TestClientGoneLeavesQueue(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	release := hold(t, s)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/depth", bytes.NewReader(b))
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := http.DefaultClient.Do(r)
		errc <- err
	}()
	waitFor(t, "a queued request", func() bool { return s.pools[0].waiting.Load() == 1 })
	cancel()
	require.Error(t, <-errc)
	waitFor(t, "the request to leave the queue", func() bool { return s.pools[0].waiting.Load() == 0 })
	waitFor(t, "the cancellation to be counted", func() bool {
		var buf bytes.Buffer
		s.metrics.write(&buf, s.pools)
		return strings.Contains(buf.String(), `da3_errors_total{kind="client_closed"} 1`)
	})
}

func TestGracefulShutdownFinishesRuns(t *testing.T) {
	da3, _ := fixtures(t)
	s, err := New(context.Background(), Options{Models: []ModelSpec{{Path: da3}}, Threads: 1, Logger: quietLog})
	require.NoError(t, err)
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	release := hold(t, s)
	got := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
		resp, err := http.Post(url+"/v1/depth", "application/json", bytes.NewReader(b))
		if err != nil {
			got <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	waitFor(t, "a request in flight", func() bool { return s.pools[0].waiting.Load() == 1 })
	stop() // SIGTERM
	waitFor(t, "draining", func() bool { return s.draining.Load() })
	rec := httptestRecorder(s, "GET", "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "readiness fails while draining")
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	assert.Equal(t, http.StatusOK, <-got, "the request in flight finishes")
	require.NoError(t, <-served)
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "the listener is closed")
}
