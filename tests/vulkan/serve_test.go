package vulkan

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/server"
)

// `da3-go serve -device Vulkan0`: the server's handler with the model on
// the device answers a depth request (one image, then two views) with the
// CPU model's depth and confidence.
func TestServe(t *testing.T) {
	need(t)
	path := gguf(t, "da3-tiny", convert.Options{})
	s, err := server.New(context.Background(), server.Options{Models: []server.ModelSpec{{Path: path}}, Device: device, Threads: 2, Logger: quiet})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	require.Equal(t, device, s.Models()[0].Device)
	cpu := load(t, path, "cpu")

	files := []string{"da3-tiny/two/images/view0.png", "da3-tiny/two/images/view1.png"}
	for _, n := range []int{1, 2} {
		var enc []string
		for _, f := range files[:n] {
			b, err := os.ReadFile(fixtureDir(f))
			require.NoError(t, err)
			enc = append(enc, base64.StdEncoding.EncodeToString(b))
		}
		body, err := json.Marshal(server.DepthRequest{Images: enc, ProcessRes: 42, ProcessedSize: true,
			IncludeDepth: true, IncludeConfidence: true, MapFormats: []string{"f32"}})
		require.NoError(t, err)
		resp, err := http.Post(ts.URL+"/v1/depth", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
		var r server.DepthResponse
		require.NoError(t, json.Unmarshal(out, &r))
		require.Len(t, r.Views, n)

		want, err := cpu.MultiView(context.Background(), images(t, files[:n]...), model.RunOptions{ProcessRes: 42, ProcessedSize: true})
		require.NoError(t, err)
		var wd, gd, wc, gc []float32
		for i, v := range r.Views {
			require.Equal(t, [2]int{want[i].Width, want[i].Height}, [2]int{v.Depth.Width, v.Depth.Height})
			wd, gd = append(wd, want[i].Depth...), append(gd, f32s(t, v.Depth.F32)...)
			wc, gc = append(wc, want[i].Conf...), append(gc, f32s(t, v.Confidence.F32)...)
		}
		gate(t, "served depth", wd, gd, relF32)
		gate(t, "served conf", wc, gc, relF32)
	}
}

// f32s decodes a base64 little-endian float32 map.
func f32s(t *testing.T, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	require.Zero(t, len(b)%4)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
