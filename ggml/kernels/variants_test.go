package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// variants are the instruction-set variants of the kernels, best first.
var variants = []kernels.Variant{kernels.VariantAVX512, kernels.VariantAVX2, kernels.VariantPortable}

// runVariants runs the cases once per kernel variant this CPU runs (each
// graph built under a policy naming it), and checks that exactly that
// variant's kernels ran: the per-variant call counts of the dispatcher grow
// for it and for no other.
func runVariants(t *testing.T, cases []optest.Case) {
	t.Helper()
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	ran := 0
	for _, v := range variants {
		if !v.Runs() {
			t.Logf("variant %s: not runnable on this CPU (features %v)", v, kernels.CPUFeatures())
			continue
		}
		ran++
		t.Run(v.String(), func(t *testing.T) {
			before := callCounts()
			optest.RunCases(t, withPolicy(cases, kernels.Policy{GEMM: true, Attention: true, Variant: v}))
			after := callCounts()
			for _, o := range variants {
				if o == v {
					assert.Greater(t, after[o], before[o], "the %s kernels ran", v)
				} else {
					assert.Equal(t, before[o], after[o], "no %s kernel ran in a %s graph", o, v)
				}
			}
		})
	}
	require.Positive(t, ran, "the portable variant runs everywhere")
}

// callCounts is kernels.Calls per variant, all precisions together.
func callCounts() map[kernels.Variant]uint64 {
	m := map[kernels.Variant]uint64{}
	for _, v := range variants {
		for _, p := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8} {
			m[v] += kernelcount.Calls(v, p)
		}
	}
	return m
}

// withPolicy returns the cases with their graphs built under policy p.
func withPolicy(cases []optest.Case, p kernels.Policy) []optest.Case {
	out := make([]optest.Case, len(cases))
	for i, c := range cases {
		build := c.Build
		c.Build = func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			kernels.SetPolicy(h.G, p)
			return build(h, rng)
		}
		out[i] = c
	}
	return out
}

// TestVariantsRun checks the variant bookkeeping: the best variant runs;
// the portable one runs everywhere; a variant this CPU lacks makes Check
// fail and Mask turn the kernels off; names round-trip.
func TestVariantsRun(t *testing.T) {
	assert.True(t, kernels.VariantPortable.Runs())
	best := kernels.BestVariant()
	assert.True(t, best.Runs())
	feats := strings.Join(kernels.CPUFeatures(), " ")
	switch {
	case strings.Contains(feats, "avx512"):
		assert.Equal(t, kernels.VariantAVX512, best)
	case strings.Contains(feats, "avx2"):
		assert.Equal(t, kernels.VariantAVX2, best)
	default:
		assert.Equal(t, kernels.VariantPortable, best)
	}
	for _, v := range append(variants, kernels.VariantAuto, kernels.VariantOff) {
		got, err := kernels.ParseVariant(strings.ToUpper(v.String()))
		require.NoError(t, err)
		assert.Equal(t, v, got)
		if !v.Runs() {
			p := kernels.Policy{GEMM: true, Attention: true, Variant: v}
			assert.Error(t, p.Check())
			assert.False(t, p.Mask().GEMM)
		}
	}
	_, err := kernels.ParseVariant("sse9")
	assert.Error(t, err)
	off := kernels.Policy{GEMM: true, Attention: true, Variant: kernels.VariantOff}.Mask()
	assert.False(t, off.GEMM || off.Attention, "VariantOff turns the kernels off")
	assert.Equal(t, "off (ggml's ops)", kernels.Describe(off))
}

