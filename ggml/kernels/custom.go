package kernels

// #include "custom.h"
import "C"

import (
	"math"
	"slices"
	"unsafe"

	"github.com/da3-go/da3-go/ggml"
)

// opBilinear is the C kernel of Bilinear (see opGEMM).
var opBilinear = unsafe.Pointer(C.da3_op_bilinear)

// BilinearFits reports whether Bilinear accepts x and the target size: x
// F32 and contiguous, w and h positive.
func BilinearFits(x *ggml.Tensor, w, h int) bool {
	return x != nil && x.Type() == ggml.TypeF32 && x.IsContiguous() && w > 0 && h > 0
}

// Bilinear is x.Interpolate(g, w, h, ggml.ScaleBilinear), or with
// ggml.ScaleAlignCorners when alignCorners, as a CPU kernel that computes
// the per-column source positions and weights once per call instead of
// once per element, and splits rows rather than channels over the threads
// (same formula, same results to float rounding): x [W, H, C, N] gives [w,
// h, C, N]. It panics with a *ggml.ShapeError unless BilinearFits(x, w, h).
// CPU backend only; portable (no AVX-512 needed).
func Bilinear(g *ggml.Context, x *ggml.Tensor, w, h int, alignCorners bool) *ggml.Tensor {
	mustFit(BilinearFits(x, w, h), "bilinear", []*ggml.Tensor{x}, "want a contiguous f32 operand and a positive size, got %dx%d", w, h)
	align := uintptr(0)
	if alignCorners {
		align = 1
	}
	return g.Custom(opBilinear, ggml.TypeF32, []int{w, h, x.Dim(2), x.Dim(3)}, []*ggml.Tensor{x}, align)
}

// opBilinearWindow is the C kernel of BilinearWindow.
var opBilinearWindow = unsafe.Pointer(C.da3_op_bilinear_window)

// windowMax bounds the sizes and offsets BilinearWindow packs into its
// userdata (20 bits each).
const windowMax = 1 << 20

// BilinearWindowFits reports whether BilinearWindow accepts its operands:
// those of Bilinear, rows [y0, y0+rows) inside the fw×fh target, pad at most
// 7, ux and uy both nil or contiguous f32 [fw, C] and [fh, C], sizes below
// 2^20, and 64-bit pointers (the parameters travel in the userdata).
func BilinearWindowFits(x, ux, uy *ggml.Tensor, fw, fh, y0, rows, pad int) bool {
	table := func(t *ggml.Tensor, n int) bool {
		return t.Type() == ggml.TypeF32 && t.IsContiguous() && t.Dim(0) == n && t.Dim(1) == x.Dim(2) && t.Dim(2) == 1 && t.Dim(3) == 1
	}
	return unsafe.Sizeof(uintptr(0)) >= 8 && BilinearFits(x, fw, fh) && fw < windowMax && fh < windowMax &&
		y0 >= 0 && rows > 0 && y0+rows <= fh && pad >= 0 && pad <= 7 &&
		(ux == nil && uy == nil || ux != nil && uy != nil && table(ux, fw) && table(uy, fh))
}

// BilinearWindow is a window of Bilinear(g, x, fw, fh, alignCorners), plus
// ux[x, c] + uy[y, c] at each pixel (x, y) when the tables are not nil (a
// separable embedding such as DA3's UV; ux [fw, C], uy [fh, C]): its rows
// [y0, y0+rows) with pad zero pixels on every side, [fw+2·pad, rows+2·pad,
// C, N] (rows outside the image are zero too). A convolution with that
// padding then runs on a strip of rows without the whole resized map ever
// existing: the full-resolution tail of the DPT heads runs in strips this
// way. It panics with a *ggml.ShapeError unless BilinearWindowFits. CPU
// backend only; portable.
func BilinearWindow(g *ggml.Context, x, ux, uy *ggml.Tensor, fw, fh, y0, rows, pad int, alignCorners bool) *ggml.Tensor {
	mustFit(BilinearWindowFits(x, ux, uy, fw, fh, y0, rows, pad), "bilinear window", []*ggml.Tensor{x, ux, uy},
		"want a contiguous f32 operand, rows %d..%d of %dx%d, pad %d and matching tables", y0, y0+rows, fw, fh, pad)
	u := uint64(pad)<<1 | uint64(y0)<<4 | uint64(fw)<<24 | uint64(fh)<<44
	if alignCorners {
		u |= 1
	}
	srcs := []*ggml.Tensor{x}
	if ux != nil {
		srcs = append(srcs, ux, uy)
	}
	return g.Custom(opBilinearWindow, ggml.TypeF32, []int{fw + 2*pad, rows + 2*pad, x.Dim(2), x.Dim(3)}, srcs, uintptr(u))
}

