package backend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelThroughScheduler: with the CPU backend's own abort flag left
// unset (as on a GPU, whose backends have none), a cancel still stops the
// graph through the scheduler's eval callback, here read every 8 nodes, and
// Run returns context.Canceled long before the graph's end.
func TestCancelThroughScheduler(t *testing.T) {
	rt, err := Open(Options{Device: "cpu", Threads: 1})
	require.NoError(t, err)
	defer rt.Close()
	rt.abortEvery, rt.schedAbortOnly = 8, true
	const d = 256
	chain := func(n int) func(b *Builder) error {
		return func(b *Builder) error {
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
	opts := RunOptions{MaxNodes: 20000}
	start := time.Now()
	_, err = rt.Run(context.Background(), opts, chain(200))
	require.NoError(t, err)
	full := 20 * time.Since(start) // 4000 nodes

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/20, cancel)
	start = time.Now()
	_, err = rt.Run(ctx, opts, chain(4000))
	took := time.Since(start)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Less(t, took, full/2, "stopped after %v of a %v graph", took, full)
	t.Logf("cancelled after %v; the whole graph takes about %v", took, full)

	out, err := rt.Run(context.Background(), RunOptions{}, chain(3))
	require.NoError(t, err, "the runtime runs again after an abort")
	assert.Len(t, out["y"].Data, d*d)
}
