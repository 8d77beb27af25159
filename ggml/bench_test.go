package ggml_test

// Micro-benchmarks of the ops DA3 spends its time in, on the CPU backend
// with every core. `make bench` runs them 3 times each; each reports
// GFLOP/s (multiply and add counted as 2 FLOPs).

import (
	"testing"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// BenchmarkMulMat multiplies a 4096x4096 weight (stored as each type) by
// 512 tokens of 4096 f32 features.
func BenchmarkMulMat(b *testing.B) {
	const K, M, N = 4096, 4096, 512
	rng := optest.RNG(1)
	w := optest.Randn(rng, K*M, 0.02)
	x := optest.Randn(rng, K*N, 1)
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeQ8_0, ggml.TypeQ4K} {
		b.Run(typ.String(), func(b *testing.B) {
			h := optest.NewHarness(b, 8)
			a := h.Input(typ, w, K, M)
			in := h.Input(ggml.TypeF32, x, K, N)
			h.Bench(b, a.MulMat(h.G, in), 2*K*M*N)
		})
	}
}

// BenchmarkConv3x3 is a DPT-style 3x3 convolution, 64 to 64 channels with
// padding 1 on a 128x96 map, through im2col + matrix product (Conv2D) and
// the direct kernel (Conv2DDirect), with f32 and f16 kernels.
func BenchmarkConv3x3(b *testing.B) {
	const W, H, C = 128, 96, 64
	rng := optest.RNG(2)
	kd := optest.Randn(rng, 3*3*C*C, 0.05)
	xd := optest.Randn(rng, W*H*C, 1)
	flops := 2.0 * 9 * C * C * W * H
	for _, v := range []struct {
		name   string
		typ    ggml.Type
		direct bool
	}{
		{"Conv2D/f32", ggml.TypeF32, false},
		{"Conv2D/f16", ggml.TypeF16, false},
		{"Conv2DDirect/f32", ggml.TypeF32, true},
		{"Conv2DDirect/f16", ggml.TypeF16, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			h := optest.NewHarness(b, 16)
			k := h.Input(v.typ, kd, 3, 3, C, C)
			x := h.Input(ggml.TypeF32, xd, W, H, C, 1)
			p := ggml.Conv2DParams{Pad: 1}
			var y *ggml.Tensor
			if v.direct {
				y = k.Conv2DDirect(h.G, x, p)
			} else {
				y = k.Conv2D(h.G, x, p)
			}
			h.Bench(b, y, flops)
		})
	}
}

// BenchmarkFlashAttnExt is one ViT-B attention at 518x392 (864 tokens, 12
// heads of 64) with f32 and f16 K/V.
func BenchmarkFlashAttnExt(b *testing.B) {
	const D, H, N = 64, 12, 864
	rng := optest.RNG(3)
	qd, kd, vd := optest.Randn(rng, D*N*H, 1), optest.Randn(rng, D*N*H, 1), optest.Randn(rng, D*N*H, 1)
	flops := 4.0 * N * N * D * H // q·kᵀ and p·v
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16} {
		b.Run(typ.String(), func(b *testing.B) {
			h := optest.NewHarness(b, 8)
			q := h.Input(ggml.TypeF32, qd, D, N, H)
			k := h.Input(typ, kd, D, N, H)
			v := h.Input(typ, vd, D, N, H)
			h.Bench(b, q.FlashAttnExt(h.G, k, v, nil, 0.125), flops)
		})
	}
}
