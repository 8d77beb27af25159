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

// winogradBound is, for every output of a 3×3 stride-1 convolution of x [W,
// H, IC] with k [3, 3, IC, OC] and padding pad, the error bound of the
// F(T×T, 3×3) algorithm in float32 (T = 2 or 4): γ_n·M with u = 2^-24,
// γ_n = n·u/(1−n·u) and M the algorithm run on absolute values
// (|Aᵀ| (Σ_ic |G||g||G|ᵀ ⊙ |Bᵀ||d||B|) |A|, plus |bias|). Every output is a
// sum of such terms, each reached through at most n roundings (the
// standard bound for sums, Higham, Accuracy and Stability, §3.1; every
// intermediate of the transforms is a combination of distinct inputs, and
// the multiplications by 2, 4, 8 are exact or inside a fused multiply-add):
//   - F(2×2): n = IC + 11: 4 in the kernel transform (two additions per
//     row, then per column; the halvings are exact), 2 in the input
//     transform, the product, IC − 1 additions over the input channels, 3
//     in the output transform and the bias.
//   - F(4×4): n = IC + 12: 1 in the kernel transform (computed in double,
//     rounded once to float32; the double's own error is far inside γ_n's
//     slack), 2 per pass of the input transform (e.g. 4x0 − 5x2 + x4 as
//     two fused multiply-adds), the product and the IC − 1 additions, 3 per
//     pass of the output transform (x0 + (x1 + x2) + (x3 + x4)) and the bias.
func winogradBound(x, k, b *optest.ND, pad, T int) *optest.ND {
	W, H, IC := x.Ne[0], x.Ne[1], x.Ne[2]
	OC := k.Ne[3]
	OW, OH := W+2*pad-2, H+2*pad-2
	u := math.Ldexp(1, -24)
	n := float64(IC + 11)
	// |G|, |Bᵀ| and |Aᵀ|: the transforms with their entries' magnitudes.
	G := [][]float64{{1, 0, 0}, {.5, .5, .5}, {.5, .5, .5}, {0, 0, 1}}
	Bt := [][]float64{{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}}
	At := [][]float64{{1, 1, 1, 0}, {0, 1, 1, 1}}
	if T == 4 {
		n = float64(IC + 12)
		G = [][]float64{{1. / 4, 0, 0}, {1. / 6, 1. / 6, 1. / 6}, {1. / 6, 1. / 6, 1. / 6},
			{1. / 24, 1. / 12, 1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {0, 0, 1}}
		Bt = [][]float64{{4, 0, 5, 0, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 4, 0, 5, 0, 1}}
		At = [][]float64{{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}}
	}
	A := T + 2 // the input block's side
	gamma := n * u / (1 - n*u)
	at := func(ic, iy, ix int) float64 {
		if iy < 0 || iy >= H || ix < 0 || ix >= W {
			return 0
		}
		return math.Abs(x.At(ix, iy, ic, 0))
	}
	// U = |G||g||G|ᵀ per (oc, ic).
	U := make([][]float64, OC*IC)
	for oc := 0; oc < OC; oc++ {
		for ic := 0; ic < IC; ic++ {
			U[oc*IC+ic] = make([]float64, A*A)
			for r := 0; r < A; r++ {
				for c := 0; c < A; c++ {
					s := 0.0
					for i := 0; i < 3; i++ {
						for j := 0; j < 3; j++ {
							s += G[r][i] * math.Abs(k.At(j, i, ic, oc)) * G[c][j]
						}
					}
					U[oc*IC+ic][r*A+c] = s
				}
			}
		}
	}
	out := optest.NewND(OW, OH, OC)
	for ty := 0; ty < (OH+T-1)/T; ty++ {
		for tx := 0; tx < (OW+T-1)/T; tx++ {
			V := make([][]float64, IC) // |Bᵀ||d||B|
			for ic := 0; ic < IC; ic++ {
				V[ic] = make([]float64, A*A)
				for r := 0; r < A; r++ {
					for c := 0; c < A; c++ {
						s := 0.0
						for i := 0; i < A; i++ {
							for j := 0; j < A; j++ {
								s += Bt[r][i] * at(ic, T*ty-pad+i, T*tx-pad+j) * Bt[c][j]
							}
						}
						V[ic][r*A+c] = s
					}
				}
			}
			m := make([]float64, A*A)
			for oc := 0; oc < OC; oc++ {
				clear(m)
				for ic := 0; ic < IC; ic++ {
					for q := range m {
						m[q] += U[oc*IC+ic][q] * V[ic][q]
					}
				}
				for r := 0; r < T; r++ {
					for c := 0; c < T; c++ {
						oy, ox := T*ty+r, T*tx+c
						if oy >= OH || ox >= OW {
							continue
						}
						s := 0.0
						for i := 0; i < A; i++ {
							for j := 0; j < A; j++ {
								s += At[r][i] * m[i*A+j] * At[c][j]
							}
						}
						out.Set(gamma*(s+math.Abs(b.V[oc])), ox, oy, oc, 0)
					}
				}
			}
		}
	}
	return out
}

// TestWinograd checks the F(2×2, 3×3) and F(4×4, 3×3) convolutions against
// float64 in every variant: each output within the bound derived from the
// transforms (winogradBound), on images with odd sizes (partial last tile
// rows and columns), tile rows wider than a block of tiles (one panel: 32
// tiles on AVX-512; 300 and 600 columns), padding 0, 1 and 2, the
// 32-channel output of the DPT heads, maps with so few tiles that the
// threads share the output channels instead (18×12 in 4×4 tiles, the
// smallest DPT map, and 21×11 with 40 channels: three tile rows, the last
// thread's partial), a bias and ReLU; and that Conv2D
// routes 3×3 convolutions to it under a policy with Winograd. It logs the
// errors of both algorithms relative to max|ref|.
func TestWinograd(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, s := range []struct{ w, h, ic, oc, pad, tile int }{
			{7, 5, 8, 8, 1, 2}, {45, 9, 16, 32, 1, 2}, {300, 6, 8, 9, 1, 2}, {30, 20, 64, 32, 1, 2}, {21, 11, 24, 40, 0, 2}, {13, 10, 9, 17, 2, 2},
			{7, 5, 8, 8, 1, 4}, {45, 9, 16, 32, 1, 4}, {600, 7, 8, 9, 1, 4}, {30, 21, 64, 32, 1, 4}, {21, 11, 24, 40, 0, 4}, {13, 10, 9, 17, 2, 4}, {18, 12, 32, 64, 1, 4},
		} {
			t.Run(fmt.Sprintf("%s/F%d/%dx%dx%d_oc%d_p%d", v, s.tile, s.w, s.h, s.ic, s.oc, s.pad), func(t *testing.T) {
				h := optest.NewHarness(t, 16)
				kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Variant: v})
				rng := optest.RNG(uint64(s.w*1000 + s.ic))
				k, kr := h.Rand(rng, 3, 3, s.ic, s.oc)
				x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
				b, br := h.Rand(rng, s.oc)
				p := ggml.Conv2DParams{Pad: s.pad}
				ep := kernels.Epilogue{Bias: b, Act: kernels.ActReLU}
				require.True(t, kernels.WinogradFits(k, x, p, ep))
				wino := kernels.Conv2DWinogradTile(h.G, k, x, p, ep, s.tile)
				direct := kernels.Conv2D(h.G, k, x, p, ep)
				out := h.Compute(wino, direct)
				ref := withBias(optest.ConvRef(kr, xr, p), br, 2, relu64)
				bound := winogradBound(xr, kr, br, s.pad, s.tile)
				var worst, refMax, errW, errD float64
				bad := 0
				for i, got := range out[0] {
					d := math.Abs(float64(got) - ref.V[i])
					if d > bound.V[i]+1e-12 {
						if bad < 5 {
							t.Errorf("output %d: got %g want %g, |d| %.3g over the bound %.3g", i, got, ref.V[i], d, bound.V[i])
						}
						bad++
					}
					if bound.V[i] > 0 {
						worst = math.Max(worst, d/bound.V[i])
					}
					refMax = math.Max(refMax, math.Abs(ref.V[i]))
					errW = math.Max(errW, d)
					errD = math.Max(errD, math.Abs(float64(out[1][i])-ref.V[i]))
				}
				assert.Zero(t, bad)
				t.Logf("max|d|/max|ref|: winograd %.2g, direct %.2g; winograd's largest |d|/bound %.3f", errW/refMax, errD/refMax, worst)
			})
		}
	}
	t.Run("one kernel transform per weight", func(t *testing.T) {
		// Convolutions of one weight in one graph (a head's strips) share its transform node;
		// another weight, tile or graph gets its own.
		h := optest.NewHarness(t, 16)
		kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: true})
		rng := optest.RNG(5)
		k, _ := h.Rand(rng, 3, 3, 16, 16)
		k2, _ := h.Rand(rng, 3, 3, 16, 16)
		x, _ := h.Rand(rng, 40, 40, 16, 1)
		p := ggml.Conv2DParams{Pad: 1}
		a := kernels.Conv2DWinogradTile(h.G, k, x, p, kernels.Epilogue{}, 4)
		b := kernels.Conv2DWinogradTile(h.G, k, a, p, kernels.Epilogue{}, 4)
		c := kernels.Conv2DWinogradTile(h.G, k2, x, p, kernels.Epilogue{}, 4)
		d := kernels.Conv2DWinogradTile(h.G, k, x, p, kernels.Epilogue{}, 2)
		assert.Equal(t, "CUSTOM", a.Src(0).Op(), "the transform is a node")
		h.G.Expand(a)
		n := h.G.Nodes()
		assert.Equal(t, 2, n, "the transform and the convolution")
		h.G.Expand(b)
		assert.Equal(t, n+1, h.G.Nodes(), "same weight and tile: the transform is shared")
		h.G.Expand(c)
		assert.Equal(t, n+3, h.G.Nodes(), "another weight: its own transform")
		h.G.Expand(d)
		assert.Equal(t, n+5, h.G.Nodes(), "another tile: its own transform")
	})
	t.Run("tile", func(t *testing.T) {
		// 4×4 tiles where there are enough of them to pay for their kernel transform, without much
		// padding; else 2×2.
		for _, c := range [][3]int{{18, 12, 2}, {36, 24, 4}, {144, 96, 4}, {504, 336, 4}, {5, 5, 2}, {30, 14, 4}, {30, 10, 2}, {33, 33, 4}} { // 30x14: 32 tiles
			assert.Equal(t, c[2], kernels.WinogradTile(c[0], c[1]), "%dx%d", c[0], c[1])
		}
	})
	t.Run("routing", func(t *testing.T) {
		p := ggml.Conv2DParams{Pad: 1}
		for _, on := range []bool{false, true} {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: on})
			rng := optest.RNG(3)
			k, _ := h.Rand(rng, 3, 3, 16, 16)
			x, _ := h.Rand(rng, 20, 20, 16, 1)
			before := kernelcount.WinogradCalls()
			h.Compute(kernels.Conv2D(h.G, k, x, p, kernels.Epilogue{}))
			assert.Equal(t, on, kernelcount.WinogradCalls() > before, "Winograd in the policy: %v", on)
		}
		g := optest.NewHarness(t, 16).G
		k := g.NewTensor(ggml.TypeF32, 3, 3, 16, 16)
		x := g.NewTensor(ggml.TypeF32, 20, 20, 16, 1)
		assert.True(t, kernels.WinogradFits(k, x, p, kernels.Epilogue{}))
		assert.False(t, kernels.WinogradFits(k, x, ggml.Conv2DParams{Pad: 1, Stride: 2}, kernels.Epilogue{}), "stride 2")
		assert.False(t, kernels.WinogradFits(k, x, ggml.Conv2DParams{Pad: 1, Dilation: 2}, kernels.Epilogue{}), "dilation 2")
		assert.False(t, kernels.WinogradFits(g.NewTensor(ggml.TypeF32, 3, 3, 3, 16), g.NewTensor(ggml.TypeF32, 20, 20, 3, 1), p, kernels.Epilogue{}), "3 input channels")
		assert.False(t, kernels.WinogradFits(g.NewTensor(ggml.TypeF32, 1, 1, 16, 16), x, ggml.Conv2DParams{}, kernels.Epilogue{}), "1x1")
	})
}

