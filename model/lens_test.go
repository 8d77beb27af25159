package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/lens"
)

func fisheyeUndistorter(t *testing.T) *lens.Undistorter {
	t.Helper()
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{})
	require.NoError(t, err)
	u, err := lens.NewUndistorter(c, pin)
	require.NoError(t, err)
	return u
}

// MapBack maps every map as the lens's back mapper does, leaves missing maps nil, and refuses cropped
// results; DistortViews maps the views given an undistorter and leaves the others.
func TestResultMapBack(t *testing.T) {
	u := fisheyeUndistorter(t)
	const w, h = 32, 24
	ramp := func(s float32) []float32 {
		d := make([]float32, w*h)
		for k := range d {
			d[k] = 1 + s*float32(k%w) + float32(k/w)
		}
		return d
	}
	pose := [3][4]float64{{1, 0, 0, 0.5}, {0, 1, 0, 0}, {0, 0, 1, 0}}
	r := Result{Depth: ramp(1), Conf: ramp(2), Width: w, Height: h, OrigWidth: 64, OrigHeight: 48, ProcessedWidth: w, ProcessedHeight: h,
		Camera: &Camera{Extrinsics: pose, Intrinsics: [3][3]float64{{15, 0, 16}, {0, 15, 12}, {0, 0, 1}}}}
	require.NoError(t, r.MapBack(u))
	assert.Equal(t, pose, r.Camera.Extrinsics)
	assert.Equal(t, [3][3]float64{{30, 0, 32.2}, {0, 30, 23.7}, {0, 0, 1}}, r.Camera.IntrinsicsOriginal, "the lens's pinhole part")
	assert.InDeltaSlice(t, []float64{15, 16.1, 15, 11.85}, []float64{r.Camera.Intrinsics[0][0], r.Camera.Intrinsics[0][2], r.Camera.Intrinsics[1][1], r.Camera.Intrinsics[1][2]}, 1e-12)
	for i, m := range [][]float32{r.Depth, r.Conf} {
		want, err := u.Backward(w, h, w, h).Floats(ramp(float32(i+1)), float32(math.NaN()))
		require.NoError(t, err)
		require.Len(t, m, w*h)
		for k := range m {
			if math.IsNaN(float64(want[k])) {
				assert.True(t, math.IsNaN(float64(m[k])))
			} else {
				assert.Equal(t, want[k], m[k])
			}
		}
	}
	assert.Nil(t, r.Sky)

	cropped := Result{Depth: ramp(1), Width: w, Height: h, Cropped: true}
	assert.ErrorIs(t, cropped.MapBack(u), ErrCroppedLens)
	assert.ErrorIs(t, cropped.MapBack(u), ErrInvalidInput)

	res := []Result{{Depth: ramp(1), Width: w, Height: h}, {Depth: ramp(1), Width: w, Height: h}}
	cam := &export.Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: [3][3]float64{{15, 0, 16}, {0, 15, 12}, {0, 0, 1}}}
	views := []export.View{{Name: "a", Width: w, Height: h, Depth: ramp(1), Camera: cam}, {Name: "b", Width: w, Height: h, Depth: ramp(1), Camera: cam}}
	require.NoError(t, DistortViews(views, res, []*lens.Undistorter{nil, u}))
	assert.Nil(t, views[0].Camera.Lens)
	assert.Equal(t, ramp(1), views[0].Depth)
	require.NotNil(t, views[1].Camera.Lens)
	assert.Equal(t, lens.OpenCVFisheye, views[1].Camera.Lens.Model)
	assert.True(t, math.IsNaN(float64(views[1].Depth[0])), "the rim")
	res[1].Cropped = true
	assert.ErrorIs(t, DistortViews(views, res, []*lens.Undistorter{nil, u}), ErrCroppedLens)
}
