package testutil_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
)

// A spec's checkpoint has its layout, metadata and statistics, its small
// tensors verbatim, and the same values on every write.
func TestSpecWriteSafetensors(t *testing.T) {
	dir := t.TempDir()
	spec := map[string]any{
		"format":   "da3-validate-spec-v1",
		"metadata": map[string]string{"format": "pt"},
		"tensors": map[string]any{
			"w":     map[string]any{"dtype": "F32", "shape": []int{64, 256}, "mean": 0.5, "std": 0.02},
			"b":     map[string]any{"dtype": "F32", "shape": []int{3}, "values": []float64{1, -2.5, 3}},
			"ids":   map[string]any{"dtype": "I64", "shape": []int{1, 2}, "values": []float64{0, 7}},
			"scale": map[string]any{"dtype": "F64", "shape": []int{20}, "mean": -1, "std": 3},
		},
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	path := filepath.Join(dir, "spec.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))

	s, err := testutil.ReadSpec(path)
	require.NoError(t, err)
	st1, st2 := filepath.Join(dir, "1.safetensors"), filepath.Join(dir, "2.safetensors")
	require.NoError(t, s.WriteSafetensors(st1, 0))
	require.NoError(t, s.WriteSafetensors(st2, 0))
	b1, err := os.ReadFile(st1)
	require.NoError(t, err)
	b2, err := os.ReadFile(st2)
	require.NoError(t, err)
	assert.Equal(t, b1, b2, "deterministic")

	ck, err := convert.OpenSafetensors(st1)
	require.NoError(t, err)
	defer ck.Close()
	assert.ElementsMatch(t, []string{"w", "b", "ids", "scale"}, ck.Names())
	get := func(name string) ([]float32, []int64) {
		tt, ok := ck.Tensor(name)
		require.True(t, ok, name)
		x, err := tt.Float32s()
		require.NoError(t, err, name)
		return x, tt.Shape
	}
	w, shape := get("w")
	assert.Equal(t, []int64{64, 256}, shape)
	mean, std := moments(w)
	assert.InDelta(t, 0.5, mean, 0.001)
	assert.InDelta(t, 0.02, std, 0.001)
	bias, _ := get("b")
	assert.Equal(t, []float32{1, -2.5, 3}, bias)
	sc, shape := get("scale")
	assert.Equal(t, []int64{20}, shape)
	assert.Len(t, sc, 20)
}

func TestReadSpecRefuses(t *testing.T) {
	for _, tc := range []struct{ name, spec string }{
		{"format", `{"format": "other", "tensors": {}}`},
		{"dtype", `{"format": "da3-validate-spec-v1", "tensors": {"x": {"dtype": "BOOL", "shape": [1], "values": [1]}}}`},
		{"count", `{"format": "da3-validate-spec-v1", "tensors": {"x": {"dtype": "F32", "shape": [2], "values": [1]}}}`},
		{"integer", `{"format": "da3-validate-spec-v1", "tensors": {"x": {"dtype": "I64", "shape": [40], "mean": 0, "std": 1}}}`},
		{"shape", `{"format": "da3-validate-spec-v1", "tensors": {"x": {"dtype": "F32", "shape": [-3, 4], "mean": 0, "std": 1}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spec.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.spec), 0o644))
			_, err := testutil.ReadSpec(path)
			assert.Error(t, err)
		})
	}
}

func moments(x []float32) (mean, std float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		std += (float64(v) - mean) * (float64(v) - mean)
	}
	return mean, math.Sqrt(std / float64(len(x)))
}
