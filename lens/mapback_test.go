package lens

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPinholeOptionsCheck(t *testing.T) {
	require.NoError(t, PinholeOptions{}.Check())
	require.NoError(t, PinholeOptions{Balance: 1, MaxFOV: 179}.Check())
	for _, o := range []PinholeOptions{{Balance: -0.1}, {Balance: 1.5}, {Balance: math.NaN()}, {MaxFOV: 180}, {MaxFOV: -1},
		{MaxFOV: math.NaN()}, {Width: -1}} {
		assert.Error(t, o.Check(), "%+v", o)
	}
	c, err := New(OpenCVFisheye, 0, 0, []float64{30, 30, 32, 24, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	_, err = NewUndistorters(c, PinholeOptions{Balance: 2})
	assert.ErrorContains(t, err, "balance 2")
}

// Undistorters makes one undistorter per image size, the one PinholeFor and NewUndistorter give, and
// none for a pinhole lens.
func TestUndistorters(t *testing.T) {
	params := []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003}
	c, err := New(OpenCVFisheye, 0, 0, params)
	require.NoError(t, err)
	s, err := NewUndistorters(c, PinholeOptions{Balance: 0.5})
	require.NoError(t, err)
	u, err := s.For(64, 48)
	require.NoError(t, err)
	again, err := s.For(64, 48)
	require.NoError(t, err)
	assert.Same(t, u, again, "one undistorter per size")
	other, err := s.For(80, 60)
	require.NoError(t, err)
	assert.NotSame(t, u, other)
	assert.Equal(t, 80, other.Pinhole.Width)

	sized := c.WithSize(64, 48)
	pin, err := PinholeFor(sized, PinholeOptions{Balance: 0.5})
	require.NoError(t, err)
	assert.Equal(t, pin.Params, u.Pinhole.Params)
	assert.Equal(t, params, u.Distorted.Params)

	p, err := New(OpenCV, 0, 0, []float64{30, 30, 32, 24, 0, 0, 0, 0})
	require.NoError(t, err)
	s, err = NewUndistorters(p, PinholeOptions{})
	require.NoError(t, err)
	u, err = s.For(64, 48)
	require.NoError(t, err)
	assert.Nil(t, u, "a lens without distortion needs no undistortion")
}

// BackMapper gives Backward's resampling with NaN outside the view, and rebuilds its table for a new
// size.
func TestBackMapper(t *testing.T) {
	c, err := New(OpenCVFisheye, 64, 48, []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	pin, err := PinholeFor(c, PinholeOptions{})
	require.NoError(t, err)
	u, err := NewUndistorter(c, pin)
	require.NoError(t, err)
	m := u.BackMapper()
	for _, sz := range [][2]int{{64, 48}, {32, 24}, {64, 48}} {
		w, h := sz[0], sz[1]
		data := make([]float32, w*h)
		for k := range data {
			data[k] = float32(k%w) + 0.5*float32(k/w)
		}
		got, err := m.Floats(data, w, h)
		require.NoError(t, err)
		want, err := u.Backward(w, h, w, h).Floats(data, float32(math.NaN()))
		require.NoError(t, err)
		require.Len(t, got, w*h)
		nan := 0
		for k := range got {
			if math.IsNaN(float64(want[k])) {
				nan++
				assert.True(t, math.IsNaN(float64(got[k])))
				continue
			}
			assert.Equal(t, want[k], got[k])
		}
		assert.Positive(t, nan, "balance 0 cuts the fisheye rim off")
	}
	got, err := m.Floats(nil, 64, 48)
	assert.NoError(t, err)
	assert.Nil(t, got)
	_, err = m.Floats(make([]float32, 5), 64, 48)
	assert.Error(t, err)
}