// TestSetDefaultVariant: each variant becomes the process's (in a child
// process, as a program sets it at start-up), a variant this CPU lacks is
// refused and the best stays, and "off" turns the kernels off.
func TestSetDefaultVariant(t *testing.T) {
	if name, ok := os.LookupEnv("DA3_VARIANT_CHILD"); ok {
		v, err := kernels.ParseVariant(name)
		if err == nil {
			err = kernels.SetDefaultVariant(v)
		}
		p := kernels.Default(true)
		fmt.Printf("variant=%s gemm=%v err=%v\n", kernels.DefaultVariant(), p.GEMM, err)
		return
	}
	best := kernels.BestVariant()
	for _, tc := range []struct {
		name, want string
		gemm, err  bool
	}{
		{"auto", best.String(), true, false},
		{"portable", "portable", true, false},
		{"avx2", map[bool]string{true: "avx2", false: best.String()}[kernels.VariantAVX2.Runs()], true, !kernels.VariantAVX2.Runs()},
		{"AVX512", map[bool]string{true: "avx512", false: best.String()}[kernels.VariantAVX512.Runs()], true, !kernels.VariantAVX512.Runs()},
		{"off", "off", false, false},
		{"fastest", best.String(), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSetDefaultVariant$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DA3_VARIANT_CHILD="+tc.name)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			line := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "variant=") {
					line = l
				}
			}
			require.NotEmpty(t, line, "%s", out)
			assert.Contains(t, line, "variant="+tc.want+" ")
			assert.Contains(t, line, fmt.Sprintf("gemm=%v ", tc.gemm))
			assert.Equal(t, tc.err, !strings.HasSuffix(line, "err=<nil>"), line)
		})
	}
	t.Run("the default is the best", func(t *testing.T) {
		assert.Equal(t, best, kernels.DefaultVariant(), "no program chose one here")
	})
}

// absND is |a|.
func absND(a *optest.ND) *optest.ND { return a.Map(math.Abs) }

// checkBound asserts |got − want| ≤ (c + 1e-5)·mag + 1e-6 element-wise, where
// mag is Σ|a·b| of each output (so c·mag is the derived bound of the
// reduced precision and 1e-5·mag covers float32 sums), and that the largest
// |got − want|/mag exceeds c/256: the reduced precision was applied.
func checkBound(t *testing.T, got []float32, want, mag *optest.ND, c float64) {
	t.Helper()
	require.Len(t, got, len(want.V))
	worst := 0.0
	bad := 0
	for i, g := range got {
		d := math.Abs(float64(g) - want.V[i])
		if d > (c+1e-5)*mag.V[i]+1e-6 {
			if bad < 5 {
				t.Errorf("element %d: got %g want %g (|d| %.3g > bound %.3g)", i, g, want.V[i], d, (c+1e-5)*mag.V[i])
			}
			bad++
		}
		if mag.V[i] > 0 {
			worst = math.Max(worst, d/mag.V[i])
		}
	}
	assert.Zero(t, bad, "elements over the bound")
	assert.Greater(t, worst, c/256, "the error is at the float32 level: the reduced precision did not run")
	t.Logf("max |d|/Σ|ab| = %.3g (bound %.3g)", worst, c)
}

// bf16Bound: bfloat16 has an 8-bit significand, unit roundoff u = 2^-8 (round to
// nearest), so a product of two rounded values is within 2u + u² ≈ 2^-7 of
// the exact one, relative to its magnitude.
const bf16Bound = 0x1p-7 + 0x1p-16

