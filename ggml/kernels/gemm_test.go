package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestGEMM checks GEMM against a float64 reference on shapes that cover
// every edge of its blocking: tails of the 14-row and 32-column register
// tiles, depths across the 256-deep packed blocks, columns across the
// 1024-wide blocks, both ways of splitting the work over threads, and a
// batched (3-D) second operand.
func TestGEMM(t *testing.T) { runVariants(t, gemmCases()) }

func gemmCases() []optest.Case {
	var cases []optest.Case
	for _, s := range [][4]int{ // K, N, M, batch
		{1, 1, 1, 1}, {7, 3, 5, 1}, {32, 32, 14, 1}, {300, 33, 15, 1}, {256, 64, 100, 1},
		{700, 2100, 29, 1}, {520, 40, 300, 1}, {64, 96, 5, 3}, {513, 17, 43, 2},
	} {
		K, N, M, B := s[0], s[1], s[2], s[3]
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("K%d_N%d_M%d_B%d", K, N, M, B),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				w, wr := h.Rand(rng, K, N)
				x, xr := h.Rand(rng, K, M, B)
				return kernels.GEMM(h.G, w, x, kernels.Epilogue{}), optest.MulMatRef(wr, xr)
			},
			Atol: 1e-4, Rtol: 1e-5,
		})
	}
	// Batched: one product per (ne2, ne3), like attention's per-head products.
	for _, s := range [][5]int{{64, 100, 37, 3, 2}, {300, 40, 50, 2, 1}} {
		K, N, M, B2, B3 := s[0], s[1], s[2], s[3], s[4]
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("batched_K%d_N%d_M%d_%dx%d", K, N, M, B2, B3),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				w, wr := h.Rand(rng, K, N, B2, B3)
				x, xr := h.Rand(rng, K, M, B2, B3)
				return kernels.GEMM(h.G, w, x, kernels.Epilogue{}), optest.MulMatRef(wr, xr)
			},
			Atol: 1e-4, Rtol: 1e-5,
		})
	}
	// Quantized and f16 weights, dequantized while packing: the reference
	// uses the dequantized weights and x unrounded.
	for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0, ggml.TypeQ4_1, ggml.TypeQ4K, ggml.TypeQ6K} {
		K, N, M := 512, 40, 19
		cases = append(cases, optest.Case{
			Name: "weights_" + typ.String(),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				wd := optest.Randn(rng, K*N, 1)
				q, err := ggml.QuantizeChunk(typ, wd, N, K, nil)
				require.NoError(h.T, err)
				deq, err := ggml.ToFloat32(typ, q, K*N)
				require.NoError(h.T, err)
				w := h.Input(typ, wd, K, N)
				x, xr := h.Rand(rng, K, M)
				return kernels.GEMM(h.G, w, x, kernels.Epilogue{}), optest.MulMatRef(optest.NDFrom(deq, K, N), xr)
			},
			Atol: 1e-4, Rtol: 1e-5,
		})
	}
	return cases
}

