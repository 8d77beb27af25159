package backend_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
)

// TestMeasureCountsCPUWork: a matrix product of f16 weights converts its
// f32 right operand to f16 in ggml's CPU work buffer, which ggml allocates
// besides the compute buffers: Measure reports it, growing with the
// operand (the estimate of a many-view run counts it at the run's size).
func TestMeasureCountsCPUWork(t *testing.T) {
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	measure := func(n int) backend.Measurement {
		ms, err := rt.Measure(backend.RunOptions{}, func(b *backend.Builder) error {
			w := b.G.NewTensor(ggml.TypeF16, 256, 256)
			x := b.Input("x", nil, 256, n)
			b.Output("y", w.MulMat(b.G, x))
			return nil
		})
		require.NoError(t, err)
		return ms
	}
	small, large := measure(1024), measure(16384)
	assert.GreaterOrEqual(t, small.Work, uint64(256*1024*2), "x as f16")
	assert.GreaterOrEqual(t, large.Work, uint64(256*16384*2))
	assert.Less(t, large.Work, uint64(256*16384*2+1<<20))
	t.Logf("work buffer: %d bytes for 1024 columns, %d for 16384", small.Work, large.Work)
}

// TestOpenThreads: more threads than ggml takes are refused with the limit
// named (ggml aborts when it cannot start them), the limit itself opens.
func TestOpenThreads(t *testing.T) {
	_, err := backend.Open(backend.Options{Device: "cpu", Threads: backend.MaxThreads + 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 512")
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: backend.MaxThreads})
	require.NoError(t, err)
	require.NoError(t, rt.Close())
}
