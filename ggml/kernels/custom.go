package kernels

// #include "custom.h"
import "C"

import (
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
