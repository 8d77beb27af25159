package server

import (
	"image"
	"image/color"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnproject(t *testing.T) {
	// A 4×3 view seen by a camera at world (1, 2, 3) rotated 90° about y
	// (camera z = world x): world = Rᵀ(cam − t) with t = −R·C.
	R := [3][3]float64{{0, 0, -1}, {0, 1, 0}, {1, 0, 0}}
	C := [3]float64{1, 2, 3}
	var e [3][4]float64
	for i := range 3 {
		for j := range 3 {
			e[i][j] = R[i][j]
			e[i][3] -= R[i][j] * C[j]
		}
	}
	K := [3][3]float64{{2, 0, 1.5}, {0, 2, 1}, {0, 0, 1}}
	v := view{Width: 4, Height: 3, ProcessedW: 4, ProcessedH: 3, Depth: make([]float32, 12), Conf: make([]float32, 12), RGB: make([]uint8, 36),
		Camera: &camera{Extrinsics: e, Intrinsics: K}}
	for i := range 12 {
		v.Depth[i] = float32(1 + i)
		v.Conf[i] = float32(i)
		v.RGB[3*i] = uint8(10 * i)
	}
	v.Depth[5] = float32(math.NaN())
	pc := unproject([]view{v}, nil, 3)
	// Pixels 3..11 pass the threshold, NaN pixel 5 is dropped.
	require.Len(t, pc.XYZ, 3*8)
	k := 0
	for i := 3; i < 12; i++ {
		if i == 5 {
			continue
		}
		x, y, d := float64(i%4), float64(i/4), float64(1+i)
		cam := [3]float64{(x - 1.5) / 2 * d, (y - 1) / 2 * d, d}
		for j := range 3 { // world = C + Rᵀ·cam
			want := C[j] + R[0][j]*cam[0] + R[1][j]*cam[1] + R[2][j]*cam[2]
			assert.InDelta(t, want, pc.XYZ[3*k+j], 1e-5, "pixel %d coordinate %d", i, j)
		}
		assert.Equal(t, uint8(10*i), pc.RGB[3*k])
		k++
	}

	// Maps at the image size use the original intrinsics, the image's colours
	// and a stride that keeps about one point per processed pixel.
	img := image.NewNRGBA(image.Rect(0, 0, 8, 6))
	for i := range 48 {
		img.Set(i%8, i/8, color.NRGBA{uint8(i), 0, 0, 255})
	}
	big := view{Width: 8, Height: 6, ProcessedW: 4, ProcessedH: 3, Depth: make([]float32, 48),
		Camera: &camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, IntrinsicsOriginal: [3][3]float64{{4, 0, 3.5}, {0, 4, 2.5}, {0, 0, 1}}}}
	for i := range big.Depth {
		big.Depth[i] = 2
	}
	pc = unproject([]view{big}, []image.Image{img}, 0)
	require.Len(t, pc.RGB, 3*12, "stride 2: 4×3 points")
	assert.Equal(t, uint8(2), pc.RGB[3], "second point is pixel (2, 0)")
	assert.InDelta(t, (2-3.5)/4*2, pc.XYZ[3], 1e-6)
	assert.InDelta(t, 2, pc.XYZ[5], 1e-6)
}
