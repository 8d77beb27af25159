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
