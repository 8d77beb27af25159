package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
)

// The tiny fixture models (random weights, committed as checkpoints under
// tests/fixtures) converted once per test binary.
var (
	fixtureDir  string
	fixtureOnce sync.Once
	fixtureErr  error
	da3Tiny     string
	da2Tiny     string

	metricOnce sync.Once
	metricErr  error
	metricTiny string    // DA3 metric-large layout (focal-normalised depth)
	nestedPair [2]string // any-view and metric halves of a nested model
)

var (
	headsOnce sync.Once
	headsErr  error
	poseTiny  string // da3-tiny-pose with the auxiliary ray head and the camera encoder
	gsTiny    string // da3-tiny-gs: DA3-GIANT's Gaussian head
)

// headsFixtures converts the tiny ray-head and Gaussian-head models once.
func headsFixtures(t testing.TB) (pose, gs string) {
	t.Helper()
	fixtures(t)
	headsOnce.Do(func() {
		poseTiny = filepath.Join(fixtureDir, "da3-tiny-pose.gguf")
		if headsErr = convert.Convert(context.Background(), "../tests/fixtures/da3-tiny-pose", poseTiny, convert.Options{WithAux: true}); headsErr != nil {
			return
		}
		gsTiny = filepath.Join(fixtureDir, "da3-tiny-gs.gguf")
		headsErr = convert.Convert(context.Background(), "../tests/fixtures/da3-tiny-gs", gsTiny, convert.Options{})
	})
	require.NoError(t, headsErr, "converting the tiny ray and Gaussian fixtures")
	return poseTiny, gsTiny
}

// metricFixtures converts the tiny metric model and nested pair once.
func metricFixtures(t testing.TB) (metric string, pair [2]string) {
	t.Helper()
	fixtures(t)
	metricOnce.Do(func() {
		metricTiny = filepath.Join(fixtureDir, "da3-tiny-metric.gguf")
		if metricErr = convert.Convert(context.Background(), "../tests/fixtures/da3-tiny-mono", metricTiny, convert.Options{Name: "da3-tiny-metric"}); metricErr != nil {
			return
		}
		src := "../tests/fixtures/da3-tiny-nested"
		fam, err := convert.Inspect(src)
		if metricErr = err; err != nil {
			return
		}
		dst := filepath.Join(fixtureDir, "da3-tiny-nested.gguf")
		if metricErr = convert.Convert(context.Background(), src, dst, convert.Options{}); metricErr != nil {
			return
		}
		paths := convert.OutputPaths(fam, dst)
		if len(paths) != 2 {
			metricErr = fmt.Errorf("nested conversion wrote %d files", len(paths))
			return
		}
		nestedPair = [2]string{paths[0], paths[1]}
	})
	require.NoError(t, metricErr, "converting the tiny metric fixtures")
	return metricTiny, nestedPair
}

// quietLog drops the access log (-v shows nothing of it; failures say enough).
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func fixtures(t testing.TB) (da3, da2 string) {
	t.Helper()
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "da3-server-test")
		if fixtureErr != nil {
			return
		}
		da3Tiny = filepath.Join(fixtureDir, "da3-tiny.gguf")
		if fixtureErr = convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", da3Tiny, convert.Options{}); fixtureErr != nil {
			return
		}
		da2Tiny = filepath.Join(fixtureDir, "da2-tiny.gguf")
		fixtureErr = convert.Convert(context.Background(), "../tests/fixtures/da2-tiny/model.pth", da2Tiny,
			convert.Options{Name: "da2-tiny", Heads: 2, OutLayers: []int{0, 1, 2, 3}})
	})
	require.NoError(t, fixtureErr, "converting the tiny fixtures")
	return da3Tiny, da2Tiny
}

// newTestServer loads the tiny models (da3-tiny first) and serves them on an
// httptest server.
func newTestServer(t testing.TB, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	da3, da2 := fixtures(t)
	if opts.Models == nil {
		opts.Models = []ModelSpec{{Path: da3}, {Path: da2}}
	}
	opts.Threads = 1
	opts.Logger = quietLog
	s, err := New(context.Background(), opts)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, s.Close())
	})
	return s, ts
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// view0 and view1 are the two-view fixture's images.
const (
	view0 = "../tests/fixtures/da3-tiny/two/images/view0.png"
	view1 = "../tests/fixtures/da3-tiny/two/images/view1.png"
)

func postJSON(t testing.TB, url string, body any) (*http.Response, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return post(t, url+"/v1/depth", "application/json", b)
}

func post(t testing.TB, url, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

// multipartBody builds a form with the image files (in order) and fields.
func multipartBody(t testing.TB, images map[string][]byte, order []string, fields map[string]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, name := range order {
		w, err := mw.CreateFormFile("image", name)
		require.NoError(t, err)
		_, err = w.Write(images[name])
		require.NoError(t, err)
	}
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func enc64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// f32s decodes a base64 little-endian float32 map.
func f32s(t testing.TB, s string) []float32 {
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

func decodeResponse(t testing.TB, body []byte) DepthResponse {
	t.Helper()
	var r DepthResponse
	require.NoError(t, json.Unmarshal(body, &r), "%s", truncate(body))
	return r
}

func decodeError(t testing.TB, body []byte) ErrorDetail {
	t.Helper()
	var e ErrorBody
	require.NoError(t, json.Unmarshal(body, &e), "error body is JSON: %s", truncate(body))
	return e.Error
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%s… (%d bytes)", b[:300], len(b))
	}
	return string(b)
}

// httptestRecorder serves one request in memory.
func httptestRecorder(s *Server, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
