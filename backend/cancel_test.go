package backend

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chain is a graph of n dependent 256×256 matrix products: many short nodes.
func chain(n int) func(b *Builder) error {
	return func(b *Builder) error {
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

// cancelMidway times a chain of n/10 products, then runs one of n and
// cancels it a twentieth of the way in: the run must end with
// context.Canceled well before the graph's end, and the runtime must run
// the next graph normally. Times run from the end of building, so that the
// Go-side work of building a graph (slow under -race) does not count as
// computing.
func cancelMidway(t *testing.T, rt *Runtime, n int) {
	opts := RunOptions{MaxNodes: n + 1000}
	built := func(n int, then func()) func(b *Builder) error {
		return func(b *Builder) error {
			err := chain(n)(b)
			then()
			return err
		}
	}
	var computing time.Time
	_, err := rt.Run(context.Background(), opts, built(n/10, func() { computing = time.Now() }))
	require.NoError(t, err)
	full := 10 * time.Since(computing)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = rt.Run(ctx, opts, built(n, func() {
		computing = time.Now()
		time.AfterFunc(full/20, cancel)
	}))
	took := time.Since(computing)
	require.ErrorIs(t, err, context.Canceled, "the graph ran to its end in %v", took)
	assert.Less(t, took, full/2, "stopped after %v of a %v graph", took, full)
	t.Logf("cancelled after %v; the whole graph takes about %v", took, full)

	out, err := rt.Run(context.Background(), RunOptions{}, chain(3))
	require.NoError(t, err, "the runtime runs again after an abort")
	assert.Len(t, out["y"].Data, 256*256)
}

// TestCancelStopsTheGraph: cancelling the context stops a running graph
// after the node in flight (the CPU backend's abort callback), not at its
// end.
func TestCancelStopsTheGraph(t *testing.T) {
	rt, err := Open(Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	cancelMidway(t, rt, 10000)
}

// TestCancelThroughScheduler: with the CPU backend's own abort flag left
// unset (as on a GPU, whose backends have none), a cancel still stops the
// graph through the scheduler's eval callback, here read every 8 nodes.
func TestCancelThroughScheduler(t *testing.T) {
	rt, err := Open(Options{Device: "cpu", Threads: 1})
	require.NoError(t, err)
	defer rt.Close()
	rt.abortEvery, rt.schedAbortOnly = 8, true
	cancelMidway(t, rt, 4000)
}

// TestRunProgress: Run reports the nodes computed while the graph runs,
// counting up to the graph's computing nodes, and done == total at the end.
func TestRunProgress(t *testing.T) {
	rt, err := Open(Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	var calls [][2]int
	var mu sync.Mutex
	opts := RunOptions{MaxNodes: 10000, Progress: func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, [2]int{done, total})
	}}
	_, err = rt.Run(context.Background(), opts, chain(4000))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(calls), 3, "a run of about a second (4000 products) reports while it runs: %v", calls)
	assert.Equal(t, [2]int{4000, 4000}, calls[len(calls)-1], "one computing node per product")
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