// TestGEMMFits checks which operands GEMM takes: quantized weights only
// with blocks dividing 256, contiguous operands, a bias of N values; and
// that GEMM panics with a *ggml.ShapeError (before ggml is called) for the
// others.
func TestGEMMFits(t *testing.T) {
	h := optest.NewHarness(t, 32)
	g := h.G
	w := g.NewTensor(ggml.TypeF32, 8, 4)
	x := g.NewTensor(ggml.TypeF32, 8, 3)
	q := g.NewTensor(ggml.TypeQ8_0, 32, 4)
	xq := g.NewTensor(ggml.TypeF32, 32, 3)
	q2 := g.NewTensor(ggml.TypeQ2K, 256, 4)
	xq2 := g.NewTensor(ggml.TypeF32, 256, 3)
	xp := g.NewTensor(ggml.TypeF32, 8, 3, 2).Permute(g, 0, 2, 1, 3)
	b4, b5 := g.NewTensor(ggml.TypeF32, 4), g.NewTensor(ggml.TypeF32, 5)
	avx512 := kernels.Available().GEMM
	assert.Equal(t, avx512, kernels.GEMMFits(w, x, kernels.Epilogue{}))
	assert.Equal(t, avx512, kernels.GEMMFits(w, x, kernels.Epilogue{Bias: b4, Act: kernels.ActGELU}))
	assert.Equal(t, avx512, kernels.GEMMFits(q, xq, kernels.Epilogue{}), "q8_0 weights are dequantized while packing")
	assert.False(t, kernels.GEMMFits(q2, xq2, kernels.Epilogue{}), "q2_K is not among the dequantized types")
	assert.False(t, kernels.GEMMFits(w, xp, kernels.Epilogue{}), "non-contiguous")
	assert.False(t, kernels.GEMMFits(w, x, kernels.Epilogue{Bias: b5}), "bias of the wrong size")
	assert.False(t, kernels.GEMMFits(w, x, kernels.Epilogue{Act: 7}), "unknown activation")
	assert.False(t, kernels.GEMMFits(nil, x, kernels.Epilogue{}))
	for _, bad := range []func(){
		func() { kernels.GEMM(g, q2, xq2, kernels.Epilogue{}) },
		func() { kernels.GEMM(g, w, xp, kernels.Epilogue{}) },
		func() { kernels.GEMM(g, w, x, kernels.Epilogue{Bias: b5}) },
		func() { kernels.GEMM(g, w, nil, kernels.Epilogue{}) },
	} {
		n := g.Tensors()
		require.PanicsWithError(t, panicMessage(t, bad), bad)
		assert.Equal(t, n, g.Tensors(), "no node is created")
	}
}

// panicMessage returns the error message fn panics with, failing unless it
// is a *ggml.ShapeError.
func panicMessage(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		se, ok := r.(*ggml.ShapeError)
		require.True(t, ok, "want a *ggml.ShapeError panic, got %v", r)
		msg = se.Error()
	}()
	fn()
	return ""
}

// BenchmarkGEMM compares GEMM with ggml_mul_mat on the matrix products of
// a ViT-B block at 504×336 (866 tokens; 3460: four views).
func BenchmarkGEMM(b *testing.B) {
	for _, s := range [][3]int{{768, 2304, 866}, {768, 3072, 866}, {3072, 768, 866}, {768, 3072, 3460}, {3072, 768, 3460}} {
		K, N, M := s[0], s[1], s[2]
		// gemm-bf16: bf16 products; gemm-int8: q8_0 weights in int8 products; packed: the weight packed
		// once (PackWeights, as models load them on the CPU) instead of per call.
		prec := map[string]kernels.Precision{"gemm-bf16": kernels.PrecisionBF16, "gemm-int8": kernels.PrecisionInt8,
			"packed-f32": kernels.PrecisionF32, "packed-bf16": kernels.PrecisionBF16, "packed-int8": kernels.PrecisionInt8}
		for _, kernel := range []string{"ggml", "gemm", "gemm-bf16", "gemm-int8", "packed-f32", "packed-bf16", "packed-int8"} {
			p, narrow := prec[kernel]
			if kernel != "ggml" && !kernels.Available().GEMM || narrow && !kernels.PrecisionRuns(kernels.DefaultVariant(), p) {
				continue
			}
			b.Run(fmt.Sprintf("%s/K%d_N%d_M%d", kernel, K, N, M), func(b *testing.B) {
				h := optest.NewHarness(b, 16)
				rng := optest.RNG(1)
				typ := ggml.TypeF32
				if p == kernels.PrecisionInt8 {
					typ = ggml.TypeQ8_0
				}
				wd := optest.Randn(rng, K*N, 1)
				w := h.Input(typ, wd, K, N)
				x := h.Input(ggml.TypeF32, optest.Randn(rng, K*M, 1), K, M)
				y := w.MulMat(h.G, x)
				if kernel != "ggml" {
					pol := kernels.Default(true)
					if narrow {
						pol.Precision = p
						kernels.SetPolicy(h.G, pol)
					}
					y = kernels.GEMM(h.G, w, x, kernels.Epilogue{})
					if strings.HasPrefix(kernel, "packed") {
						data := unsafe.Slice((*byte)(unsafe.Pointer(&wd[0])), 4*len(wd))
						if typ == ggml.TypeQ8_0 {
							var err error
							data, err = ggml.QuantizeChunk(typ, wd, N, K, nil)
							require.NoError(b, err)
						}
						set, err := kernels.PackWeights(pol, []*ggml.Tensor{w}, func(*ggml.Tensor) ([]byte, error) { return data, nil }, nil)
						require.NoError(b, err)
						b.Cleanup(func() { set.Close() })
						y = kernels.GEMMPacked(h.G, set.Weights()[w], x, kernels.Epilogue{})
					}
				}
				h.Bench(b, y, 2*float64(K*N*M))
			})
		}
	}
}