// opLayerNorm is the C kernel of LayerNorm.
var opLayerNorm = unsafe.Pointer(C.da3_op_layer_norm)

// LayerNormFits reports whether LayerNorm accepts its operands: x F32 with
// contiguous rows (any strides above them), w and b F32, contiguous, with
// one value per channel (x's ne0).
func LayerNormFits(x, w, b *ggml.Tensor) bool {
	affine := func(t *ggml.Tensor) bool {
		return t != nil && t.Type() == ggml.TypeF32 && t.IsContiguous() && t.Elements() == x.Dim(0)
	}
	return x != nil && x.Type() == ggml.TypeF32 && x.Stride(0) == 4 && affine(w) && affine(b)
}

// LayerNormRoPEFits reports whether LayerNormRoPE accepts its operands:
// those of LayerNormFits, x [C, H, T, S] with C a multiple of 4, and an F32
// contiguous table cs [C, T].
func LayerNormRoPEFits(x, w, b, cs *ggml.Tensor) bool {
	return LayerNormFits(x, w, b) && cs != nil && cs.Type() == ggml.TypeF32 && cs.IsContiguous() &&
		x.Dim(0)%4 == 0 && cs.Dim(0) == x.Dim(0) && cs.Dim(1) == x.Dim(2) && cs.Elements() == x.Dim(0)*x.Dim(2)
}

// LayerNormRoPE is LayerNorm followed by a 2-D rotary embedding in the same
// pass (DA3's QK norm, then its RotaryPositionEmbedding2D): each row of x
// [C, H, T, S] (a head of token t) is normalized, then its first half
// rotated by the angles of the token's y position and its second half by
// those of its x position, as NeoX pairs (i, i + C/4) within each half. cs
// [C, T] holds per token the cosines and sines: cos_y, sin_y, cos_x, sin_x,
// C/4 values each. One node instead of the norm, two ropes and a concat.
// It panics with a *ggml.ShapeError unless LayerNormRoPEFits. CPU backend
// only; portable.
func LayerNormRoPE(g *ggml.Context, x, w, b, cs *ggml.Tensor, eps float32) *ggml.Tensor {
	mustFit(LayerNormRoPEFits(x, w, b, cs), "layer norm + rope", []*ggml.Tensor{x, w, b, cs}, "want f32 rows of a multiple of 4, an f32 weight and bias of one value per channel and an f32 table [C, T]")
	return g.Custom(opLayerNorm, ggml.TypeF32, []int{x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)}, []*ggml.Tensor{x, w, b, cs}, uintptr(math.Float32bits(eps)))
}

// LayerNorm is x.Norm(g, eps).Mul(g, w).Add(g, b) as one CPU kernel: each
// row is read once from memory and swept three times in L1 (mean, variance,
// output), and the affine weight and bias are applied as it is written,
// instead of three graph nodes with a pass over the whole tensor each. x
// [C, …] may be a view (q or k of a fused projection); the result is
// contiguous, of x's shape. It panics with a *ggml.ShapeError unless
// LayerNormFits. CPU backend only; portable.
func LayerNorm(g *ggml.Context, x, w, b *ggml.Tensor, eps float32) *ggml.Tensor {
	mustFit(LayerNormFits(x, w, b), "layer norm", []*ggml.Tensor{x, w, b}, "want f32 rows and an f32 weight and bias of one value per channel")
	return g.Custom(opLayerNorm, ggml.TypeF32, []int{x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)}, []*ggml.Tensor{x, w, b}, uintptr(math.Float32bits(eps)))
}

// opSumParts is the C kernel of SumParts.
var opSumParts = unsafe.Pointer(C.da3_op_sum_parts)

// SumPartsFits reports whether SumParts accepts x: F32 and contiguous.
func SumPartsFits(x *ggml.Tensor) bool {
	return x != nil && x.Type() == ggml.TypeF32 && x.IsContiguous()
}

