package kernels

// #include <stdlib.h>
// #include "custom.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/da3-go/da3-go/ggml"
)

// The C kernels (ggml_custom_op_t), unexported: nodes are built only by the
// functions below, which check the operands first and name the variant and
// precision (the graph's policy) in the node's userdata (custom.h).
var (
	opGEMM       = unsafe.Pointer(C.da3_op_gemm)
	opConv2D     = unsafe.Pointer(C.da3_op_conv2d)
	opWinograd   = unsafe.Pointer(C.da3_op_winograd)
	opWinoKernel = unsafe.Pointer(C.da3_op_wino_kernel)
	opAttention  = unsafe.Pointer(C.da3_op_attention)
	opPointwise  = unsafe.Pointer(C.da3_op_pointwise)
)

// Act is an activation applied by a fused epilogue.
type Act int

const (
	ActNone Act = iota
	ActReLU     // max(x, 0)
	ActGELU     // x·Φ(x), the exact (erf) GELU of torch's nn.GELU()
)

// Apply is the activation as separate graph ops (for the paths without a
// fused epilogue).
func (a Act) Apply(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	switch a {
	case ActReLU:
		return x.ReLU(g)
	case ActGELU:
		return x.GELUErf(g)
	}
	return x
}

// Epilogue is work fused into the store of a GEMM or Conv2D: a bias (F32
// [N] for GEMM, added to every row; [OC] for a convolution, per output
// channel), then an activation. The fused GELU computes erf(x/√2) as a
// rational function of x (P/Q of degrees 7 and 4 in x², a minimax fit
// within 1e-8; scripts/gelu_fit.py).
type Epilogue struct {
	Bias *ggml.Tensor
	Act  Act
}

// fits reports whether the bias is an F32 contiguous vector of n values.
func (e Epilogue) fits(n int) bool {
	return e.Act >= ActNone && e.Act <= ActGELU &&
		(e.Bias == nil || e.Bias.Type() == ggml.TypeF32 && e.Bias.IsContiguous() && e.Bias.Dim(0) == n && e.Bias.Elements() == n)
}

// args appends the bias, if any, to the custom op's sources.
func (e Epilogue) args(ts []*ggml.Tensor) []*ggml.Tensor {
	if e.Bias != nil {
		return append(ts, e.Bias)
	}
	return ts
}

// nodeKernels is the variant and policy for a node built in g: the graph's
// policy (the zero Policy when none was set), with VariantAuto, or a variant
// that cannot run, replaced by DefaultVariant.
func nodeKernels(g *ggml.Context) (Policy, Variant) {
	p := PolicyOf(g)
	v := p.Variant
	if v == VariantAuto || v == VariantOff || !v.Runs() {
		v = DefaultVariant()
	}
	p.Variant = v
	return p, v
}

// precisionFor is the precision a node of variant v computes for weights of
// type w under p, f32 where v cannot compute p's.
func precisionFor(p Policy, v Variant, w ggml.Type) Precision {
	prec := p.nodePrecision(w)
	if prec != PrecisionF32 && !PrecisionRuns(v, prec) {
		return PrecisionF32
	}
	return prec
}

// convPrecision is the precision of a convolution of variant v under p,
// strided or not: f32 unless p.Convs is ConvsNarrow, or ConvsStrided for a
// strided one.
func (p Policy) convPrecision(v Variant, strided bool) Precision {
	if p.Convs != ConvsNarrow && !(p.Convs == ConvsStrided && strided) {
		return PrecisionF32
	}
	return precisionFor(p, v, ggml.TypeF32)
}

// vnniTiles reports whether p is int8c in a variant with AVX-512 VNNI's
// int8 tiles (the attention's and the Winograd convolutions' int8 paths).
func vnniTiles(p Policy, v Variant) bool {
	return p.Precision == PrecisionInt8Channel && PrecisionRuns(v, PrecisionInt8)
}

// winogradPrecision is the precision of a Winograd convolution of variant v
// under p: convPrecision's, but int8c's own (F(2×2): both transforms'
// products in int8, U_ξ per output channel, V_ξ per tile) where int8c
// narrows the convolutions on the VNNI tiles.
func (p Policy) winogradPrecision(v Variant) Precision {
	if p.Convs == ConvsNarrow && vnniTiles(p, v) {
		return PrecisionInt8Channel
	}
	return p.convPrecision(v, false)
}

// gemmDequantizes lists the weight types GEMM dequantizes while packing.
func gemmDequantizes(t ggml.Type) bool {
	switch t {
	case ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5_1, ggml.TypeQ8_0, ggml.TypeQ4K, ggml.TypeQ5K, ggml.TypeQ6K:
		return 256%t.BlockSize() == 0
	}
	return false
}

