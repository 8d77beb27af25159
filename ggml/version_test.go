package ggml_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// TestHeaderPathMatchesGoMod checks that da3_ggml.h looks for the headers of
// the ollama version go.mod pins, in the module cache next to this module:
// bumping the version in go.mod alone would make programs that import
// da3-go compile against headers of the old version, or fail to find any.
func TestHeaderPathMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(ggml.ModulePath) + `\s+(\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "go.mod requires %s", ggml.ModulePath)
	version := string(m[1])
	h, err := os.ReadFile("da3_ggml.h")
	require.NoError(t, err)
	paths := regexp.MustCompile(`"\.\./\.\./\.\./ollama/ollama@([^/]+)/`).FindAllSubmatch(h, -1)
	require.NotEmpty(t, paths, "da3_ggml.h looks for the module next to da3-go's")
	for _, p := range paths {
		assert.Equal(t, version, string(p[1]), "da3_ggml.h's module-cache path must name go.mod's version")
	}
	assert.Contains(t, string(h), `#define DA3_GGML_MODULE_VERSION "`+version+`"`)
}
