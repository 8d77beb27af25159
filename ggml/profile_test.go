package ggml

import (
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfileNodes: a profiled Compute records every node that computes
// something (the transpose view runs with the product after it) in graph
// order, with its op, shape and first source's shape, times that add up to
// no more than the compute took, and the same results; without profiling
// there are no records.
func TestProfileNodes(t *testing.T) {
	cpu, err := CPUDevice().NewBackend()
	require.NoError(t, err)
	defer cpu.Close()
	_, err = cpu.SetThreads(2)
	require.NoError(t, err)
	s, err := NewScheduler([]*Backend{cpu}, 64)
	require.NoError(t, err)
	defer s.Close()
	g, set, r := smallGraph(t, s)
	set()
	require.NoError(t, s.Compute(g))
	want, err := r.Float32s()
	require.NoError(t, err)
	assert.Nil(t, s.NodeTimes(), "not profiling")

	require.NoError(t, s.ProfileNodes(true))
	set() // the inputs' memory is reused by later nodes
	start := time.Now()
	require.NoError(t, s.Compute(g))
	took := time.Since(start)
	got, err := r.Float32s()
	require.NoError(t, err)
	assert.True(t, slices.Equal(want, got), "the same results: %v … against %v …", got[:4], want[:4])
	nt := s.NodeTimes()
	ops := make([]string, len(nt))
	var sum time.Duration
	for i, n := range nt {
		ops[i] = n.Op
		sum += n.Time
		assert.Positive(t, n.Time, "node %d (%s)", i, n.Op)
		assert.Nil(t, n.Kernel, "no custom ops here")
	}
	assert.Equal(t, []string{"MUL_MAT", "CONT", "ADD", "SCALE", "GELU"}, ops)
	assert.LessOrEqual(t, sum, took)
	require.Len(t, nt, 5)
	assert.Equal(t, [4]int{32, 48, 1, 1}, nt[0].Shape)
	assert.Equal(t, [4]int{64, 32, 1, 1}, nt[0].Src)
	assert.Equal(t, [4]int{48, 32, 1, 1}, nt[1].Shape)
	assert.Equal(t, [4]int{48, 32, 1, 1}, nt[1].Src, "the transposed view")

	set()
	require.NoError(t, s.Compute(g))
	assert.Len(t, s.NodeTimes(), 5, "each Compute starts its own records")
	require.NoError(t, s.ProfileNodes(false))
	require.NoError(t, s.Compute(g))
	assert.Nil(t, s.NodeTimes())
}

// smallGraph is a graph of a matrix product, a copy of its transpose, an
// addition, a scale and a GELU, allocated on s, with the function that sets
// its inputs (again before each Compute: ggml's allocator lets later nodes
// reuse their memory) and its output.
func smallGraph(t *testing.T, s *Scheduler) (*Context, func(), *Tensor) {
	t.Helper()
	g, err := NewContext(64)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	a := g.Input(g.NewTensor(TypeF32, 64, 32))
	b := g.Input(g.NewTensor(TypeF32, 64, 48))
	p := a.MulMat(g, b)                    // [32, 48]
	q := p.Transpose(g).Cont(g)            // [48, 32]
	r := q.Add(g, q).Scale(g, 0.5).GELU(g) // ADD, SCALE, GELU
	g.Output(r)
	g.Expand(r)
	require.NoError(t, s.Alloc(g))
	da, db := make([]float32, 64*32), make([]float32, 64*48)
	for i := range da {
		da[i] = float32(i%13) / 13
	}
	for i := range db {
		db[i] = float32(i%5) / 5
	}
	set := func() {
		require.NoError(t, a.SetFloat32s(da))
		require.NoError(t, b.SetFloat32s(db))
	}
	return g, set, r
}

// threadCount is the number of threads of this process (Linux).
func threadCount(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	return len(es)
}

// TestCPUThreadPool: SetThreads gives the CPU backend a pool of that many
// threads (the caller's and n−1 workers) that lives until Close, instead
// of threads started and joined by every graph, and a new count replaces
// it.
func TestCPUThreadPool(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts the threads in /proc/self/task")
	}
	cpu, err := CPUDevice().NewBackend()
	require.NoError(t, err)
	defer cpu.Close()
	base := threadCount(t)
	ok, err := cpu.SetThreads(5)
	require.NoError(t, err)
	require.True(t, ok)
	assert.GreaterOrEqual(t, threadCount(t)-base, 4, "four workers started")
	s, err := NewScheduler([]*Backend{cpu}, 64)
	require.NoError(t, err)
	defer s.Close()
	g, set, y := smallGraph(t, s)
	set()
	require.NoError(t, s.Compute(g))
	first, err := y.Float32s()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, threadCount(t)-base, 4, "the workers outlive the graph")

	ok, err = cpu.SetThreads(2)
	require.NoError(t, err)
	require.True(t, ok)
	n := threadCount(t)
	assert.LessOrEqual(t, n-base, 2, "the pool of five replaced by one of two")
	set()
	require.NoError(t, s.Compute(g))
	again, err := y.Float32s()
	require.NoError(t, err)
	assert.True(t, slices.Equal(first, again), "the same results: %v … against %v …", again[:4], first[:4])

	require.NoError(t, s.Close())
	require.NoError(t, cpu.Close())
	assert.LessOrEqual(t, threadCount(t), n-1, "Close ends the worker")
}