// GEMMFits reports whether GEMM accepts w, x and ep: this build has the
// kernel; contiguous operands, x F32, with ne0 = K, and either w a 2-D
// matrix [K, N] (x [K, …]) or w [K, N, B2, B3] with x [K, M, B2, B3] (one
// product per batch, no broadcasting); an F32 contiguous bias of N values
// or none.
//
// A 2-D w may also be f16, bf16 or block-quantized with blocks dividing 256
// (q4_0 … q8_0, the k-quants): its rows are dequantized as the GEMM packs
// them. This is exact for the weights (the same values ggml's own kernels
// dequantize to), and unlike ggml's quantized kernels it does not round x
// to 8 bits.
func GEMMFits(w, x *ggml.Tensor, ep Epilogue) bool {
	if !Available().GEMM || !nonNil(w, x) || x.Type() != ggml.TypeF32 || !w.IsContiguous() || !x.IsContiguous() || w.Dim(0) != x.Dim(0) || !ep.fits(w.Dim(1)) {
		return false
	}
	if w.Type() != ggml.TypeF32 {
		return w.Dim(2) == 1 && w.Dim(3) == 1 && gemmDequantizes(w.Type())
	}
	return w.Dim(2) == 1 && w.Dim(3) == 1 || w.Dim(2) == x.Dim(2) && w.Dim(3) == x.Dim(3)
}

// GEMM is w.MulMat(g, x) with ep fused into the store, computed by the
// packed GEMM (GotoBLAS-style panels and register tiles, 14×32 in the
// AVX-512 variant) of the graph's kernel variant and precision: w [K, N], x
// [K, …] give [N, …] (batched: w [K, N, B2, B3], x [K, M, B2, B3] give [N,
// M, B2, B3]). In f32 the same result as MulMat for F32 operands up to
// summation order. Where the runtime packed w at load (SetPacked) for the
// graph's variant and precision, the product reads those panels instead of
// packing w again: the same values. It panics with a *ggml.ShapeError
// unless GEMMFits(w, x, ep). CPU backend only.
func GEMM(g *ggml.Context, w, x *ggml.Tensor, ep Epilogue) *ggml.Tensor {
	if pw := packedFor(g, w); pw != nil && gemmPackedFits(g, pw, x, ep) {
		return gemmPacked(g, pw, x, ep)
	}
	ts := ep.args([]*ggml.Tensor{w, x})
	mustFit(GEMMFits(w, x, ep), "gemm", ts, "want kernels on (a variant other than off), contiguous operands, x f32, w [K, N] (f32, f16, bf16 or a quantized type with blocks dividing 256) and x [K, ...], or f32 batches of equal count; a bias of N f32 values")
	shape := dims(x)
	shape[0] = w.Dim(1)
	p, v := nodeKernels(g)
	prec := precisionFor(p, v, w.Type())
	return g.Custom(opGEMM, ggml.TypeF32, shape, ts, uintptr(ep.Act)|uintptr(prec)<<8|uintptr(v)<<16)
}

// Conv2DFits reports whether Conv2D accepts kernel w, input x, p and ep:
// this build has the kernel; F32 contiguous operands with matching
// channels; stride, padding and dilation below 256; a kernel that fits the
// padded input; fewer than 2³¹ input values per channel plane (32-bit gather
// offsets); an F32 contiguous bias of OC values or none.
func Conv2DFits(w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) bool {
	if !Available().GEMM || !nonNil(w, x) || x.Dim(0)*x.Dim(1) >= 1<<31 {
		return false
	}
	s, pad, d := p.Norm()
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), w.Dim(0), w.Dim(1))
	return w.Type() == ggml.TypeF32 && x.Type() == ggml.TypeF32 && w.IsContiguous() && x.IsContiguous() &&
		w.Dim(2) == x.Dim(2) && s < 256 && pad >= 0 && pad < 256 && d < 256 && ow > 0 && oh > 0 && ep.fits(w.Dim(3))
}

