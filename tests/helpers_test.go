// Package tests holds the end-to-end, CLI and parity tests of da3-go. Parity
// tests convert the committed oracle fixtures (tests/fixtures, written by
// tests/oracle) to GGUF, run them and compare every stage with the PyTorch
// reference tensors. Tests that need real weights are gated by DA3_TEST_MODEL*.
package tests

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// fixture returns the path of a committed fixture directory.
func fixture(t *testing.T, name string) string {
	t.Helper()
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join("fixtures", name)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture %s missing: regenerate it with tests/oracle (see tests/oracle/README.md): %v", name, err)
	}
	return p
}

// refTensors reads a fixture's reference tensors.
func refTensors(t *testing.T, path string) map[string]refTensor {
	t.Helper()
	ck, err := convert.OpenSafetensors(path)
	require.NoError(t, err)
	defer ck.Close()
	out := map[string]refTensor{}
	for _, name := range ck.Names() {
		tt, ok := ck.Tensor(name)
		require.True(t, ok, name)
		data, err := tt.Float32s()
		require.NoError(t, err)
		shape := make([]int, len(tt.Shape))
		for i, d := range tt.Shape {
			shape[i] = int(d)
		}
		out[name] = refTensor{Data: data, Shape: shape}
	}
	return out
}

type refTensor struct {
	Data  []float32
	Shape []int // torch order
}

func readMeta(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func metaInts(m map[string]any, key string) []int {
	v, _ := m[key].([]any)
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x.(float64))
	}
	return out
}

// convertFixture converts a checkpoint to a GGUF in a temp dir.
func convertFixture(t *testing.T, src string, opts convert.Options) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "model.gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, opts))
	return dst
}

func loadModel(t *testing.T, path string) *model.Model {
	t.Helper()
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// gate compares got with want: correlation ≥ minCorr and max|d| ≤ relTol·max|want|.
func gate(t *testing.T, stage string, want, got []float32, minCorr, relTol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: size", stage)
	maxAbs, meanAbs, corr := testutil.Stats(want, got)
	var ref float64
	for _, v := range want {
		ref = math.Max(ref, math.Abs(float64(v)))
	}
	t.Logf("%-22s max|d| %.3g (%.3g of max|ref| %.3g)  mean|d| %.3g  corr %.8f", stage, maxAbs, maxAbs/ref, ref, meanAbs, corr)
	if corr < minCorr || maxAbs > relTol*ref {
		t.Errorf("%s: parity gate failed: corr %.8f (min %.6f), max|d| %.3g > %.3g (%.0e of max|ref| %.3g)", stage, corr, minCorr, maxAbs, relTol*ref, relTol, ref)
	}
}
