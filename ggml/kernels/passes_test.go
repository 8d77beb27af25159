package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// TestSumParts checks SumParts against float64 sums of the same runs (more
// parts than values included), and that a NaN or an Inf shows in the part
// that holds it and in no other.
func TestSumParts(t *testing.T) {
	for _, s := range [][2]int{{1000, 16}, {37, 16}, {5, 16}, {4096, 1}, {100003, 7}} {
		n, parts := s[0], s[1]
		t.Run(fmt.Sprintf("n%d_parts%d", n, parts), func(t *testing.T) {
			rng := optest.RNG(uint64(n))
			data := optest.Randn(rng, n, 1)
			h := optest.NewHarness(t, 8)
			x := h.Input(ggml.TypeF32, data, n)
			got := h.Compute(kernels.SumParts(h.G, x, parts))[0]
			require.Len(t, got, parts)
			for p := range parts {
				want := 0.0
				for _, v := range data[n*p/parts : n*(p+1)/parts] {
					want += float64(v)
				}
				assert.InDelta(t, want, got[p], 1e-5*math.Sqrt(float64(n)), "part %d", p)
			}
		})
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		data := make([]float32, 1000)
		data[613] = bad
		h := optest.NewHarness(t, 8)
		got := h.Compute(kernels.SumParts(h.G, h.Input(ggml.TypeF32, data, 10, 100), 16))[0]
		for p, v := range got {
			assert.Equal(t, p == 613*16/1000, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "part %d of a %v at 613: %v", p, bad, v)
		}
	}
	assert.False(t, kernels.SumPartsFits(nil))
}

// TestStackRows checks StackRows against chains of ggml's concatenation
// along the rows (bit for bit: both copy) for one to MaxStack maps of
// different heights, several channels and images, and that maps of other
// widths, channels or images, or too many maps, do not fit.
func TestStackRows(t *testing.T) {
	heights := []int{3, 1, 7, 2, 5, 4, 6, 1, 2}
	require.Len(t, heights, kernels.MaxStack)
	for _, k := range []int{1, 2, 3, kernels.MaxStack} {
		t.Run(fmt.Sprintf("maps%d", k), func(t *testing.T) {
			h := optest.NewHarness(t, 64)
			rng := optest.RNG(uint64(k))
			var ts []*ggml.Tensor
			for _, rows := range heights[:k] {
				x, _ := h.Rand(rng, 11, rows, 3, 2)
				ts = append(ts, x)
			}
			chain := ts[0]
			for _, x := range ts[1:] {
				chain = chain.Concat(h.G, x, 1)
			}
			require.True(t, kernels.StackRowsFits(ts))
			out := h.Compute(kernels.StackRows(h.G, ts), chain.Cont(h.G))
			assert.Equal(t, out[1], out[0])
		})
	}
	g := optest.NewHarness(t, 16).G
	a := g.NewTensor(ggml.TypeF32, 4, 2, 3, 1)
	for name, b := range map[string]*ggml.Tensor{
		"width":    g.NewTensor(ggml.TypeF32, 5, 2, 3, 1),
		"channels": g.NewTensor(ggml.TypeF32, 4, 2, 2, 1),
		"images":   g.NewTensor(ggml.TypeF32, 4, 2, 3, 2),
		"type":     g.NewTensor(ggml.TypeF16, 4, 2, 3, 1),
	} {
		assert.False(t, kernels.StackRowsFits([]*ggml.Tensor{a, b}), name)
	}
	many := make([]*ggml.Tensor, kernels.MaxStack+1)
	for i := range many {
		many[i] = a
	}
	assert.False(t, kernels.StackRowsFits(many), "more than MaxStack maps")
	assert.False(t, kernels.StackRowsFits(nil), "no map")
}

