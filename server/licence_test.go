package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