// Conv2D is the convolution of ggml's Conv2D (kernel w [KW, KH, IC, OC] over
// x [W, H, IC, N] gives [OW, OH, OC, N]) with ep fused into the store,
// computed as an implicit-im2col GEMM: the patches are packed straight from
// the input into the GEMM's cache-sized panels, so no im2col matrix is
// built. Where the graph's policy has Winograd and winogradFits, it is
// Winograd's algorithm instead (conv2DWinograd); a 1×1 convolution with at
// most four outputs is a stream over the input's channels (pointwiseFew).
// It panics with a *ggml.ShapeError unless Conv2DFits(w, x, p, ep). CPU
// backend only.
func Conv2D(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) *ggml.Tensor {
	ts := ep.args([]*ggml.Tensor{w, x})
	mustFit(Conv2DFits(w, x, p, ep), "conv2d_gemm", ts, "want kernels on (a variant other than off), f32 contiguous operands with matching channels, stride, pad, dilation < 256, and a bias of OC f32 values")
	if pointwiseFew(w, p) {
		return g.Custom(opPointwise, ggml.TypeF32, []int{x.Dim(0), x.Dim(1), w.Dim(3), x.Dim(3)}, ts, uintptr(ep.Act))
	}
	pol, v := nodeKernels(g)
	if pol.Winograd && winogradFits(w, x, p, ep) {
		return conv2DWinograd(g, w, x, p, ep)
	}
	if y := conv2DPacked(g, w, x, p, ep); y != nil {
		return y
	}
	s, pad, d := p.Norm()
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), w.Dim(0), w.Dim(1))
	prec := pol.convPrecision(v, s > 1)
	return g.Custom(opConv2D, ggml.TypeF32, []int{ow, oh, w.Dim(3), x.Dim(3)}, ts,
		uintptr(s|pad<<8|d<<16|int(ep.Act)<<24|int(prec)<<26|int(v)<<28))
}

// pointwiseMaxOutputs is the most outputs a 1×1 convolution may have to run
// as a stream over the input's channels (opPointwise) instead of a GEMM.
const pointwiseMaxOutputs = 4

// pointwiseFew reports whether Conv2D computes the convolution by kernel
// w with p as a stream over the input's channel planes (opPointwise): 1×1,
// stride 1, no padding, at most pointwiseMaxOutputs outputs (a head's last
// convolution: depth, confidence, sky). Each output pixel is a dot
// product of its channels, in float32 whatever the policy's precision
// (the node is bound by reading the map); a GEMM would pack the whole map
// into panels to fill tiles of which it uses a row per output.
func pointwiseFew(w *ggml.Tensor, p ggml.Conv2DParams) bool {
	s, pad, d := p.Norm()
	return w.Dim(0) == 1 && w.Dim(1) == 1 && w.Dim(3) <= pointwiseMaxOutputs && s == 1 && pad == 0 && d == 1
}

// convsPacked reports whether PackWeights packs the convolutions' kernels
// under p in variant v (conv2DPacked): where the convolutions are narrowed
// to int8 (int8c with ConvsNarrow on the VNNI tiles, as the Winograd ones).
func convsPacked(p Policy, v Variant) bool {
	return p.winogradPrecision(v) == PrecisionInt8Channel
}

// conv2DPacked is Conv2D as a product by the kernel packed at load (SetPacked;
// PackWeights packs a kernel [KW, KH, IC, OC] as the matrix of OC rows of
// KW·KH·IC under convsPacked): the input's im2col matrix (a row per output
// pixel), the packed int8c product with ep (each pixel's row quantized over
// the kernel's whole depth, each output channel's weights over theirs) and
// the result transposed to [OW, OH, OC, N]. nil where g's policy does not
// pack convolutions or w was not packed (the caller computes it itself).
func conv2DPacked(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) *ggml.Tensor {
	pw := packedFor(g, w)
	pol, v := nodeKernels(g)
	K, OC := w.Dim(0)*w.Dim(1)*w.Dim(2), w.Dim(3)
	if pw == nil || !convsPacked(pol, v) || pw.K != K || pw.N != OC || pw.Precision != PrecisionInt8Channel {
		return nil
	}
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), w.Dim(0), w.Dim(1))
	var cols *ggml.Tensor // [K, OW, OH, N]
	if pol.Norm && Im2ColFits(x, w.Dim(0), w.Dim(1), p) {
		cols = Im2Col(g, x, w.Dim(0), w.Dim(1), p)
	} else {
		cols = w.Im2Col(g, x, p, ggml.TypeF32)
	}
	rows := cols.Reshape(g, K, ow*oh, x.Dim(3)) // [K, OW·OH, N]
	if !gemmPackedFits(g, pw, rows, ep) {
		return nil
	}
	return Transpose(g, gemmPacked(g, pw, rows, ep)).Reshape(g, ow, oh, OC, x.Dim(3))
}

