package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestCancelStopsALongKernel: a graph of one custom attention node that
// would run for many seconds (n = 32768 tokens, 8 heads of 64: 5.5e11
// multiply-adds for the scores and as many for the outputs) stops within a second or two of the cancel, because the
// kernel polls the abort flag between blocks of queries; ggml itself only
// checks it between nodes. A liveness bound, generous for a loaded machine.
func TestCancelStopsALongKernel(t *testing.T) {
	if !kernels.Available().Attention {
		t.Skip("the CPU kernels are off in this build")
	}
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	const hd, heads, n = 64, 8, 32768
	data := make([]float32, hd*heads*n)
	for i := range data {
		data[i] = float32(i%13) / 13
	}
	build := func(b *backend.Builder) error {
		x := b.Input("x", data, hd, heads, n, 1)
		b.Output("y", kernels.Attention(b.G, x, x, x, 0.125))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	time.AfterFunc(500*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	start := time.Now()
	_, err = rt.Run(ctx, backend.RunOptions{}, build)
	end := time.Now()
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.False(t, cancelled.IsZero(), "the run ended before the cancel, after %v", end.Sub(start))
	latency := end.Sub(cancelled)
	assert.Less(t, latency, 5*time.Second, "the node ran on %v after the cancel", latency)
	t.Logf("stopped %v after the cancel (run %v)", latency, end.Sub(start))
}
