package export

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numpyRef is testdata/numpy.json, written by testdata/gen_numpy.py with numpy and the official
// visualize_depth.
type numpyRef struct {
	Percentile []struct {
		Data []float32
		Q    []float64
		P    []float32
		P64  []float64
	}
	Round struct {
		Data []float32
		Out  map[string][]float32
	}
	DepthVis []struct {
		Name  string
		W, H  int
		Depth []float32
		RGB   []uint8
	} `json:"depth_vis"`
}

func loadNumpyRef(t *testing.T) *numpyRef {
	t.Helper()
	b, err := os.ReadFile("testdata/numpy.json")
	require.NoError(t, err)
	var r numpyRef
	require.NoError(t, json.Unmarshal(b, &r))
	require.NotEmpty(t, r.Percentile)
	return &r
}

func TestPercentileMatchesNumpy(t *testing.T) {
	ref := loadNumpyRef(t)
	for _, c := range ref.Percentile {
		s := sorted32(c.Data)
		s64 := make([]float64, len(c.Data))
		for i, v := range c.Data {
			s64[i] = float64(v)
		}
		slices.Sort(s64)
		for k, q := range c.Q {
			// Bit-exact: the selection of points depends on the exact threshold.
			assert.Equal(t, math.Float32bits(c.P[k]), math.Float32bits(percentile(s, q)), "n=%d q=%g float32", len(c.Data), q)
			assert.Equal(t, c.P64[k], percentile(s64, q), "n=%d q=%g float64", len(c.Data), q)
		}
	}
}

func TestRoundMatchesNumpy(t *testing.T) {
	ref := loadNumpyRef(t)
	require.Len(t, ref.Round.Out, 3)
	for _, d := range []int{2, 6, 8} {
		want := ref.Round.Out[map[int]string{2: "2", 6: "6", 8: "8"}[d]]
		require.Len(t, want, len(ref.Round.Data))
		for i, x := range ref.Round.Data {
			assert.Equal(t, math.Float32bits(want[i]), math.Float32bits(round32(x, d)), "round(%v, %d)", x, d)
		}
	}
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median64([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median64([]float64{4, 1, 3, 2}))
	assert.True(t, math.IsNaN(median64(nil)))
}

func TestVisualizeDepthMatchesOfficial(t *testing.T) {
	ref := loadNumpyRef(t)
	require.Len(t, ref.DepthVis, 4)
	for _, c := range ref.DepthVis {
		t.Run(c.Name, func(t *testing.T) {
			got := visualizeDepth(c.Depth)
			require.Len(t, c.RGB, 3*len(got))
			for i, px := range got {
				assert.Equal(t, c.RGB[3*i:3*i+3], px[:], "pixel %d (depth %v)", i, c.Depth[i])
			}
		})
	}
}
