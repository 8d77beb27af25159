package ggml_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
)

// gelu64 is the exact (erf) GELU in float64.
func gelu64(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func relu64(x float64) float64 { return math.Max(x, 0) }

// withBias adds b[i] along axis (0: columns of a GEMM, 2: channels of a
// convolution) and applies f.
func withBias(y, b *nd, axis int, f func(float64) float64) *nd {
	r := newND(y.ne[:]...)
	y.each(func(i0, i1, i2, i3 int) {
		i := [4]int{i0, i1, i2, i3}[axis]
		r.set(f(y.at(i0, i1, i2, i3)+b.v[i]), i0, i1, i2, i3)
	})
	return r
}

// TestGEMMEpilogue checks the bias and activations fused into OpGEMM's
// store, against float64 with the exact erf: on tile edges, across packed
// depth blocks (the epilogue must run once, after the last), with
// quantized weights, and GELU over a range that reaches both tails.
func TestGEMMEpilogue(t *testing.T) {
	if !ggml.HasGEMM() {
		t.Skip("built without AVX-512 (see HasGEMM)")
	}
	var cases []opCase
	for _, s := range []struct {
		K, N, M int
		typ     ggml.Type
		act     ggml.Act
		bias    bool
	}{
		{7, 3, 5, ggml.TypeF32, ggml.ActGELU, true},
		{300, 33, 15, ggml.TypeF32, ggml.ActGELU, true},
		{600, 70, 29, ggml.TypeF32, ggml.ActReLU, true},
		{64, 40, 17, ggml.TypeF32, ggml.ActNone, true},
		{64, 40, 17, ggml.TypeF32, ggml.ActGELU, false},
		{512, 40, 19, ggml.TypeQ8_0, ggml.ActGELU, true},
	} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("K%d_N%d_M%d_%s_act%d_bias%v", s.K, s.N, s.M, s.typ, s.act, s.bias),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				wd := randn(rng, s.K*s.N, 3/math.Sqrt(float64(s.K))) // outputs of a few units: both GELU tails
				wr := ndFrom(wd, s.K, s.N)
				if s.typ != ggml.TypeF32 {
					q, err := ggml.QuantizeChunk(s.typ, wd, s.N, s.K, nil)
					if err != nil {
						t.Fatal(err)
					}
					deq, err := ggml.ToFloat32(s.typ, q, s.K*s.N)
					if err != nil {
						t.Fatal(err)
					}
					wr = ndFrom(deq, s.K, s.N)
				}
				w := h.input(s.typ, wd, s.K, s.N)
				x, xr := h.rand(rng, s.K, s.M)
				ep := ggml.Epilogue{Act: s.act}
				br := newND(s.N)
				if s.bias {
					ep.Bias, br = h.rand(rng, s.N)
				}
				f := map[ggml.Act]func(float64) float64{ggml.ActNone: func(x float64) float64 { return x }, ggml.ActReLU: relu64, ggml.ActGELU: gelu64}[s.act]
				return w.GEMMWith(h.g, x, ep), withBias(mulMatRef(wr, xr), br, 0, f)
			},
			atol: 2e-5, rtol: 1e-5,
		})
	}
	runOpCases(t, cases)
}

// TestConv2DGEMMEpilogue checks the per-channel bias and ReLU fused into
// OpConv2D, on the three packing paths (1×1 contiguous, masked rows,
// gathers).
func TestConv2DGEMMEpilogue(t *testing.T) {
	if !ggml.HasGEMM() {
		t.Skip("built without AVX-512 (see HasGEMM)")
	}
	var cases []opCase
	for _, s := range []struct {
		k, w, h, ic, oc int
		p               ggml.Conv2DParams
		act             ggml.Act
	}{
		{1, 40, 6, 8, 9, ggml.Conv2DParams{}, ggml.ActNone},
		{3, 70, 9, 4, 17, ggml.Conv2DParams{Pad: 1}, ggml.ActReLU},
		{3, 37, 21, 3, 4, ggml.Conv2DParams{Stride: 2, Pad: 1}, ggml.ActReLU},
		{1, 20, 7, 5, 6, ggml.Conv2DParams{Stride: 2}, ggml.ActNone},
	} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("k%d_%dx%dx%d_oc%d_s%d_p%d_act%d", s.k, s.w, s.h, s.ic, s.oc, s.p.Stride, s.p.Pad, s.act),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				k, kr := h.rand(rng, s.k, s.k, s.ic, s.oc)
				x, xr := h.rand(rng, s.w, s.h, s.ic, 1)
				b, br := h.rand(rng, s.oc)
				f := func(x float64) float64 { return x }
				if s.act == ggml.ActReLU {
					f = relu64
				}
				return k.Conv2DGEMMWith(h.g, x, s.p, ggml.Epilogue{Bias: b, Act: s.act}), withBias(convRef(kr, xr, s.p), br, 2, f)
			},
			atol: 1e-4, rtol: 1e-5,
		})
	}
	runOpCases(t, cases)
}