// winogradFits reports whether conv2DWinograd accepts the operands: those
// of Conv2DFits with a 3×3 kernel, stride 1, dilation 1 and padding ≤ 2,
// and at least 8 input and output channels (fewer gain too little over the
// GEMM to pay for the transforms).
func winogradFits(w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) bool {
	s, pad, d := p.Norm()
	return Conv2DFits(w, x, p, ep) && w.Dim(0) == 3 && w.Dim(1) == 3 && s == 1 && d == 1 && pad <= 2 &&
		w.Dim(2) >= 8 && w.Dim(3) >= 8 && x.Dim(0)+2*pad < 1<<31
}

// conv2DWinograd is Conv2D for 3×3 kernels by Winograd's algorithm in the
// tile chooseWinogradTile picks: F(4×4, 3×3) takes 36 products per 4×4 block of
// outputs and channel pair instead of 144 (4x fewer), F(2×2, 3×3) 16
// instead of 36 (2.25x), the rest being the input, kernel and output
// transforms. The result differs from the direct convolution by rounding
// only, more for F(4×4) (its transforms scale by up to 8 and its kernel
// transform is inexact); see TestWinograd for the bounds. It panics with a
// *ggml.ShapeError unless winogradFits(w, x, p, ep).
func conv2DWinograd(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) *ggml.Tensor {
	return winograd(g, w, x, p, ep, false)
}

// Conv2DReLUIn is Conv2D(g, w, x.ReLU(g), p, ep): where the graph's policy
// takes the convolution by Winograd, the input's ReLU is done as the input
// transform loads it (the same values, without a pass over the map and a
// copy of it); otherwise the two nodes. It panics with a *ggml.ShapeError
// unless Conv2DFits(w, x, p, ep).
func Conv2DReLUIn(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue) *ggml.Tensor {
	if pol, _ := nodeKernels(g); pol.Winograd && winogradFits(w, x, p, ep) {
		return winograd(g, w, x, p, ep, true)
	}
	return Conv2D(g, w, x.ReLU(g), p, ep)
}

// Conv2DAdd is res.Add(g, Conv2D(g, w, x, p, ep)) (res of the output's
// shape): where the graph's policy takes the convolution by Winograd and
// res is a contiguous F32 map, the sum is done as the output transform
// stores each run of outputs (the same values, without a pass over the
// maps); otherwise the two nodes. It panics with a *ggml.ShapeError unless
// Conv2DFits(w, x, p, ep).
func Conv2DAdd(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue, res *ggml.Tensor) *ggml.Tensor {
	if pol, _ := nodeKernels(g); pol.Winograd && winogradFits(w, x, p, ep) && res != nil && res.Type() == ggml.TypeF32 && res.IsContiguous() {
		ow, oh := p.OutSize(x.Dim(0), x.Dim(1), 3, 3)
		if slices.Equal(dims(res), []int{ow, oh, w.Dim(3), x.Dim(3)}) {
			return winogradRes(g, w, x, p, ep, false, res)
		}
	}
	return res.Add(g, Conv2D(g, w, x, p, ep))
}

// winograd is conv2DWinograd, of ReLU(x) when reluIn.
func winograd(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue, reluIn bool) *ggml.Tensor {
	return winogradRes(g, w, x, p, ep, reluIn, nil)
}

// winogradRes is winograd plus res (nil: none).
func winogradRes(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue, reluIn bool, res *ggml.Tensor) *ggml.Tensor {
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), 3, 3)
	tile := chooseWinogradTile(ow, oh)
	if pol, v := nodeKernels(g); pol.winogradPrecision(v) != PrecisionF32 {
		// F(4×4)'s transforms spread the values over a wider range than bf16's 8 bits keep:
		// on the tiny DA2 fixture with narrow convolutions the depth's correlation with
		// f32 falls from 0.99999 (F(2×2)) to 0.9996.
		tile = 2
	}
	return winogradTile(g, w, x, p, ep, tile, reluIn, res)
}

// chooseWinogradTile is the output tile conv2DWinograd uses for an ow×oh output in
// f32: 4 (F(4×4, 3×3)) unless the map is so small that 4×4 tiles would
// compute many padding outputs, or fewer than 32 of them would not pay for
// their kernel transform (2.25 times F(2×2)'s, redone in every run: the
// 18×12 maps of a DPT head at 504×336 take 20-40 % longer in 4×4 tiles),
// then 2.
func chooseWinogradTile(ow, oh int) int {
	pad := func(n, t int) int { return (n + t - 1) / t * t }
	// F(4×4) does 36/16 = 2.25 products per output, F(2×2) 16/4 = 4, each on its
	// tiles' outputs, padding included.
	if pad(ow, 4)*pad(oh, 4) >= 32*16 && float64(pad(ow, 4)*pad(oh, 4))*2.25 < float64(pad(ow, 2)*pad(oh, 2))*4 {
		return 4
	}
	return 2
}