// TestConv2D checks Conv2D against a float64 reference: 3×3 padded
// convolutions on rows shorter and longer than the 32-wide panels (the
// masked-load path, with its left and right borders), stride 2 and
// dilation 2 (the element-wise path), 1×1, a depth across packed blocks
// (IC·9 > 256) and two images.
func TestConv2D(t *testing.T) { runVariants(t, conv2DCases()) }

func conv2DCases() []optest.Case {
	var cases []optest.Case
	for _, s := range []struct {
		k, w, h, ic, oc, n int
		p                  ggml.Conv2DParams
	}{
		{3, 7, 5, 2, 3, 1, ggml.Conv2DParams{Pad: 1}},
		{3, 70, 9, 4, 5, 1, ggml.Conv2DParams{Pad: 1}},
		{3, 64, 33, 3, 20, 1, ggml.Conv2DParams{Pad: 1}},
		{3, 45, 17, 40, 16, 2, ggml.Conv2DParams{Pad: 1}},
		{3, 37, 21, 3, 4, 1, ggml.Conv2DParams{Stride: 2, Pad: 1}},
		{3, 50, 20, 3, 4, 1, ggml.Conv2DParams{Pad: 2, Dilation: 2}},
		{1, 40, 6, 8, 9, 1, ggml.Conv2DParams{}},
		{4, 36, 36, 3, 8, 1, ggml.Conv2DParams{Stride: 4}},
		{1, 70, 9, 32, 2, 2, ggml.Conv2DParams{}}, // few outputs, two images
	} {
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("k%d_%dx%dx%d_oc%d_n%d_s%d_p%d_d%d", s.k, s.w, s.h, s.ic, s.oc, s.n, s.p.Stride, s.p.Pad, s.p.Dilation),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				k, kr := h.Rand(rng, s.k, s.k, s.ic, s.oc)
				x, xr := h.Rand(rng, s.w, s.h, s.ic, s.n)
				return kernels.Conv2D(h.G, k, x, s.p, kernels.Epilogue{}), optest.ConvRef(kr, xr, s.p)
			},
			Atol: 1e-4, Rtol: 1e-5,
		})
	}
	return cases
}

// BenchmarkConv2D times Conv2D on the 3×3 convolutions of the DA2
// ViT-S head at 518×518 (the fusion blocks at 296², the output convs).
func BenchmarkConv2D(b *testing.B) {
	if !kernels.Available().GEMM {
		b.Skip("built without AVX-512 (see kernels.Available)")
	}
	for _, s := range [][4]int{{296, 64, 64, 1}, {296, 64, 32, 1}, {518, 32, 32, 1}, {148, 64, 64, 1}, {296, 64, 64, 2}, {37, 384, 384, 2}, {36, 768, 768, 2}} {
		W, IC, OC, stride := s[0], s[1], s[2], s[3]
		b.Run(fmt.Sprintf("%dx%d_ic%d_oc%d_s%d", W, W, IC, OC, stride), func(b *testing.B) {
			h := optest.NewHarness(b, 16)
			rng := optest.RNG(1)
			k := h.Input(ggml.TypeF32, optest.Randn(rng, 9*IC*OC, 1), 3, 3, IC, OC)
			x := h.Input(ggml.TypeF32, optest.Randn(rng, W*W*IC, 1), W, W, IC, 1)
			y := kernels.Conv2D(h.G, k, x, ggml.Conv2DParams{Stride: stride, Pad: 1}, kernels.Epilogue{})
			h.Bench(b, y, 2*float64(9*IC*OC*y.Dim(0)*y.Dim(1)))
		})
	}
}

