package main

import (
	"bytes"
	"log/slog"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model"
)

// captureLog points the library's logger at a buffer for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	old := logger
	logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() { logger = old })
	return &buf
}

func liveCount() int {
	live.Lock()
	defer live.Unlock()
	return len(live.m)
}

// TestDoubleFreeIgnored: freeing a buffer or string twice, or a pointer the
// library never returned, is ignored with a warning instead of corrupting
// the heap.
func TestDoubleFreeIgnored(t *testing.T) {
	logs := captureLog(t)
	before := liveCount()
	buf := floats([]float32{1, 2, 3})
	s := cString("an error")
	assert.Equal(t, before+2, liveCount())

	da3go_free_buffer(unsafe.Pointer(buf))
	da3go_free_string(s)
	assert.Equal(t, before, liveCount())
	assert.Empty(t, logs.String(), "the first free is silent")

	da3go_free_buffer(unsafe.Pointer(buf)) // the C library's free would abort or corrupt the heap here
	da3go_free_string(s)
	assert.Contains(t, logs.String(), "da3go_free_buffer: pointer ignored, not a live buffer of this library")
	assert.Contains(t, logs.String(), "da3go_free_string: pointer ignored")

	var local [4]byte
	da3go_free_buffer(unsafe.Pointer(&local[0]))
	assert.Contains(t, logs.String(), "not returned by this library")

	// A buffer is not a string: the wrong free function is refused too.
	b := bytesC([]byte("x"))
	da3go_free_string((*_Ctype_char)(b))
	assert.Contains(t, logs.String(), "it is\"=\"a buffer of this library\"")
	da3go_free_buffer(b)
	assert.Equal(t, before, liveCount())
	da3go_free_buffer(nil) // NULL is a no-op, as for free
}

// TestFreeViewsWrongCount: da3go_free_views frees the views da3go_run
// returned whatever count it is given, and a second call is ignored.
func TestFreeViewsWrongCount(t *testing.T) {
	logs := captureLog(t)
	before := liveCount()
	res := []model.Result{
		{Width: 2, Height: 1, Depth: []float32{1, 2}, Conf: []float32{3, 4}},
		{Width: 2, Height: 1, Depth: []float32{5, 6}, Sky: []float32{0, 1}},
	}
	views := newViews(res)
	assert.Equal(t, before+1+4, liveCount(), "the array and its four maps")
	vs := unsafe.Slice(views, 2)
	assert.Equal(t, float32(6), unsafe.Slice((*float32)(unsafe.Pointer(vs[1].depth)), 2)[1])

	da3go_free_views(views, 7) // reading 7 views would run past the array
	assert.Contains(t, logs.String(), "da3go_free_views: wrong count")
	assert.Equal(t, before, liveCount(), "everything freed once")

	da3go_free_views(views, 2)
	assert.Contains(t, logs.String(), "da3go_free_views: pointer ignored, not a live view array")
	da3go_free_views(nil, 3)
}

func TestConfThresh(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.5} {
		err := checkConfThresh(v)
		require.Error(t, err, "%v", v)
		assert.Contains(t, err.Error(), "conf_thresh")
		assert.Contains(t, err.Error(), "must be a finite number ≥ 0")
	}
	for _, v := range []float64{0, 0.3, 5} {
		assert.NoError(t, checkConfThresh(v))
	}
}