// conv2DWinogradTile is conv2DWinograd in output tiles of tile×tile: 2
// (F(2×2, 3×3)) or 4 (F(4×4, 3×3)).
func conv2DWinogradTile(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue, tile int) *ggml.Tensor {
	return winogradTile(g, w, x, p, ep, tile, false, nil)
}

// winogradTile is conv2DWinogradTile, of ReLU(x) when reluIn, plus res when
// not nil.
func winogradTile(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams, ep Epilogue, tile int, reluIn bool, res *ggml.Tensor) *ggml.Tensor {
	mustFit(winogradFits(w, x, p, ep) && (tile == 2 || tile == 4), "conv2d_winograd", ep.args([]*ggml.Tensor{w, x}), "want the operands of Conv2D with a 3x3 kernel, stride 1, dilation 1, pad <= 2 and at least 8 channels in and out, and a tile of 2 or 4")
	_, pad, _ := p.Norm()
	ow, oh := p.OutSize(x.Dim(0), x.Dim(1), 3, 3)
	pol, v := nodeKernels(g)
	prec := pol.winogradPrecision(v)
	if prec == PrecisionInt8Channel && tile != 2 {
		prec = pol.convPrecision(v, false) // int8c computes F(2×2) only
	}
	f4, relu := 0, 0
	if tile == 4 {
		f4 = 1
	}
	if reluIn {
		relu = 1
	}
	u := winogradKernel(g, w, tile, prec, v)
	args, withRes := ep.args([]*ggml.Tensor{u, x}), 0
	if res != nil {
		args, withRes = append(args, res), 1
	}
	return g.Custom(opWinograd, ggml.TypeF32, []int{ow, oh, w.Dim(3), x.Dim(3)}, args,
		uintptr(pad|int(ep.Act)<<8|int(prec)<<10|int(v)<<12|f4<<16|relu<<17|withRes<<18))
}

// winogradKernel is the Winograd transform of the 3×3 kernel w for the
// tile, precision and variant (the operand of the convolution node, built
// once per graph: the strips of a head share it): the one stored in the
// graph's WinogradCache, else a node computing it (into the cache, where
// the graph has one).
func winogradKernel(g *ggml.Context, w *ggml.Tensor, tile int, prec Precision, v Variant) *ggml.Tensor {
	type key struct {
		w    *ggml.Tensor
		tile int
		prec Precision
		v    Variant
	}
	cache, _ := g.Value(winoKernelsKey{}).(map[key]*ggml.Tensor)
	if cache == nil {
		cache = map[key]*ggml.Tensor{}
		g.SetValue(winoKernelsKey{}, cache)
	}
	k := key{w, tile, prec, v}
	if u, ok := cache[k]; ok {
		return u
	}
	n := int(C.da3_wino_kernel_size(C.int(v), C.int64_t(w.Dim(2)), C.int64_t(w.Dim(3)), C.int(tile), C.int(prec)))
	if n <= 0 {
		panic(&ggml.ShapeError{Op: "wino_kernel", Msg: fmt.Sprintf("variant %v cannot compute precision %v", v, prec)})
	}
	node := func() *ggml.Tensor {
		return g.Custom(opWinoKernel, ggml.TypeF32, []int{n}, []*ggml.Tensor{w}, uintptr(tile|int(prec)<<8|int(v)<<12))
	}
	u := cachedWinogradKernel(g, winoKey{w, tile, prec, v}, n, node)
	if u == nil {
		u = node()
	}
	cache[k] = u
	return u
}

// winoKernelsKey keys a graph's Winograd kernel nodes (winogradKernel).
type winoKernelsKey struct{}

// AttentionFits reports whether Attention accepts q, k, v: this build has
// the kernel; F32 [hd, H, n, B] (k and v with their own token count) with
// contiguous rows of hd ≤ 256 and 4-byte aligned strides; any strides above
// hd.
func AttentionFits(q, k, v *ggml.Tensor) bool {
	if !Available().Attention || !nonNil(q, k, v) {
		return false
	}
	for _, t := range []*ggml.Tensor{q, k, v} {
		if t.Type() != ggml.TypeF32 || t.Stride(0) != 4 || t.Stride(1)%4 != 0 || t.Stride(2)%4 != 0 || t.Stride(3)%4 != 0 {
			return false
		}
	}
	return q.Dim(0) <= 256 && k.Dim(0) == q.Dim(0) && v.Dim(0) == q.Dim(0) && k.Dim(2) >= 1 &&
		k.Dim(1) == q.Dim(1) && v.Dim(1) == q.Dim(1) && k.Dim(3) == q.Dim(3) && v.Dim(3) == q.Dim(3) && v.Dim(2) == k.Dim(2)
}

