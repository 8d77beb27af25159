package backend_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// chain is a graph of n dependent 256×256 matrix products: many short nodes.
func chain(n int) func(b *backend.Builder) error {
	return func(b *backend.Builder) error {
		const d = 256
		w := make([]float32, d*d)
		for i := range w {
			w[i] = float32(i%7) / (7 * d)
		}
		wt := b.Input("w", w, d, d)
		x := b.Input("x", w, d, d)
		for range n {
			x = wt.MulMat(b.G, x)
		}
		b.Output("y", x)
		return nil
	}
}

// TestCancelStopsTheGraph: cancelling the context stops a running graph
// after the node in flight (the abort callback), not at its end, and the
// runtime runs the next graph normally. Times are taken from the end of
// building, so the Go-side work of building a graph (slow under -race) does
// not count as computing.
func TestCancelStopsTheGraph(t *testing.T) {
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	opts := backend.RunOptions{MaxNodes: 20000}
	// built wraps a chain's builder and calls then once it is built.
	built := func(n int, then func()) func(b *backend.Builder) error {
		return func(b *backend.Builder) error {
			err := chain(n)(b)
			then()
			return err
		}
	}

	// The uncancelled graph's duration on this machine, from a tenth of it.
	var computing time.Time
	_, err = rt.Run(context.Background(), opts, built(1000, func() { computing = time.Now() }))
	require.NoError(t, err)
	full := 10 * time.Since(computing) // 10000 nodes

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = rt.Run(ctx, opts, built(10000, func() {
		computing = time.Now()
		time.AfterFunc(full/20, cancel)
	}))
	took := time.Since(computing)
	require.ErrorIs(t, err, context.Canceled, "the graph ran to its end in %v", took)
	assert.Less(t, took, full/2, "stopped after %v of a %v graph", took, full)
	t.Logf("cancelled after %v; the whole graph takes about %v", took, full)

	out, err := rt.Run(context.Background(), backend.RunOptions{}, chain(3))
	require.NoError(t, err, "the runtime runs again after an abort")
	assert.Len(t, out["y"].Data, 256*256)
}

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

// TestRunProgress: Run reports the nodes computed while the graph runs,
// counting up to the graph's computing nodes, and done == total at the end.
func TestRunProgress(t *testing.T) {
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	var calls [][2]int
	var mu sync.Mutex
	opts := backend.RunOptions{MaxNodes: 10000, Progress: func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, [2]int{done, total})
	}}
	_, err = rt.Run(context.Background(), opts, chain(4000))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(calls), 3, "a run of about a second (4000 products) reports while it runs: %v", calls)
	last := calls[len(calls)-1]
	assert.Equal(t, [2]int{4000, 4000}, last, "one computing node per product")
	between := 0
	for i, c := range calls {
		assert.Equal(t, 4000, c[1])
		if i > 0 {
			assert.GreaterOrEqual(t, c[0], calls[i-1][0], "the count never goes back")
		}
		if c[0] > 0 && c[0] < 4000 {
			between++
		}
	}
	assert.Positive(t, between, "some report falls inside the graph: %v", calls)
}
