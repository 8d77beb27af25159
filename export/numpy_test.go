package export

import (
	"encoding/json"
	"math"
	"math/rand/v2"
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

// TestRadixSelectMatchesSort: the two-pass order statistics equal those of a sorted copy, bit for bit,
// with negative values, infinities, ties and signed zeros, so the streamed threshold is numpy's.
func TestRadixSelectMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1, math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, n := range []int{1, 2, 3, 10, 1000, 70000} {
		v := make([]float32, n)
		for i := range v {
			switch r.IntN(4) {
			case 0:
				v[i] = special[r.IntN(len(special))]
			case 1:
				v[i] = float32(r.IntN(5)) // ties
			default:
				v[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(10)-5)))
			}
		}
		var sel radixSelect
		for _, x := range v {
			sel.add1(x)
		}
		qs := []float64{0, 1, 5, 40, 50, 90, 99.9, 100}
		var ranks []int
		for _, q := range qs {
			lo, hi, _ := percentileRanks(n, q)
			ranks = append(ranks, lo, hi)
		}
		sel.want(ranks...)
		for _, x := range v {
			sel.add2(x)
		}
		s := sorted32(v)
		for _, q := range qs {
			lo, hi, g := percentileRanks(n, q)
			// Signed zeros compare equal; the sort may order them either way.
			assert.Equal(t, s[lo] == 0, sel.value(lo) == 0)
			if s[lo] != 0 {
				assert.Equal(t, math.Float32bits(s[lo]), math.Float32bits(sel.value(lo)), "n=%d rank %d", n, lo)
			}
			want, got := percentile(s, q), lerpPercentile(sel.value(lo), sel.value(hi), g)
			assert.True(t, want == got || (math.IsNaN(float64(want)) && math.IsNaN(float64(got))), "n=%d q=%g: %g vs %g", n, q, want, got)
		}
	}
}
