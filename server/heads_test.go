package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
)

// TestHeads: ray_pose, given cameras and DA3-GIANT's Gaussians (gs_ply)
// equal what the library gives for the same options.
func TestHeads(t *testing.T) {
	pose, giant := headsFixtures(t)
	s, ts := newTestServer(t, Options{Models: []ModelSpec{{Name: "pose", Path: pose}, {Name: "giant", Path: giant}, {Name: "plain", Path: da3Tiny}, {Name: "da2", Path: da2Tiny}}})
	require.True(t, s.pools[0].info.RayPose)
	require.True(t, s.pools[1].info.Gaussians)
	assert.Contains(t, s.pools[1].info.Exports, "gs_ply")
	assert.NotContains(t, s.pools[0].info.Exports, "gs_ply")
	files := []string{"../tests/fixtures/da3-tiny/four/images/view0.png", "../tests/fixtures/da3-tiny/four/images/view1.png"}
	var imgs []image.Image
	var b64s []string
	for _, f := range files {
		img, err := imgio.Decode(f)
		require.NoError(t, err)
		imgs = append(imgs, img)
		b64s = append(b64s, enc64(readFile(t, f)))
	}
	lib := func(path string, opt model.RunOptions) []model.Result {
		m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
		require.NoError(t, err)
		defer m.Close()
		res, err := m.MultiView(context.Background(), imgs, opt)
		require.NoError(t, err)
		return res
	}

	// Cameras from the ray head.
	resp, body := postJSON(t, ts.URL, DepthRequest{Model: "pose", Images: b64s, ProcessRes: 42, RayPose: true, RaySeed: 3})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	want := lib(pose, model.RunOptions{ProcessRes: 42, RayPose: true, RaySeed: 3})
	for i := range want {
		assert.Equal(t, want[i].Camera.Extrinsics, *r.Views[i].Extrinsics, "view %d: the ray head's camera", i)
		assert.Equal(t, want[i].Depth, f32s(t, r.Views[i].Depth.F32))
	}

	// Those cameras given back: the depth is conditioned on them.
	var cams []GivenCamera
	opt := model.RunOptions{ProcessRes: 42}
	for _, w := range want {
		k := w.Camera.IntrinsicsOriginal
		cams = append(cams, GivenCamera{Extrinsics: w.Camera.Extrinsics, Intrinsics: [4]float64{k[0][0], k[1][1], k[0][2], k[1][2]}})
		opt.Extrinsics = append(opt.Extrinsics, w.Camera.Extrinsics)
		opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]})
	}
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "pose", Images: b64s, ProcessRes: 42, Cameras: cams})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	given := lib(pose, opt)
	for i := range given {
		assert.Equal(t, given[i].Depth, f32s(t, r.Views[i].Depth.F32), "view %d: pose-conditioned depth", i)
		assert.Equal(t, given[i].AlignScale, r.Views[i].AlignScale)
		assert.Equal(t, cams[i].Extrinsics, *r.Views[i].Extrinsics, "the given camera comes back")
	}
	// The same as a multipart field.
	camJSON, err := jsonString(cams)
	require.NoError(t, err)
	ct, form := multipartBody(t, map[string][]byte{"a.png": readFile(t, files[0]), "b.png": readFile(t, files[1])}, []string{"a.png", "b.png"},
		map[string]string{"model": "pose", "process_res": "42", "cameras": camJSON})
	resp, body = post(t, ts.URL+"/v1/depth", ct, form)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.Equal(t, given[1].Depth, f32s(t, decodeResponse(t, body).Views[1].Depth.F32))

	// DA3-GIANT's Gaussians.
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "giant", Images: b64s, ProcessRes: 56, Exports: []string{"gs_ply"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	got, err := base64.StdEncoding.DecodeString(decodeResponse(t, body).Exports["gs_ply"].Data)
	require.NoError(t, err)
	res := lib(giant, model.RunOptions{ProcessRes: 56, Gaussians: true})
	var parts []*gs.Gaussians
	for i := range res {
		parts = append(parts, res[i].Gaussians)
	}
	var ply bytes.Buffer
	require.NoError(t, gs.WritePLY(&ply, gs.Concat(parts...)))
	assert.Equal(t, ply.Bytes(), got, "gs_ply is the library's Gaussians")

	// The fly-through video of those Gaussians (skipped without ffmpeg).
	if haveFFmpeg() {
		assert.Contains(t, s.pools[1].info.Exports, "gs_video")
		resp, body = postJSON(t, ts.URL, DepthRequest{Model: "giant", Images: b64s, ProcessRes: 56, Exports: []string{"gs_video"}})
		require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
		e := decodeResponse(t, body).Exports["gs_video"]
		assert.Equal(t, "video/mp4", e.MediaType)
		mp4, err := base64.StdEncoding.DecodeString(e.Data)
		require.NoError(t, err)
		require.Greater(t, len(mp4), 1000)
		assert.Equal(t, "ftyp", string(mp4[4:8]), "an MP4 file")
	}

	// What a model lacks is refused, naming it.
	for _, tc := range []struct {
		req    DepthRequest
		status int
		says   string
	}{
		{DepthRequest{Model: "plain", Images: b64s, RayPose: true}, 422, "ray_pose needs"},
		{DepthRequest{Model: "pose", Images: b64s, Exports: []string{"gs_ply"}}, 422, "gs_ply needs DA3-GIANT"},
		{DepthRequest{Model: "pose", Images: b64s, Exports: []string{"gs_video"}}, 422, "gs_video needs DA3-GIANT"},
		{DepthRequest{Model: "pose", Images: b64s, Cameras: cams[:1]}, 400, "1 cameras for 2 images"},
		{DepthRequest{Model: "da2", Images: b64s[:1], Cameras: cams[:1]}, 422, "cannot take given cameras"},
		{DepthRequest{Model: "da2", Images: b64s[:1], RayPose: true}, 422, "ray_pose needs"},
		{DepthRequest{Model: "pose", Images: b64s, Cameras: []GivenCamera{cams[0], {Intrinsics: [4]float64{1, 1, 0, 0}}}}, 422, "given camera 1"},
	} {
		resp, body := postJSON(t, ts.URL, tc.req)
		assert.Equal(t, tc.status, resp.StatusCode, truncate(body))
		assert.Contains(t, decodeError(t, body).Message, tc.says)
	}
}
