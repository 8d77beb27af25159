package dpt

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// uvRef is depth_anything_3's create_uv_grid + position_grid_to_embed in float64: 0.1·UV(c, h, w) for aspect a = W/H,
// laid out [w, h, c] (x fastest).
func uvRef(c, h, w int, a float64) []float64 {
	diag := math.Sqrt(a*a + 1)
	spanX, spanY := a/diag, 1/diag
	lin := func(span float64, n int) []float64 {
		lo, hi := -span*float64(n-1)/float64(n), span*float64(n-1)/float64(n)
		out := make([]float64, n)
		for i := range out {
			if n == 1 {
				out[i] = lo
			} else {
				out[i] = lo + (hi-lo)*float64(i)/float64(n-1)
			}
		}
		return out
	}
	xs, ys := lin(spanX, w), lin(spanY, h)
	q := c / 4
	out := make([]float64, w*h*c)
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			for k := 0; k < q; k++ {
				om := math.Pow(100, -float64(k)/float64(q))
				vals := [4]float64{math.Sin(xs[j] * om), math.Cos(xs[j] * om), math.Sin(ys[i] * om), math.Cos(ys[i] * om)}
				for part, v := range vals {
					out[((part*q+k)*h+i)*w+j] = 0.1 * v
				}
			}
		}
	}
	return out
}

func TestUVEmbedMatchesSpec(t *testing.T) {
	for _, tc := range []struct {
		c, h, w int
		a       float64
	}{
		{8, 3, 5, 5.0 / 3},
		{16, 7, 4, 4.0 / 7},
		{256, 37, 37, 1},
		{12, 18, 24, 504.0 / 378},
		{4, 1, 6, 2},
		{8, 5, 1, 0.5},
	} {
		got := uvEmbed(tc.c, tc.h, tc.w, tc.a)
		want := uvRef(tc.c, tc.h, tc.w, tc.a)
		require.Len(t, got, len(want))
		worst := 0.0
		for i := range want {
			worst = max(worst, math.Abs(want[i]-float64(got[i])))
		}
		assert.LessOrEqual(t, worst, 1e-6, "c=%d h=%d w=%d a=%g", tc.c, tc.h, tc.w, tc.a)
	}
}

// Explicit values pin the channel order [sin x, cos x, sin y, cos y], the
// layout [w, h, C] and the 0.1 scale independently of the reference above.
func TestUVEmbedLayout(t *testing.T) {
	const c, h, w = 4, 2, 3 // q = 1, ω_0 = 1
	a := 3.0 / 2
	got := uvEmbed(c, h, w, a)
	d := math.Sqrt(a*a + 1)
	sx, sy := a/d, 1/d
	xs := []float64{-sx * 2 / 3, 0, sx * 2 / 3}
	ys := []float64{-sy / 2, sy / 2}
	at := func(ch, i, j int) float64 { return float64(got[(ch*h+i)*w+j]) }
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			assert.InDelta(t, 0.1*math.Sin(xs[j]), at(0, i, j), 1e-7, "sin x at (%d,%d)", i, j)
			assert.InDelta(t, 0.1*math.Cos(xs[j]), at(1, i, j), 1e-7, "cos x at (%d,%d)", i, j)
			assert.InDelta(t, 0.1*math.Sin(ys[i]), at(2, i, j), 1e-7, "sin y at (%d,%d)", i, j)
			assert.InDelta(t, 0.1*math.Cos(ys[i]), at(3, i, j), 1e-7, "cos y at (%d,%d)", i, j)
		}
	}
	// x varies along ne0 only: row 0 and row 1 of the sin-x channel agree.
	assert.Equal(t, got[0:w], got[w:2*w])
	// Every value is within the 0.1 scale.
	for _, v := range got {
		assert.LessOrEqual(t, math.Abs(float64(v)), 0.1+1e-7)
	}
}

// A 1-point linspace is its start, −span·0/1 = 0: sin = 0, cos = 0.1.
func TestUVEmbedSinglePoint(t *testing.T) {
	got := uvEmbed(8, 1, 1, 1.7)
	want := []float32{0, 0, 0.1, 0.1, 0, 0, 0.1, 0.1}
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-7, "channel %d", i)
	}
}

func TestHeadUVCache(t *testing.T) {
	h := New(Config{Kind: DualDPT, NormEps: 1e-5})
	a := h.UV(8, 3, 5, 5.0/3)
	b := h.UV(8, 3, 5, 5.0/3)
	require.NotEmpty(t, a)
	assert.Same(t, &a[0], &b[0], "the same (C, h, w, aspect) returns the cached slice")
	assert.Equal(t, uvEmbed(8, 3, 5, 5.0/3), a)
	for _, other := range [][]float32{h.UV(8, 3, 5, 1.2), h.UV(8, 5, 3, 5.0/3), h.UV(12, 3, 5, 5.0/3)} {
		assert.NotSame(t, &a[0], &other[0])
	}
	assert.Equal(t, uvEmbed(8, 3, 5, 1.2), h.UV(8, 3, 5, 1.2), "a different aspect is computed, not served from the cache")
}

func TestNewHeadLayout(t *testing.T) {
	h := New(Config{Kind: DualDPT, NormEps: 1e-5})
	require.NotNil(t, h.Norm)
	assert.Equal(t, float32(1e-5), h.Norm.Eps)
	assert.Nil(t, h.Scratch.SkyOut2a)
	assert.Equal(t, 4, h.Resize0.Stride)
	assert.Equal(t, 2, h.Resize1.Stride)
	assert.Equal(t, ggml.Conv2DParams{Stride: 2, Pad: 1}, h.Resize3.Params)
	assert.Equal(t, ggml.Conv2DParams{Pad: 1}, h.Scratch.L1.Params)
	assert.Equal(t, ggml.Conv2DParams{}, h.Scratch.Out2b.Params, "out2b is 1×1")
	assert.Nil(t, h.Scratch.RN4.RC1, "refinenet4 has no resConfUnit1")
	for _, f := range []*Fusion{&h.Scratch.RN1, &h.Scratch.RN2, &h.Scratch.RN3} {
		require.NotNil(t, f.RC1)
		assert.Equal(t, ggml.Conv2DParams{Pad: 1}, f.RC1.C1.Params)
	}

	m := New(Config{Kind: Mono})
	assert.Nil(t, m.Norm)
	require.NotNil(t, m.Scratch.SkyOut2a)
	assert.Equal(t, ggml.Conv2DParams{Pad: 1}, m.Scratch.SkyOut2a.Params)
	assert.Equal(t, "dualdpt", DualDPT.String())
	assert.Equal(t, "Kind(7)", Kind(7).String())
}
