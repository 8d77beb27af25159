package tests

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model"
)

// TestEstimateManyViewsDA3Small: 500 views of 640×480 (processed at
// 504×378, 973 tokens each) on a model of DA3-SMALL's shapes: the estimate
// counts what the scene holds at those sizes (the MLP's hidden activation
// of every token, the fused attention's scratch over all S·T keys on each
// thread, the features of every view that the head reads back), is
// refused under an 8 GiB budget, and a window of 32 views fits in it (so
// the command line streams such a directory in windows).
func TestEstimateManyViewsDA3Small(t *testing.T) {
	m := loadModel(t, da3SmallShaped(t, false))
	const S, W, H = 500, 640, 480
	const tokens = S * (1 + 36*27)
	opt := model.RunOptions{ChunkSize: 8, MaxMemory: 8 << 30}
	e, err := m.EstimateMemory(opt, S, W, H)
	require.NoError(t, err)
	require.Equal(t, 504, e.Width)
	require.Equal(t, 378, e.Height)
	t.Logf("500 views: %v", e)
	assert.GreaterOrEqual(t, e.Backbone, int64(tokens)*1536*4, "the MLP's hidden activation of every token")
	assert.GreaterOrEqual(t, e.Scratch, int64(runtime.NumCPU())*2*tokens*(64+16)*4, "fused attention over S·T keys, per thread")
	assert.GreaterOrEqual(t, e.Host, int64(S)*4*768*36*27*4, "the four feature maps of every view")
	assert.Positive(t, e.Head)

	err = m.CheckMemory(opt, S, W, H)
	var me *model.MemoryError
	require.True(t, errors.As(err, &me), "500 views under 8 GiB: %v", err)
	assert.Equal(t, e.Total(), me.Need)
	assert.NoError(t, m.CheckMemory(opt, 32, W, H), "a window of 32 views fits in 8 GiB")
}

// TestEstimateManyViewsScoresPath: without the fused attention kernel (as
// on devices without flash attention), attention takes its queries in
// chunks whose scores stay under 256 MiB, each over all S·T keys, so 500
// views make a graph of hundreds of thousands of nodes: the estimate says
// the scene does not fit (ErrNotEnoughMemory, so that the command line
// streams it) instead of failing to plan it, and a window still fits.
func TestEstimateManyViewsScoresPath(t *testing.T) {
	path := da3SmallShaped(t, false)
	m, err := model.Load(t.Context(), path, model.Options{Options: backend.Options{Device: "cpu", Kernels: kernels.Policy{Explicit: true}}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	opt := model.RunOptions{ChunkSize: 8}
	err = m.CheckMemory(opt, 500, 640, 480)
	require.ErrorIs(t, err, model.ErrNotEnoughMemory)
	assert.Contains(t, err.Error(), "run fewer views at once")
	assert.NoError(t, m.CheckMemory(opt, 8, 640, 480))
}

// TestEstimateKeyedByOptions: the estimates are cached by the request's
// graphs, not only its shape: given cameras replace stage A (and its
// tokens on the host), so an estimate asked after one without them is the
// one a fresh model gives.
func TestEstimateKeyedByOptions(t *testing.T) {
	src := convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{})
	const S = 4
	given := model.RunOptions{ProcessRes: 98, Extrinsics: make([][3][4]float64, S)}
	for i := range given.Extrinsics {
		given.Extrinsics[i] = [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, float64(i)}}
	}
	fresh, err := loadModel(t, src).EstimateMemory(given, S, 120, 90)
	require.NoError(t, err)

	m := loadModel(t, src)
	plain, err := m.EstimateMemory(model.RunOptions{ProcessRes: 98}, S, 120, 90)
	require.NoError(t, err)
	after, err := m.EstimateMemory(given, S, 120, 90)
	require.NoError(t, err)
	assert.Equal(t, fresh, after, "with given cameras after an estimate without")
	assert.NotEqual(t, plain.Host, after.Host, "stage A's tokens are held only without given cameras")
}
