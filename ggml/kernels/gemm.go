package ggml

// #include "custom.h"
import "C"

import "math"

// OpGEMM is an AVX-512 F32 matrix product for the CPU backend (see gemm.c):
// the same result as MulMat for F32 operands up to summation order, about
// twice as fast as ggml's F32 kernel on AVX-512 CPUs. It exists only in
// binaries built with AVX-512 enabled (HasGEMM).
var OpGEMM = CustomOp{name: "gemm", fn: C.ggml_custom_op_t(C.da3_op_gemm)}

// HasGEMM reports whether this binary was built with the AVX-512 GEMM
// (CGO_CFLAGS with -march=native on an AVX-512 CPU, or -mavx512f).
func HasGEMM() bool { return C.da3_gemm_available() != 0 }

// GEMMFits reports whether GEMM accepts w and x: contiguous operands, x
// F32, with ne0 = K, and either w a 2-D matrix [K, N] (x [K, …]) or w [K, N, B2,
// B3] with x [K, M, B2, B3] (one product per batch, no broadcasting).
//
// A 2-D w may also be f16, bf16 or block-quantized with blocks dividing 256
// (q4_0 … q8_0, the k-quants): its rows are dequantized as the GEMM packs
// them. This is exact for the weights (the same values ggml's own kernels
// dequantize to), and unlike ggml's quantized kernels it does not round x
// to 8 bits.
func GEMMFits(w, x *Tensor) bool {
	if w == nil || x == nil || x.Type() != TypeF32 || !w.IsContiguous() || !x.IsContiguous() || w.ne(0) != x.ne(0) {
		return false
	}
	if w.Type() != TypeF32 {
		return w.ne(2) == 1 && w.ne(3) == 1 && gemmDequantizes(w.Type())
	}
	return w.ne(2) == 1 && w.ne(3) == 1 || w.ne(2) == x.ne(2) && w.ne(3) == x.ne(3)
}

// gemmDequantizes lists the weight types OpGEMM dequantizes while packing.
func gemmDequantizes(t Type) bool {
	switch t {
	case TypeF16, TypeBF16, TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ8_0, TypeQ4K, TypeQ5K, TypeQ6K:
		return 256%t.BlockSize() == 0
	}
	return false
}

// GEMM is w.MulMat(g, x) through OpGEMM: w [K, N], x [K, …] give [N, …]
// (batched: w [K, N, B2, B3], x [K, M, B2, B3] give [N, M, B2, B3]).
// It panics with a *ShapeError when the binary lacks the kernel or the
// operands do not fit (see GEMMFits). The node only runs on the CPU backend.
func (w *Tensor) GEMM(g *Context, x *Tensor) *Tensor { return w.GEMMWith(g, x, Epilogue{}) }

// Act is an activation applied by a fused epilogue.
type Act int

const (
	ActNone Act = iota
	ActReLU     // max(x, 0)
	ActGELU     // x·Φ(x), the exact (erf) GELU of torch's nn.GELU()
)

// Apply is the activation as separate graph ops (for the paths without a
// fused epilogue).
func (a Act) Apply(g *Context, x *Tensor) *Tensor {
	switch a {
	case ActReLU:
		return x.ReLU(g)
	case ActGELU:
		return x.GELUErf(g)
	}
	return x
}

// Epilogue is work fused into the store of a GEMM or Conv2DGEMM: a bias
// (F32 [N] for GEMM, added to every row; [OC] for a convolution, per output
// channel), then an activation. The fused GELU computes erf with
// Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, as oneDNN's).
type Epilogue struct {
	Bias *Tensor
	Act  Act
}

// fits reports whether the bias is an F32 contiguous vector of n values.
func (e Epilogue) fits(n int64) bool {
	return e.Act >= ActNone && e.Act <= ActGELU &&
		(e.Bias == nil || e.Bias.Type() == TypeF32 && e.Bias.IsContiguous() && e.Bias.ne(0) == n && e.Bias.Elements() == int(n))
}

// args appends the bias, if any, to the custom op's sources.
func (e Epilogue) args(ts []*Tensor) []*Tensor {
	if e.Bias != nil {
		return append(ts, e.Bias)
	}
	return ts
}

// GEMMWithFits reports whether GEMMWith accepts the operands and epilogue.
func GEMMWithFits(w, x *Tensor, e Epilogue) bool {
	return GEMMFits(w, x) && e.fits(w.ne(1))
}

// GEMMWith is GEMM with ep fused into the store: e.g. a linear layer's bias
// and GELU in one pass over the output.
func (w *Tensor) GEMMWith(g *Context, x *Tensor, ep Epilogue) *Tensor {
	notNil("gemm", w, x)
	ts := []*Tensor{w, x}
	mustf(HasGEMM(), "gemm", ts, "this binary was built without AVX-512 (see HasGEMM)")
	mustf(GEMMFits(w, x), "gemm", ts, "want f32 contiguous operands, w [K, N] and x [K, ...], or batches of equal count")
	mustf(ep.fits(w.ne(1)), "gemm", ts, "want an F32 contiguous bias of %d values and a known activation", w.ne(1))
	shape := x.ne4()
	shape[0] = int(w.ne(1))
	return g.Custom(OpGEMM, TypeF32, shape, ep.args(ts), int(ep.Act))
}

// MatMul is w.MulMat(g, x), computed with GEMM when the context allows it
// (SetGEMM) and the operands fit.
func (w *Tensor) MatMul(g *Context, x *Tensor) *Tensor {
	if g.gemm && GEMMFits(w, x) {
		return w.GEMM(g, x)
	}
	return w.MulMat(g, x)
}

