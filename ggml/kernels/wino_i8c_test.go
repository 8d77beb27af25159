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

// winogradInt8Bound is, for every output of a 3×3 stride-1 convolution of x
// [W, H, IC] with k [3, 3, IC, OC] and padding pad in F(2×2) with both
// operands of the products quantized as int8c does (U_ξ = G g Gᵀ per output
// channel over IC, V_ξ = Bᵀ d B per tile over IC, scale max|·|/127, round to
// nearest), the error quantization can add: each product m_ξ within
// Σ_ic (s_u/2·|V| + s_v/2·|U| + s_u·s_v/4), summed by the output transform
// (|Aᵀ| · |A|).
func winogradInt8Bound(x, k *optest.ND, pad int) *optest.ND {
	W, H, IC := x.Ne[0], x.Ne[1], x.Ne[2]
	OC := k.Ne[3]
	OW, OH := W+2*pad-2, H+2*pad-2
	G := [][]float64{{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}}
	Bt := [][]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	At := [][]float64{{1, 1, 1, 0}, {0, 1, -1, -1}}
	const A = 4
	at := func(ic, iy, ix int) float64 {
		if iy < 0 || iy >= H || ix < 0 || ix >= W {
			return 0
		}
		return x.At(ix, iy, ic, 0)
	}
	U := make([][A * A]float64, OC*IC)
	su := make([][A * A]float64, OC) // per position and output channel
	for oc := range OC {
		for ic := range IC {
			for r := range A {
				for c := range A {
					s := 0.0
					for i := range 3 {
						for j := range 3 {
							s += G[r][i] * k.At(j, i, ic, oc) * G[c][j]
						}
					}
					U[oc*IC+ic][r*A+c] = s
					su[oc][r*A+c] = max(su[oc][r*A+c], math.Abs(s)/127)
				}
			}
		}
	}
	out := optest.NewND(OW, OH, OC)
	for ty := 0; ty < (OH+1)/2; ty++ {
		for tx := 0; tx < (OW+1)/2; tx++ {
			V := make([][A * A]float64, IC)
			var sv [A * A]float64
			for ic := range IC {
				for r := range A {
					for c := range A {
						s := 0.0
						for i := range A {
							for j := range A {
								s += Bt[r][i] * at(ic, 2*ty-pad+i, 2*tx-pad+j) * Bt[c][j]
							}
						}
						V[ic][r*A+c] = s
						sv[r*A+c] = max(sv[r*A+c], math.Abs(s)/127)
					}
				}
			}
			for oc := range OC {
				var m [A * A]float64
				for q := range m {
					for ic := range IC {
						m[q] += su[oc][q]/2*math.Abs(V[ic][q]) + sv[q]/2*math.Abs(U[oc*IC+ic][q]) + su[oc][q]*sv[q]/4
					}
				}
				for r := range 2 {
					for c := range 2 {
						oy, ox := 2*ty+r, 2*tx+c
						if oy >= OH || ox >= OW {
							continue
						}
						s := 0.0
						for i := range A {
							for j := range A {
								s += math.Abs(At[r][i]) * m[i*A+j] * math.Abs(At[c][j])
							}
						}
						out.Set(s, ox, oy, oc, 0)
					}
				}
			}
		}
	}
	return out
}