// TestGEMMBF16 checks GEMM and Conv2D (with ConvsNarrow) in bf16 precision
// against float64: every output within 2^-7·Σ|a·b| (both operands rounded
// to bf16, exact products, float32 sums), on the tile and block edges of
// TestGEMM; that without ConvsNarrow the convolutions stay float32 under a
// bf16 policy; and that ConvsStrided narrows the strided ones only.
func TestGEMMBF16(t *testing.T) {
	if !kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionBF16) {
		t.Skipf("bf16 needs AVX-512 with AVX512_BF16 (CPU features: %v)", kernels.CPUFeatures())
	}
	p := kernels.Policy{GEMM: true, Variant: kernels.VariantAVX512, Precision: kernels.PrecisionBF16}
	before := kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16)
	for _, s := range [][3]int{{1, 1, 1}, {7, 3, 5}, {300, 33, 15}, {520, 40, 300}, {700, 70, 29}} {
		K, N, M := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("gemm_K%d_N%d_M%d", K, N, M), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, p)
			rng := optest.RNG(uint64(K))
			w, wr := h.Rand(rng, K, N)
			x, xr := h.Rand(rng, K, M)
			b, br := h.Rand(rng, N)
			y := kernels.GEMM(h.G, w, x, kernels.Epilogue{Bias: b})
			got := h.Compute(y)[0]
			checkBound(t, got, withBias(optest.MulMatRef(wr, xr), br, 0, func(x float64) float64 { return x }),
				optest.MulMatRef(absND(wr), absND(xr)), bf16Bound)
		})
	}
	for _, s := range []struct {
		k, w, h, ic, oc int
		p               ggml.Conv2DParams
	}{
		{3, 70, 9, 4, 32, ggml.Conv2DParams{Pad: 1}},
		{3, 37, 21, 30, 9, ggml.Conv2DParams{Stride: 2, Pad: 1}},
		{1, 40, 6, 8, 9, ggml.Conv2DParams{}},
	} {
		t.Run(fmt.Sprintf("conv_k%d_%dx%dx%d_oc%d_s%d", s.k, s.w, s.h, s.ic, s.oc, s.p.Stride), func(t *testing.T) {
			narrow := p
			narrow.Convs = kernels.ConvsNarrow
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, narrow)
			rng := optest.RNG(uint64(s.w))
			k, kr := h.Rand(rng, s.k, s.k, s.ic, s.oc)
			x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
			got := h.Compute(kernels.Conv2D(h.G, k, x, s.p, kernels.Epilogue{}))[0]
			checkBound(t, got, optest.ConvRef(kr, xr, s.p), optest.ConvRef(absND(kr), absND(xr), s.p), bf16Bound)
		})
		for _, convs := range []kernels.Convs{kernels.ConvsAuto, kernels.ConvsStrided} {
			t.Run(fmt.Sprintf("conv_k%d_%dx%dx%d_oc%d_s%d_%s", s.k, s.w, s.h, s.ic, s.oc, s.p.Stride, convs), func(t *testing.T) {
				pol := p // bf16, convolutions not narrowed, or the strided ones only
				pol.Convs = convs
				h := optest.NewHarness(t, 16)
				kernels.SetPolicy(h.G, pol)
				rng := optest.RNG(uint64(s.w))
				k, kr := h.Rand(rng, s.k, s.k, s.ic, s.oc)
				x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
				calls := kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16)
				got := h.Compute(kernels.Conv2D(h.G, k, x, s.p, kernels.Epilogue{}))[0]
				want, mag := optest.ConvRef(kr, xr, s.p), optest.ConvRef(absND(kr), absND(xr), s.p)
				if convs == kernels.ConvsStrided && s.p.Stride > 1 {
					assert.Greater(t, kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16), calls, "the bf16 kernel ran")
					checkBound(t, got, want, mag, bf16Bound)
					return
				}
				assert.Equal(t, calls, kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16), "no bf16 kernel ran")
				for i := range got {
					assert.InDelta(t, want.V[i], float64(got[i]), 1e-5*mag.V[i]+1e-6, "output %d: float32 accuracy", i)
				}
			})
		}
	}
	assert.Greater(t, kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16), before, "the bf16 kernels ran")
}