// SumParts is the sums [parts] of parts equal runs of x's values (in
// order), computed on all the graph's threads (ggml's Sum runs on one): a
// probe that is NaN or Inf when a value of x is. It panics with a
// *ggml.ShapeError unless SumPartsFits(x) and parts >= 1. CPU backend only;
// portable.
func SumParts(g *ggml.Context, x *ggml.Tensor, parts int) *ggml.Tensor {
	mustFit(SumPartsFits(x) && parts >= 1, "sum_parts", []*ggml.Tensor{x}, "want a contiguous f32 operand and at least one part, got %d", parts)
	return g.Custom(opSumParts, ggml.TypeF32, []int{parts}, []*ggml.Tensor{x}, 0)
}

// opStackRows is the C kernel of StackRows.
var opStackRows = unsafe.Pointer(C.da3_op_stack_rows)

// MaxStack is the most maps StackRows takes at once.
const MaxStack = C.GGML_MAX_SRC - 1

// StackRowsFits reports whether StackRows accepts ts: 1 to MaxStack
// contiguous F32 maps [W, h_i, C, S] of equal W, C and S.
func StackRowsFits(ts []*ggml.Tensor) bool {
	if len(ts) < 1 || len(ts) > MaxStack || !nonNil(ts...) {
		return false
	}
	for _, t := range ts {
		if t.Type() != ggml.TypeF32 || !t.IsContiguous() || t.Dim(0) != ts[0].Dim(0) || t.Dim(2) != ts[0].Dim(2) || t.Dim(3) != ts[0].Dim(3) {
			return false
		}
	}
	return true
}

// StackRows is the maps ts [W, h_i, C, S] stacked along the rows (dim 1),
// the values of ts[0].Concat(g, ts[1], 1).Concat(g, ts[2], 1)… with each
// value copied once. It panics with a *ggml.ShapeError unless
// StackRowsFits(ts). CPU backend only; portable.
func StackRows(g *ggml.Context, ts []*ggml.Tensor) *ggml.Tensor {
	mustFit(StackRowsFits(ts), "stack_rows", ts, "want 1 to %d contiguous f32 maps [W, h, C, S] of equal W, C and S", MaxStack)
	h := 0
	for _, t := range ts {
		h += t.Dim(1)
	}
	return g.Custom(opStackRows, ggml.TypeF32, []int{ts[0].Dim(0), h, ts[0].Dim(2), ts[0].Dim(3)}, ts, 0)
}

// opAddScaled is the C kernel of AddScaled.
var opAddScaled = unsafe.Pointer(C.da3_op_add_scaled)

// AddScaledFits reports whether AddScaled accepts x, y and gamma: x and y
// contiguous F32 of one shape, gamma a contiguous F32 vector of x.Dim(0).
func AddScaledFits(x, y, gamma *ggml.Tensor) bool {
	return nonNil(x, y, gamma) && x.Type() == ggml.TypeF32 && y.Type() == ggml.TypeF32 && gamma.Type() == ggml.TypeF32 &&
		x.IsContiguous() && y.IsContiguous() && gamma.IsContiguous() && slices.Equal(dims(x), dims(y)) &&
		gamma.Elements() == x.Dim(0) && gamma.Dim(0) == x.Dim(0)
}

// AddScaled is x.Add(g, y.Mul(g, gamma)) (gamma [C] per channel) in one
// pass: the same values (each product rounded before the sum). It panics
// with a *ggml.ShapeError unless AddScaledFits(x, y, gamma). CPU backend
// only; portable.
func AddScaled(g *ggml.Context, x, y, gamma *ggml.Tensor) *ggml.Tensor {
	mustFit(AddScaledFits(x, y, gamma), "add_scaled", []*ggml.Tensor{x, y, gamma}, "want contiguous f32 x and y of one shape and a gamma of x.Dim(0) f32 values")
	return g.Custom(opAddScaled, ggml.TypeF32, dims(x), []*ggml.Tensor{x, y, gamma}, 0)
}

// opExp is the C kernel of Exp.
var opExp = unsafe.Pointer(C.da3_op_exp)

// ExpFits reports whether Exp accepts x: F32 with contiguous rows (any
// other strides: a channel of a map, say).
func ExpFits(x *ggml.Tensor) bool {
	return x != nil && x.Type() == ggml.TypeF32 && x.Stride(0) == 4
}

