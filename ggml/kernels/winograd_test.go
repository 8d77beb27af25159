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
)

// winogradBound is, for every output of a 3×3 stride-1 convolution of x [W,
// H, IC] with k [3, 3, IC, OC] and padding pad, the error bound of the
// F(2×2, 3×3) algorithm in float32: γ_n·M with u = 2^-24, γ_n = n·u/(1−n·u)
// and M the algorithm run on absolute values (|Aᵀ| (Σ_ic |G||g||G|ᵀ ⊙
// |Bᵀ||d||B|) |A|, plus |bias|). Every output is a sum of such terms,
// each reached through at most n = IC + 11 roundings: 4 in the kernel
// transform (two additions per row, then per column; the halvings are
// exact), 2 in the input transform, the product, IC − 1 additions over the
// input channels, 3 in the output transform and the bias (the standard
// bound for sums, Higham, Accuracy and Stability, §3.1).
func winogradBound(x, k, b *optest.ND, pad int) *optest.ND {
	W, H, IC := x.Ne[0], x.Ne[1], x.Ne[2]
	OC := k.Ne[3]
	OW, OH := W+2*pad-2, H+2*pad-2
	u := math.Ldexp(1, -24)
	n := float64(IC + 11)
	gamma := n * u / (1 - n*u)
	at := func(ic, iy, ix int) float64 {
		if iy < 0 || iy >= H || ix < 0 || ix >= W {
			return 0
		}
		return math.Abs(x.At(ix, iy, ic, 0))
	}
	// |G| and |Bᵀ|: the transforms with their entries' magnitudes.
	G := [4][3]float64{{1, 0, 0}, {.5, .5, .5}, {.5, .5, .5}, {0, 0, 1}}
	Bt := [4][4]float64{{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}}
	At := [2][4]float64{{1, 1, 1, 0}, {0, 1, 1, 1}}
	// U = |G||g||G|ᵀ per (oc, ic).
	U := make([][16]float64, OC*IC)
	for oc := 0; oc < OC; oc++ {
		for ic := 0; ic < IC; ic++ {
			for r := 0; r < 4; r++ {
				for c := 0; c < 4; c++ {
					s := 0.0
					for i := 0; i < 3; i++ {
						for j := 0; j < 3; j++ {
							s += G[r][i] * math.Abs(k.At(j, i, ic, oc)) * G[c][j]
						}
					}
					U[oc*IC+ic][r*4+c] = s
				}
			}
		}
	}
	out := optest.NewND(OW, OH, OC)
	for ty := 0; ty < (OH+1)/2; ty++ {
		for tx := 0; tx < (OW+1)/2; tx++ {
			V := make([][16]float64, IC) // |Bᵀ||d||B|
			for ic := 0; ic < IC; ic++ {
				for r := 0; r < 4; r++ {
					for c := 0; c < 4; c++ {
						s := 0.0
						for i := 0; i < 4; i++ {
							for j := 0; j < 4; j++ {
								s += Bt[r][i] * at(ic, 2*ty-pad+i, 2*tx-pad+j) * Bt[c][j]
							}
						}
						V[ic][r*4+c] = s
					}
				}
			}
			for oc := 0; oc < OC; oc++ {
				var m [16]float64
				for ic := 0; ic < IC; ic++ {
					for q := range m {
						m[q] += U[oc*IC+ic][q] * V[ic][q]
					}
				}
				for r := 0; r < 2; r++ {
					for c := 0; c < 2; c++ {
						oy, ox := 2*ty+r, 2*tx+c
						if oy >= OH || ox >= OW {
							continue
						}
						s := 0.0
						for i := 0; i < 4; i++ {
							for j := 0; j < 4; j++ {
								s += At[r][i] * m[i*4+j] * At[c][j]
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

// TestWinograd checks the F(2×2, 3×3) convolution against float64 in every
// variant: each output within the bound derived from the transforms
// (winogradBound), on images with odd sizes (a partial last tile row and
// column), tile rows wider than a block of tiles, padding 0, 1 and 2, the
// 32-channel output of the DPT heads, a bias and ReLU; and that Conv2D
// routes 3×3 convolutions to it under a policy with Winograd. It logs the
// errors of both algorithms relative to max|ref|.
func TestWinograd(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("kernels off (DA3_KERNELS=off)")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, s := range []struct{ w, h, ic, oc, pad int }{
			{7, 5, 8, 8, 1}, {45, 9, 16, 32, 1}, {300, 6, 8, 9, 1}, {30, 20, 64, 32, 1}, {21, 11, 24, 40, 0}, {13, 10, 9, 17, 2},
		} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d_oc%d_p%d", v, s.w, s.h, s.ic, s.oc, s.pad), func(t *testing.T) {
				h := optest.NewHarness(t, 16)
				kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Variant: v})
				rng := optest.RNG(uint64(s.w*1000 + s.ic))
				k, kr := h.Rand(rng, 3, 3, s.ic, s.oc)
				x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
				b, br := h.Rand(rng, s.oc)
				p := ggml.Conv2DParams{Pad: s.pad}
				ep := kernels.Epilogue{Bias: b, Act: kernels.ActReLU}
				require.True(t, kernels.WinogradFits(k, x, p, ep))
				wino := kernels.Conv2DWinograd(h.G, k, x, p, ep)
				direct := kernels.Conv2D(h.G, k, x, p, ep)
				out := h.Compute(wino, direct)
				ref := withBias(optest.ConvRef(kr, xr, p), br, 2, relu64)
				bound := winogradBound(xr, kr, br, s.pad)
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
	t.Run("routing", func(t *testing.T) {
		p := ggml.Conv2DParams{Pad: 1}
		for _, on := range []bool{false, true} {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: on})
			rng := optest.RNG(3)
			k, _ := h.Rand(rng, 3, 3, 16, 16)
			x, _ := h.Rand(rng, 20, 20, 16, 1)
			before := kernels.WinogradCalls()
			h.Compute(kernels.Conv2D(h.G, k, x, p, kernels.Epilogue{}))
			assert.Equal(t, on, kernels.WinogradCalls() > before, "Winograd in the policy: %v", on)
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

// BenchmarkWinograd compares Conv2DWinograd with the direct Conv2D on the
// 3×3 convolutions of the DA3-BASE head at 504×336 (features 128: the
// fusion blocks at 144×96, output_conv1 at 288×192, output_conv2 at full
// size with 32 channels out).
func BenchmarkWinograd(b *testing.B) {
	for _, s := range [][4]int{{144, 96, 128, 128}, {72, 48, 128, 128}, {288, 192, 128, 64}, {504, 336, 64, 32}} {
		W, H, IC, OC := s[0], s[1], s[2], s[3]
		for _, wino := range []bool{false, true} {
			name := map[bool]string{false: "direct", true: "winograd"}[wino]
			b.Run(fmt.Sprintf("%dx%d_ic%d_oc%d/%s", W, H, IC, OC, name), func(b *testing.B) {
				h := optest.NewHarness(b, 16)
				kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Winograd: wino})
				rng := optest.RNG(1)
				k := h.Input(ggml.TypeF32, optest.Randn(rng, 9*IC*OC, 1), 3, 3, IC, OC)
				x := h.Input(ggml.TypeF32, optest.Randn(rng, W*H*IC, 1), W, H, IC, 1)
				y := kernels.Conv2D(h.G, k, x, ggml.Conv2DParams{Pad: 1}, kernels.Epilogue{})
				h.Bench(b, y, 2*float64(9*IC*OC*W*H)) // direct-convolution flops: the speed-up shows as GFLOP/s
			})
		}
	}
}
