package ggml_test

// Micro-benchmarks of the ops DA3 spends its time in, on the CPU backend
// with every core. `make bench` runs them 3 times each; each reports
// GFLOP/s (multiply and add counted as 2 FLOPs).

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// benchGraph allocates g on the CPU, sets the inputs, and times Compute.
func benchGraph(b *testing.B, h *harness, out *ggml.Tensor, flops float64) {
	b.Helper()
	h.g.Output(out)
	h.g.Expand(out)
	buf, err := h.g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(b, err)
	defer buf.Close()
	for _, f := range h.feeds {
		require.NoError(b, f())
	}
	be := newCPUBackend(b)
	require.NoError(b, be.Compute(h.g)) // warm up: thread pool, work buffers
	b.ResetTimer()
	for b.Loop() {
		if err := be.Compute(h.g); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(runtime.NumCPU()), "threads")
}

// BenchmarkMulMat multiplies a 4096x4096 weight (stored as each type) by
// 512 tokens of 4096 f32 features.
func BenchmarkMulMat(b *testing.B) {
	const K, M, N = 4096, 4096, 512
	rng := newRNG(1)
	w := randn(rng, K*M, 0.02)
	x := randn(rng, K*N, 1)
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeQ8_0, ggml.TypeQ4K} {
		b.Run(typ.String(), func(b *testing.B) {
			h := newHarness(b, 8)
			a := h.input(typ, w, K, M)
			in := h.input(ggml.TypeF32, x, K, N)
			benchGraph(b, h, a.MulMat(h.g, in), 2*K*M*N)
		})
	}
}

// BenchmarkConv3x3 is a DPT-style 3x3 convolution, 64 to 64 channels with
// padding 1 on a 128x96 map, through im2col + matrix product (Conv2D) and
// the direct kernel (Conv2DDirect), with f32 and f16 kernels.
func BenchmarkConv3x3(b *testing.B) {
	const W, H, C = 128, 96, 64
	rng := newRNG(2)
	kd := randn(rng, 3*3*C*C, 0.05)
	xd := randn(rng, W*H*C, 1)
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
			h := newHarness(b, 16)
			k := h.input(v.typ, kd, 3, 3, C, C)
			x := h.input(ggml.TypeF32, xd, W, H, C, 1)
			p := ggml.Conv2DParams{Pad: 1}
			var y *ggml.Tensor
			if v.direct {
				y = k.Conv2DDirect(h.g, x, p)
			} else {
				y = k.Conv2D(h.g, x, p)
			}
			benchGraph(b, h, y, flops)
		})
	}
}

// BenchmarkFlashAttnExt is one ViT-B attention at 518x392 (864 tokens, 12
// heads of 64) with f32 and f16 K/V.
func BenchmarkFlashAttnExt(b *testing.B) {
	const D, H, N = 64, 12, 864
	rng := newRNG(3)
	qd, kd, vd := randn(rng, D*N*H, 1), randn(rng, D*N*H, 1), randn(rng, D*N*H, 1)
	flops := 4.0 * N * N * D * H // q·kᵀ and p·v
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16} {
		b.Run(typ.String(), func(b *testing.B) {
			h := newHarness(b, 8)
			q := h.input(ggml.TypeF32, qd, D, N, H)
			k := h.input(typ, kd, D, N, H)
			v := h.input(typ, vd, D, N, H)
			benchGraph(b, h, q.FlashAttnExt(h.g, k, v, nil, 0.125), flops)
		})
	}
}

// BenchmarkConv2DGEMM times OpConv2D on the 3×3 convolutions of the DA2
// ViT-S head at 518×518 (the fusion blocks at 296², the output convs).
func BenchmarkConv2DGEMM(b *testing.B) {
	if !ggml.HasGEMM() {
		b.Skip("built without AVX-512 (see HasGEMM)")
	}
	for _, s := range [][4]int{{296, 64, 64, 1}, {296, 64, 32, 1}, {518, 32, 32, 1}, {148, 64, 64, 1}, {296, 64, 64, 2}} {
		W, IC, OC, stride := s[0], s[1], s[2], s[3]
		b.Run(fmt.Sprintf("%dx%d_ic%d_oc%d_s%d", W, W, IC, OC, stride), func(b *testing.B) {
			h := newHarness(b, 16)
			rng := newRNG(1)
			k := h.input(ggml.TypeF32, randn(rng, 9*IC*OC, 1), 3, 3, IC, OC)
			x := h.input(ggml.TypeF32, randn(rng, W*W*IC, 1), W, W, IC, 1)
			y := k.Conv2DGEMM(h.g, x, ggml.Conv2DParams{Stride: stride, Pad: 1})
			benchGraph(b, h, y, 2*float64(9*IC*OC*y.Dim(0)*y.Dim(1)))
		})
	}
}
