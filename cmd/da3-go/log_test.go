package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The library is silent unless given a logger; the command gives it its own: -v shows the load's
// messages on stderr, the default (warnings only) does not.
func TestCommandPassesItsLogger(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	code, _, stderr := runCLI("depth", "-v", "-model", m, "-process-res", "56", "-format", "npy", "-o", t.TempDir(), img)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, `level=INFO msg="model loaded"`)
	assert.Contains(t, stderr, "level=INFO msg=device name=CPU")

	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "56", "-format", "npy", "-o", t.TempDir(), img)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "model loaded")
}
