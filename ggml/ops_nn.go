package ggml

/*
#include <stdint.h>
#include "ggml.h"
static struct ggml_tensor * da3_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
        struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun, intptr_t param) {
    return ggml_custom_4d(ctx, type, ne0, ne1, ne2, ne3, args, n_args, fun, GGML_N_TASKS_MAX, (void *) param);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// This file holds the convolution, resampling, RoPE and attention ops.
// Feature maps are [W, H, C, N] (x fastest); convolution kernels are
// [KW, KH, IC, OC], the reversed PyTorch (OC, IC, KH, KW).

// Conv2DParams are a 2-D convolution's stride, padding and dilation. The zero
// value means stride 1, no padding, dilation 1.
type Conv2DParams struct {
	Stride, Pad, Dilation int
}

func (p Conv2DParams) norm() (s, pad, d int) {
	s, pad, d = p.Stride, p.Pad, p.Dilation
	if s <= 0 {
		s = 1
	}
	if d <= 0 {
		d = 1
	}
	return s, pad, d
}

func convOut(in, k, s, p, d int64) int64 { return (in+2*p-d*(k-1)-1)/s + 1 }

func (t *Tensor) checkConv(op string, x *Tensor, p Conv2DParams) {
	notNil(op, t, x)
	ts := []*Tensor{t, x}
	s, pad, d := p.norm()
	mustf(pad >= 0, op, ts, "negative padding")
	mustf(t.ne(2) == x.ne(2), op, ts, "kernel input channels %d != data channels %d", t.ne(2), x.ne(2))
	ow := convOut(x.ne(0), t.ne(0), int64(s), int64(pad), int64(d))
	oh := convOut(x.ne(1), t.ne(1), int64(s), int64(pad), int64(d))
	mustf(ow > 0 && oh > 0, op, ts, "input %dx%d too small for kernel %dx%d", x.ne(0), x.ne(1), t.ne(0), t.ne(1))
}

// Im2Col is ggml_im2col for 2-D: unfolds x:[W, H, IC, N] for the kernel shape
// of t:[KW, KH, IC, OC] into [IC·KH·KW, OW, OH, N] of type dst.
func (t *Tensor) Im2Col(g *Context, x *Tensor, p Conv2DParams, dst Type) *Tensor {
	t.checkConv("im2col", x, p)
	s, pad, d := p.norm()
	g.reserve("im2col", 1)
	return g.wrap("im2col", C.ggml_im2col(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d), true, C.enum_ggml_type(dst)))
}

// Conv2D is ggml_conv_2d (im2col followed by a matrix product): kernel
// t:[KW, KH, IC, OC] over x:[W, H, IC, N] gives [OW, OH, OC, N] with
// OW = (W + 2·pad − dil·(KW−1) − 1)/stride + 1. No bias.
func (t *Tensor) Conv2D(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	t.checkConv("conv_2d", x, p)
	s, pad, d := p.norm()
	g.reserve("conv_2d", 8)
	return g.wrap("conv_2d", C.ggml_conv_2d(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d)))
}

// Conv2DDirect is ggml_conv_2d_direct: the same convolution as Conv2D computed
// directly, without the im2col buffer.
func (t *Tensor) Conv2DDirect(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	t.checkConv("conv_2d_direct", x, p)
	s, pad, d := p.norm()
	g.reserve("conv_2d_direct", 1)
	return g.wrap("conv_2d_direct", C.ggml_conv_2d_direct(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d)))
}

// ConvTranspose2D is ggml_conv_transpose_2d_p0, a transposed convolution with
// padding 0: kernel t:[KW, KH, OC, IC] (PyTorch (IC, OC, KH, KW) reversed)
// over x:[W, H, IC, N] gives [(W−1)·stride+KW, (H−1)·stride+KH, OC, N].
// The CPU kernel needs an F16 kernel (and rounds x to F16); for exact F32 use
// the matrix-product form in model/nn when stride equals the kernel size.
func (t *Tensor) ConvTranspose2D(g *Context, x *Tensor, stride int) *Tensor {
	notNil("conv_transpose_2d_p0", t, x)
	ts := []*Tensor{t, x}
	mustf(stride > 0, "conv_transpose_2d_p0", ts, "stride must be positive")
	mustf(t.ne(3) == x.ne(2), "conv_transpose_2d_p0", ts, "kernel input channels %d != data channels %d", t.ne(3), x.ne(2))
	mustf(t.Type() == TypeF16, "conv_transpose_2d_p0", ts, "kernel must be f16 (ggml's CPU kernel supports only f16); Cast it")
	mustf(x.Type() == TypeF32, "conv_transpose_2d_p0", ts, "data must be f32")
	g.reserve("conv_transpose_2d_p0", 1)
	return g.wrap("conv_transpose_2d_p0", C.ggml_conv_transpose_2d_p0(g.c, t.p, x.p, C.int(stride)))
}

// PoolOp selects max or average pooling.
type PoolOp int

const (
	PoolMax PoolOp = C.GGML_OP_POOL_MAX
	PoolAvg PoolOp = C.GGML_OP_POOL_AVG
)

// Pool2D is ggml_pool_2d over x:[W, H, C, N] with kernel k, stride s and
// padding p (the same on both axes): [(W+2p−k)/s+1, (H+2p−k)/s+1, C, N].
func (t *Tensor) Pool2D(g *Context, op PoolOp, k, s, p int) *Tensor {
	notNil("pool_2d", t)
	mustf(k > 0 && s > 0 && p >= 0, "pool_2d", []*Tensor{t}, "kernel and stride must be positive, padding non-negative")
	mustf(t.ne(0)+2*int64(p) >= int64(k) && t.ne(1)+2*int64(p) >= int64(k), "pool_2d", []*Tensor{t}, "input smaller than the kernel")
	g.reserve("pool_2d", 1)
	return g.wrap("pool_2d", C.ggml_pool_2d(g.c, t.p, C.enum_ggml_op_pool(op), C.int(k), C.int(k), C.int(s), C.int(s), C.float(p), C.float(p)))
}

// ScaleMode selects the resampling of Interpolate; OR ScaleAlignCorners into
// ScaleBilinear for torch's align_corners=True.
type ScaleMode uint32

const (
	ScaleNearest      ScaleMode = C.GGML_SCALE_MODE_NEAREST
	ScaleBilinear     ScaleMode = C.GGML_SCALE_MODE_BILINEAR
	ScaleBicubic      ScaleMode = C.GGML_SCALE_MODE_BICUBIC
	ScaleAlignCorners ScaleMode = C.GGML_SCALE_FLAG_ALIGN_CORNERS
	ScaleAntialias    ScaleMode = C.GGML_SCALE_FLAG_ANTIALIAS
)

// Interpolate is ggml_interpolate: resamples the first two dims of t:[W, H, C, N]
// to [w, h, C, N]. Bilinear without ScaleAlignCorners uses half-pixel centres
// like torch's align_corners=False.
func (t *Tensor) Interpolate(g *Context, w, h int, mode ScaleMode) *Tensor {
	notNil("interpolate", t)
	mustf(w > 0 && h > 0, "interpolate", []*Tensor{t}, "target size %dx%d must be positive", w, h)
	base := mode & 0xFF
	mustf(base == ScaleNearest || base == ScaleBilinear || base == ScaleBicubic, "interpolate", []*Tensor{t}, "unknown mode %#x", uint32(mode))
	mustf(mode&ScaleAntialias == 0 || base == ScaleBilinear, "interpolate", []*Tensor{t}, "antialias needs bilinear")
	g.reserve("interpolate", 1)
	return g.wrap("interpolate", C.ggml_interpolate(g.c, t.p, C.int64_t(w), C.int64_t(h), C.int64_t(t.ne(2)), C.int64_t(t.ne(3)), C.uint32_t(mode)))
}

// RoPEMode is ggml's rope type.
type RoPEMode int

const (
	RoPENormal RoPEMode = 0
	RoPENeoX   RoPEMode = C.GGML_ROPE_TYPE_NEOX
	RoPEMRoPE  RoPEMode = C.GGML_ROPE_TYPE_MROPE
	RoPEVision RoPEMode = C.GGML_ROPE_TYPE_VISION
)

// RoPEParams are rope_ext's frequency parameters. The zero value of the YaRN
// fields disables YaRN (FreqScale 0 means 1, AttnFactor 0 means 1).
type RoPEParams struct {
	Dims                     int      // rotated dims of each row (ne0); 0 means all
	Mode                     RoPEMode // RoPENeoX rotates (i, i+Dims/2) pairs
	Base                     float32  // frequency base θ: f_k = Base^(−2k/Dims)
	FreqScale                float32
	ExtFactor, AttnFactor    float32
	BetaFast, BetaSlow       float32
	OrigCtx                  int
	FreqFactors              *Tensor // optional F32 [Dims/2] divisors of the frequencies
}

func (p RoPEParams) norm(ne0 int64) RoPEParams {
	if p.Dims == 0 {
		p.Dims = int(ne0)
	}
	if p.FreqScale == 0 {
		p.FreqScale = 1
	}
	if p.AttnFactor == 0 {
		p.AttnFactor = 1
	}
	return p
}

// RoPEExt is ggml_rope_ext: rotary position embedding of t:[D, heads, tokens, B]
// with one I32 position per token (pos:[tokens]).
func (t *Tensor) RoPEExt(g *Context, pos *Tensor, p RoPEParams) *Tensor {
	notNil("rope_ext", t, pos)
	ts := []*Tensor{t, pos}
	p = p.norm(t.ne(0))
	mustf(pos.Type() == TypeI32 && pos.NDims() == 1, "rope_ext", ts, "positions must be an i32 vector")
	mustf(pos.ne(0) == t.ne(2), "rope_ext", ts, "need one position per token (ne2 = %d), got %d", t.ne(2), pos.ne(0))
	mustf(p.Dims > 0 && p.Dims%2 == 0 && int64(p.Dims) <= t.ne(0), "rope_ext", ts, "rotated dims %d must be even and at most ne0", p.Dims)
	mustf(p.Mode&1 == 0 && p.Mode != RoPEMRoPE && p.Mode != RoPEVision, "rope_ext", ts, "mode %d needs RoPEMulti", p.Mode)
	var ff *C.struct_ggml_tensor
	if p.FreqFactors != nil {
		mustf(p.FreqFactors.Type() == TypeF32 && p.FreqFactors.ne(0) >= int64(p.Dims/2), "rope_ext", ts, "freq factors must be f32 with at least Dims/2 entries")
		ff = p.FreqFactors.p
	}
	g.reserve("rope_ext", 1)
	return g.wrap("rope_ext", C.ggml_rope_ext(g.c, t.p, pos.p, ff, C.int(p.Dims), C.int(p.Mode), C.int(p.OrigCtx), C.float(p.Base), C.float(p.FreqScale), C.float(p.ExtFactor), C.float(p.AttnFactor), C.float(p.BetaFast), C.float(p.BetaSlow)))
}

// RoPEMulti is ggml_rope_multi: multi-section RoPE (Qwen2-VL's M-RoPE, or
// RoPEVision for 2-D image positions). pos holds 4 I32 positions per token
// (pos:[4·tokens], section-major); sections gives the rotated pairs per section.
func (t *Tensor) RoPEMulti(g *Context, pos *Tensor, sections [4]int, p RoPEParams) *Tensor {
	notNil("rope_multi", t, pos)
	ts := []*Tensor{t, pos}
	p = p.norm(t.ne(0))
	mustf(p.Mode == RoPEMRoPE || p.Mode == RoPEVision, "rope_multi", ts, "mode must be RoPEMRoPE or RoPEVision")
	mustf(pos.Type() == TypeI32 && pos.NDims() == 1 && pos.ne(0) == 4*t.ne(2), "rope_multi", ts, "need 4 i32 positions per token (%d), got %d", 4*t.ne(2), pos.ne(0))
	mustf(p.Dims > 0 && int64(p.Dims) <= t.ne(0), "rope_multi", ts, "rotated dims %d out of range", p.Dims)
	var ff *C.struct_ggml_tensor
	if p.FreqFactors != nil {
		ff = p.FreqFactors.p
	}
	sec := [4]C.int{C.int(sections[0]), C.int(sections[1]), C.int(sections[2]), C.int(sections[3])}
	g.reserve("rope_multi", 1)
	return g.wrap("rope_multi", C.ggml_rope_multi(g.c, t.p, pos.p, ff, C.int(p.Dims), &sec[0], C.int(p.Mode), C.int(p.OrigCtx), C.float(p.Base), C.float(p.FreqScale), C.float(p.ExtFactor), C.float(p.AttnFactor), C.float(p.BetaFast), C.float(p.BetaSlow)))
}

// FlashAttnExt is ggml_flash_attn_ext: softmax(q·kᵀ·scale + mask)·v fused.
// q:[D, Nq, H, B], k:[D, Nk, Hkv, B], v:[Dv, Nk, Hkv, B] (H a multiple of Hkv)
// gives [Dv, H, Nq, B] — note heads before queries. mask (optional) must be F16
// [Nk, Nq padded to GGML_KQ_MASK_PAD]. F32 accumulation.
func (q *Tensor) FlashAttnExt(g *Context, k, v, mask *Tensor, scale float32) *Tensor {
	notNil("flash_attn_ext", q, k, v)
	ts := []*Tensor{q, k, v}
	mustf(k.ne(0) == q.ne(0), "flash_attn_ext", ts, "q and k head dims differ")
	mustf(k.ne(2) != 0 && q.ne(2)%k.ne(2) == 0 && q.ne(3)%k.ne(3) == 0, "flash_attn_ext", ts, "q heads must be a multiple of k heads")
	mustf(k.ne(1) == v.ne(1) && k.ne(2) == v.ne(2), "flash_attn_ext", ts, "k and v must have the same tokens and heads")
	mustf(q.ne(3) == k.ne(3) && q.ne(3) == v.ne(3), "flash_attn_ext", ts, "batch dims differ")
	var m *C.struct_ggml_tensor
	if mask != nil {
		mustf(mask.Type() == TypeF16 && mask.IsContiguous(), "flash_attn_ext", append(ts, mask), "mask must be contiguous f16")
		mustf(mask.ne(0) == k.ne(1) && mask.ne(1) >= q.ne(1), "flash_attn_ext", append(ts, mask), "mask must be [Nk, >=Nq]")
		m = mask.p
	}
	g.reserve("flash_attn_ext", 1)
	r := C.ggml_flash_attn_ext(g.c, q.p, k.p, v.p, m, C.float(scale), 0, 0)
	C.ggml_flash_attn_ext_set_prec(r, C.GGML_PREC_F32)
	return g.wrap("flash_attn_ext", r)
}

// CustomOp is a CPU kernel written in C inside this package, run by
// ggml_custom_4d. Kernels receive the destination tensor (its sources hold the
// arguments), the thread index and count, and an integer parameter.
type CustomOp struct {
	name string
	fn   C.ggml_custom_op_t
}

// Name is the kernel's name.
func (op CustomOp) Name() string { return op.name }

// Custom adds a node computed by the CPU kernel op (ggml_custom_4d): the result
// has type typ and the given shape; args become its sources; param is passed
// to the kernel. Graphs that use custom ops run on the CPU backend only.
func (g *Context) Custom(op CustomOp, typ Type, shape []int, args []*Tensor, param int) *Tensor {
	ne := normShape("custom", shape)
	if op.fn == nil {
		panic(&ShapeError{Op: "custom", Msg: "zero CustomOp"})
	}
	if len(args) >= C.GGML_MAX_SRC {
		panic(&ShapeError{Op: "custom", Msg: fmt.Sprintf("%d arguments, at most %d", len(args), C.GGML_MAX_SRC-1)})
	}
	notNil("custom", args...)
	cargs := make([]*C.struct_ggml_tensor, len(args)+1)
	for i, a := range args {
		cargs[i] = a.p
	}
	g.reserve("custom", 1)
	// The args array is copied into the node by ggml; it is not retained.
	p := C.da3_custom_4d(g.c, C.enum_ggml_type(typ), C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]),
		(**C.struct_ggml_tensor)(unsafe.Pointer(&cargs[0])), C.int(len(args)), op.fn, C.intptr_t(param))
	return g.wrap("custom", p)
}
