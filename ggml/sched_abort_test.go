package ggml

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// abortChain is a graph of n dependent 128×128 matrix products on the
// scheduler's CPU backend, its input set.
func abortChain(t *testing.T, s *Scheduler, n int) (*Context, *Tensor) {
	t.Helper()
	const d = 128
	g, err := NewContext(n + 16)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	w := g.Input(g.NewTensor(TypeF32, d, d))
	x := g.Input(g.NewTensor(TypeF32, d, d))
	y := x
	for range n {
		y = w.MulMat(g, y)
	}
	g.Output(y)
	g.Expand(y)
	require.NoError(t, s.Alloc(g))
	data := make([]float32, d*d)
	for i := range data {
		data[i] = float32(i%7) / (7 * d)
	}
	require.NoError(t, w.SetFloat32s(data))
	require.NoError(t, x.SetFloat32s(data))
	return g, y
}

// TestSchedulerAbort: the scheduler's eval callback stops a graph on a
// backend that has no abort callback of its own (the CPU backend without
// EnableAbort stands for a GPU's): between pieces of a split with an
// interval (pieces of 8 nodes here), at the next split boundary without one (here the only split's
// first node), and the scheduler computes normally once cleared.
func TestSchedulerAbort(t *testing.T) {
	cpu, err := CPUDevice().NewBackend()
	require.NoError(t, err)
	defer cpu.Close()
	_, err = cpu.SetThreads(1)
	require.NoError(t, err)
	s, err := NewScheduler([]*Backend{cpu}, 8192)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.EnableAbort(8))

	const n = 800
	g, y := abortChain(t, s, n)
	start := time.Now()
	require.NoError(t, s.Compute(g))
	full := time.Since(start)
	want, err := y.Float32s()
	require.NoError(t, err)

	// A cancel after 40 of the 800 nodes.
	s.abortAfter(40)
	start = time.Now()
	err = s.Compute(g)
	took := time.Since(start)
	var se *StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, StatusAborted, se.Status)
	assert.Less(t, took, full/4, "stopped after %v of a %v graph", took, full)
	t.Logf("stopped after %v; the whole graph takes %v", took, full)

	s.ClearAbort()
	require.NoError(t, s.Compute(g), "cleared, the graph runs again")
	got, err := y.Float32s()
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Without an interval the flag is read at split boundaries only: set
	// before the graph starts, the split computes its first node and stops.
	require.NoError(t, s.EnableAbort(0))
	s.Abort()
	start = time.Now()
	err = s.Compute(g)
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, StatusAborted, se.Status)
	assert.Less(t, time.Since(start), full/4)
	s.ClearAbort()
	require.NoError(t, s.Compute(g))
}
