package backend

import (
	"context"
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
	// built wraps a chain's builder and calls then once it is built: times
	// run from there, so building the graph (slow under -race) is not counted.
	built := func(n int, then func()) func(b *Builder) error {
		return func(b *Builder) error {
			err := chain(n)(b)
			then()
			return err
		}
	}
	var computing time.Time
	_, err = rt.Run(context.Background(), opts, built(400, func() { computing = time.Now() }))
	require.NoError(t, err)
	full := 10 * time.Since(computing) // 4000 nodes

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = rt.Run(ctx, opts, built(4000, func() {
		computing = time.Now()
		time.AfterFunc(full/20, cancel)
	}))
	took := time.Since(computing)
	require.ErrorIs(t, err, context.Canceled, "the graph ran to its end in %v", took)
	assert.Less(t, took, full/2, "stopped after %v of a %v graph", took, full)
	t.Logf("cancelled after %v; the whole graph takes about %v", took, full)

	out, err := rt.Run(context.Background(), RunOptions{}, chain(3))
	require.NoError(t, err, "the runtime runs again after an abort")
	assert.Len(t, out["y"].Data, d*d)
}
