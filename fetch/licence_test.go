package fetch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/fetch"
)

func TestEveryPublishedModelHasALicenceAndSource(t *testing.T) {
	for _, m := range fetch.Names() {
		assert.Contains(t, []string{"Apache-2.0", "CC-BY-NC-4.0"}, m.Licence, m.Name)
		assert.Equal(t, m.Licence == "CC-BY-NC-4.0", m.NonCommercial, m.Name)
		assert.True(t, strings.HasPrefix(m.Source, "https://huggingface.co/depth-anything/"), "%s: source %q", m.Name, m.Source)
	}
}

func TestLicenceOfPublishedModels(t *testing.T) {
	const hf = "https://huggingface.co/depth-anything/"
	for _, tc := range []struct {
		name, licence, source string
	}{
		{"da3-small", "Apache-2.0", "DA3-SMALL"},
		{"da3-base-q4_k", "Apache-2.0", "DA3-BASE"},
		{"da3-large", "CC-BY-NC-4.0", "DA3-LARGE"},
		{"da3-giant", "CC-BY-NC-4.0", "DA3-GIANT"},
		{"da3-mono-large", "Apache-2.0", "DA3MONO-LARGE"},
		{"da3-metric-large", "Apache-2.0", "DA3METRIC-LARGE"},
		{"da3-nested-anyview", "CC-BY-NC-4.0", "DA3NESTED-GIANT-LARGE"},
		{"da3-nested-metric", "CC-BY-NC-4.0", "DA3NESTED-GIANT-LARGE"},
		{"da2-small-q8_0", "Apache-2.0", "Depth-Anything-V2-Small"},
		{"da2-base", "CC-BY-NC-4.0", "Depth-Anything-V2-Base"},
		{"da2-large-f16", "CC-BY-NC-4.0", "Depth-Anything-V2-Large"},
		{"da2-metric-indoor-small", "Apache-2.0", "Depth-Anything-V2-Metric-Hypersim-Small"},
		{"da2-metric-outdoor-small-q4_k", "Apache-2.0", "Depth-Anything-V2-Metric-VKITTI-Small"},
		{"da2-metric-indoor-base", "CC-BY-NC-4.0", "Depth-Anything-V2-Metric-Hypersim-Base"},
		{"da2-metric-outdoor-large", "CC-BY-NC-4.0", "Depth-Anything-V2-Metric-VKITTI-Large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := fetch.Lookup(tc.name)
			require.True(t, ok)
			assert.Equal(t, tc.licence, m.Licence)
			assert.Equal(t, tc.licence != "Apache-2.0", m.NonCommercial)
			assert.Equal(t, hf+tc.source, m.Source)
		})
	}
}

func TestUnpublishedNamesSayConvert(t *testing.T) {
	un := fetch.Unpublished()
	require.Len(t, un, 3)
	for _, m := range un {
		assert.Empty(t, m.File, m.Name)
		assert.True(t, strings.HasSuffix(m.Source, "-1.1"), m.Source)
		assert.Equal(t, "CC-BY-NC-4.0", m.Licence, "the official table: every -1.1 checkpoint is CC BY-NC 4.0")
		assert.True(t, m.NonCommercial, m.Name)
		_, published := fetch.Lookup(m.Name)
		assert.False(t, published, m.Name)
	}
	opts := fetch.Options{CacheDir: t.TempDir(), BaseURL: "http://127.0.0.1:1"}
	for _, name := range []string{"da3-large-1.1", "DA3-GIANT-1.1", "da3nested-giant-large-1.1"} {
		_, err := fetch.Resolve(context.Background(), name, opts)
		require.ErrorIs(t, err, fetch.ErrNotPublished, name)
		assert.NotErrorIs(t, err, fetch.ErrUnknownModel)
		assert.Contains(t, err.Error(), "no published GGUF yet: convert the official checkpoint with `da3-go convert`")
		assert.Contains(t, err.Error(), "https://huggingface.co/depth-anything/")
	}
	_, err := fetch.Fetch(context.Background(), un[0], opts)
	require.ErrorIs(t, err, fetch.ErrNotPublished)
	assert.Contains(t, err.Error(), "da3-go convert DA3-LARGE-1.1/ da3-large-1.1.gguf")
}