// TestPointwiseFew checks which convolutions Conv2D streams over the
// channels: 1×1, stride 1, no padding, at most four outputs.
func TestPointwiseFew(t *testing.T) {
	for _, c := range []struct {
		k, oc int
		p     ggml.Conv2DParams
		want  bool
	}{
		{1, 1, ggml.Conv2DParams{}, true},
		{1, 4, ggml.Conv2DParams{}, true},
		{1, 5, ggml.Conv2DParams{}, false},
		{1, 2, ggml.Conv2DParams{Stride: 2}, false},
		{1, 2, ggml.Conv2DParams{Pad: 1}, false},
		{3, 1, ggml.Conv2DParams{Pad: 1}, false},
	} {
		g, err := ggml.NewContext(4)
		require.NoError(t, err)
		w := g.NewTensor(ggml.TypeF32, c.k, c.k, 8, c.oc)
		assert.Equal(t, c.want, kernels.PointwiseFew(w, c.p), "%d×%d kernel, %d outputs, %+v", c.k, c.k, c.oc, c.p)
		g.Close()
	}
}

// BenchmarkPointwise times the last convolution of DA2's head (1×1, 32
// channels to 1, a strip of 124 rows of the 518×518 map) and of DA3's
// (32 to 2, 64 rows of 504): a stream over the channel planes.
func BenchmarkPointwise(b *testing.B) {
	for _, s := range [][4]int{{518, 124, 32, 1}, {504, 64, 32, 2}} {
		W, H, IC, OC := s[0], s[1], s[2], s[3]
		b.Run(fmt.Sprintf("%dx%d_ic%d_oc%d", W, H, IC, OC), func(b *testing.B) {
			h := optest.NewHarness(b, 16)
			rng := optest.RNG(1)
			k := h.Input(ggml.TypeF32, optest.Randn(rng, IC*OC, 1), 1, 1, IC, OC)
			x := h.Input(ggml.TypeF32, optest.Randn(rng, W*H*IC, 1), W, H, IC, 1)
			h.Bench(b, kernels.Conv2D(h.G, k, x, ggml.Conv2DParams{}, kernels.Epilogue{Act: kernels.ActReLU}), 2*float64(W*H*IC*OC))
		})
	}
}

// TestPeak checks that Peak measures something for every variant this CPU
// runs in f32, and nothing for precisions a variant cannot compute.
func TestPeak(t *testing.T) {
	for _, v := range []kernels.Variant{kernels.VariantPortable, kernels.VariantAVX2, kernels.VariantAVX512} {
		for _, p := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8, kernels.PrecisionInt8Channel} {
			got := kernels.Peak(v, p, time.Millisecond)
			if v.Runs() && kernels.PrecisionRuns(v, p) {
				assert.Positive(t, got, "%s %s", v, p)
			} else {
				assert.Zero(t, got, "%s %s cannot run here", v, p)
			}
		}
	}
	assert.Zero(t, kernels.Peak(kernels.VariantOff, kernels.PrecisionF32, time.Millisecond))
}

// BenchmarkPeak reports the peak rate of each variant's products on one
// core (GFLOP/s; int8: GOP/s), to compare BenchmarkGEMM's rates with.
func BenchmarkPeak(b *testing.B) {
	for _, v := range []kernels.Variant{kernels.VariantPortable, kernels.VariantAVX2, kernels.VariantAVX512} {
		for _, p := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8, kernels.PrecisionInt8Channel} {
			if !v.Runs() || !kernels.PrecisionRuns(v, p) {
				continue
			}
			for _, form := range precisionForms(b, v, p) {
				b.Run(fmt.Sprintf("%s/%s%s", v, p, form.sub()), func(b *testing.B) {
					form.set(b)
					var r float64
					for b.Loop() {
						r = kernels.Peak(v, p, 100*time.Millisecond)
					}
					b.ReportMetric(r/1e9, "GFLOP/s")
				})
			}
		}
	}
}
