package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
)

// png16AgainstNPY runs depth with -format png16,npy and returns both maps of view0.
func png16AgainstNPY(t *testing.T, args ...string) (export.DepthMap, []float32) {
	t.Helper()
	out := t.TempDir()
	code, _, stderr := runCLI(append([]string{"depth", "-format", "png16,npy", "-quiet", "-o", out}, args...)...)
	require.Equal(t, 0, code, stderr)
	m, err := export.ReadDepthPNG16(filepath.Join(out, "view0_depth_16.png"))
	require.NoError(t, err)
	want, shape, err := imgio.ReadNPY(filepath.Join(out, "view0_depth.npy"))
	require.NoError(t, err)
	require.Equal(t, []int{m.Height, m.Width}, shape)
	return m, want
}

// Metric depth is stored in millimetres: read back within half a millimetre.
func TestDepthPNG16Metric(t *testing.T) {
	metric := convertFixture(t, "da3-tiny-mono", convert.Options{Name: "da3-tiny-metric"})[0]
	img := fixtureImage(t, "da3-tiny-mono/one/images/view0.png")
	m, want := png16AgainstNPY(t, "-metric", "-intrinsics", "50,60,22,30", "-model", metric, "-process-res", "70", img)
	assert.Equal(t, export.UnitMetres, m.Unit)
	checked := 0
	for i, v := range want {
		if v >= 0.001 && v <= 65.535 {
			require.InDelta(t, v, m.Depth[i], 0.0005+1e-5, "pixel %d", i)
			checked++
		}
	}
	assert.Positive(t, checked, "some depths within the millimetre range")
}

// Relative depth keeps its min–max mapping: read back within half a quantisation step.
func TestDepthPNG16Relative(t *testing.T) {
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	m, want := png16AgainstNPY(t, "-model", tinyDA3(t), "-process-res", "56", img)
	assert.Equal(t, "relative", m.Unit)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range want {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	require.Greater(t, hi, lo)
	step := (hi - lo) / 65535
	for i, v := range want {
		require.InDelta(t, v, m.Depth[i], step/2+1e-6*hi, "pixel %d", i)
	}
}
