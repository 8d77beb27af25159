package ggml

// #include "custom.h"
import "C"

// OpExpP1 computes exp(x) + 1 element-wise over one F32 argument (DA3's
// "expp1" confidence activation) in a single pass:
//
//	y := g.Custom(ggml.OpExpP1, ggml.TypeF32, x.Shape(), []*ggml.Tensor{x}, 0)
var OpExpP1 = CustomOp{name: "expp1", fn: C.ggml_custom_op_t(C.da3_op_expp1)}

// ExpP1 is exp(t) + 1 through the OpExpP1 CPU kernel (t must be F32 with
// contiguous rows).
func (t *Tensor) ExpP1(g *Context) *Tensor {
	notNil("expp1", t)
	mustf(t.Type() == TypeF32, "expp1", []*Tensor{t}, "operand must be f32")
	return g.Custom(OpExpP1, TypeF32, t.ne4(), []*Tensor{t}, 0)
}

// OpBilinear is ggml_interpolate's bilinear mode (with or without
// align_corners) as a CPU kernel that computes the per-column source
// positions and weights once per call instead of once per element, and
// splits rows rather than channels over the threads (same formula, same
// results to float rounding).
var OpBilinear = CustomOp{name: "bilinear", fn: C.ggml_custom_op_t(C.da3_op_bilinear)}

// Resample is t.Interpolate(g, w, h, mode), computed with OpBilinear when
// the context allows CPU kernels (SetGEMM), the mode is bilinear (with or
// without ScaleAlignCorners, no antialias) and t is F32 and contiguous.
func (t *Tensor) Resample(g *Context, w, h int, mode ScaleMode) *Tensor {
	if g.gemm && t != nil && t.Type() == TypeF32 && t.IsContiguous() && w > 0 && h > 0 &&
		(mode == ScaleBilinear || mode == ScaleBilinear|ScaleAlignCorners) {
		align := 0
		if mode&ScaleAlignCorners != 0 {
			align = 1
		}
		return g.Custom(OpBilinear, TypeF32, []int{w, h, int(t.ne(2)), int(t.ne(3))}, []*Tensor{t}, align)
	}
	return t.Interpolate(g, w, h, mode)
}