// TestConcat checks Concat against ggml's concatenation (bit for bit: both
// copy) along each dim, of contiguous tensors and of views with gaps
// between their rows (the patch tokens after a class token), and that
// other types, strided rows, shapes that differ off the dim and dims out of
// range do not fit.
func TestConcat(t *testing.T) {
	for dim := range 4 {
		for _, view := range []bool{false, true} {
			t.Run(fmt.Sprintf("dim%d_view%v", dim, view), func(t *testing.T) {
				h := optest.NewHarness(t, 64)
				rng := optest.RNG(uint64(10*dim + 1))
				sa, sb := []int{5, 4, 3, 2}, []int{5, 4, 3, 2}
				sa[dim], sb[dim] = 3, 2
				a, _ := h.Rand(rng, sa...)
				b, _ := h.Rand(rng, sb...)
				if view { // a's rows 1 … of a taller tensor: gaps between its rows and planes
					big, _ := h.Rand(rng, sa[0], sa[1]+1, sa[2], sa[3])
					a = big.View(h.G, big.Stride(1), sa, []int{big.Stride(1), big.Stride(2), big.Stride(3)})
				}
				require.True(t, kernels.ConcatFits(a, b, dim))
				out := h.Compute(kernels.Concat(h.G, a, b, dim), a.Concat(h.G, b, dim).Cont(h.G))
				assert.Equal(t, out[1], out[0])
			})
		}
	}
	g := optest.NewHarness(t, 16).G
	a := g.NewTensor(ggml.TypeF32, 4, 2, 3, 1)
	assert.False(t, kernels.ConcatFits(a, g.NewTensor(ggml.TypeF32, 4, 3, 3, 1), 0), "dim 1 differs")
	assert.False(t, kernels.ConcatFits(a, g.NewTensor(ggml.TypeF16, 4, 2, 3, 1), 0), "type")
	assert.False(t, kernels.ConcatFits(a, a, 4), "dim out of range")
	assert.False(t, kernels.ConcatFits(a.Transpose(g), a.Transpose(g), 1), "strided rows")
	assert.False(t, kernels.ConcatFits(nil, a, 0))
}

// TestTranspose checks Transpose against ggml's copy of a transposed view
// (bit for bit), on sizes off the 32×32 blocks, several planes, and a view
// with gaps between its rows and planes; strided rows and other types do
// not fit.
func TestTranspose(t *testing.T) {
	for _, s := range [][4]int{{1, 1, 1, 1}, {5, 3, 1, 1}, {33, 70, 2, 1}, {64, 32, 3, 2}, {100, 7, 1, 3}} {
		for _, view := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v_view%v", s, view), func(t *testing.T) {
				h := optest.NewHarness(t, 16)
				rng := optest.RNG(uint64(s[0]*100 + s[1]))
				x, _ := h.Rand(rng, s[:]...)
				if view {
					big, _ := h.Rand(rng, s[0]+2, s[1]+1, s[2], s[3])
					x = big.View(h.G, big.Stride(1), s[:], []int{big.Stride(1), big.Stride(2), big.Stride(3)})
				}
				require.True(t, kernels.TransposeFits(x))
				out := h.Compute(kernels.Transpose(h.G, x), x.Transpose(h.G).Cont(h.G))
				assert.Equal(t, out[1], out[0])
			})
		}
	}
	g := optest.NewHarness(t, 16).G
	a := g.NewTensor(ggml.TypeF32, 4, 2, 3, 1)
	assert.False(t, kernels.TransposeFits(a.Transpose(g)), "strided rows")
	assert.False(t, kernels.TransposeFits(g.NewTensor(ggml.TypeF16, 4, 2)), "type")
	assert.False(t, kernels.TransposeFits(nil))
}

// TestConv2DReLUIn checks that the input's ReLU done by the Winograd input
// transform gives the values of a ReLU node before the convolution, bit for
// bit, in every variant and both tiles (a small map takes 2×2 tiles),
// with negative zeros and a NaN in the input (ReLU makes both +0, as
// ggml's does); and that without Winograd in the policy it is those two
// nodes.
func TestConv2DReLUIn(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, s := range [][4]int{{6, 5, 16, 8}, {40, 23, 24, 40}} {
			W, H, IC, OC := s[0], s[1], s[2], s[3]
			for _, wino := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%dx%d_ic%d_oc%d_F%d_winograd%v", v, W, H, IC, OC, kernels.WinogradTile(W, H), wino), func(t *testing.T) {
					h := optest.NewHarness(t, 32)
					kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: wino, Variant: v})
					rng := optest.RNG(uint64(W*100 + IC))
					xd := optest.Randn(rng, W*H*IC, 1)
					xd[3] = float32(math.Copysign(0, -1))
					xd[W*H+7] = float32(math.NaN())
					x := h.Input(ggml.TypeF32, xd, W, H, IC, 1)
					k, _ := h.Rand(rng, 3, 3, IC, OC)
					b, _ := h.Rand(rng, OC)
					p := ggml.Conv2DParams{Pad: 1}
					ep := kernels.Epilogue{Bias: b, Act: kernels.ActReLU}
					before := kernelcount.WinogradCalls()
					fused := kernels.Conv2DReLUIn(h.G, k, x, p, ep)
					assert.Equal(t, wino, fused.Src(1).Op() == x.Op(), "Winograd reads x itself; else a ReLU node does (%s)", fused.Src(1).Op())
					out := h.Compute(fused, kernels.Conv2D(h.G, k, x.ReLU(h.G), p, ep))
					assert.Equal(t, wino, kernelcount.WinogradCalls() > before)
					for i, o := range out[0] {
						require.False(t, math.IsNaN(float64(o)), "output %d: the NaN passed the ReLU", i)
					}
					assert.Equal(t, out[1], out[0])
				})
			}
		}
	}
}

