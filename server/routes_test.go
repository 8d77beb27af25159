package server

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModelsHealthMetrics(t *testing.T) {
	s, ts := newTestServer(t, Options{Parallel: 2})
	rec := httptestRecorder(s, "GET", "/v1/models")
	require.Equal(t, http.StatusOK, rec.Code)
	var list ModelList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Data, 2)
	m := list.Data[0]
	assert.Equal(t, "da3-tiny", m.Name)
	assert.Equal(t, "da3-tiny.gguf", m.File)
	assert.True(t, m.Camera && m.Confidence && m.MultiView)
	assert.Equal(t, "CPU", m.Device)
	assert.Equal(t, 2, m.Instances)
	assert.NotZero(t, m.WeightBytes)
	assert.False(t, list.Data[1].Camera)
	assert.Equal(t, "disparity", list.Data[1].Unit)
	assert.Equal(t, "relative", m.Unit)
	assert.False(t, m.Nested || m.Metric || m.Intrinsics)
	assert.Equal(t, 504, m.ProcessRes, "DA3's default process_res")
	assert.Equal(t, 518, list.Data[1].ProcessRes, "DA2's default process_res")

	rec = httptestRecorder(s, "GET", "/healthz")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok","models":["da3-tiny","da2-tiny"]}`, rec.Body.String())

	resp, _ := postJSON(t, ts.URL, DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	post(t, ts.URL+"/v1/depth", "application/json", []byte(`{`))
	rec = httptestRecorder(s, "GET", "/metrics")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain; version=0.0.4")
	text := rec.Body.String()
	for _, want := range []string{
		`da3_http_requests_total{handler="/v1/depth",code="200"} 1`,
		`da3_http_requests_total{handler="/v1/depth",code="400"} 1`,
		`da3_errors_total{kind="bad_request"} 1`,
		`da3_request_duration_seconds_count{handler="/v1/depth"} 2`,
		`da3_request_duration_seconds_bucket{handler="/v1/depth",le="+Inf"} 2`,
		`da3_inference_duration_seconds_count{model="da3-tiny"} 1`,
		`da3_images_total 1`,
		`da3_queue_length{model="da3-tiny"} 0`,
		`da3_runs_in_flight{model="da3-tiny"} 0`,
		`da3_model_weight_bytes{model="da2-tiny",device="CPU"}`,
		`process_resident_memory_bytes `,
	} {
		assert.Contains(t, text, want)
	}
	// Every sample line is "name{labels} value" or "name value".
	sample := regexp.MustCompile(`^[a-z_][a-z0-9_]*(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$`)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			assert.Regexp(t, sample, line)
		}
	}
	rec = httptestRecorder(s, "GET", "/nope")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Contains(t, httptestRecorder(s, "GET", "/metrics").Body.String(), `da3_http_requests_total{handler="other",code="404"} 1`)
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

func TestOpenAPIMatchesTypes(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	rec := httptestRecorder(s, "GET", "/openapi.json")
	require.Equal(t, http.StatusOK, rec.Code)
	var spec struct {
		OpenAPI    string                    `json:"openapi"`
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &spec))
	assert.Equal(t, "3.0.3", spec.OpenAPI)
	for path, method := range map[string]string{"/v1/depth": "post", "/v1/models": "get", "/healthz": "get", "/metrics": "get", "/openapi.json": "get"} {
		assert.Contains(t, spec.Paths[path], method, path)
	}
	for name, typ := range map[string]any{"DepthRequest": DepthRequest{}, "DepthResponse": DepthResponse{}, "View": View{},
		"Map": Map{}, "Export": Export{}, "Timing": Timing{}, "ModelList": ModelList{}, "ModelInfo": ModelInfo{},
		"ErrorBody": ErrorBody{}, "ErrorDetail": ErrorDetail{}, "GivenCamera": GivenCamera{}, "Undistorted": Undistorted{}} {
		schema, ok := spec.Components.Schemas[name]
		require.True(t, ok, "schema %s", name)
		var props []string
		for p := range schema.Properties {
			props = append(props, p)
		}
		assert.ElementsMatch(t, jsonFields(reflect.TypeOf(typ)), props, "openapi.json %s documents every field of the Go type", name)
	}
}

func TestPage(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	rec := httptestRecorder(s, "GET", "/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/html")
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
	page := rec.Body.String()
	assert.Contains(t, page, `src="/static/app.js"`)
	for _, f := range []string{"app.js", "style.css"} {
		rec = httptestRecorder(s, "GET", "/static/"+f)
		assert.Equal(t, http.StatusOK, rec.Code, f)
	}
	rec = httptestRecorder(s, "GET", "/static/viewer.js")
	if ViewerBundled() {
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	} else {
		assert.Equal(t, http.StatusNotFound, rec.Code, "without npm the bundle is absent and the page says so")
	}
	_, err := fs.Stat(staticFS(), "index.html")
	require.NoError(t, err)
}
