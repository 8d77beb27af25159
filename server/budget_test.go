package server

import (
	"bytes"
	"image"
	"image/png"
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pngOf is a w×h grey PNG (small on the wire, large decoded).
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i % 251)
	}
	var buf bytes.Buffer
	require.NoError(t, (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img))
	return buf.Bytes()
}

// TestRequestMemoryBudget: a small file declaring many pixels, with its
// maps asked for at the image size in every format, is refused with 413
// before it runs, naming the estimate, the budget and what to lower; the
// same request at the processed size runs, its response is small, and its
// buffers are not held afterwards. Many tiny images at a large process_res
// are refused for the model's buffers.
func TestRequestMemoryBudget(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxRequestMemory: 256 << 20})
	big := pngOf(t, 3000, 3000)
	req := DepthRequest{Image: enc64(big), ProcessRes: 56, MapFormats: []string{"f32", "npy", "png", "png16"}}
	resp, body := postJSON(t, ts.URL, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, truncate(body))
	e := decodeError(t, body)
	assert.Equal(t, kindTooLarge, e.Type)
	t.Log(e.Message)
	for _, want := range []string{"the request needs about", "3000x3000", "256 MiB", "-max-request-memory", "processed_size: true", "fewer map_formats"} {
		assert.Contains(t, e.Message, want)
	}

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	req.ProcessedSize = true
	resp, body = postJSON(t, ts.URL, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.Less(t, len(body), 1<<20, "maps at the processed size")
	r := decodeResponse(t, body)
	assert.Less(t, r.Views[0].Width, 100)
	resp, body = nil, nil
	runtime.GC()
	runtime.ReadMemStats(&ms)
	assert.Less(t, int64(ms.HeapInuse)-int64(before), int64(32<<20), "the request's buffers are released after the response")

	tiny := enc64(pngOf(t, 1, 1))
	many := make([]string, 16)
	for i := range many {
		many[i] = tiny
	}
	resp, body = postJSON(t, ts.URL, DepthRequest{Images: many, ProcessRes: 2048})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, truncate(body))
	e = decodeError(t, body)
	assert.Contains(t, e.Message, "lower process_res")
	assert.Contains(t, e.Message, "16 view(s)")
}