// TestAttention checks OpAttention against float64: q, k, v as strided
// views of one fused qkv projection [3·hd·H, n, B] (the layout the ViT
// feeds it), query and key counts off the 32- and 14-wide blocks, head
// sizes off the 14-row tile, several heads and batches, keys fewer and
// more than the queries, and scores large enough that the softmax is
// peaked.
func TestAttention(t *testing.T) {
	if !ggml.HasGEMM() {
		t.Skip("built without AVX-512 (see HasGEMM)")
	}
	var cases []opCase
	for _, s := range []struct{ hd, H, n, nk, B int }{
		{64, 2, 33, 33, 1}, {64, 3, 100, 100, 2}, {20, 2, 7, 300, 1}, {16, 1, 70, 5, 1}, {64, 1, 5, 1, 1},
	} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("hd%d_H%d_n%d_nk%d_B%d", s.hd, s.H, s.n, s.nk, s.B),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				C := s.hd * s.H
				view := func(t *ggml.Tensor, off, n int) *ggml.Tensor {
					return t.View(h.g, off*4, []int{s.hd, s.H, n, s.B}, []int{s.hd * 4, t.Stride(1), t.Stride(2)})
				}
				// q from its own [C, n, B] rows, k and v from one [2C, nk, B] tensor.
				qd := randn(rng, C*s.n*s.B, 2)
				kvd := randn(rng, 2*C*s.nk*s.B, 2)
				qt := h.input(ggml.TypeF32, qd, C, s.n, s.B)
				kvt := h.input(ggml.TypeF32, kvd, 2*C, s.nk, s.B)
				q, k, v := view(qt, 0, s.n), view(kvt, 0, s.nk), view(kvt, C, s.nk)
				kv := ndFrom(kvd, 2*C, s.nk, s.B)
				qr, kr, vr := ndFrom(qd, s.hd, s.H, s.n, s.B), newND(s.hd, s.H, s.nk, s.B), newND(s.hd, s.H, s.nk, s.B)
				kr.each(func(d, hh, j, b int) {
					kr.set(kv.at(hh*s.hd+d, j, b, 0), d, hh, j, b)
					vr.set(kv.at(C+hh*s.hd+d, j, b, 0), d, hh, j, b)
				})
				scale := 1 / math.Sqrt(float64(s.hd))
				p := func(x *nd) *nd { return x.permute(0, 2, 1, 3) } // to attnRef's [hd, n, H, B]
				return q.Attention(h.g, k, v, float32(scale)), attnRef(p(qr), p(kr), p(vr), nil, scale)
			},
			atol: 1e-5, rtol: 1e-5,
		})
	}
	runOpCases(t, cases)
}

// TestResample checks OpBilinear against ggml's own interpolate (computed in
// the same graph) for upsampling and downsampling, with and without
// align_corners, several channels and two images; and that Resample falls
// back to ggml_interpolate without SetGEMM.
func TestResample(t *testing.T) {
	for _, s := range []struct {
		w, h, c, n, ow, oh int
		mode               ggml.ScaleMode
	}{
		{37, 37, 3, 1, 74, 74, ggml.ScaleBilinear | ggml.ScaleAlignCorners},
		{36, 24, 4, 2, 504, 336, ggml.ScaleBilinear | ggml.ScaleAlignCorners},
		{296, 296, 2, 1, 518, 518, ggml.ScaleBilinear | ggml.ScaleAlignCorners},
		{20, 9, 3, 1, 7, 13, ggml.ScaleBilinear},
		{1, 5, 2, 1, 6, 1, ggml.ScaleBilinear | ggml.ScaleAlignCorners},
	} {
		t.Run(fmt.Sprintf("%dx%d_to_%dx%d_mode%#x", s.w, s.h, s.ow, s.oh, uint32(s.mode)), func(t *testing.T) {
			h := newHarness(t, 16)
			x, _ := h.rand(newRNG(7), s.w, s.h, s.c, s.n)
			ref := x.Interpolate(h.g, s.ow, s.oh, s.mode)
			assert.Equal(t, "UPSCALE", x.Resample(h.g, s.ow, s.oh, s.mode).Op(), "without SetGEMM")
			h.g.SetGEMM(true)
			got := x.Resample(h.g, s.ow, s.oh, s.mode)
			if ggml.HasGEMM() { // CPU kernels are enabled with the GEMM
				assert.Equal(t, "CUSTOM", got.Op())
			}
			out := h.compute(ref, got)
			testutil.AllClose(t, out[0], out[1], 1e-6, 1e-6)
		})
	}
}