// SetGEMM lets MatMul use OpGEMM in graphs built on g. Set it only for
// graphs that run on the CPU backend; it is ignored when !HasGEMM().
func (g *Context) SetGEMM(on bool) { g.gemm = on && HasGEMM() }

// OpConv2D is a 2-D convolution computed as an implicit-im2col GEMM on the
// CPU (see gemm.c): the patches are packed straight from the input into the
// GEMM's cache-sized panels, so no im2col matrix is built.
var OpConv2D = CustomOp{name: "conv2d_gemm", fn: C.ggml_custom_op_t(C.da3_op_conv2d)}

// GEMM reports whether SetGEMM enabled the CPU GEMM for graphs built on g.
func (g *Context) GEMM() bool { return g.gemm }

// Conv2DGEMMFits reports whether Conv2DGEMM accepts kernel w, input x and p:
// F32 contiguous operands and stride, padding and dilation below 256, and
// fewer than 2³¹ input values per image (32-bit gather offsets).
func Conv2DGEMMFits(w, x *Tensor, p Conv2DParams) bool {
	if x != nil && x.ne(0)*x.ne(1) >= 1<<31 {
		return false
	}
	s, pad, d := p.norm()
	return w != nil && x != nil && w.Type() == TypeF32 && x.Type() == TypeF32 && w.IsContiguous() && x.IsContiguous() &&
		w.ne(2) == x.ne(2) && s < 256 && pad < 256 && d < 256
}

// Conv2DGEMM is the convolution of Conv2D (kernel w [KW, KH, IC, OC] over x
// [W, H, IC, N] gives [OW, OH, OC, N]) through OpConv2D. It panics with a
// *ShapeError when the binary lacks the kernel or the operands do not fit
// (Conv2DGEMMFits). The node only runs on the CPU backend.
func (w *Tensor) Conv2DGEMM(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	return w.Conv2DGEMMWith(g, x, p, Epilogue{})
}

// Conv2DGEMMWithFits reports whether Conv2DGEMMWith accepts the epilogue for
// kernel w (the operands themselves: Conv2DGEMMFits).
func Conv2DGEMMWithFits(w *Tensor, e Epilogue) bool { return w != nil && e.fits(w.ne(3)) }

// Conv2DGEMMWith is Conv2DGEMM with ep (bias [OC], activation) fused into
// the store.
func (w *Tensor) Conv2DGEMMWith(g *Context, x *Tensor, p Conv2DParams, ep Epilogue) *Tensor {
	w.checkConv("conv2d_gemm", x, p)
	ts := []*Tensor{w, x}
	mustf(HasGEMM(), "conv2d_gemm", ts, "this binary was built without AVX-512 (see HasGEMM)")
	mustf(Conv2DGEMMFits(w, x, p), "conv2d_gemm", ts, "want f32 contiguous operands and stride, pad, dilation < 256")
	mustf(ep.fits(w.ne(3)), "conv2d_gemm", ts, "want an F32 contiguous bias of %d values and a known activation", w.ne(3))
	s, pad, d := p.norm()
	ow := convOut(x.ne(0), w.ne(0), int64(s), int64(pad), int64(d))
	oh := convOut(x.ne(1), w.ne(1), int64(s), int64(pad), int64(d))
	return g.Custom(OpConv2D, TypeF32, []int{int(ow), int(oh), int(w.ne(3)), int(x.ne(3))}, ep.args(ts), s|pad<<8|d<<16|int(ep.Act)<<24)
}

// OpAttention is softmax(q·kᵀ·scale)·v fused into one CPU kernel (see
// gemm.c): per head, kᵀ and v are packed once, and each block of 14 queries
// has its scores, probabilities and outputs computed in cache, written
// straight into the output's layout. Neither the score matrix nor any
// permuted copy of q, k, v or the output exists in the graph.
var OpAttention = CustomOp{name: "attention", fn: C.ggml_custom_op_t(C.da3_op_attention)}

// AttentionFits reports whether Attention accepts q, k, v: F32 [hd, H, n, B]
// (k and v with their own token count) with contiguous rows of hd ≤ 256 and
// 4-byte aligned strides; any strides above hd.
func AttentionFits(q, k, v *Tensor) bool {
	if q == nil || k == nil || v == nil || !HasGEMM() {
		return false
	}
	for _, t := range []*Tensor{q, k, v} {
		if t.Type() != TypeF32 || t.Stride(0) != 4 || t.Stride(1)%4 != 0 || t.Stride(2)%4 != 0 || t.Stride(3)%4 != 0 {
			return false
		}
	}
	return q.ne(0) <= 256 && k.ne(0) == q.ne(0) && v.ne(0) == q.ne(0) &&
		k.ne(1) == q.ne(1) && v.ne(1) == q.ne(1) && k.ne(3) == q.ne(3) && v.ne(3) == q.ne(3) && v.ne(2) == k.ne(2)
}

// Attention is softmax(q·kᵀ·scale)·v per head through OpAttention: q [hd, H,
// n, B], k and v [hd, H, nk, B] give [hd, H, n, B] (contiguous: reshape to
// [hd·H, n, B] for the output projection). It panics with a *ShapeError
// when the operands do not fit (AttentionFits). CPU backend only.
func (q *Tensor) Attention(g *Context, k, v *Tensor, scale float32) *Tensor {
	notNil("attention", q, k, v)
	ts := []*Tensor{q, k, v}
	mustf(AttentionFits(q, k, v), "attention", ts, "want F32 [hd, H, n, B] operands with contiguous rows of hd <= 256 (and an AVX-512 build)")
	return g.Custom(OpAttention, TypeF32, q.ne4(), ts, int(int32(math.Float32bits(scale))))
}