// TestGEMMInt8 checks GEMM in int8 precision with q8_0 weights against
// float64 with the dequantized weights: quantizing a block of 32 activations
// to max|x|/127 steps moves each by at most half a step, so every output is
// within Σ_blocks max|x_blk|/254·Σ_blk|w| (plus float32 sums) of the
// reference; activations with outliers make the steps uneven.
func TestGEMMInt8(t *testing.T) {
	if !kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionInt8) {
		t.Skipf("int8 needs AVX-512 with AVX512_VNNI (CPU features: %v)", kernels.CPUFeatures())
	}
	p := kernels.Policy{GEMM: true, Variant: kernels.VariantAVX512, Precision: kernels.PrecisionInt8}
	before := kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionInt8)
	for _, s := range [][3]int{{32, 1, 1}, {64, 45, 37}, {288, 130, 200}, {768, 100, 45}, {512, 1100, 3}} {
		K, N, M := s[0], s[1], s[2]
		for _, act := range []kernels.Act{kernels.ActNone, kernels.ActGELU} {
			t.Run(fmt.Sprintf("K%d_N%d_M%d_act%d", K, N, M, act), func(t *testing.T) {
				h := optest.NewHarness(t, 16)
				kernels.SetPolicy(h.G, p)
				rng := optest.RNG(uint64(K + N))
				wd := optest.Randn(rng, K*N, 1)
				q, err := ggml.QuantizeChunk(ggml.TypeQ8_0, wd, N, K, nil)
				require.NoError(t, err)
				deq, err := ggml.ToFloat32(ggml.TypeQ8_0, q, K*N)
				require.NoError(t, err)
				w := h.Input(ggml.TypeQ8_0, wd, K, N)
				xd := optest.Randn(rng, K*M, 1)
				for i := 0; i < len(xd); i += 7 {
					xd[i] *= 9
				}
				x := h.Input(ggml.TypeF32, xd, K, M)
				got := h.Compute(kernels.GEMM(h.G, w, x, kernels.Epilogue{Act: act}))[0]
				want, bound := int8Ref(deq, xd, K, N, M, act)
				// GELU's slope is at most 1.13, so it stretches the bound by that much.
				checkBound(t, got, want, bound, map[kernels.Act]float64{kernels.ActNone: 1, kernels.ActGELU: 1.13}[act])
			})
		}
	}
	assert.Greater(t, kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionInt8), before, "the int8 kernels ran")
}

// int8Ref is act(w·x) in float64 for w [K, N] and x [K, M], and per output
// the bound Σ_blocks max|x_blk|/254·Σ_blk|w| of TestGEMMInt8 (as a
// magnitude for checkBound with c = 1).
func int8Ref(w, x []float32, K, N, M int, act kernels.Act) (*optest.ND, *optest.ND) {
	want, bound := optest.NewND(N, M), optest.NewND(N, M)
	f := map[kernels.Act]func(float64) float64{kernels.ActNone: func(x float64) float64 { return x }, kernels.ActGELU: gelu64}[act]
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			s, b := 0.0, 0.0
			for k0 := 0; k0 < K; k0 += 32 {
				amax, wabs := 0.0, 0.0
				for k := k0; k < k0+32; k++ {
					s += float64(w[n*K+k]) * float64(x[m*K+k])
					amax = math.Max(amax, math.Abs(float64(x[m*K+k])))
					wabs += math.Abs(float64(w[n*K+k]))
				}
				b += amax / 254 * wabs
			}
			want.Set(f(s), n, m, 0, 0)
			bound.Set(b, n, m, 0, 0)
		}
	}
	return want, bound
}

// TestPrecisionCheck checks that a precision the CPU lacks is an error, not
// a silent fallback, and that f32 always passes.
func TestPrecisionCheck(t *testing.T) {
	for _, prec := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8, kernels.PrecisionInt8Channel} {
		got, err := kernels.ParsePrecision(prec.String())
		require.NoError(t, err)
		assert.Equal(t, prec, got)
		for _, v := range variants {
			if !v.Runs() {
				continue
			}
			err := kernels.Policy{GEMM: true, Variant: v, Precision: prec}.Check()
			if kernels.PrecisionRuns(v, prec) {
				assert.NoError(t, err, "%s %s", v, prec)
			} else {
				assert.ErrorIs(t, err, kernels.ErrPrecision, "%s %s", v, prec)
			}
		}
	}
	assert.False(t, kernels.PrecisionRuns(kernels.VariantAVX2, kernels.PrecisionBF16), "bf16 products are AVX-512 only")
	assert.False(t, kernels.PrecisionRuns(kernels.VariantPortable, kernels.PrecisionInt8))
	_, err := kernels.ParsePrecision("fp8")
	assert.Error(t, err)
}