// BenchmarkWinograd compares Conv2DWinogradTile, F(2×2) and F(4×4), with
// the direct Conv2D on the 3×3 convolutions of the DA3-BASE head at 504×336
// (features 128: the fusion blocks at 18×12 … 144×96, output_conv1 at
// 288×192, output_conv2 at full size with 32 channels out); F2i8 is F(2×2)
// in int8 (int8c with ConvsNarrow, where the CPU has AVX512_VNNI).
func BenchmarkWinograd(b *testing.B) {
	for _, s := range [][4]int{{18, 12, 128, 128}, {36, 24, 128, 128}, {72, 48, 128, 128}, {144, 96, 128, 128}, {288, 192, 128, 64}, {504, 336, 64, 32},
		{18, 12, 768, 128}, {36, 24, 384, 128}, {72, 48, 192, 128}, {144, 96, 96, 128}} { // the layerN_rn convs
		W, H, IC, OC := s[0], s[1], s[2], s[3]
		for _, tile := range []int{0, 2, 4, -2} {
			name := map[int]string{0: "direct", 2: "F2", 4: "F4", -2: "F2i8"}[tile]
			b.Run(fmt.Sprintf("%dx%d_ic%d_oc%d/%s", W, H, IC, OC, name), func(b *testing.B) {
				h := optest.NewHarness(b, 16)
				pol, t := kernels.Policy{GEMM: true}, tile
				if t < 0 {
					v := kernels.VariantAVX512
					if !kernels.PrecisionRuns(v, kernels.PrecisionInt8) {
						b.Skip("needs the avx512 kernels and AVX512_VNNI")
					}
					pol = kernels.Policy{GEMM: true, Winograd: true, Variant: v, Precision: kernels.PrecisionInt8Channel, Convs: kernels.ConvsNarrow}
					t = 2
				}
				kernels.SetPolicy(h.G, pol)
				rng := optest.RNG(1)
				k := h.Input(ggml.TypeF32, optest.Randn(rng, 9*IC*OC, 1), 3, 3, IC, OC)
				x := h.Input(ggml.TypeF32, optest.Randn(rng, W*H*IC, 1), W, H, IC, 1)
				p := ggml.Conv2DParams{Pad: 1}
				y := kernels.Conv2D(h.G, k, x, p, kernels.Epilogue{})
				if t > 0 {
					y = kernels.Conv2DWinogradTile(h.G, k, x, p, kernels.Epilogue{}, t)
				}
				h.Bench(b, y, 2*float64(9*IC*OC*W*H)) // direct-convolution flops: the speed-up shows as GFLOP/s
			})
		}
	}
}
