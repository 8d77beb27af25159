package fetch

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/fetch/internal/shasum"
)

// sharedTable is the list the table is generated from, relative to this
// package (the repository's ../shared).
const sharedTable = "../../../shared/published-gguf.sha256"

func TestTableMatchesSharedList(t *testing.T) {
	data, err := os.ReadFile(sharedTable)
	if os.IsNotExist(err) {
		t.Skipf("%s not present", sharedTable)
	}
	require.NoError(t, err)
	entries, err := shasum.Parse(string(data))
	require.NoError(t, err)
	var want []publishedFile
	for _, e := range entries {
		want = append(want, publishedFile{e.File, e.SHA256})
	}
	assert.Equal(t, want, published, "table.go is stale: run go generate ./fetch")
}

func TestEveryFileHasOneModel(t *testing.T) {
	models := Names()
	require.Len(t, models, len(published))
	byFile := map[string]Model{}
	for _, m := range models {
		_, dup := byFile[m.File]
		assert.False(t, dup, "%s listed twice", m.File)
		byFile[m.File] = m
	}
	names := map[string]string{}
	for _, f := range published {
		m, ok := byFile[f.file]
		require.True(t, ok, "%s has no model", f.file)
		assert.Equal(t, f.sha256, m.SHA256)
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			prev, dup := names[n]
			assert.False(t, dup, "name %s selects %s and %s", n, prev, f.file)
			names[n] = f.file
			got, ok := Lookup(n)
			require.True(t, ok, n)
			assert.Equal(t, f.file, got.File, n)
		}
		got, ok := Lookup(f.file)
		require.True(t, ok, f.file)
		assert.Equal(t, m.Name, got.Name)
	}
}

func TestFriendlyNames(t *testing.T) {
	for name, file := range map[string]string{
		"da2-small":                     "depth-anything2-small-f32.gguf",
		"da2-small-f32":                 "depth-anything2-small-f32.gguf",
		"da2-base":                      "depth-anything2-base-f32.gguf",
		"da2-large":                     "depth-anything2-large-f32.gguf",
		"da2-small-q8_0":                "depth-anything2-small-q8_0.gguf",
		"da2-small-f16":                 "depth-anything2-small-f16.gguf",
		"da2-small-q6_k":                "depth-anything2-small-q6_k.gguf",
		"da2-small-q5_k":                "depth-anything2-small-q5_k.gguf",
		"da2-large-q4_k":                "depth-anything2-large-q4_k.gguf",
		"da2-metric-indoor-small":       "depth-anything2-metric-hypersim-small-f32.gguf",
		"da2-metric-outdoor-small":      "depth-anything2-metric-vkitti-small-f32.gguf",
		"da2-metric-hypersim-small":     "depth-anything2-metric-hypersim-small-f32.gguf",
		"da2-metric-vkitti-small":       "depth-anything2-metric-vkitti-small-f32.gguf",
		"da2-metric-vkitti-small-f32":   "depth-anything2-metric-vkitti-small-f32.gguf",
		"da2-metric-indoor-large-q4_k":  "depth-anything2-metric-hypersim-large-q4_k.gguf",
		"da2-metric-outdoor-base-f16":   "depth-anything2-metric-vkitti-base-f16.gguf",
		"da2-metric-hypersim-base-q8_0": "depth-anything2-metric-hypersim-base-q8_0.gguf",
		"da3-small":                     "depth-anything-small-f32.gguf",
		"da3-base":                      "depth-anything-base-f32.gguf",
		"da3-base-f16":                  "depth-anything-base-f16.gguf",
		"da3-base-q8_0":                 "depth-anything-base-q8_0.gguf",
		"da3-base-q4_k":                 "depth-anything-base-q4_k.gguf",
		"da3-large":                     "depth-anything-large-f32.gguf",
		"da3-giant":                     "depth-anything-giant-f32.gguf",
		"da3-mono-large":                "depth-anything-mono-large-f32.gguf",
		"da3-metric-large":              "depth-anything-metric-large-f32.gguf",
		"da3-nested-anyview":            "depth-anything-nested-anyview.gguf",
		"da3-nested-metric":             "depth-anything-nested-metric.gguf",
		"depth-anything2-small-f32":     "depth-anything2-small-f32.gguf",
	} {
		m, ok := Lookup(name)
		if assert.True(t, ok, name) {
			assert.Equal(t, file, m.File, name)
		}
	}
	for _, name := range []string{"da2-small-q4_0", "da3-small-q8_0", "da2", "da2-metric-small", "da3-nested"} {
		_, ok := Lookup(name)
		assert.False(t, ok, name)
	}
}

func TestFamiliesAndOrder(t *testing.T) {
	families := map[string]string{}
	var order []string
	for _, m := range Names() {
		families[m.Name] = m.Family
		order = append(order, m.Name)
	}
	assert.Equal(t, "da2", families["da2-base-q5_k"])
	assert.Equal(t, "da2-metric", families["da2-metric-outdoor-large"])
	assert.Equal(t, "da3", families["da3-giant"])
	assert.Equal(t, "da3-mono", families["da3-mono-large"])
	assert.Equal(t, "da3-metric", families["da3-metric-large"])
	assert.Equal(t, "da3-nested", families["da3-nested-metric"])
	assert.Equal(t, []string{"da2-small", "da2-small-f16", "da2-small-q8_0", "da2-small-q6_k", "da2-small-q5_k", "da2-small-q4_k", "da2-base"}, order[:7])
	assert.Equal(t, "da3-small", order[54])
	assert.Equal(t, "da3-nested-metric", order[len(order)-1])
}

func TestModelForRejectsUnknownFiles(t *testing.T) {
	for _, file := range []string{"depth-anything2-small-f32.bin", "other-small-f32.gguf", "depth-anything2-small.gguf",
		"depth-anything2-metric-nyu-small-f32.gguf", "depth-anything2-huge-f32.gguf"} {
		_, _, err := modelFor(file, strings.Repeat("0", 64))
		assert.Error(t, err, file)
	}
}

func TestNewRegistryRejectsDuplicates(t *testing.T) {
	_, err := newRegistry([]Model{{Name: "a", File: "x.gguf"}, {Name: "b", Aliases: []string{"A"}, File: "y.gguf"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a" selects both x.gguf and y.gguf`)
}

func TestSuggest(t *testing.T) {
	r := published_()
	assert.Equal(t, []string{"da2-small"}, r.suggest("da2-smal", 5)[:1])
	assert.Contains(t, r.suggest("DA3-GIANT-F16", 5), "da3-giant-f32")
	assert.Len(t, r.suggest("da2", 5), 5)
	assert.Empty(t, r.suggest("xyz", 5))
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"da3-lrage", "da3-large", 2}, {"same", "same", 0}} {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		h           string
		start, size int64
		ok          bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-9/*", 0, -1, true},
		{"bytes */500", -1, 500, true},
		{"bytes */*", 0, 0, false},
		{"items 0-9/10", 0, 0, false},
		{"bytes x-9/10", 0, 0, false},
		{"bytes 0-9/-4", 0, 0, false},
		{"bytes 0-9", 0, 0, false},
	} {
		start, size, ok := parseContentRange(tc.h)
		assert.Equal(t, tc.ok, ok, tc.h)
		if tc.ok {
			assert.Equal(t, []int64{tc.start, tc.size}, []int64{start, size}, tc.h)
		}
	}
}
