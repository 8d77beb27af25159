package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
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
// runtime runs the next graph normally.
func TestCancelStopsTheGraph(t *testing.T) {
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	opts := backend.RunOptions{MaxNodes: 20000}

	// The uncancelled graph's duration on this machine, from a tenth of it.
	start := time.Now()
	_, err = rt.Run(context.Background(), opts, chain(500))
	require.NoError(t, err)
	full := 20 * time.Since(start) // 10000 nodes

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/20, cancel)
	start = time.Now()
	_, err = rt.Run(ctx, opts, chain(10000))
	took := time.Since(start)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Less(t, took, full/2, "stopped after %v of a %v graph", took, full)
	t.Logf("cancelled after %v; the whole graph takes about %v", took, full)

	out, err := rt.Run(context.Background(), backend.RunOptions{}, chain(3))
	require.NoError(t, err, "the runtime runs again after an abort")
	assert.Len(t, out["y"].Data, 256*256)
}