// Attention is softmax(q·kᵀ·scale)·v per head fused into one kernel: q [hd,
// H, n, B], k and v [hd, H, nk, B] give [hd, H, n, B] (contiguous: reshape
// to [hd·H, n, B] for the output projection). Per head, kᵀ and v are packed
// once, and each block of queries has its scores, probabilities and
// outputs computed in cache: neither the score matrix nor any permuted copy
// of q, k, v or the output exists in the graph. In bf16 (and int8)
// precision q, k, v and the probabilities are rounded to bf16 for the two
// products; the softmax stays f32. In int8c precision both products are
// int8: q and k quantized per token, v per head dim, the probabilities to
// bytes (255·p). It panics with a
// *ggml.ShapeError unless AttentionFits(q, k, v). CPU backend only.
func Attention(g *ggml.Context, q, k, v *ggml.Tensor, scale float32) *ggml.Tensor {
	ts := []*ggml.Tensor{q, k, v}
	mustFit(AttentionFits(q, k, v), "attention", ts, "want kernels on (a variant other than off) and f32 [hd, H, n, B] operands with contiguous rows of hd <= 256")
	ud := uint64(math.Float32bits(scale))
	if pol, vr := nodeKernels(g); unsafe.Sizeof(uintptr(0)) == 8 { // else the C side takes the best variant, f32
		ud |= uint64(attentionPrecision(pol, vr))<<32 | uint64(vr)<<40
	}
	return g.Custom(opAttention, ggml.TypeF32, dims(q), ts, uintptr(ud))
}

// attentionPrecision is the precision of the attention's two products
// under p in variant v: int8 for int8c (each product's int32 sums over its
// whole depth) with AVX-512 VNNI, or in the avx2 variant where its int8c
// takes a vpdpbusd form; else as a product of f32 weights.
func attentionPrecision(p Policy, v Variant) Precision {
	if vnniTiles(p, v) {
		return PrecisionInt8Channel
	}
	if p.Precision == PrecisionInt8Channel && v == VariantAVX2 {
		if f, _ := SetAVX2Int8Form(-1); f == AVX2Int8VNNI512 || f == AVX2Int8AVXVNNI {
			return PrecisionInt8Channel
		}
	}
	return precisionFor(p, v, ggml.TypeF32)
}

// PackedWeight is a weight w [K, N] (F32; F16 for bf16 products; Q8_0 for
// int8 products; F32, F16, BF16 or Q8_0 quantized per channel for int8c)
// packed once (PackWeights) into the panels the GEMM of one variant and
// precision reads, so that its products skip packing the weight on every
// call (ONNX Runtime's MLAS pre-packs its weights the same way). T holds the
// packed words as an F32 tensor [W·NR, N/NR] (W = K, ⌈K/2⌉ bf16 pairs,
// 5K/16 words of q8 blocks, scales and sums, or ⌈K/4⌉+2 words of int8c
// quads, a scale and an excess); the kernel checks its shape, and a graph
// reads only the panels of its own variant and precision (gemmPackedFits).
type PackedWeight struct {
	T         *ggml.Tensor
	K, N      int
	Type      ggml.Type // the weight's type: F32, F16 or Q8_0
	Variant   Variant
	Precision Precision // how the panels are stored: f32, bf16 pairs (F32 weights), int8 (Q8_0)
}

// packedShape is the shape of PackedWeight.T for a weight [K, N] packed for
// variant v in precision p (f32 or bf16 pairs of an F32 weight, or int8
// panels of a Q8_0 weight), and false when it cannot be packed there (N not
// a multiple of the variant's panel width, or a variant or precision this
// CPU lacks).
func packedShape(v Variant, p Precision, K, N int) ([]int, bool) {
	words := int(C.da3_pack_weight_words(C.int(v), C.int(p), C.int64_t(K), C.int64_t(N)))
	nr := int(C.da3_variant_nr(C.int(v)))
	if words <= 0 || nr <= 0 || N%nr != 0 {
		return nil, false
	}
	return []int{words / (N / nr), N / nr}, true
}

