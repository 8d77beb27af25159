package testutil

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder captures failures instead of failing the real test.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) text() string { return strings.Join(r.msgs, "\n") }

func TestAllClosePasses(t *testing.T) {
	r := &recorder{TB: t}
	want := []float32{1, -2, 100, float32(math.Inf(1)), 0}
	got := []float32{1.001, -2, 100.5, float32(math.Inf(1)), 1e-7}
	assert.True(t, AllClose(r, want, got, 1e-3, 5e-3))
	assert.Empty(t, r.msgs)
	assert.True(t, AllClose(r, nil, nil, 0, 0))
}

func TestAllCloseReports(t *testing.T) {
	r := &recorder{TB: t}
	want := []float32{1, 2, 3, 4}
	got := []float32{1, 2.5, 3, 4.01}
	ok := AllClose(r, want, got, 0.02, 0, "stage %s", "fusion1")
	assert.False(t, ok)
	msg := r.text()
	assert.Contains(t, msg, "1 of 4 elements differ beyond atol=0.02 rtol=0")
	assert.Contains(t, msg, "max|d|=0.5 ")
	assert.Contains(t, msg, "mean|d|=0.1275")
	assert.Contains(t, msg, "worst [1]: want 2, got 2.5")
	assert.Contains(t, msg, "stage fusion1")
	assert.Contains(t, msg, "corr=0.9")
}

func TestAllCloseWorstIsLargestExcess(t *testing.T) {
	r := &recorder{TB: t}
	// Element 0 has the largest |d| but a large tolerance through rtol;
	// element 1 exceeds its tolerance by more.
	want := []float32{1000, 1}
	got := []float32{1003, 2.5}
	assert.False(t, AllClose(r, want, got, 0, 2e-3))
	assert.Contains(t, r.text(), "2 of 2 elements")
	assert.Contains(t, r.text(), "worst [1]: want 1, got 2.5")
	assert.Contains(t, r.text(), "max|d|=3 ")
}

func TestAllCloseSizeAndNaN(t *testing.T) {
	r := &recorder{TB: t}
	assert.False(t, AllClose(r, []float32{1, 2}, []float32{1}, 1, 1))
	assert.Contains(t, r.text(), "size mismatch: want 2 elements, got 1")

	r = &recorder{TB: t}
	nan := float32(math.NaN())
	assert.False(t, AllClose(r, []float32{1, 2, 3}, []float32{1, nan, 3}, 1, 1))
	assert.Contains(t, r.text(), "1 of 3 elements")
	assert.Contains(t, r.text(), "worst [1]: want 2, got NaN")
	assert.Contains(t, r.text(), "max|d|=NaN")

	r = &recorder{TB: t}
	inf := float32(math.Inf(1))
	assert.False(t, AllClose(r, []float32{inf}, []float32{-inf}, 1, 1))
	assert.False(t, AllClose(r, []float32{inf}, []float32{1e30}, 1, 1), "infinity only matches itself")
	assert.False(t, AllClose(r, []float32{1e30}, []float32{inf}, 1, 1))
	assert.False(t, AllClose(r, []float32{nan}, []float32{nan}, 1, 1), "NaN never matches")
}

func TestStats(t *testing.T) {
	maxAbs, meanAbs, corr := Stats([]float32{1, 2, 3, 4}, []float32{1, 2, 3, 4})
	assert.Zero(t, maxAbs)
	assert.Zero(t, meanAbs)
	assert.InDelta(t, 1, corr, 1e-12)

	maxAbs, meanAbs, corr = Stats([]float32{1, 2, 3, 4}, []float32{2, 4, 6, 8})
	assert.InDelta(t, 4, maxAbs, 0)
	assert.InDelta(t, 2.5, meanAbs, 1e-12)
	assert.InDelta(t, 1, corr, 1e-12, "correlation ignores scale")

	_, _, corr = Stats([]float32{1, 2, 3}, []float32{3, 2, 1})
	assert.InDelta(t, -1, corr, 1e-12)

	_, _, corr = Stats([]float32{5, 5}, []float32{5, 5})
	assert.Equal(t, 1.0, corr, "identical constants")
	_, _, corr = Stats([]float32{5, 5}, []float32{1, 2})
	assert.True(t, math.IsNaN(corr), "constant side")
	maxAbs, meanAbs, corr = Stats(nil, nil)
	assert.Zero(t, maxAbs)
	assert.Zero(t, meanAbs)
	assert.True(t, math.IsNaN(corr))

	maxAbs, _, _ = Stats([]float32{1, 2, 3}, []float32{1, float32(math.NaN()), 3})
	assert.True(t, math.IsNaN(maxAbs), "NaN difference shows")

	maxAbs, _, _ = Stats([]float32{1, 2, 9}, []float32{1, 3})
	assert.Equal(t, 1.0, maxAbs, "common prefix")
}
