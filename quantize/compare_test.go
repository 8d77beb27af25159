package quantize_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/quantize"
)

func TestCompare(t *testing.T) {
	a := []float32{1, 2, 3, 4}
	for _, tc := range []struct {
		name         string
		b            []float32
		corr, maxAbs float64
		maxRel       float64
	}{
		{"equal", []float32{1, 2, 3, 4}, 1, 0, 0},
		{"scaled", []float32{2, 4, 6, 8}, 1, 4, 1},
		{"reversed", []float32{4, 3, 2, 1}, -1, 3, 0.75},
		{"offset", []float32{1.5, 2.5, 3.5, 4.5}, 1, 0.5, 0.125},
		{"one off", []float32{1, 2, 3, 5}, 0.9827076298239907, 1, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := quantize.Compare(a, tc.b)
			require.NoError(t, err)
			assert.InDelta(t, tc.corr, got.Corr, 1e-12)
			assert.InDelta(t, tc.maxAbs, got.MaxAbs, 1e-12)
			assert.InDelta(t, tc.maxRel, got.MaxRel, 1e-12)
		})
	}
	got, err := quantize.Compare([]float32{2, 2}, []float32{2, 2})
	require.NoError(t, err)
	assert.Equal(t, 1.0, got.Corr, "equal constants")
	got, err = quantize.Compare([]float32{2, 2}, []float32{2, 3})
	require.NoError(t, err)
	assert.Equal(t, 0.0, got.Corr, "constant against varying")

	_, err = quantize.Compare(a, a[:3])
	assert.ErrorContains(t, err, "4 values against 3")
	_, err = quantize.Compare(nil, nil)
	assert.ErrorContains(t, err, "no values")
	_, err = quantize.Compare([]float32{1, float32(math.NaN())}, []float32{1, 2})
	assert.ErrorContains(t, err, "NaN at index 1")
}
