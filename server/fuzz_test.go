package server

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// The fuzz targets send hostile bodies and images to the depth handler: every
// answer must be JSON with an expected status, never a 500 (a recovered
// panic answers 500) or a crash. `make fuzz-serve` fuzzes them; plain
// `go test` runs the seeds.

var (
	fuzzOnce   sync.Once
	fuzzServer *Server
)

// fuzzHandler is a server with small limits so that no input is slow.
func fuzzHandler(t testing.TB) http.Handler {
	fuzzOnce.Do(func() {
		da3, da2 := fixtures(t)
		s, err := New(t.Context(), Options{Models: []ModelSpec{{Path: da3}, {Path: da2}}, Threads: 1, Logger: quietLog,
			MaxBodyBytes: 1 << 20, MaxPixels: 200 * 200, MaxViews: 4, MaxProcessRes: 112, Timeout: fuzzTimeout})
		require.NoError(t, err)
		fuzzServer = s // lives for the test binary: the OS frees it
	})
	require.NotNil(t, fuzzServer)
	return fuzzServer.Handler()
}

// checkAnswer asserts the answer is one the API documents.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	switch rec.Code {
	case 200:
		var r DepthResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), "200 with a depth response")
		require.NotEmpty(t, r.Views)
	case 400, 404, 413, 415, 422, 503:
		var e ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "error answers are JSON: %s", truncate(rec.Body.Bytes()))
		require.Equal(t, rec.Code, e.Error.Code)
		require.NotEmpty(t, e.Error.Message)
	default:
		t.Fatalf("unexpected status %d: %s", rec.Code, truncate(rec.Body.Bytes()))
	}
}

// serveBody answers one request; an answer that takes longer than the
// server's timeout and a margin is a hang, reported with its input.
func serveBody(t *testing.T, h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/depth", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(fuzzTimeout + 10*time.Second):
		t.Fatalf("no answer after %s to %q: %q", fuzzTimeout+10*time.Second, contentType, truncate(body))
	}
	return rec
}

const fuzzBoundary = "da3fuzzboundary"

// fuzzTimeout is the fuzzed server's request timeout.
const fuzzTimeout = 10 * time.Second

var fuzzContentTypes = []string{"application/json", "multipart/form-data; boundary=" + fuzzBoundary, "image/png", ""}

func FuzzDepthBody(f *testing.F) {
	img, err := os.ReadFile(view0)
	require.NoError(f, err)
	js, _ := json.Marshal(DepthRequest{Image: enc64(img), ProcessRes: 28, IncludePoints: true, MapFormats: []string{"f32", "png"}})
	f.Add(uint8(0), js)
	f.Add(uint8(0), []byte(`{"images": ["`+enc64(img)+`", "`+enc64(img)+`"], "process_res": 28, "ref_view": "first"}`))
	f.Add(uint8(0), []byte(`{"image": "data:image/png;base64,AAAA", "model": "da2-tiny"}`))
	f.Add(uint8(0), []byte(`{"image": 5}`))
	f.Add(uint8(0), []byte(`[1, 2, 3]`))
	var mp bytes.Buffer
	mp.WriteString("--" + fuzzBoundary + "\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n")
	mp.Write(img)
	mp.WriteString("\r\n--" + fuzzBoundary + "\r\nContent-Disposition: form-data; name=\"process_res\"\r\n\r\n28\r\n--" + fuzzBoundary + "--\r\n")
	f.Add(uint8(1), mp.Bytes())
	f.Add(uint8(1), []byte("--"+fuzzBoundary+"\r\nContent-Disposition: form-data; name=\"exports\"\r\n\r\nply\r\n--"+fuzzBoundary+"--\r\n"))
	f.Add(uint8(1), []byte("--"+fuzzBoundary+"\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\n\x89PNG\r\n\x1a\n\r\n--"+fuzzBoundary+"--"))
	f.Add(uint8(2), img)
	f.Add(uint8(3), []byte(`{}`))
	f.Fuzz(func(t *testing.T, ct uint8, body []byte) {
		h := fuzzHandler(t)
		checkAnswer(t, serveBody(t, h, fuzzContentTypes[int(ct)%len(fuzzContentTypes)], body))
	})
}

func FuzzDepthImage(f *testing.F) {
	src := image.NewNRGBA(image.Rect(0, 0, 30, 20))
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 37)
	}
	pal := image.NewPaletted(src.Bounds(), []color.Color{color.Black, color.White, color.RGBA{200, 30, 30, 255}})
	for _, enc := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return png.Encode(b, src) },
		func(b *bytes.Buffer) error { return jpeg.Encode(b, src, nil) },
		func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) },
		func(b *bytes.Buffer) error { return bmp.Encode(b, src) },
		func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) },
	} {
		var buf bytes.Buffer
		require.NoError(f, enc(&buf))
		f.Add(buf.Bytes(), uint8(28))
	}
	webp, err := os.ReadFile("../internal/imgio/testdata/rgb4x3_lossless.webp")
	require.NoError(f, err)
	f.Add(webp, uint8(0))
	f.Add(pngOfSize(f, 1, 200), uint8(14))
	f.Fuzz(func(t *testing.T, img []byte, res uint8) {
		h := fuzzHandler(t)
		js, _ := json.Marshal(DepthRequest{Image: enc64(img), ProcessRes: int(res) % 113, IncludePoints: res%2 == 0})
		checkAnswer(t, serveBody(t, h, "application/json", js))
	})
}
