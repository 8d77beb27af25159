package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/tile"
)

// TestTile: tile on gives the library's tiled map at the image size; auto
// tiles an image only when its longer side is 4× the process resolution;
// what tiles cannot go with is refused.
func TestTile(t *testing.T) {
	_, da2 := fixtures(t)
	_, ts := newTestServer(t, Options{})
	const img = "../tests/fixtures/da2-tiny/image.png" // 160×120
	im, err := imgio.Decode(img)
	require.NoError(t, err)
	m, err := model.Load(context.Background(), da2, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: quietLog}})
	require.NoError(t, err)
	defer m.Close()
	run := model.RunOptions{ProcessRes: 28, ProcessedSize: true}
	tiled, err := tile.Depth(context.Background(), m, im, tile.Options{Size: 56, Run: run})
	require.NoError(t, err)
	plain, err := m.Depth(context.Background(), im, model.RunOptions{ProcessRes: 28})
	require.NoError(t, err)
	require.NotEqual(t, plain.Depth, tiled.Depth)

	for _, tc := range []struct {
		mode string
		res  int
		want *model.Result
	}{
		{"on", 28, tiled},
		{"auto", 28, tiled}, // 160 ≥ 4·28
		{"off", 28, plain},
	} {
		resp, body := postJSON(t, ts.URL, DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), ProcessRes: tc.res,
			Tile: tc.mode, TileSize: 56, IncludeDepth: true})
		require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
		r := decodeResponse(t, body)
		assert.Equal(t, [2]int{160, 120}, [2]int{r.Width, r.Height}, tc.mode)
		assert.Equal(t, tc.want.Depth, f32s(t, r.Views[0].Depth.F32), tc.mode)
	}
	// auto at a process resolution above a quarter of the side: one plain run.
	plain56, err := m.Depth(context.Background(), im, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	resp, body := postJSON(t, ts.URL, DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), ProcessRes: 56, Tile: "auto", IncludeDepth: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.Equal(t, plain56.Depth, f32s(t, decodeResponse(t, body).Views[0].Depth.F32))

	two := []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))}
	for _, tc := range []struct {
		req DepthRequest
		msg string
	}{
		{DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), Tile: "yes"}, "want on, auto or off"},
		{DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), Tile: "on", TileSize: -1}, "tile_size -1"},
		{DepthRequest{Images: two, Tile: "on"}, "set independent"},
		{DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), Tile: "on", ProcessedSize: true}, "drop processed_size"},
		{DepthRequest{Images: two, Independent: true, Tile: "on", Exports: []string{"glb"}}, "drop include_points and exports"},
		{DepthRequest{Model: "da2-tiny", Image: enc64(readFile(t, img)), Tile: "on", CameraModel: "fisheye", CameraParams: []float64{100, 100, 80, 60, 0, 0, 0, 0}}, "tile with camera_model"},
	} {
		resp, body := postJSON(t, ts.URL, tc.req)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, truncate(body))
		assert.Contains(t, decodeError(t, body).Message, tc.msg)
	}
}
