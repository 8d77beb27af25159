package main

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
)

// png16AgainstNPY runs depth with -format png16,npy and returns both maps of view0 and the warnings.
func png16AgainstNPY(t *testing.T, args ...string) (export.DepthMap, []float32, string) {
	t.Helper()
	out := t.TempDir()
	code, _, stderr := runCLI(append([]string{"depth", "-format", "png16,npy", "-quiet", "-o", out}, args...)...)
	require.Equal(t, 0, code, stderr)
	m, err := export.ReadDepthPNG16(filepath.Join(out, "view0_depth_16.png"))
	require.NoError(t, err)
	want, shape, err := imgio.ReadNPY(filepath.Join(out, "view0_depth.npy"))
	require.NoError(t, err)
	require.Equal(t, []int{m.Height, m.Width}, shape)
	return m, want, stderr
}

// Metric depth is stored in millimetres, or with -png16-step kitti in 1/256 m: read back within half a
// step, and the depths beyond the range are named in a warning.
func TestDepthPNG16Metric(t *testing.T) {
	metric := convertFixture(t, "da3-tiny-mono", convert.Options{Name: "da3-tiny-metric"})[0]
	img := fixtureImage(t, "da3-tiny-mono/one/images/view0.png")
	for _, tc := range []struct {
		step  string
		limit float64
	}{{"", 65.535}, {"kitti", 65535.0 / 256}, {"0.01", 655.35}, {"0.000004", 0.26214}} {
		args := []string{"-metric", "-intrinsics", "50,60,22,30", "-model", metric, "-process-res", "70", img}
		q := 0.001
		if tc.step != "" {
			args = append([]string{"-png16-step", tc.step}, args...)
			q = map[string]float64{"kitti": 1.0 / 256, "0.01": 0.01, "0.000004": 0.000004}[tc.step]
		}
		m, want, stderr := png16AgainstNPY(t, args...)
		assert.Equal(t, export.UnitMetres, m.Unit)
		checked, beyond := 0, 0
		for i, v := range want {
			switch {
			case float64(v) > tc.limit:
				beyond++
				require.InDelta(t, tc.limit, m.Depth[i], 1e-4, "pixel %d clamped", i)
			case float64(v) >= q:
				require.InDelta(t, v, m.Depth[i], q/2+1e-5, "step %q, pixel %d", tc.step, i)
				checked++
			}
		}
		t.Logf("step %q: %d depths within the range, %d beyond", tc.step, checked, beyond)
		if tc.step == "0.000004" {
			require.Positive(t, beyond, "some of the tiny model's depths pass 0.262 m")
		}
		assert.Positive(t, checked, "some depths within the range")
		if beyond > 0 {
			assert.Contains(t, stderr, fmt.Sprintf("%d depths beyond", beyond))
		} else {
			assert.NotContains(t, stderr, "depths beyond")
		}
	}
	code, _, stderr := runCLI("depth", "-png16-step", "-1", "-model", metric, img)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "positive number of metres")
}

// Relative depth keeps its min–max mapping: read back within half a quantisation step.
func TestDepthPNG16Relative(t *testing.T) {
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	m, want, _ := png16AgainstNPY(t, "-model", tinyDA3(t), "-process-res", "56", img)
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
