package server

import (
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
	cam := &camera{Extrinsics: e, Intrinsics: [3][3]float64{{2, 0, 1.5}, {0, 2, 1}, {0, 0, 1}}}
	depth, conf, rgb := make([]float32, 12), make([]float32, 12), make([]uint8, 36)
	for i := range 12 {
		depth[i] = float32(1 + i)
		conf[i] = float32(i)
		rgb[3*i] = uint8(10 * i)
	}
	depth[5] = float32(math.NaN())
	depth[6] = float32(math.Inf(1))
	depth[7] = -1
	pc := unproject(depth, conf, rgb, 4, 3, cam, 3)
	// Pixels 3..11 pass the threshold; NaN, +Inf and negative depths are dropped.
	require.Len(t, pc.XYZ, 3*6)
	k := 0
	for i := 3; i < 12; i++ {
		if i >= 5 && i <= 7 {
			continue
		}
		x, y, d := float64(i%4), float64(i/4), float64(1+i)
		c := [3]float64{(x - 1.5) / 2 * d, (y - 1) / 2 * d, d}
		for j := range 3 { // world = C + Rᵀ·cam
			want := C[j] + R[0][j]*c[0] + R[1][j]*c[1] + R[2][j]*c[2]
			assert.InDelta(t, want, pc.XYZ[3*k+j], 1e-5, "pixel %d coordinate %d", i, j)
		}
		assert.Equal(t, uint8(10*i), pc.RGB[3*k])
		k++
	}
	all := unproject(depth, nil, nil, 4, 3, cam, 100)
	assert.Len(t, all.XYZ, 3*9, "without a confidence map every valid pixel counts")
	assert.Equal(t, []uint8{200, 200, 200}, all.RGB[:3], "grey without colours")

	m := merge([]view{{points: pc}, {points: all}})
	assert.Equal(t, append(append([]float32{}, pc.XYZ...), all.XYZ...), m.XYZ)
	assert.Len(t, m.RGB, len(m.XYZ))
}
