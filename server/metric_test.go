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
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

func TestMetricUnits(t *testing.T) {
	metric, pair := metricFixtures(t)
	_, ts := newTestServer(t, Options{Models: []ModelSpec{{Name: "metric", Path: metric}, {Name: "nested", Path: pair[0], MetricPath: pair[1]}}})
	const img = "../tests/fixtures/da3-tiny-mono/one/images/view0.png"
	im, err := imgio.Decode(img)
	require.NoError(t, err)
	m, err := model.Load(context.Background(), metric, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()

	// DA3 metric-large without a focal length: focal-normalised, not metres.
	resp, body := postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), ProcessRes: 70})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	assert.Equal(t, "focal-normalised", r.Unit)
	assert.False(t, r.IsMetric)
	want, err := m.Depth(context.Background(), im, model.RunOptions{ProcessRes: 70})
	require.NoError(t, err)
	assert.Equal(t, want.Depth, f32s(t, r.Views[0].Depth.F32))
	assert.Equal(t, want.Sky, f32s(t, r.Views[0].Sky.F32), "mono models return sky by default")

	// With the intrinsics: metres.
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), ProcessRes: 70, Intrinsics: []float64{50, 60, 22, 30}})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	assert.Equal(t, "metres", r.Unit)
	assert.True(t, r.IsMetric)
	want, err = m.Depth(context.Background(), im, model.RunOptions{ProcessRes: 70, Intrinsics: &model.Intrinsics{Fx: 50, Fy: 60, Cx: 22, Cy: 30}})
	require.NoError(t, err)
	assert.Equal(t, want.Depth, f32s(t, r.Views[0].Depth.F32))

	// png16 in KITTI's steps (png16_step): the metres back within half a step of 1/256 m.
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), ProcessRes: 70, Intrinsics: []float64{50, 60, 22, 30},
		MapFormats: []string{"png16"}, PNG16Step: export.MetricStepKITTI})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	raw, err := base64.StdEncoding.DecodeString(decodeResponse(t, body).Views[0].Depth.PNG16)
	require.NoError(t, err)
	d16, err := export.DecodeDepthPNG16(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, d16.Depth, len(want.Depth))
	for i, v := range want.Depth {
		require.InDelta(t, v, d16.Depth[i], export.MetricStepKITTI/2+1e-5, "pixel %d", i)
	}
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), MapFormats: []string{"png16"}, PNG16Step: -1})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, decodeError(t, body).Message, "png16_step")

	// The nested pair: metres, confidence, sky and cameras, several views as one scene.
	views := []string{"../tests/fixtures/da3-tiny-nested/three/images/view0.png", "../tests/fixtures/da3-tiny-nested/three/images/view1.png"}
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "nested", Images: []string{enc64(readFile(t, views[0])), enc64(readFile(t, views[1]))}, ProcessRes: 42, IncludePoints: true, IncludeDepth: true, IncludeSky: true, IncludePose: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r = decodeResponse(t, body)
	assert.Equal(t, "metres", r.Unit)
	assert.True(t, r.IsMetric)
	n, err := nested.Load(context.Background(), pair[0], pair[1], model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer n.Close()
	var imgs []image.Image
	for _, f := range views {
		im, err := imgio.Decode(f)
		require.NoError(t, err)
		imgs = append(imgs, im)
	}
	out, err := n.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 42})
	require.NoError(t, err)
	for i, w := range out.Views {
		assert.Equal(t, w.Depth, f32s(t, r.Views[i].Depth.F32), "view %d in metres, as the nested library gives it", i)
		assert.Equal(t, w.Sky, f32s(t, r.Views[i].Sky.F32))
		assert.Equal(t, w.Camera.Extrinsics, *r.Views[i].Extrinsics)
		assert.Nil(t, r.Views[i].Confidence, "only what was asked for")
	}
	assert.Positive(t, r.NumPoints)

	// Intrinsics go only to the model that uses them.
	for _, name := range []string{"nested"} {
		resp, body = postJSON(t, ts.URL, DepthRequest{Model: name, Image: enc64(readFile(t, img)), Intrinsics: []float64{50, 60, 22, 30}})
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		assert.Contains(t, decodeError(t, body).Message, "does not use intrinsics")
	}
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), Intrinsics: []float64{0, 60, 22, 30}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, decodeError(t, body).Message, "positive")
	resp, body = postJSON(t, ts.URL, DepthRequest{Model: "metric", Image: enc64(readFile(t, img)), Intrinsics: []float64{50, 60}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, decodeError(t, body).Message, "[fx, fy, cx, cy]")
}
