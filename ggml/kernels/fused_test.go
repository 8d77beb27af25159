package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/testutil"
)

// gelu64 is the exact (erf) GELU in float64.
func gelu64(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func relu64(x float64) float64 { return math.Max(x, 0) }

// withBias adds b[i] along axis (0: columns of a GEMM, 2: channels of a
// convolution) and applies f.
func withBias(y, b *optest.ND, axis int, f func(float64) float64) *optest.ND {
	r := optest.NewND(y.Ne[:]...)
	y.Each(func(i0, i1, i2, i3 int) {
		i := [4]int{i0, i1, i2, i3}[axis]
		r.Set(f(y.At(i0, i1, i2, i3)+b.V[i]), i0, i1, i2, i3)
	})
	return r
}

// TestGEMMEpilogue checks the bias and activations fused into GEMM's
// store, against float64 with the exact erf: on tile edges, across packed
// depth blocks (the epilogue must run once, after the last), with
// quantized weights, and GELU over a range that reaches both tails.
func TestGEMMEpilogue(t *testing.T) { runVariants(t, gemmEpilogueCases(t)) }

func gemmEpilogueCases(t *testing.T) []optest.Case {
	var cases []optest.Case
	for _, s := range []struct {
		K, N, M int
		typ     ggml.Type
		act     kernels.Act
		bias    bool
	}{
		{7, 3, 5, ggml.TypeF32, kernels.ActGELU, true},
		{300, 33, 15, ggml.TypeF32, kernels.ActGELU, true},
		{600, 70, 29, ggml.TypeF32, kernels.ActReLU, true},
		{64, 40, 17, ggml.TypeF32, kernels.ActNone, true},
		{64, 40, 17, ggml.TypeF32, kernels.ActGELU, false},
		{512, 40, 19, ggml.TypeQ8_0, kernels.ActGELU, true},
	} {
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("K%d_N%d_M%d_%s_act%d_bias%v", s.K, s.N, s.M, s.typ, s.act, s.bias),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				wd := optest.Randn(rng, s.K*s.N, 3/math.Sqrt(float64(s.K))) // outputs of a few units: both GELU tails
				wr := optest.NDFrom(wd, s.K, s.N)
				if s.typ != ggml.TypeF32 {
					q, err := ggml.QuantizeChunk(s.typ, wd, s.N, s.K, nil)
					if err != nil {
						t.Fatal(err)
					}
					deq, err := ggml.ToFloat32(s.typ, q, s.K*s.N)
					if err != nil {
						t.Fatal(err)
					}
					wr = optest.NDFrom(deq, s.K, s.N)
				}
				w := h.Input(s.typ, wd, s.K, s.N)
				x, xr := h.Rand(rng, s.K, s.M)
				ep := kernels.Epilogue{Act: s.act}
				br := optest.NewND(s.N)
				if s.bias {
					ep.Bias, br = h.Rand(rng, s.N)
				}
				f := map[kernels.Act]func(float64) float64{kernels.ActNone: func(x float64) float64 { return x }, kernels.ActReLU: relu64, kernels.ActGELU: gelu64}[s.act]
				return kernels.GEMM(h.G, w, x, ep), withBias(optest.MulMatRef(wr, xr), br, 0, f)
			},
			Atol: 2e-5, Rtol: 1e-5,
		})
	}
	return cases
}

// TestConv2DEpilogue checks the per-channel bias and ReLU fused into
// Conv2D, on the three packing paths (1×1 contiguous, masked rows,
// gathers), and the bias and activations of the 1×1 convolutions with few
// outputs (a stream over the channels).
func TestConv2DEpilogue(t *testing.T) { runVariants(t, conv2DEpilogueCases()) }

