package tests

import (
	"context"
	"errors"
	"image"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

func tinyDA3(t *testing.T) *model.Model {
	t.Helper()
	return loadModel(t, convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{}))
}

func views(n, w, h int) []image.Image {
	out := make([]image.Image, n)
	for i := range out {
		out[i] = hostileImageSized(w, h, i)
	}
	return out
}

// TestEstimateMemoryMatchesScheduler: the compute buffers EstimateMemory
// plans are the ones the runs allocate.
func TestEstimateMemoryMatchesScheduler(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		views, chunk int
	}{{"one view", 1, 8}, {"two views", 2, 8}, {"four views, chunks of 2", 4, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tinyDA3(t)
			opt := model.RunOptions{ProcessRes: 98, ChunkSize: tc.chunk}
			est, err := m.EstimateMemory(opt, tc.views, 120, 90)
			require.NoError(t, err)
			assert.Equal(t, 98, est.Width)
			assert.Equal(t, 70, est.Height, "120x90 → longest side 98, 74 rounded to 70")
			assert.Positive(t, est.Weights)
			assert.Positive(t, est.Host)
			assert.Positive(t, est.Scratch)
			_, err = m.MultiView(ctx, views(tc.views, 120, 90), opt)
			require.NoError(t, err)
			var used uint64
			for _, b := range m.Stats().ComputeBuffers {
				used += b
			}
			assert.Equal(t, uint64(est.Compute), used, "planned %d, allocated %d", est.Compute, used)
			assert.Equal(t, est.Compute, max(est.Backbone, est.Head))
		})
	}
}

// TestChunkSizeBoundsHead: the head's compute buffer grows with the views
// per chunk, not with the views of the request.
func TestChunkSizeBoundsHead(t *testing.T) {
	m := tinyDA3(t)
	head := func(views, chunk int) int64 {
		e, err := m.EstimateMemory(model.RunOptions{ProcessRes: 140, ChunkSize: chunk}, views, 140, 140)
		require.NoError(t, err)
		return e.Head
	}
	h1, h4 := head(8, 1), head(8, 4)
	assert.InDelta(t, 0.25, float64(h1)/float64(h4), 0.05, "head for 1 view %d, for 4 views %d", h1, h4)
	assert.Equal(t, h4, head(16, 4), "more views, same chunk: same head")
}

// TestMaxMemory: a request over RunOptions.MaxMemory is refused before it
// runs, with the figures and what lowers them.
func TestMaxMemory(t *testing.T) {
	ctx := context.Background()
	m := tinyDA3(t)
	opt := model.RunOptions{ProcessRes: 98, ChunkSize: 4}
	est, err := m.EstimateMemory(opt, 4, 120, 90)
	require.NoError(t, err)

	opt.MaxMemory = est.Total() - 1
	_, err = m.MultiView(ctx, views(4, 120, 90), opt)
	require.ErrorIs(t, err, model.ErrNotEnoughMemory)
	var me *model.MemoryError
	require.True(t, errors.As(err, &me))
	assert.Equal(t, est.Total(), me.Need)
	msg := err.Error()
	assert.Contains(t, msg, "4 view(s) at 98x70")
	assert.Contains(t, msg, "-max-memory")
	assert.Contains(t, msg, "-process-res")
	assert.NotContains(t, msg, "\n")

	opt.MaxMemory = est.Total()
	_, err = m.MultiView(ctx, views(4, 120, 90), opt)
	require.NoError(t, err)
}
