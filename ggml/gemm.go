package ggml

// #include "custom.h"
import "C"

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
func (w *Tensor) GEMM(g *Context, x *Tensor) *Tensor {
	notNil("gemm", w, x)
	ts := []*Tensor{w, x}
	mustf(HasGEMM(), "gemm", ts, "this binary was built without AVX-512 (see HasGEMM)")
	mustf(GEMMFits(w, x), "gemm", ts, "want f32 contiguous operands, w [K, N] and x [K, ...], or batches of equal count")
	shape := x.ne4()
	shape[0] = int(w.ne(1))
	return g.Custom(OpGEMM, TypeF32, shape, ts, 0)
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
// F32 contiguous operands and stride, padding and dilation below 256.
func Conv2DGEMMFits(w, x *Tensor, p Conv2DParams) bool {
	s, pad, d := p.norm()
	return w != nil && x != nil && w.Type() == TypeF32 && x.Type() == TypeF32 && w.IsContiguous() && x.IsContiguous() &&
		w.ne(2) == x.ne(2) && s < 256 && pad < 256 && d < 256
}

// Conv2DGEMM is the convolution of Conv2D (kernel w [KW, KH, IC, OC] over x
// [W, H, IC, N] gives [OW, OH, OC, N]) through OpConv2D. It panics with a
// *ShapeError when the binary lacks the kernel or the operands do not fit
// (Conv2DGEMMFits). The node only runs on the CPU backend.
func (w *Tensor) Conv2DGEMM(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	w.checkConv("conv2d_gemm", x, p)
	ts := []*Tensor{w, x}
	mustf(HasGEMM(), "conv2d_gemm", ts, "this binary was built without AVX-512 (see HasGEMM)")
	mustf(Conv2DGEMMFits(w, x, p), "conv2d_gemm", ts, "want f32 contiguous operands and stride, pad, dilation < 256")
	s, pad, d := p.norm()
	ow := convOut(x.ne(0), w.ne(0), int64(s), int64(pad), int64(d))
	oh := convOut(x.ne(1), w.ne(1), int64(s), int64(pad), int64(d))
	return g.Custom(OpConv2D, TypeF32, []int{int(ow), int(oh), int(w.ne(3)), int(x.ne(3))}, ts, s|pad<<8|d<<16)
}
