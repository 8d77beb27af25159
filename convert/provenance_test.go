package convert

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/loader"
)

// provenance is provenanceKVs as a map.
func provenance(t *testing.T, src string, cfg map[string]any, o *output) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, kv := range provenanceKVs(src, &Checkpoint{Config: cfg}, o) {
		s, ok := kv.Value.Any().(string)
		require.True(t, ok, kv.Key)
		got[kv.Key] = s
	}
	return got
}

func TestProvenanceByKindAndSize(t *testing.T) {
	dir := t.TempDir() // no README.md: the kind+size table decides
	const hf = "https://huggingface.co/depth-anything/"
	for _, tc := range []struct {
		name string
		o    output
		cfg  map[string]any
		want map[string]string
	}{
		{"da3 small", output{kind: licence.DA3, size: "small"}, nil,
			map[string]string{KeyLicense: "Apache-2.0", KeySourceURL: hf + "DA3-SMALL"}},
		{"da3 large", output{kind: licence.DA3, size: "large"}, nil,
			map[string]string{KeyLicense: "CC-BY-NC-4.0", KeySourceURL: hf + "DA3-LARGE"}},
		{"mono by model_name", output{kind: licence.DA3Mono, size: "large"}, map[string]any{"model_name": "da3mono-large"},
			map[string]string{KeyLicense: "Apache-2.0", KeySourceURL: hf + "DA3MONO-LARGE"}},
		{"mono or metric, unnamed: no source", output{kind: licence.DA3Mono, size: "large"}, nil,
			map[string]string{KeyLicense: "Apache-2.0"}},
		{"metric", output{kind: licence.DA3Metric, size: "large"}, map[string]any{"model_name": "da3metric-large"},
			map[string]string{KeyLicense: "Apache-2.0", KeySourceURL: hf + "DA3METRIC-LARGE"}},
		{"nested", output{kind: licence.DA3Nested, size: "large"}, nil,
			map[string]string{KeyLicense: "CC-BY-NC-4.0", KeySourceURL: hf + "DA3NESTED-GIANT-LARGE"}},
		{"da2 small indoor", output{kind: da2Kind(20), size: "small"}, nil,
			map[string]string{KeyLicense: "Apache-2.0", KeySourceURL: hf + "Depth-Anything-V2-Metric-Hypersim-Small"}},
		{"da2 base", output{kind: da2Kind(0), size: "base"}, nil,
			map[string]string{KeyLicense: "CC-BY-NC-4.0", KeySourceURL: hf + "Depth-Anything-V2-Base"}},
		{"da2 metric, other max depth", output{kind: da2Kind(10), size: "large"}, nil,
			map[string]string{KeyLicense: "CC-BY-NC-4.0"}},
		{"config.json licence", output{kind: licence.DA3, size: "base"}, map[string]any{"license": "cc-by-nc-4.0"},
			map[string]string{KeyLicense: "CC-BY-NC-4.0", KeySourceURL: hf + "DA3-BASE"}},
		{"no official size", output{kind: licence.DA3, size: ""}, nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, provenance(t, dir, tc.cfg, &tc.o))
		})
	}
}

func TestProvenanceModelCardAndRetrained(t *testing.T) {
	// A Hugging Face snapshot of a "-1.1" checkpoint: the directory names it.
	dir := filepath.Join(t.TempDir(), "DA3-LARGE-1.1")
	require.NoError(t, os.Mkdir(dir, 0o755))
	o := &output{kind: licence.DA3, size: "large"}
	assert.Equal(t, map[string]string{KeyLicense: "CC-BY-NC-4.0", KeySourceURL: "https://huggingface.co/depth-anything/DA3-LARGE-1.1"},
		provenance(t, dir, nil, o))

	// The model card wins over the table (and over config.json), for a file
	// inside the directory too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\nlicense: apache-2.0\n---\n# card\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), nil, 0o644))
	got := provenance(t, filepath.Join(dir, "model.safetensors"), map[string]any{"license": "mit"}, o)
	assert.Equal(t, "Apache-2.0", got[KeyLicense])
}

// TestConvertWritesLicence converts a tiny DA2 checkpoint beside a model
// card: the file carries general.license; without a card and at a width no
// official model has, it carries none.
func TestConvertWritesLicence(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "da2.safetensors")
	writeSafetensors(t, st, da2Original(tinyDA2))
	opts := Options{OutLayers: []int{0, 1, 2, 3}}

	out := filepath.Join(dir, "plain.gguf")
	require.NoError(t, Convert(context.Background(), st, out, opts))
	f := openGGUF(t, out)
	_, ok := f.KV().Get(KeyLicense)
	assert.False(t, ok, "a tiny test model has no known licence")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\nlicense: cc-by-nc-4.0\npipeline_tag: depth-estimation\n---\n"), 0o644))
	out = filepath.Join(dir, "carded.gguf")
	require.NoError(t, Convert(context.Background(), st, out, opts))
	f = openGGUF(t, out)
	lic, err := f.KV().String(KeyLicense)
	require.NoError(t, err)
	assert.Equal(t, "CC-BY-NC-4.0", lic)
	v, _ := f.KV().Get(KeyLicense)
	assert.Equal(t, loader.ValueString, v.Type())
}
