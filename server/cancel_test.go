package server

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientGoneStopsRun: a client that goes away while its request runs
// stops the graph (ggml's abort callback through the request's context)
// within a second, instead of the run going on for seconds; the instance is
// free again and the cancellation is counted.
func TestClientGoneStopsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a multi-second graph")
	}
	da3, _ := fixtures(t)
	s, ts := newTestServer(t, Options{Models: []ModelSpec{{Path: da3}}, MaxProcessRes: 1008})
	var views []string
	for i := range 8 {
		img := image.NewRGBA(image.Rect(0, 0, 1000, 750))
		for y := 0; y < 750; y++ {
			for x := 0; x < 1000; x++ {
				img.Set(x, y, color.RGBA{uint8(3*x + 40*i), uint8(5 * y), uint8(x ^ y), 255})
			}
		}
		var buf bytes.Buffer
		require.NoError(t, png.Encode(&buf, img))
		views = append(views, enc64(buf.Bytes()))
	}
	// Eight views at 1008 px take several seconds on the tiny model with
	// one thread.
	b, _ := json.Marshal(DepthRequest{Images: views, ProcessRes: 1008})
	ctx, cancel := context.WithCancel(context.Background())
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/depth", bytes.NewReader(b))
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(r)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, "the run to start", func() bool { return s.pools[0].running.Load() == 1 })
	time.Sleep(500 * time.Millisecond) // decoding and preprocessing done, the graph running
	start := time.Now()
	cancel()
	require.Error(t, <-errc)
	waitFor(t, "the run to stop", func() bool { return s.pools[0].running.Load() == 0 })
	took := time.Since(start)
	t.Logf("run stopped %v after the client went away", took)
	assert.Less(t, took, time.Second)
	waitFor(t, "the cancellation to be counted", func() bool {
		var buf bytes.Buffer
		s.metrics.write(&buf, s.pools)
		return strings.Contains(buf.String(), `da3_errors_total{kind="client_closed"} 1`)
	})
}