// TestAttentionBF16 checks Attention in bf16 precision against float64:
// with q, k, v rounded to bf16 the scores are within 2^-7·Σ|q·k| of
// exact; through the softmax, a score error e scales the probabilities by
// at most exp(±2e·scale), so each output stays within (exp(2·e_max) − 1 +
// 2^-7)·Σ_j p_j·|v_j| of the reference (the probabilities and v rounded
// too), with e_max the largest scaled score bound of the query.
func TestAttentionBF16(t *testing.T) {
	if !kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionBF16) {
		t.Skipf("bf16 needs AVX-512 with AVX512_BF16 (CPU features: %v)", kernels.CPUFeatures())
	}
	before := kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16)
	for _, s := range []struct{ hd, H, n, nk int }{{64, 2, 33, 33}, {20, 2, 7, 300}, {64, 1, 70, 129}} {
		t.Run(fmt.Sprintf("hd%d_H%d_n%d_nk%d", s.hd, s.H, s.n, s.nk), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, kernels.Policy{Attention: true, Variant: kernels.VariantAVX512, Precision: kernels.PrecisionBF16})
			rng := optest.RNG(uint64(s.nk))
			q, qr := h.Rand(rng, s.hd, s.H, s.n, 1)
			k, kr := h.Rand(rng, s.hd, s.H, s.nk, 1)
			v, vr := h.Rand(rng, s.hd, s.H, s.nk, 1)
			scale := 1 / math.Sqrt(float64(s.hd))
			got := h.Compute(kernels.Attention(h.G, q, k, v, float32(scale)))[0]
			bad, worst := 0, 0.0
			for hh := 0; hh < s.H; hh++ {
				for i := 0; i < s.n; i++ {
					sc := make([]float64, s.nk)
					emax, mx := 0.0, math.Inf(-1)
					for j := range sc {
						dot, mag := 0.0, 0.0
						for d := 0; d < s.hd; d++ {
							dot += qr.At(d, hh, i, 0) * kr.At(d, hh, j, 0)
							mag += math.Abs(qr.At(d, hh, i, 0) * kr.At(d, hh, j, 0))
						}
						sc[j] = dot * scale
						emax = math.Max(emax, bf16Bound*mag*scale)
						mx = math.Max(mx, sc[j])
					}
					sum := 0.0
					for j := range sc {
						sc[j] = math.Exp(sc[j] - mx)
						sum += sc[j]
					}
					for d := 0; d < s.hd; d++ {
						want, mag := 0.0, 0.0
						for j := range sc {
							want += sc[j] / sum * vr.At(d, hh, j, 0)
							mag += sc[j] / sum * math.Abs(vr.At(d, hh, j, 0))
						}
						bound := (math.Expm1(2*emax)+2*bf16Bound)*mag + 1e-6
						diff := math.Abs(float64(got[(i*s.H+hh)*s.hd+d]) - want)
						worst = math.Max(worst, diff/bound)
						if diff > bound {
							bad++
						}
					}
				}
			}
			assert.Zero(t, bad, "outputs over the bound")
			t.Logf("largest |d|/bound %.3f", worst)
			assert.Greater(t, worst, 1e-3, "the error is at the float32 level: bf16 did not run")
		})
	}
	assert.Greater(t, kernelcount.Calls(kernels.VariantAVX512, kernels.PrecisionBF16), before)
}
