package server

import (
	"context"
	"image"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// alignPointsOf are measurements of depth scale·want at every 5th pixel of the
// maps of image i (want at the image size).
func alignPointsOf(want *model.Result, i int, scale float64) []AlignPoint {
	var pts []AlignPoint
	for y := 0; y < want.Height; y += 5 {
		for x := 0; x < want.Width; x += 5 {
			pts = append(pts, AlignPoint{Image: i, X: float64(x), Y: float64(y), Depth: scale * float64(want.Depth[y*want.Width+x])})
		}
	}
	return pts
}

// TestAlignPoints: measurements at 3 times the model's depth give metres of 3
// times its depth (and a scene's camera translations 3 times theirs), with
// the fit reported per view; bad points and impossible combinations are
// refused.
func TestAlignPoints(t *testing.T) {
	da3, _ := fixtures(t)
	_, ts := newTestServer(t, Options{})
	m, err := model.Load(context.Background(), da3, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()
	var imgs []image.Image
	for _, f := range []string{view0, view1} {
		im, err := imgio.Decode(f)
		require.NoError(t, err)
		imgs = append(imgs, im)
	}
	want, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)

	pts := append(alignPointsOf(&want[0], 0, 3), alignPointsOf(&want[1], 1, 3)...)
	resp, body := postJSON(t, ts.URL, DepthRequest{Images: []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))},
		ProcessRes: 56, IncludeDepth: true, IncludePose: true, AlignPoints: pts})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	r := decodeResponse(t, body)
	assert.Equal(t, "metres", r.Unit)
	assert.True(t, r.IsMetric)
	for i, v := range r.Views {
		require.NotNil(t, v.Alignment, "view %d", i)
		// The points are read off the map resized to the image, the fit samples the processed map: they
		// agree but for resampling.
		assert.InDelta(t, 3, v.Alignment.Scale, 3e-3)
		assert.Greater(t, v.Alignment.InlierShare, 0.75)
		assert.Equal(t, len(pts), v.Alignment.Samples, "one fit for the scene")
		got := f32s(t, v.Depth.F32)
		for p := range got {
			assert.InDelta(t, 3*want[i].Depth[p], got[p], 3e-3*float64(want[i].Depth[p])+1e-5)
		}
		for k := range 3 {
			assert.InDelta(t, 3*want[i].Camera.Extrinsics[k][3], v.Extrinsics[k][3], 3e-3*abs(want[i].Camera.Extrinsics[k][3])+1e-6)
		}
	}

	two := []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))}
	for _, tc := range []struct {
		req    DepthRequest
		status int
		msg    string
	}{
		{DepthRequest{Images: two, AlignPoints: []AlignPoint{{Image: 2, X: 1, Y: 1, Depth: 1}}}, http.StatusBadRequest, "image 2 out of range"},
		{DepthRequest{Images: two, ProcessRes: 56, AlignPoints: pts[:3]}, http.StatusUnprocessableEntity, "too few"},
	} {
		resp, body := postJSON(t, ts.URL, tc.req)
		assert.Equal(t, tc.status, resp.StatusCode, truncate(body))
		assert.Contains(t, decodeError(t, body).Message, tc.msg)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
