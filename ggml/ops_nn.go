package ggml

/*
#include <stdint.h>
#include "da3_ggml.h"
static struct ggml_tensor * da3_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
        struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun, intptr_t param, int * abort_flag) {
    struct ggml_tensor * t = ggml_custom_4d(ctx, type, ne0, ne1, ne2, ne3, args, n_args, fun, GGML_N_TASKS_MAX, (void *) param);
    memcpy((char *) t->op_params + DA3_ABORT_OFFSET, &abort_flag, sizeof abort_flag);
    return t;
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

// Norm returns the stride, padding and dilation with the zero value's
// defaults applied (stride and dilation 1).
func (p Conv2DParams) Norm() (stride, pad, dilation int) {
	stride, pad, dilation = p.Stride, p.Pad, p.Dilation
	if stride <= 0 {
		stride = 1
	}
	if dilation <= 0 {
		dilation = 1
	}
	return stride, pad, dilation
}

// OutSize is the output size of a convolution with kernel kw×kh over a w×h
// input: (w + 2·pad − dil·(kw−1) − 1)/stride + 1, and likewise for h. It is
// not positive when the kernel does not fit the padded input.
func (p Conv2DParams) OutSize(w, h, kw, kh int) (ow, oh int) {
	s, pad, d := p.Norm()
	return convOut(w, kw, s, pad, d), convOut(h, kh, s, pad, d)
}

func convOut(in, k, s, p, d int) int { return (in+2*p-d*(k-1)-1)/s + 1 }

func (t *Tensor) checkConv(op string, x *Tensor, p Conv2DParams) {
	notNil(op, t, x)
	ts := []*Tensor{t, x}
	mustf(p.Pad >= 0, op, ts, "negative padding")
	mustf(t.Type() == TypeF32 || t.Type() == TypeF16, op, ts, "kernel must be f32 or f16, not %s", t.Type())
	mustf(x.Type() == TypeF32, op, ts, "data must be f32, not %s", x.Type())
	mustf(t.ne(2) == x.ne(2), op, ts, "kernel input channels %d != data channels %d", t.ne(2), x.ne(2))
	ow, oh := p.OutSize(int(x.ne(0)), int(x.ne(1)), int(t.ne(0)), int(t.ne(1)))
	mustf(ow > 0 && oh > 0, op, ts, "input %dx%d too small for kernel %dx%d", x.ne(0), x.ne(1), t.ne(0), t.ne(1))
}

// Im2Col is ggml_im2col for 2-D: unfolds x:[W, H, IC, N] for the kernel shape
// of t:[KW, KH, IC, OC] into [IC·KH·KW, OW, OH, N] of type dst; patch element
// (ic, ky, kx) is at ic·KH·KW + ky·KW + kx. Only t's shape is used (and its
// type: dst F16 needs an F16 t). x must be F32 with dense planes.
func (t *Tensor) Im2Col(g *Context, x *Tensor, p Conv2DParams, dst Type) *Tensor {
	t.checkConv("im2col", x, p)
	ts := []*Tensor{t, x}
	mustf(x.denseRows(), "im2col", ts, "data planes must be dense (nb1 = ne0·4): use Cont")
	mustf(dst == TypeF32 || (dst == TypeF16 && t.Type() == TypeF16), "im2col", ts, "result type must be f32, or f16 with an f16 kernel")
	s, pad, d := p.Norm()
	g.reserve("im2col", 1)
	return g.wrap("im2col", C.ggml_im2col(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d), true, C.enum_ggml_type(dst)))
}

// Conv2D is ggml_conv_2d (im2col followed by a matrix product): kernel
// t:[KW, KH, IC, OC] over x:[W, H, IC, N] gives [OW, OH, OC, N] with
// OW = (W + 2·pad − dil·(KW−1) − 1)/stride + 1. No bias. The kernel is F32
// or F16 (then the data is rounded to F16) and contiguous; x is F32 with
// dense planes.
func (t *Tensor) Conv2D(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	t.checkConv("conv_2d", x, p)
	mustf(t.IsContiguous(), "conv_2d", []*Tensor{t, x}, "kernel must be contiguous")
	mustf(x.denseRows(), "conv_2d", []*Tensor{t, x}, "data planes must be dense (nb1 = ne0·4): use Cont")
	s, pad, d := p.Norm()
	g.reserve("conv_2d", 8)
	return g.wrap("conv_2d", C.ggml_conv_2d(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d)))
}

// Conv2DDirect is ggml_conv_2d_direct: the same convolution as Conv2D computed
// without materialising the whole im2col matrix (the CPU kernel unfolds
// patches in batches into its work buffer). x may have any strides.
func (t *Tensor) Conv2DDirect(g *Context, x *Tensor, p Conv2DParams) *Tensor {
	t.checkConv("conv_2d_direct", x, p)
	mustf(t.IsContiguous(), "conv_2d_direct", []*Tensor{t, x}, "kernel must be contiguous")
	s, pad, d := p.Norm()
	g.reserve("conv_2d_direct", 1)
	return g.wrap("conv_2d_direct", C.ggml_conv_2d_direct(g.c, t.p, x.p, C.int(s), C.int(s), C.int(pad), C.int(pad), C.int(d), C.int(d)))
}

// ConvTranspose2D is ggml_conv_transpose_2d_p0, a transposed convolution with
// padding 0: kernel t:[KW, KH, OC, IC] (PyTorch (IC, OC, KH, KW) reversed)
// over x:[W, H, IC, N] gives [(W−1)·stride+KW, (H−1)·stride+KH, OC, N].
// The CPU kernel needs a contiguous F16 kernel and rounds x to F16 (products
// are summed in F32); for exact F32 use the matrix-product form in model/nn
// when stride equals the kernel size. The CPU kernel computes only the first
// image of a batch, so for N > 1 the binding convolves each image of x
// separately and concatenates the results.
func (t *Tensor) ConvTranspose2D(g *Context, x *Tensor, stride int) *Tensor {
	notNil("conv_transpose_2d_p0", t, x)
	ts := []*Tensor{t, x}
	mustf(stride > 0, "conv_transpose_2d_p0", ts, "stride must be positive")
	mustf(t.ne(3) == x.ne(2), "conv_transpose_2d_p0", ts, "kernel input channels %d != data channels %d", t.ne(3), x.ne(2))
	mustf(t.Type() == TypeF16 && t.IsContiguous(), "conv_transpose_2d_p0", ts, "kernel must be contiguous f16 (ggml's CPU kernel supports only f16); Cast it")
	mustf(x.Type() == TypeF32 && x.rowsContiguous(), "conv_transpose_2d_p0", ts, "data must be f32 with contiguous rows")
	n := int(x.ne(3))
	if n <= 1 {
		g.reserve("conv_transpose_2d_p0", 1)
		return g.wrap("conv_transpose_2d_p0", C.ggml_conv_transpose_2d_p0(g.c, t.p, x.p, C.int(stride)))
	}
	g.reserve("conv_transpose_2d_p0", 3*n-1)
	var out *C.struct_ggml_tensor
	for i := 0; i < n; i++ {
		xi := C.ggml_view_4d(g.c, x.p, x.p.ne[0], x.p.ne[1], x.p.ne[2], 1, x.p.nb[1], x.p.nb[2], x.p.nb[3], C.size_t(i)*x.p.nb[3])
		yi := C.ggml_conv_transpose_2d_p0(g.c, t.p, xi, C.int(stride))
		if out == nil {
			out = yi
		} else {
			out = C.ggml_concat(g.c, out, yi, 3)
		}
	}
	return g.wrap("conv_transpose_2d_p0", out)
}

// PoolOp selects max or average pooling.
type PoolOp int

const (
	PoolMax PoolOp = C.GGML_OP_POOL_MAX
	PoolAvg PoolOp = C.GGML_OP_POOL_AVG
)

// Pool2D is ggml_pool_2d over x:[W, H, C, N] with kernel k, stride s and
// padding p (the same on both axes): [(W+2p−k)/s+1, (H+2p−k)/s+1, C, N], F32.
// Like PyTorch (ceil_mode=False), padding never wins a max and counts as
// zeros in an average (count_include_pad=True). t must be contiguous.
func (t *Tensor) Pool2D(g *Context, op PoolOp, k, s, p int) *Tensor {
	notNil("pool_2d", t)
	mustf(k > 0 && s > 0 && p >= 0, "pool_2d", []*Tensor{t}, "kernel and stride must be positive, padding non-negative")
	mustf(op == PoolMax || op == PoolAvg, "pool_2d", []*Tensor{t}, "unknown pool op %d", op)
	mustf(t.IsContiguous() && (t.Type() == TypeF32 || t.Type() == TypeF16), "pool_2d", []*Tensor{t}, "operand must be contiguous f32 or f16 (use Cont)")
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
// (F32, any strides) to [w, h, C, N]. The modes follow PyTorch's
// F.interpolate called with size=(h, w), i.e. scale = in/out (the tests check
// each against torch's formulas):
//
//   - ScaleBilinear is mode="bilinear" with half-pixel centres
//     (align_corners=False); ScaleBilinear|ScaleAlignCorners is
//     align_corners=True. They agree with torch to float rounding.
//   - ScaleBicubic is mode="bicubic" (A = −0.75, clamped borders), with or
//     without ScaleAlignCorners; also agrees to float rounding.
//   - ScaleNearest is mode="nearest" except where the exact source position
//     is an integer: ggml computes floor(dst / float32(out/in)) and can pick
//     the pixel before torch's floor(dst · float32(in/out)) (14 → 4 picks
//     columns 0 3 6 10, torch 0 3 7 10; 518 → 37 picks 14·i − 1 for most i).
//
// Calls that give torch a scale_factor (without recompute_scale_factor) use
// 1/scale_factor instead of in/out; ggml cannot: DINOv2's position-embedding
// resize with scale (ph+0.1)/37 must be computed another way.
func (t *Tensor) Interpolate(g *Context, w, h int, mode ScaleMode) *Tensor {
	notNil("interpolate", t)
	mustf(w > 0 && h > 0, "interpolate", []*Tensor{t}, "target size %dx%d must be positive", w, h)
	mustf(t.Type() == TypeF32, "interpolate", []*Tensor{t}, "operand must be f32, not %s", t.Type())
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
	Dims                  int      // rotated dims of each row (ne0); 0 means all
	Mode                  RoPEMode // RoPENeoX rotates (i, i+Dims/2) pairs
	Base                  float32  // frequency base θ: f_k = Base^(−2k/Dims)
	FreqScale             float32
	ExtFactor, AttnFactor float32
	BetaFast, BetaSlow    float32
	OrigCtx               int
	FreqFactors           *Tensor // optional F32 [Dims/2] divisors of the frequencies
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
// with one I32 position per token (pos:[tokens]). With RoPENeoX the pairs
// (k, k+Dims/2), k < Dims/2, of each row rotate by θ = pos·Base^(−2k/Dims)
// (dims from Dims on are copied); RoPENormal rotates adjacent pairs
// (2k, 2k+1). t's rows must be contiguous; it may be a permuted view.
func (t *Tensor) RoPEExt(g *Context, pos *Tensor, p RoPEParams) *Tensor {
	notNil("rope_ext", t, pos)
	ts := []*Tensor{t, pos}
	p = p.norm(t.ne(0))
	mustf(t.Type() == TypeF32 || t.Type() == TypeF16, "rope_ext", ts, "operand must be f32 or f16")
	mustf(t.rowsContiguous(), "rope_ext", ts, "operand rows must be contiguous")
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
// (pos:[4·tokens], section-major: pos[s·tokens + i] is token i's position in
// section s); sections gives the rotated pairs per section.
//
// With RoPEVision, Dims must be ne0/2 = n: pair (i, i+n), i < n, belongs to
// the section s with s0+…+s(s−1) <= i mod Σsections < s0+…+s(s), and rotates
// by θ = pos[s·tokens + token]·Base^(−2j/n) where j is i's index within its
// section (frequencies restart in each section). This is not DA3's 2-D RoPE,
// whose pairs are (k, k+16) within each 32-dim half: build that with RoPEExt.
func (t *Tensor) RoPEMulti(g *Context, pos *Tensor, sections [4]int, p RoPEParams) *Tensor {
	notNil("rope_multi", t, pos)
	ts := []*Tensor{t, pos}
	p = p.norm(t.ne(0))
	mustf(p.Mode == RoPEMRoPE || p.Mode == RoPEVision, "rope_multi", ts, "mode must be RoPEMRoPE or RoPEVision")
	mustf(pos.Type() == TypeI32 && pos.NDims() == 1 && pos.ne(0) == 4*t.ne(2), "rope_multi", ts, "need 4 i32 positions per token (%d), got %d", 4*t.ne(2), pos.ne(0))
	mustf(t.Type() == TypeF32 || t.Type() == TypeF16, "rope_multi", ts, "operand must be f32 or f16")
	mustf(t.rowsContiguous(), "rope_multi", ts, "operand rows must be contiguous")
	mustf(p.Dims > 0 && p.Dims%2 == 0 && int64(p.Dims) <= t.ne(0), "rope_multi", ts, "rotated dims %d must be even and at most ne0", p.Dims)
	mustf(p.Mode != RoPEVision || int64(p.Dims) == t.ne(0)/2, "rope_multi", ts, "vision RoPE rotates (i, i+ne0/2): Dims must be ne0/2 = %d, got %d", t.ne(0)/2, p.Dims)
	secSum := 0
	for _, sec := range sections {
		mustf(sec >= 0, "rope_multi", ts, "negative section %v", sections)
		secSum += sec
	}
	mustf(sections[0] > 0 || sections[1] > 0 || sections[2] > 0, "rope_multi", ts, "sections %v: one of the first three must be positive", sections)
	mustf(int64(secSum) <= t.ne(0), "rope_multi", ts, "sections %v add up to more than ne0", sections)
	var ff *C.struct_ggml_tensor
	if p.FreqFactors != nil {
		mustf(p.FreqFactors.Type() == TypeF32 && p.FreqFactors.ne(0) >= int64(p.Dims/2), "rope_multi", ts, "freq factors must be f32 with at least Dims/2 entries")
		ff = p.FreqFactors.p
	}
	sec := [4]C.int{C.int(sections[0]), C.int(sections[1]), C.int(sections[2]), C.int(sections[3])}
	g.reserve("rope_multi", 1)
	return g.wrap("rope_multi", C.ggml_rope_multi(g.c, t.p, pos.p, ff, C.int(p.Dims), &sec[0], C.int(p.Mode), C.int(p.OrigCtx), C.float(p.Base), C.float(p.FreqScale), C.float(p.ExtFactor), C.float(p.AttnFactor), C.float(p.BetaFast), C.float(p.BetaSlow)))
}

// FlashAttnExt is ggml_flash_attn_ext: softmax(q·kᵀ·scale + mask)·v fused.
// q:[D, Nq, H, B], k:[D, Nk, Hkv, B], v:[Dv, Nk, Hkv, B] (H a multiple of Hkv)
// gives [Dv, H, Nq, B] — note heads before queries. q is F32; k and v share a
// type (F32, F16, BF16 or Q8_0); rows must be contiguous (permuted views are
// fine). mask (optional) is F16 [Nk, >=Nq, m2, m3] with m2 | H and m3 | B.
// The F32 precision is requested, but ggml's CPU kernel converts q to k's type
// for q·k and, for F16 v, accumulates the output in F16 (relative error about
// 1e-3).
func (q *Tensor) FlashAttnExt(g *Context, k, v, mask *Tensor, scale float32) *Tensor {
	notNil("flash_attn_ext", q, k, v)
	ts := []*Tensor{q, k, v}
	mustf(k.ne(0) == q.ne(0), "flash_attn_ext", ts, "q and k head dims differ")
	mustf(k.ne(2) != 0 && q.ne(2)%k.ne(2) == 0 && q.ne(3)%k.ne(3) == 0, "flash_attn_ext", ts, "q heads must be a multiple of k heads")
	mustf(k.ne(1) == v.ne(1) && k.ne(2) == v.ne(2), "flash_attn_ext", ts, "k and v must have the same tokens and heads")
	mustf(q.ne(3) == k.ne(3) && q.ne(3) == v.ne(3), "flash_attn_ext", ts, "batch dims differ")
	mustf(q.Type() == TypeF32, "flash_attn_ext", ts, "q must be f32")
	mustf(k.Type() == v.Type() && (k.Type() == TypeF32 || k.Type() == TypeF16 || k.Type() == TypeBF16 || k.Type() == TypeQ8_0), "flash_attn_ext", ts, "k and v must both be f32, f16, bf16 or q8_0")
	mustf(q.rowsContiguous() && k.rowsContiguous() && v.rowsContiguous(), "flash_attn_ext", ts, "q, k and v rows must be contiguous")
	var m *C.struct_ggml_tensor
	if mask != nil {
		ts = append(ts, mask)
		mustf(mask.Type() == TypeF16 && mask.IsContiguous(), "flash_attn_ext", ts, "mask must be contiguous f16")
		mustf(mask.ne(0) == k.ne(1) && mask.ne(1) >= q.ne(1), "flash_attn_ext", ts, "mask must be [Nk, >=Nq]")
		mustf(q.ne(2)%mask.ne(2) == 0 && q.ne(3)%mask.ne(3) == 0, "flash_attn_ext", ts, "mask dims 2 and 3 must divide q's heads and batch")
		m = mask.p
	}
	g.reserve("flash_attn_ext", 1)
	r := C.ggml_flash_attn_ext(g.c, q.p, k.p, v.p, m, C.float(scale), 0, 0)
	C.ggml_flash_attn_ext_set_prec(r, C.GGML_PREC_F32)
	return g.wrap("flash_attn_ext", r)
}

// Custom is ggml_custom_4d: a node of type typ and the given shape computed
// on the CPU backend by the C function fn, a ggml_custom_op_t
// (void fn(struct ggml_tensor * dst, int ith, int nth, void * userdata))
// defined in a cgo package and passed as unsafe.Pointer(C.fn). args become
// the node's sources (dst->src[i]); userdata is passed to every call. The
// node may use all threads (GGML_N_TASKS_MAX). The node carries the abort
// flag of the backend given to SetAbort (see DA3_ABORT_OFFSET in
// da3_ggml.h), which fn may poll to stop early.
//
// Nothing here checks what fn does with its arguments: a package that
// defines kernels should keep fn unexported and check the operands in the
// function that calls Custom (as ggml/kernels does).
func (g *Context) Custom(fn unsafe.Pointer, typ Type, shape []int, args []*Tensor, userdata uintptr) *Tensor {
	ne := normShape("custom", shape)
	if fn == nil {
		panic(&ShapeError{Op: "custom", Msg: "nil kernel function"})
	}
	if !typ.Valid() {
		panic(&ShapeError{Op: "custom", Msg: fmt.Sprintf("invalid type %d", typ)})
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
		(**C.struct_ggml_tensor)(unsafe.Pointer(&cargs[0])), C.int(len(args)), C.ggml_custom_op_t(fn), C.intptr_t(userdata), g.abort)
	return g.wrap("custom", p)
}