// TestWinogradInt8Channel checks the int8c Winograd convolution (F(2×2)
// with -narrow-convs under int8c, AVX-512 VNNI) against float64: each
// output within the quantization's bound (winogradInt8Bound) plus
// float32's (winogradBound), on odd sizes, a tile row wider than a panel,
// padding 0–2, channel counts off the 8-row tile and the depth's quads, a
// bias and ReLU; the error must be int8's, not float32's (int8 ran); and
// F(4×4) and the policy without ConvsNarrow stay float32.
func TestWinogradInt8Channel(t *testing.T) {
	v := kernels.VariantAVX512
	if !kernels.PrecisionRuns(v, kernels.PrecisionInt8) {
		t.Skipf("needs the avx512 kernels and AVX512_VNNI (CPU features: %v)", kernels.CPUFeatures())
	}
	pol := kernels.Policy{GEMM: true, Winograd: true, Variant: v, Precision: kernels.PrecisionInt8Channel, Convs: kernels.ConvsNarrow}
	for _, s := range []struct{ w, h, ic, oc, pad int }{
		{7, 5, 8, 8, 1}, {45, 9, 16, 32, 1}, {30, 20, 64, 32, 1}, {21, 11, 24, 40, 0}, {13, 10, 9, 17, 2}, {70, 3, 130, 12, 1},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d_oc%d_p%d", s.w, s.h, s.ic, s.oc, s.pad), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, pol)
			rng := optest.RNG(uint64(s.w*1000 + s.ic))
			k, kr := h.Rand(rng, 3, 3, s.ic, s.oc)
			x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
			b, br := h.Rand(rng, s.oc)
			p := ggml.Conv2DParams{Pad: s.pad}
			ep := kernels.Epilogue{Bias: b, Act: kernels.ActReLU}
			require.True(t, kernels.WinogradFits(k, x, p, ep))
			out := h.Compute(kernels.Conv2DWinogradTile(h.G, k, x, p, ep, 2))[0]
			ref := withBias(optest.ConvRef(kr, xr, p), br, 2, relu64)
			qb, fb := winogradInt8Bound(xr, kr, s.pad), winogradBound(xr, kr, br, s.pad, 2)
			bad, worst, errMax, refMax := 0, 0.0, 0.0, 0.0
			for i, got := range out {
				d := math.Abs(float64(got) - ref.V[i])
				bound := qb.V[i] + fb.V[i] + 1e-12
				if d > bound {
					if bad < 5 {
						t.Errorf("output %d: got %g want %g, |d| %.3g over the bound %.3g", i, got, ref.V[i], d, bound)
					}
					bad++
				}
				worst = max(worst, d/bound)
				errMax = max(errMax, d)
				refMax = max(refMax, math.Abs(ref.V[i]))
			}
			assert.Zero(t, bad)
			assert.Greater(t, errMax/refMax, 1e-4, "an error at float32's level: int8 did not run")
			t.Logf("max|d|/max|ref| %.2g; largest |d|/bound %.3f", errMax/refMax, worst)
		})
	}
	t.Run("routing", func(t *testing.T) {
		// Conv2D takes a 3×3 convolution in int8 (F(2×2), though 40×40 would be F(4×4) in float32)
		// under int8c with ConvsNarrow, in float32 without.
		for _, narrow := range []bool{true, false} {
			h := optest.NewHarness(t, 16)
			pl := pol
			pl.Convs = kernels.ConvsF32
			if narrow {
				pl.Convs = kernels.ConvsNarrow
			}
			kernels.SetPolicy(h.G, pl)
			rng := optest.RNG(9)
			k, kr := h.Rand(rng, 3, 3, 16, 16)
			x, xr := h.Rand(rng, 40, 40, 16, 1)
			p := ggml.Conv2DParams{Pad: 1}
			out := h.Compute(kernels.Conv2D(h.G, k, x, p, kernels.Epilogue{}))[0]
			ref := optest.ConvRef(kr, xr, p)
			errMax, refMax, gr, rr := 0.0, 0.0, 0.0, 0.0
			for i, got := range out {
				errMax = max(errMax, math.Abs(float64(got)-ref.V[i]))
				refMax = max(refMax, math.Abs(ref.V[i]))
				gr += float64(got) * ref.V[i]
				rr += ref.V[i] * ref.V[i]
			}
			assert.Equal(t, narrow, errMax/refMax > 1e-4, "narrow %v: max|d|/max|ref| %.2g", narrow, errMax/refMax)
			// Rounding to nearest is unbiased: the outputs' least-squares slope against the exact ones is
			// 1 (a scale off by 1 % anywhere shows here, inside the per-output bound).
			assert.InDelta(t, 1, gr/rr, 2e-3, "slope of the outputs against the exact convolution")
		}
	})
}
