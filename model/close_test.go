package model_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
)

// TestCloseDuringRuns calls Depth from several goroutines while another
// goroutine closes the model (run it with -race: make test-race). Every
// call must either succeed or return ErrClosed; nothing may crash or read
// freed memory (a Close that freed the weights under a running graph
// faulted in the scheduler before).
func TestCloseDuringRuns(t *testing.T) {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu", Threads: 2}})
	require.NoError(t, err)
	img := photo(64, 48)
	const workers, calls = 4, 6
	var wg sync.WaitGroup
	first := make(chan struct{})
	var once sync.Once
	errs := make(chan error, workers*calls)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				res, err := m.Depth(ctx, img, model.RunOptions{ProcessRes: 56})
				if err != nil {
					errs <- err
					return
				}
				if len(res.Depth) != 64*48 {
					errs <- errors.New("short depth map")
					return
				}
				once.Do(func() { close(first) })
			}
		}()
	}
	<-first // at least one run finished: the others are queued or computing
	var closers sync.WaitGroup
	for range 2 {
		closers.Add(1)
		go func() {
			defer closers.Done()
			assert.NoError(t, m.Close())
		}()
	}
	closers.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.ErrorIs(t, err, model.ErrClosed)
	}
	_, err = m.Depth(ctx, img, model.RunOptions{ProcessRes: 56})
	assert.ErrorIs(t, err, model.ErrClosed)
	_, err = m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error { return nil })
	assert.ErrorIs(t, err, model.ErrClosed)
	assert.NoError(t, m.Close(), "Close is idempotent")
}

// TestCloseWaitsForRun holds a run in flight and checks that Close does not
// return (nor free anything) until the run has ended, and that the run
// completes normally.
func TestCloseWaitsForRun(t *testing.T) {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	type result struct {
		out map[string]backend.Tensor
		err error
	}
	ran := make(chan result, 1)
	go func() {
		out, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
			close(started)
			<-release
			px := b.Input("pixels", make([]float32, 3*56*42), 56, 42, 3, 1)
			x, grid := m.Backbone().Embed(b.G, b, px)
			f := m.Backbone().Forward(b.G, b, x, grid, 0)
			b.Output("depth", m.Head().Forward(b.G, b, f.Feats, grid.PH, grid.PW).Depth)
			return nil
		})
		ran <- result{out, err}
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a run was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	_, err = m.Depth(ctx, photo(64, 48), model.RunOptions{ProcessRes: 56})
	assert.ErrorIs(t, err, model.ErrClosed, "runs started after Close are refused")
	close(release)
	r := <-ran
	require.NoError(t, r.err)
	assert.Len(t, r.out["depth"].Data, 56*42)
	require.NoError(t, <-closed)
}