// Exp is e^x · scale + bias, contiguous, in one pass (ggml's Cont, Exp and
// ScaleBias in three, its exponential one value at a time): e^x to about 1
// ulp, +Inf above the largest float's logarithm, NaN where x is. It panics
// with a *ggml.ShapeError unless ExpFits(x). CPU backend only; portable.
func Exp(g *ggml.Context, x *ggml.Tensor, scale, bias float32) *ggml.Tensor {
	mustFit(ExpFits(x), "exp", []*ggml.Tensor{x}, "want f32 x with contiguous rows")
	u := uint64(math.Float32bits(scale))<<32 | uint64(math.Float32bits(bias))
	return g.Custom(opExp, ggml.TypeF32, dims(x), []*ggml.Tensor{x}, uintptr(u))
}

// opDepthToSpace is the C kernel of DepthToSpace.
var opDepthToSpace = unsafe.Pointer(C.da3_op_depth_to_space)

// DepthToSpaceFits reports whether DepthToSpace accepts r, kw, kh, w and h:
// r contiguous F32 [kw·kh·OC, w·h·N] (2-D), kw and kh from 1 to 255.
func DepthToSpaceFits(r *ggml.Tensor, kw, kh, w, h int) bool {
	return r != nil && r.Type() == ggml.TypeF32 && r.IsContiguous() && kw >= 1 && kw < 256 && kh >= 1 && kh < 256 &&
		w >= 1 && h >= 1 && r.Dim(0)%(kw*kh) == 0 && r.Dim(1)%(w*h) == 0 && r.Dim(2) == 1 && r.Dim(3) == 1
}

// DepthToSpace is the pixel shuffle after a transposed convolution's
// product whose stride is its kernel (kw×kh, the patches not overlapping):
// r [kw·kh·OC, w·h·N], a row per input pixel holding (i, j, oc), gives
// [kw·w, kh·h, OC, N] with out[x·kw + i][y·kh + j][oc][n] = r[(oc·kh + j)·kw
// + i][(n·h + y)·w + x], in one pass (ggml's permutes and copies take two,
// three for N > 1). It panics with a *ggml.ShapeError unless
// DepthToSpaceFits. CPU backend only; portable.
func DepthToSpace(g *ggml.Context, r *ggml.Tensor, kw, kh, w, h int) *ggml.Tensor {
	mustFit(DepthToSpaceFits(r, kw, kh, w, h), "depth_to_space", []*ggml.Tensor{r}, "want contiguous f32 r [kw·kh·OC, w·h·N], kw and kh in 1..255")
	oc, n := r.Dim(0)/(kw*kh), r.Dim(1)/(w*h)
	return g.Custom(opDepthToSpace, ggml.TypeF32, []int{kw * w, kh * h, oc, n}, []*ggml.Tensor{r}, uintptr(kw|kh<<8))
}

// opIm2Col is the C kernel of Im2Col.
var opIm2Col = unsafe.Pointer(C.da3_op_im2col)

// Im2ColFits reports whether Im2Col accepts x, a kw×kh kernel and p:
// contiguous F32 x [W, H, IC, N]; kernel sides, stride, padding and dilation
// below 256; a kernel that fits the padded input.
func Im2ColFits(x *ggml.Tensor, kw, kh int, p ggml.Conv2DParams) bool {
	if x == nil {
		return false
	}
	s, pad, d := p.Norm()
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), kw, kh)
	return x.Type() == ggml.TypeF32 && x.IsContiguous() && kw >= 1 && kw < 256 && kh >= 1 && kh < 256 &&
		s >= 1 && s < 256 && pad >= 0 && pad < 256 && d >= 1 && d < 256 && ow > 0 && oh > 0
}