func conv2DEpilogueCases() []optest.Case {
	var cases []optest.Case
	for _, s := range []struct {
		k, w, h, ic, oc int
		p               ggml.Conv2DParams
		act             kernels.Act
	}{
		{1, 40, 6, 8, 9, ggml.Conv2DParams{}, kernels.ActNone},
		{3, 70, 9, 4, 17, ggml.Conv2DParams{Pad: 1}, kernels.ActReLU},
		{3, 37, 21, 3, 4, ggml.Conv2DParams{Stride: 2, Pad: 1}, kernels.ActReLU},
		{1, 20, 7, 5, 6, ggml.Conv2DParams{Stride: 2}, kernels.ActNone},
		// 1×1 with few outputs (kernels.PointwiseFew): whole 64-pixel blocks and a partial one, every output count
		{1, 130, 1, 32, 1, ggml.Conv2DParams{}, kernels.ActReLU},
		{1, 70, 9, 32, 2, ggml.Conv2DParams{}, kernels.ActReLU},
		{1, 64, 3, 5, 3, ggml.Conv2DParams{}, kernels.ActNone},
		{1, 40, 7, 9, 4, ggml.Conv2DParams{}, kernels.ActGELU},
	} {
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("k%d_%dx%dx%d_oc%d_s%d_p%d_act%d", s.k, s.w, s.h, s.ic, s.oc, s.p.Stride, s.p.Pad, s.act),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				k, kr := h.Rand(rng, s.k, s.k, s.ic, s.oc)
				x, xr := h.Rand(rng, s.w, s.h, s.ic, 1)
				b, br := h.Rand(rng, s.oc)
				f := map[kernels.Act]func(float64) float64{kernels.ActNone: func(x float64) float64 { return x }, kernels.ActReLU: relu64, kernels.ActGELU: gelu64}[s.act]
				return kernels.Conv2D(h.G, k, x, s.p, kernels.Epilogue{Bias: b, Act: s.act}), withBias(optest.ConvRef(kr, xr, s.p), br, 2, f)
			},
			Atol: 1e-4, Rtol: 1e-5,
		})
	}
	return cases
}

// TestAttention checks Attention against float64: q, k, v as strided
// views of one fused qkv projection [3·hd·H, n, B] (the layout the ViT
// feeds it), query and key counts off the 32- and 14-wide blocks, head
// sizes off the 14-row tile, several heads and batches, keys fewer and
// more than the queries, and scores large enough that the softmax is
// peaked.
func TestAttention(t *testing.T) { runVariants(t, attentionCases()) }

func attentionCases() []optest.Case {
	var cases []optest.Case
	for _, s := range []struct{ hd, H, n, nk, B int }{
		{64, 2, 33, 33, 1}, {64, 3, 100, 100, 2}, {20, 2, 7, 300, 1}, {16, 1, 70, 5, 1}, {64, 1, 5, 1, 1},
	} {
		cases = append(cases, optest.Case{
			Name: fmt.Sprintf("hd%d_H%d_n%d_nk%d_B%d", s.hd, s.H, s.n, s.nk, s.B),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				C := s.hd * s.H
				view := func(t *ggml.Tensor, off, n int) *ggml.Tensor {
					return t.View(h.G, off*4, []int{s.hd, s.H, n, s.B}, []int{s.hd * 4, t.Stride(1), t.Stride(2)})
				}
				// q from its own [C, n, B] rows, k and v from one [2C, nk, B] tensor.
				qd := optest.Randn(rng, C*s.n*s.B, 2)
				kvd := optest.Randn(rng, 2*C*s.nk*s.B, 2)
				qt := h.Input(ggml.TypeF32, qd, C, s.n, s.B)
				kvt := h.Input(ggml.TypeF32, kvd, 2*C, s.nk, s.B)
				q, k, v := view(qt, 0, s.n), view(kvt, 0, s.nk), view(kvt, C, s.nk)
				kv := optest.NDFrom(kvd, 2*C, s.nk, s.B)
				qr, kr, vr := optest.NDFrom(qd, s.hd, s.H, s.n, s.B), optest.NewND(s.hd, s.H, s.nk, s.B), optest.NewND(s.hd, s.H, s.nk, s.B)
				kr.Each(func(d, hh, j, b int) {
					kr.Set(kv.At(hh*s.hd+d, j, b, 0), d, hh, j, b)
					vr.Set(kv.At(C+hh*s.hd+d, j, b, 0), d, hh, j, b)
				})
				scale := 1 / math.Sqrt(float64(s.hd))
				p := func(x *optest.ND) *optest.ND { return x.Permute(0, 2, 1, 3) } // to attnRef's [hd, n, H, B]
				return kernels.Attention(h.G, q, k, v, float32(scale)), optest.AttnRef(p(qr), p(kr), p(vr), nil, scale)
			},
			Atol: 1e-5, Rtol: 1e-5,
		})
	}
	return cases
}

// TestBilinear checks the bilinear kernel against ggml's own interpolate
// (computed in the same graph) for upsampling and downsampling, with and
// without align_corners, several channels and two images.
func TestBilinear(t *testing.T) {
	for _, s := range []struct {
		w, h, c, n, ow, oh int
		align              bool
	}{
		{37, 37, 3, 1, 74, 74, true},
		{36, 24, 4, 2, 504, 336, true},
		{296, 296, 2, 1, 518, 518, true},
		{20, 9, 3, 1, 7, 13, false},
		{1, 5, 2, 1, 6, 1, true},
	} {
		t.Run(fmt.Sprintf("%dx%d_to_%dx%d_align%v", s.w, s.h, s.ow, s.oh, s.align), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			x, _ := h.Rand(optest.RNG(7), s.w, s.h, s.c, s.n)
			mode := ggml.ScaleBilinear
			if s.align {
				mode |= ggml.ScaleAlignCorners
			}
			ref := x.Interpolate(h.G, s.ow, s.oh, mode)
			got := kernels.Bilinear(h.G, x, s.ow, s.oh, s.align)
			assert.Equal(t, "CUSTOM", got.Op())
			out := h.Compute(ref, got)
			testutil.AllClose(t, out[0], out[1], 1e-6, 1e-6)
		})
	}
}

