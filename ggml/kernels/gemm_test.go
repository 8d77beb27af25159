package ggml_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// TestGEMM checks OpGEMM against a float64 reference on shapes that cover
// every edge of its blocking: tails of the 14-row and 32-column register
// tiles, depths across the 256-deep packed blocks, columns across the
// 1024-wide blocks, both ways of splitting the work over threads, and a
// batched (3-D) second operand.
func TestGEMM(t *testing.T) {
	if !ggml.HasGEMM() {
		t.Skip("built without AVX-512: MatMul uses ggml's kernel (see HasGEMM)")
	}
	var cases []opCase
	for _, s := range [][4]int{ // K, N, M, batch
		{1, 1, 1, 1}, {7, 3, 5, 1}, {32, 32, 14, 1}, {300, 33, 15, 1}, {256, 64, 100, 1},
		{700, 2100, 29, 1}, {520, 40, 300, 1}, {64, 96, 5, 3}, {513, 17, 43, 2},
	} {
		K, N, M, B := s[0], s[1], s[2], s[3]
		cases = append(cases, opCase{
			name: fmt.Sprintf("K%d_N%d_M%d_B%d", K, N, M, B),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				w, wr := h.rand(rng, K, N)
				x, xr := h.rand(rng, K, M, B)
				return w.GEMM(h.g, x), mulMatRef(wr, xr)
			},
			atol: 1e-4, rtol: 1e-5,
		})
	}
	// Batched: one product per (ne2, ne3), like attention's per-head products.
	for _, s := range [][5]int{{64, 100, 37, 3, 2}, {300, 40, 50, 2, 1}} {
		K, N, M, B2, B3 := s[0], s[1], s[2], s[3], s[4]
		cases = append(cases, opCase{
			name: fmt.Sprintf("batched_K%d_N%d_M%d_%dx%d", K, N, M, B2, B3),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				w, wr := h.rand(rng, K, N, B2, B3)
				x, xr := h.rand(rng, K, M, B2, B3)
				return w.GEMM(h.g, x), mulMatRef(wr, xr)
			},
			atol: 1e-4, rtol: 1e-5,
		})
	}
	// Quantized and f16 weights, dequantized while packing: the reference
	// uses the dequantized weights and x unrounded.
	for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0, ggml.TypeQ4_1, ggml.TypeQ4K, ggml.TypeQ6K} {
		K, N, M := 512, 40, 19
		cases = append(cases, opCase{
			name: "weights_" + typ.String(),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				wd := randn(rng, K*N, 1)
				q, err := ggml.QuantizeChunk(typ, wd, N, K, nil)
				require.NoError(h.t, err)
				deq, err := ggml.ToFloat32(typ, q, K*N)
				require.NoError(h.t, err)
				w := h.input(typ, wd, K, N)
				x, xr := h.rand(rng, K, M)
				return w.GEMM(h.g, x), mulMatRef(ndFrom(deq, K, N), xr)
			},
			atol: 1e-4, rtol: 1e-5,
		})
	}
	runOpCases(t, cases)
}

// TestMatMulPicksGEMM checks that MatMul uses OpGEMM only with SetGEMM and
// fitting operands, and falls back to ggml_mul_mat otherwise.
func TestMatMulPicksGEMM(t *testing.T) {
	h := newHarness(t, 16)
	w := h.g.NewTensor(ggml.TypeF32, 8, 4)
	x := h.g.NewTensor(ggml.TypeF32, 8, 3)
	q := h.g.NewTensor(ggml.TypeQ8_0, 32, 4)
	q2 := h.g.NewTensor(ggml.TypeQ2K, 256, 4)
	xq := h.g.NewTensor(ggml.TypeF32, 32, 3)
	xq2 := h.g.NewTensor(ggml.TypeF32, 256, 3)
	assert.Equal(t, "MUL_MAT", w.MatMul(h.g, x).Op())
	h.g.SetGEMM(true)
	want := "MUL_MAT"
	if ggml.HasGEMM() {
		want = "CUSTOM"
	}
	assert.Equal(t, want, w.MatMul(h.g, x).Op())
	assert.Equal(t, want, q.MatMul(h.g, xq).Op(), "q8_0 weights are dequantized while packing")
	assert.Equal(t, "MUL_MAT", q2.MatMul(h.g, xq2).Op(), "q2_K is not among the dequantized types")
	xp := h.g.NewTensor(ggml.TypeF32, 8, 3, 2).Permute(h.g, 0, 2, 1, 3)
	assert.Equal(t, "MUL_MAT", w.MatMul(h.g, xp).Op(), "non-contiguous")
	if !ggml.HasGEMM() {
		require.Panics(t, func() { w.GEMM(h.g, x) })
	}
}

// BenchmarkGEMM compares OpGEMM with ggml_mul_mat on the matrix products of
// a ViT-B block at 504×336 (866 tokens).
func BenchmarkGEMM(b *testing.B) {
	for _, s := range [][3]int{{768, 2304, 866}, {768, 3072, 866}, {3072, 768, 866}} {
		K, N, M := s[0], s[1], s[2]
		for _, kernel := range []string{"ggml", "gemm"} {
			if kernel == "gemm" && !ggml.HasGEMM() {
				continue
			}
			b.Run(fmt.Sprintf("%s/K%d_N%d_M%d", kernel, K, N, M), func(b *testing.B) {
				h := newHarness(b, 16)
				rng := newRNG(1)
				w := h.input(ggml.TypeF32, randn(rng, K*N, 1), K, N)
				x := h.input(ggml.TypeF32, randn(rng, K*M, 1), K, M)
				y := w.MulMat(h.g, x)
				if kernel == "gemm" {
					y = w.GEMM(h.g, x)
				}
				benchGraph(b, h, y, 2*float64(K*N*M))
			})
		}
	}
}

// TestConv2DGEMM checks OpConv2D against a float64 reference: 3×3 padded
// convolutions on rows shorter and longer than the 32-wide panels (the
// masked-load path, with its left and right borders), stride 2 and
// dilation 2 (the element-wise path), 1×1, a depth across packed blocks
// (IC·9 > 256) and two images.
func TestConv2DGEMM(t *testing.T) {
	if !ggml.HasGEMM() {
		t.Skip("built without AVX-512 (see HasGEMM)")
	}
	var cases []opCase
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
	} {
		cases = append(cases, opCase{
			name: fmt.Sprintf("k%d_%dx%dx%d_oc%d_n%d_s%d_p%d_d%d", s.k, s.w, s.h, s.ic, s.oc, s.n, s.p.Stride, s.p.Pad, s.p.Dilation),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				k, kr := h.rand(rng, s.k, s.k, s.ic, s.oc)
				x, xr := h.rand(rng, s.w, s.h, s.ic, s.n)
				return k.Conv2DGEMM(h.g, x, s.p), convRef(kr, xr, s.p)
			},
			atol: 1e-4, rtol: 1e-5,
		})
	}
	runOpCases(t, cases)
}