// weightPrecision is the precision of the products of a weight of type t
// packed at load, for variant v under p: int8c for the types it quantizes
// per channel (F32, F16, BF16, Q8_0) where v computes it, else
// precisionFor's.
func weightPrecision(p Policy, v Variant, t ggml.Type) Precision {
	if p.Precision == PrecisionInt8Channel && PrecisionRuns(v, PrecisionInt8Channel) &&
		(t == ggml.TypeF32 || t == ggml.TypeF16 || t == ggml.TypeBF16 || t == ggml.TypeQ8_0) {
		return PrecisionInt8Channel
	}
	return precisionFor(p, v, t)
}

// packedPrecision is how a weight of type t is packed for products in
// precision p: int8c panels for int8c (weightPrecision gives it only to the
// types it quantizes); an F32 weight in bf16 pairs for bf16 and in f32 otherwise, an
// F16 weight in bf16 pairs for bf16 (f32 products of F16 weights dequantize
// per call: their f32 panels would double their memory), a Q8_0 weight in
// int8 panels for int8; false for the rest (not packed).
func packedPrecision(p Precision, t ggml.Type) (Precision, bool) {
	switch {
	case p == PrecisionInt8Channel:
		return PrecisionInt8Channel, true
	case (t == ggml.TypeF32 || t == ggml.TypeF16) && p == PrecisionBF16:
		return PrecisionBF16, true
	case t == ggml.TypeF32:
		return PrecisionF32, true
	case t == ggml.TypeQ8_0 && p == PrecisionInt8:
		return PrecisionInt8, true
	}
	return 0, false
}

// PackedSet holds weights packed once (PackWeights) for one variant, in
// 64-byte aligned memory of its own (the register tiles load the panels
// aligned), until Close.
type PackedSet struct {
	Variant Variant
	host    *hostMemory
	ws      map[*ggml.Tensor]*PackedWeight
}

// PackWeights packs the matrices ws [K, N] for the products of graphs with
// policy pol (its variant, and the precision its products give each
// weight's type): F32 weights, F16 ones for bf16 products and Q8_0 ones for
// int8 products, those that packedShape allows (the others are left out);
// and, where pol narrows the convolutions to int8 (convsPacked), F32
// convolution kernels [KW, KH, IC, OC] as OC rows of KW·KH·IC for Conv2D
// (conv2DPacked; a kernel Winograd's algorithm takes gains nothing),
// reading each one's
// data (N rows of K values as the tensor's type stores them) with read and
// calling done (when not nil) once it is packed; the weights are packed on
// all CPUs, so read and done are called from several goroutines at once.
// The products gemmPacked computes from them equal, bit for bit, those of
// GEMM from the weights.
func PackWeights(pol Policy, ws []*ggml.Tensor, read func(*ggml.Tensor) ([]byte, error), done func(*ggml.Tensor)) (*PackedSet, error) {
	v := pol.Variant
	if v == VariantAuto || v == VariantOff || !v.Runs() {
		v = DefaultVariant()
	}
	pol.Variant = v
	type item struct {
		w     *ggml.Tensor
		prec  Precision
		K, N  int
		shape []int
		off   int
	}
	var items []item
	total := 0
	for _, w := range ws {
		if w == nil {
			continue
		}
		K, N := w.Dim(0), w.Dim(1)
		if w.Dim(2) != 1 || w.Dim(3) != 1 { // a convolution's kernel [KW, KH, IC, OC]: its rows of KW·KH·IC
			if !convsPacked(pol, v) || w.Type() != ggml.TypeF32 || !w.IsContiguous() {
				continue
			}
			K, N = w.Dim(0)*w.Dim(1)*w.Dim(2), w.Dim(3)
		}
		p, ok := packedPrecision(weightPrecision(pol, v, w.Type()), w.Type())
		if !ok {
			continue
		}
		if shape, ok := packedShape(v, p, K, N); ok {
			items = append(items, item{w, p, K, N, shape, total})
			total += (shape[0]*shape[1]*4 + 63) &^ 63
		}
	}
	s := &PackedSet{Variant: v, ws: make(map[*ggml.Tensor]*PackedWeight, len(items))}
	if len(items) == 0 {
		return s, nil
	}
	var err error
	if s.host, err = newHostMemory(total); err != nil {
		return nil, fmt.Errorf("packing %d weights (%.1f MiB): %w", len(items), float64(total)/(1<<20), err)
	}
	s.host.ctx, err = ggml.NewContext(len(items) + 1)
	ts := make([]*ggml.Tensor, len(items))
	for i, it := range items { // the tensors first (a ggml context is not safe for concurrent use)
		if err != nil {
			break
		}
		ts[i] = s.host.ctx.NewTensor(ggml.TypeF32, it.shape...)
		err = s.host.buf.Place(ts[i], it.off)
	}
	if err == nil { // then the packing, the weights spread over the CPUs
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := 0
		for range min(runtime.NumCPU(), len(items)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					failed := err != nil
					mu.Unlock()
					if i >= len(items) || failed {
						return
					}
					it := items[i]
					pw, e := packOne(s, it.w, it.prec, it.K, it.N, ts[i], it.off, it.shape, read)
					mu.Lock()
					if e != nil && err == nil {
						err = e
					}
					if e == nil {
						s.ws[items[i].w] = pw
					}
					mu.Unlock()
					if e == nil && done != nil {
						done(items[i].w)
					}
				}
			}()
		}
		wg.Wait()
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// packOne packs weight w, N rows of K, in precision p into t, at off in s's
// memory.
func packOne(s *PackedSet, w *ggml.Tensor, p Precision, K, N int, t *ggml.Tensor, off int, shape []int, read func(*ggml.Tensor) ([]byte, error)) (*PackedWeight, error) {
	data, err := read(w)
	if err != nil {
		return nil, err
	}
	if len(data) != w.Bytes() {
		return nil, fmt.Errorf("weight %s: %d bytes, want %d", w.Name(), len(data), w.Bytes())
	}
	n := C.da3_pack_weight(C.int(s.Variant), C.int(p), C.int(w.Type()), unsafe.Pointer(&data[0]), C.int64_t(K), C.int64_t(N),
		(*C.uint32_t)(unsafe.Add(s.host.mem, off)))
	if int(n) != shape[0]*shape[1] {
		return nil, fmt.Errorf("packing weight %s [%d, %d] for %s %s: %w", w.Name(), K, N, s.Variant, p, ggml.ErrOutOfMemory)
	}
	return &PackedWeight{T: t, K: K, N: N, Type: w.Type(), Variant: s.Variant, Precision: p}, nil
}

