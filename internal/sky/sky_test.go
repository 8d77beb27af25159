package sky_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/internal/sky"
	"github.com/da3-go/da3-go/internal/tmath"
)

func TestFill(t *testing.T) {
	assert.InDelta(t, 4.96, tmath.Quantile([]float32{5, 1, 3, 2, 4}, 0.99), 1e-6)
	assert.InDelta(t, 3, tmath.Quantile([]float32{5, 1, 3, 2, 4}, 0.5), 1e-6)
	depth := make([]float32, 40)
	sk := make([]float32, 40)
	for i := range depth {
		depth[i] = float32(i)
		if i >= 25 {
			sk[i] = 1
		}
	}
	sky.Fill(depth, sk)
	q := tmath.Quantile([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}, 0.99)
	assert.InDelta(t, 23.76, q, 1e-5)
	assert.Equal(t, float32(3), depth[3], "non-sky unchanged")
	assert.InDelta(t, q, depth[30], 1e-6, "sky filled with the 0.99 quantile")
	// Too few sky pixels: unchanged.
	d2 := []float32{1, 2, 3}
	sky.Fill(d2, []float32{1, 0, 0})
	assert.Equal(t, []float32{1, 2, 3}, d2)
}