// Im2Col is ggml's Im2Col of x for a kw×kh kernel (F32 [kw·kh·IC, OW, OH,
// N]: a row per output pixel, (ic, ky, kx) in it, 0 outside the input), the
// same values with the threads taking output rows (ggml's take channels in
// turn, so both write every row's cache lines). It panics with a
// *ggml.ShapeError unless Im2ColFits. CPU backend only; portable.
func Im2Col(g *ggml.Context, x *ggml.Tensor, kw, kh int, p ggml.Conv2DParams) *ggml.Tensor {
	mustFit(Im2ColFits(x, kw, kh, p), "im2col", []*ggml.Tensor{x}, "want contiguous f32 x, a kernel that fits it, and sides, stride, padding and dilation below 256")
	s, pad, d := p.Norm()
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), kw, kh)
	u := uint64(kw) | uint64(kh)<<8 | uint64(s)<<16 | uint64(pad)<<24 | uint64(d)<<32
	return g.Custom(opIm2Col, ggml.TypeF32, []int{kw * kh * x.Dim(2), ow, oh, x.Dim(3)}, []*ggml.Tensor{x}, uintptr(u))
}

// opConcat is the C kernel of Concat.
var opConcat = unsafe.Pointer(C.da3_op_concat)

// ConcatFits reports whether Concat accepts a, b and dim: F32 tensors with
// contiguous rows (views too), equal in every dim but dim (0 to 3).
func ConcatFits(a, b *ggml.Tensor, dim int) bool {
	if !nonNil(a, b) || dim < 0 || dim > 3 || a.Type() != ggml.TypeF32 || b.Type() != ggml.TypeF32 || a.Stride(0) != 4 || b.Stride(0) != 4 {
		return false
	}
	for d := range 4 {
		if d != dim && a.Dim(d) != b.Dim(d) {
			return false
		}
	}
	return true
}

// Concat is a.Concat(g, b, dim) (ggml_concat: b after a along dim), each
// row copied whole: the same values, contiguous. It panics with a
// *ggml.ShapeError unless ConcatFits(a, b, dim). CPU backend only;
// portable.
func Concat(g *ggml.Context, a, b *ggml.Tensor, dim int) *ggml.Tensor {
	mustFit(ConcatFits(a, b, dim), "concat", []*ggml.Tensor{a, b}, "want f32 operands with contiguous rows, equal in every dim but %d", dim)
	shape := dims(a)
	shape[dim] += b.Dim(dim)
	return g.Custom(opConcat, ggml.TypeF32, shape, []*ggml.Tensor{a, b}, uintptr(dim))
}

// opTranspose is the C kernel of Transpose.
var opTranspose = unsafe.Pointer(C.da3_op_transpose)

// TransposeFits reports whether Transpose accepts x: F32 with contiguous
// rows (views too).
func TransposeFits(x *ggml.Tensor) bool {
	return x != nil && x.Type() == ggml.TypeF32 && x.Stride(0) == 4
}

// Transpose is x.Transpose(g).Cont(g): x [n0, n1, n2, n3] with its first
// two dims swapped, contiguous (the same values, copied in blocks). It
// panics with a *ggml.ShapeError unless TransposeFits(x). CPU backend only;
// portable.
func Transpose(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	mustFit(TransposeFits(x), "transpose", []*ggml.Tensor{x}, "want an f32 operand with contiguous rows")
	return g.Custom(opTranspose, ggml.TypeF32, []int{x.Dim(1), x.Dim(0), x.Dim(2), x.Dim(3)}, []*ggml.Tensor{x}, 0)
}

// KernelName names the kernel of a custom node (ggml.NodeTime.Kernel):
// "gemm", "conv2d", "winograd", "wino_kernel", "attention", "bilinear",
// "bilinear_window", "layer_norm", "sum_parts", "stack_rows", "add_scaled",
// "concat", "transpose" or "pointwise"; "" for a kernel not of this package.
func KernelName(fn unsafe.Pointer) string {
	switch fn {
	case nil:
		return ""
	case opGEMM:
		return "gemm"
	case opConv2D:
		return "conv2d"
	case opWinograd:
		return "winograd"
	case opWinoKernel:
		return "wino_kernel"
	case opAttention:
		return "attention"
	case opBilinear:
		return "bilinear"
	case opBilinearWindow:
		return "bilinear_window"
	case opLayerNorm:
		return "layer_norm"
	case opSumParts:
		return "sum_parts"
	case opStackRows:
		return "stack_rows"
	case opAddScaled:
		return "add_scaled"
	case opConcat:
		return "concat"
	case opTranspose:
		return "transpose"
	case opPointwise:
		return "pointwise"
	case opExp:
		return "exp"
	case opDepthToSpace:
		return "depth_to_space"
	case opIm2Col:
		return "im2col"
	}
	return ""
}
