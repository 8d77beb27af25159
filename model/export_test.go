package model

import (
	"testing"

	"github.com/da3-go/da3-go/export"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResultView(t *testing.T) {
	k := [3][3]float64{{10, 0, 2}, {0, 10, 1}, {0, 0, 1}}
	ko := [3][3]float64{{20, 0, 4}, {0, 20, 2}, {0, 0, 1}}
	rgb := make([]uint8, 4*2*3)
	for i := range rgb {
		rgb[i] = uint8(i)
	}
	cam := &Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 5}}, Intrinsics: k, IntrinsicsOriginal: ko}
	r := Result{Depth: make([]float32, 8), Conf: make([]float32, 8), Width: 4, Height: 2, ProcessedWidth: 4, ProcessedHeight: 2,
		OrigWidth: 8, OrigHeight: 4, Camera: cam, RGB: rgb}
	v, err := r.View("a.png")
	require.NoError(t, err)
	assert.Equal(t, "a.png", v.Name)
	assert.Equal(t, k, v.Camera.Intrinsics, "processed-size maps use the processed intrinsics")
	assert.Equal(t, ko, v.Camera.IntrinsicsOriginal)
	assert.Equal(t, 8, v.OrigWidth)
	assert.Equal(t, rgb, v.RGB)

	// Maps at the original size: original intrinsics, colours of the nearest processed pixel.
	r.Depth, r.Conf, r.Width, r.Height = make([]float32, 32), make([]float32, 32), 8, 4
	v, err = r.View("a.png")
	require.NoError(t, err)
	assert.Equal(t, ko, v.Camera.Intrinsics)
	require.Len(t, v.RGB, 3*32)
	assert.Equal(t, rgb[0:3], v.RGB[0:3])                     // (0,0) <- (0,0)
	assert.Equal(t, rgb[3:6], v.RGB[3*2:3*2+3])               // (2,0) <- (1,0)
	assert.Equal(t, rgb[3*(4+3):3*(4+3)+3], v.RGB[3*31:3*32]) // (7,3) <- (3,1)

	r.Camera = nil
	v, err = r.View("a.png")
	require.NoError(t, err)
	assert.Nil(t, v.Camera)
	_, err = r.PointCloud(export.DefaultOptions())
	assert.ErrorContains(t, err, "no camera")

	r.Depth = r.Depth[:3]
	_, err = r.View("a.png")
	assert.ErrorContains(t, err, "depth values")
	_, err = Views([]Result{r}, []string{"a", "b"})
	assert.ErrorContains(t, err, "2 names for 1 results")
}