// TestAddScaled checks AddScaled against ggml's mul then add, bit for bit
// (each product rounded before the sum, no fused multiply-add), on rows of
// lengths that are and are not multiples of the vector widths, and that
// operands of other shapes do not fit.
func TestAddScaled(t *testing.T) {
	for _, s := range [][3]int{{768, 37, 2}, {13, 5, 1}, {64, 1, 3}} {
		t.Run(fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			rng := optest.RNG(uint64(s[0] + s[1]))
			x, _ := h.Rand(rng, s[0], s[1], s[2])
			y, _ := h.Rand(rng, s[0], s[1], s[2])
			gamma, _ := h.Rand(rng, s[0])
			require.True(t, kernels.AddScaledFits(x, y, gamma))
			out := h.Compute(kernels.AddScaled(h.G, x, y, gamma), x.Add(h.G, y.Mul(h.G, gamma)))
			assert.Equal(t, out[1], out[0])
		})
	}
	g := optest.NewHarness(t, 16).G
	x := g.NewTensor(ggml.TypeF32, 8, 3)
	assert.False(t, kernels.AddScaledFits(x, g.NewTensor(ggml.TypeF32, 8, 4), g.NewTensor(ggml.TypeF32, 8)), "y of another shape")
	assert.False(t, kernels.AddScaledFits(x, x, g.NewTensor(ggml.TypeF32, 4)), "short gamma")
	assert.False(t, kernels.AddScaledFits(x, x, nil), "no gamma")
}

// TestConv2DAdd checks that the residual added by the Winograd output
// transform gives res + the convolution of ggml's add, bit for bit, in every
// variant and both tiles, on two images (each image's residual), with a
// bias and with the convolution bias-free; and that without Winograd in the
// policy it is those two nodes.
func TestConv2DAdd(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, s := range [][5]int{{6, 5, 16, 8, 1}, {40, 23, 24, 40, 0}} {
			W, H, IC, OC, withBias := s[0], s[1], s[2], s[3], s[4] == 1
			for _, wino := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%dx%d_ic%d_oc%d_bias%v_winograd%v", v, W, H, IC, OC, withBias, wino), func(t *testing.T) {
					h := optest.NewHarness(t, 32)
					kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: wino, Variant: v})
					rng := optest.RNG(uint64(W*10 + OC))
					x, _ := h.Rand(rng, W, H, IC, 2)
					k, _ := h.Rand(rng, 3, 3, IC, OC)
					res, _ := h.Rand(rng, W, H, OC, 2)
					var ep kernels.Epilogue
					if withBias {
						ep.Bias, _ = h.Rand(rng, OC)
					}
					p := ggml.Conv2DParams{Pad: 1}
					before := kernelcount.WinogradCalls()
					fused := kernels.Conv2DAdd(h.G, k, x, p, ep, res)
					assert.Equal(t, wino, fused.Op() == "CUSTOM", "one node with Winograd; else an add (%s)", fused.Op())
					out := h.Compute(fused, res.Add(h.G, kernels.Conv2D(h.G, k, x, p, ep)))
					assert.Equal(t, wino, kernelcount.WinogradCalls() > before)
					assert.Equal(t, out[1], out[0])
				})
			}
		}
	}
}
