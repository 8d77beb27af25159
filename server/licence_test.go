package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
)

func TestModelsListLicenceAndSource(t *testing.T) {
	da3, da2 := fixtures(t)
	const src = "https://huggingface.co/depth-anything/DA3-LARGE"
	s, _ := newTestServer(t, Options{Models: []ModelSpec{
		{Path: da3, Licence: "CC-BY-NC-4.0", Source: src},
		{Path: da2},
	}})
	rec := httptestRecorder(s, "GET", "/v1/models")
	require.Equal(t, http.StatusOK, rec.Code)
	var raw struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &raw))
	require.Len(t, raw.Data, 2)
	assert.Equal(t, "CC-BY-NC-4.0", raw.Data[0]["licence"])
	assert.Equal(t, true, raw.Data[0]["non_commercial"])
	assert.Equal(t, src, raw.Data[0]["source"])
	// A file without general.license: the fields are there, empty.
	assert.Equal(t, "", raw.Data[1]["licence"])
	assert.Equal(t, false, raw.Data[1]["non_commercial"])
	assert.Equal(t, "", raw.Data[1]["source"])
}

// TestModelsListLicenceFromFile: without a licence in the spec, the file's
// general.license (written by convert from the model card) is shown.
func TestModelsListLicenceFromFile(t *testing.T) {
	dir := t.TempDir()
	pth, err := os.ReadFile("../tests/fixtures/da2-tiny/model.pth")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.pth"), pth, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\nlicense: cc-by-nc-4.0\n---\n"), 0o644))
	gguf := filepath.Join(dir, "carded.gguf")
	require.NoError(t, convert.Convert(context.Background(), filepath.Join(dir, "model.pth"), gguf,
		convert.Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}}))
	s, _ := newTestServer(t, Options{Models: []ModelSpec{{Path: gguf}}})
	rec := httptestRecorder(s, "GET", "/v1/models")
	require.Equal(t, http.StatusOK, rec.Code)
	var list ModelList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Data, 1)
	assert.Equal(t, "CC-BY-NC-4.0", list.Data[0].Licence)
	assert.True(t, list.Data[0].NonCommercial)
	assert.Empty(t, list.Data[0].Source, "a tiny test model has no official checkpoint")
}