// Weights maps each packed weight to its packed form (for SetPacked).
func (s *PackedSet) Weights() map[*ggml.Tensor]*PackedWeight {
	if s == nil {
		return nil
	}
	return s.ws
}

// Bytes is the memory the packed weights take.
func (s *PackedSet) Bytes() int {
	if s == nil {
		return 0
	}
	if s.host == nil {
		return 0
	}
	return s.host.size
}

// Close frees the packed weights. Idempotent.
func (s *PackedSet) Close() error {
	if s == nil {
		return nil
	}
	err := s.host.close()
	s.host, s.ws = nil, nil
	return err
}

// SetPacked makes the packed weights of ws (by the weight they replace)
// available to the products built in g (GEMM reads them).
func SetPacked(g *ggml.Context, ws map[*ggml.Tensor]*PackedWeight) { g.SetValue(packedKey{}, ws) }

// packedFor is the packed form of w set on g, or nil.
func packedFor(g *ggml.Context, w *ggml.Tensor) *PackedWeight {
	ws, _ := g.Value(packedKey{}).(map[*ggml.Tensor]*PackedWeight)
	return ws[w]
}

type packedKey struct{}

// gemmPackedFits reports whether gemmPacked accepts pw and x in g: the
// graph's kernel variant and the precision its products take are those pw
// was packed for, x is F32 [K, …] contiguous, and ep fits N.
func gemmPackedFits(g *ggml.Context, pw *PackedWeight, x *ggml.Tensor, ep Epilogue) bool {
	if pw == nil || pw.T == nil || !Available().GEMM || x == nil || x.Type() != ggml.TypeF32 || !x.IsContiguous() ||
		x.Dim(0) != pw.K || !ep.fits(pw.N) {
		return false
	}
	p, v := nodeKernels(g)
	pp, ok := packedPrecision(weightPrecision(p, v, pw.Type), pw.Type)
	return p.GEMM && v == pw.Variant && ok && pp == pw.Precision
}

// gemmPacked is GEMM(g, w, x, ep) for the weight w that pw packs: the same
// values without packing w again. It panics with a *ggml.ShapeError unless
// gemmPackedFits.
func gemmPacked(g *ggml.Context, pw *PackedWeight, x *ggml.Tensor, ep Epilogue) *ggml.Tensor {
	ts := ep.args([]*ggml.Tensor{pw.T, x})
	mustFit(gemmPackedFits(g, pw, x, ep), "gemm (packed)", ts, "want the graph's variant and precision those of the packing, and x f32 [K, ...] contiguous")
	shape := dims(x)
	shape[0] = pw.N
	_, v := nodeKernels(g)
	return g.Custom(opGEMM, ggml.TypeF32, shape, ts, uintptr(ep.Act)|uintptr(pw.Precision)<<8|uintptr(v)<<16|1<<24)
}