// BenchmarkAttention times Attention on the global attention of DA3-BASE at
// 504×336 (12 heads of 64, 865 tokens a view) over 1, 4 and 8 views, in f32
// and in bf16 and int8c where the CPU has them.
func BenchmarkAttention(b *testing.B) {
	if !kernels.Available().Attention {
		b.Skip("the CPU kernels are off in this build")
	}
	for _, prec := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8Channel} {
		if !kernels.PrecisionRuns(kernels.DefaultVariant(), prec) {
			continue
		}
		for _, views := range []int{1, 4, 8} {
			benchAttention(b, prec, views)
		}
	}
}

func benchAttention(b *testing.B, prec kernels.Precision, views int) {
	{
		n, hd, H := 865*views, 64, 12
		b.Run(fmt.Sprintf("%s/views%d_n%d", prec, views, n), func(b *testing.B) {
			h := optest.NewHarness(b, 16)
			pol := kernels.Default(true)
			pol.Precision = prec
			kernels.SetPolicy(h.G, pol)
			rng := optest.RNG(1)
			q := h.Input(ggml.TypeF32, optest.Randn(rng, hd*H*n, 1), hd, H, n, 1)
			k := h.Input(ggml.TypeF32, optest.Randn(rng, hd*H*n, 1), hd, H, n, 1)
			v := h.Input(ggml.TypeF32, optest.Randn(rng, hd*H*n, 1), hd, H, n, 1)
			h.Bench(b, kernels.Attention(h.G, q, k, v, 0.125), 4*float64(n)*float64(n)*float64(hd*H))
		})
	}
}

// TestBilinearWindow checks windows of the bilinear kernel against the whole
// resize (Bilinear) plus the separable tables, cut out and zero-padded in
// Go: every strip of a tiling (first, inner, last, a short last one), pad 0
// and 1, with and without tables, two images. The windows compute the same
// formula per pixel, so the values must be identical.
func TestBilinearWindow(t *testing.T) {
	for _, s := range []struct {
		w, h, c, n, fw, fh, rows, pad int
		tables                        bool
	}{
		{36, 27, 4, 2, 504, 378, 64, 1, true},
		{36, 27, 3, 1, 504, 378, 100, 1, false},
		{9, 7, 2, 1, 30, 22, 4, 0, true},
		{9, 7, 2, 2, 30, 22, 22, 1, true}, // one strip: the whole map with its border
		{5, 5, 1, 1, 7, 9, 2, 2, false},
	} {
		t.Run(fmt.Sprintf("%dx%d_to_%dx%d_rows%d_pad%d_tables%v", s.w, s.h, s.fw, s.fh, s.rows, s.pad, s.tables), func(t *testing.T) {
			h := optest.NewHarness(t, 64)
			rng := optest.RNG(11)
			x, _ := h.Rand(rng, s.w, s.h, s.c, s.n)
			var ux, uy *ggml.Tensor
			tx, ty := make([]float32, s.fw*s.c), make([]float32, s.fh*s.c)
			if s.tables {
				tx, ty = optest.Randn(rng, s.fw*s.c, 1), optest.Randn(rng, s.fh*s.c, 1)
				ux, uy = h.Input(ggml.TypeF32, tx, s.fw, s.c), h.Input(ggml.TypeF32, ty, s.fh, s.c)
			}
			outs := []*ggml.Tensor{kernels.Bilinear(h.G, x, s.fw, s.fh, true)}
			var y0s []int
			for y0 := 0; y0 < s.fh; y0 += s.rows {
				y0s = append(y0s, y0)
				outs = append(outs, kernels.BilinearWindow(h.G, x, ux, uy, s.fw, s.fh, y0, min(s.rows, s.fh-y0), s.pad, true))
			}
			got := h.Compute(outs...)
			whole := got[0]
			for k, y0 := range y0s {
				rows := min(s.rows, s.fh-y0)
				ow, oh := s.fw+2*s.pad, rows+2*s.pad
				win := got[k+1]
				if !assert.Len(t, win, ow*oh*s.c*s.n) {
					continue
				}
				bad := 0
				for p := 0; p < s.c*s.n; p++ {
					ch := p % s.c
					for j := 0; j < oh; j++ {
						for i := 0; i < ow; i++ {
							fx, fy := i-s.pad, y0+j-s.pad
							var want float32
							if fx >= 0 && fx < s.fw && fy >= 0 && fy < s.fh {
								want = whole[(p*s.fh+fy)*s.fw+fx] + (tx[ch*s.fw+fx] + ty[ch*s.fh+fy])
							}
							if g := win[(p*oh+j)*ow+i]; g != want && bad < 5 {
								bad++
								t.Errorf("strip at %d: plane %d window (%d, %d): got %v, want %v", y0, p, i, j, g, want)
							}
						}
					}
				}
			}
		})
	}
}

// BenchmarkLayerNorm times LayerNorm on DA3-BASE's token rows (768 values,
// 865 tokens) and on its QK norm (q as a view of the fused QKV projection's
// output: 12 heads of 64 per token), and LayerNormRoPE there (DA3's QK norm
// and rotation). The same values, in rows twelve times shorter: what is
// done per row shows.
func BenchmarkLayerNorm(b *testing.B) {
	const C, T, H, hd = 768, 865, 12, 64
	b.Run("tokens_768x865", func(b *testing.B) {
		h := optest.NewHarness(b, 16)
		rng := optest.RNG(1)
		x := h.Input(ggml.TypeF32, optest.Randn(rng, C*T, 1), C, T)
		w := h.Input(ggml.TypeF32, optest.Randn(rng, C, 1), C)
		bias := h.Input(ggml.TypeF32, optest.Randn(rng, C, 1), C)
		h.Bench(b, kernels.LayerNorm(h.G, x, w, bias, 1e-6), float64(C*T))
	})
	for _, rope := range []bool{true, false} {
		name := map[bool]string{true: "qk_rope_64x12x865", false: "qk_norm_64x12x865"}[rope]
		b.Run(name, func(b *testing.B) {
			h := optest.NewHarness(b, 16)
			rng := optest.RNG(1)
			qkv := h.Input(ggml.TypeF32, optest.Randn(rng, 3*C*T, 1), 3*C, T)
			q := qkv.View(h.G, 0, []int{hd, H, T}, []int{hd * 4, 3 * C * 4})
			w := h.Input(ggml.TypeF32, optest.Randn(rng, hd, 1), hd)
			bias := h.Input(ggml.TypeF32, optest.Randn(rng, hd, 1), hd)
			y := kernels.LayerNorm(h.G, q, w, bias, 1e-5)
			if rope {
				cs := h.Input(ggml.TypeF32, optest.Randn(rng, hd*T, 1), hd, T)
				y = kernels.LayerNormRoPE(h.G, q, w, bias, cs, 1e-5)
			}
			h.Bench(b, y, float64(C*T))
		})
	}
}

// TestGELUAccuracy checks the GELU of the products' epilogue value by value
// against float64 with the exact erf: a product by ones of depth 1 (exact)
// feeds it x from −12 to 12 (both tails and the middle) and a few extremes.
// The rational erf(x/√2) is within 1e-8 in exact arithmetic; its float32
// evaluation (the rounding of P/Q near 1, times |x| up to 4√2, without fused
// multiply-adds in the portable kernels) stays within 5e-7, so x·Φ(x) is
// within 2.5e-7·|x| plus the rounding of the result. Its sign is x's (or 0).
func TestGELUAccuracy(t *testing.T) {
	xs := []float32{-1e30, -87, 87, 1e30, 0}
	for i := -12000; i <= 12000; i++ {
		xs = append(xs, float32(i)/1000)
	}
	const N = 32
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		t.Run(v.String(), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			kernels.SetPolicy(h.G, kernels.CPUKernels(v))
			ones := make([]float32, N)
			for i := range ones {
				ones[i] = 1
			}
			w := h.Input(ggml.TypeF32, ones, 1, N)
			x := h.Input(ggml.TypeF32, xs, 1, len(xs))
			got := h.Compute(kernels.GEMM(h.G, w, x, kernels.Epilogue{Act: kernels.ActGELU}))[0]
			worst := 0.0
			for m, xv := range xs {
				want := gelu64(float64(xv))
				bound := 2.5e-7*math.Abs(float64(xv)) + 6e-8*math.Abs(want) + 1e-37
				for n := range N {
					if !assert.False(t, got[m*N+n]*xv < 0, "GELU(%g) = %g has the other sign", xv, got[m*N+n]) {
						return
					}
					d := math.Abs(float64(got[m*N+n]) - want)
					worst = math.Max(worst, d/bound)
					if !assert.LessOrEqual(t, d, bound, "GELU(%g) = %g, want %g", xv, got[m*N+n], want) {
						return
					}
				}
			}
			t.Logf("largest |d|/bound %.3f", worst)
		})
	}
}
