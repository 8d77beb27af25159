package ggml

/*
#include "da3_ggml.h"
static int da3_to_float(enum ggml_type t, const void * x, float * y, int64_t k) {
    const struct ggml_type_traits * tr = ggml_get_type_traits(t);
    if (tr == NULL || tr->to_float == NULL) return 0;
    tr->to_float(x, y, k);
    return 1;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// QuantizeRequiresImatrix is ggml_quantize_requires_imatrix.
func QuantizeRequiresImatrix(t Type) bool {
	return t.Valid() && bool(C.ggml_quantize_requires_imatrix(C.enum_ggml_type(t)))
}

// QuantizeChunk converts nrows rows of ncols float32 values to type t
// (ggml_quantize_chunk; plain types are converted). imatrix is optional
// (per-column importance, len ncols). ncols must be a multiple of t's block
// size. The result is nrows·RowSize(ncols) bytes.
func QuantizeChunk(t Type, src []float32, nrows, ncols int, imatrix []float32) ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("ggml: quantize: invalid type %d", t)
	}
	if nrows < 0 || ncols <= 0 || nrows*ncols != len(src) {
		return nil, fmt.Errorf("ggml: quantize: %d values are not %d rows of %d", len(src), nrows, ncols)
	}
	if ncols%t.BlockSize() != 0 {
		return nil, fmt.Errorf("ggml: quantize to %s: row of %d values is not a multiple of the block size %d", t, ncols, t.BlockSize())
	}
	if t == TypeI8 || t == TypeI16 || t == TypeI32 || t == TypeI64 || t == TypeF64 || t == TypeQ8_1 || t == TypeQ8K {
		return nil, fmt.Errorf("ggml: quantize: cannot convert float32 to %s", t)
	}
	if QuantizeRequiresImatrix(t) && imatrix == nil {
		return nil, fmt.Errorf("ggml: quantize to %s needs an importance matrix", t)
	}
	if imatrix != nil && len(imatrix) != ncols {
		return nil, fmt.Errorf("ggml: quantize: importance matrix has %d values, need %d", len(imatrix), ncols)
	}
	out := make([]byte, nrows*t.RowSize(ncols))
	if nrows == 0 {
		return out, nil
	}
	var im *C.float
	if imatrix != nil {
		im = (*C.float)(unsafe.Pointer(&imatrix[0]))
	}
	n := C.ggml_quantize_chunk(C.enum_ggml_type(t), (*C.float)(unsafe.Pointer(&src[0])), unsafe.Pointer(&out[0]), 0, C.int64_t(nrows), C.int64_t(ncols), im)
	if int(n) != len(out) {
		return nil, fmt.Errorf("ggml: quantize to %s wrote %d bytes, expected %d", t, int(n), len(out))
	}
	return out, nil
}

// ToFloat32 converts n values of type t in data to float32 (dequantizes)
// with the type's to_float trait.
func ToFloat32(t Type, data []byte, n int) ([]float32, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("ggml: dequantize: invalid type %d", t)
	}
	if n < 0 || n%t.BlockSize() != 0 {
		return nil, fmt.Errorf("ggml: dequantize %s: %d values is not a multiple of the block size %d", t, n, t.BlockSize())
	}
	if need := n / t.BlockSize() * t.TypeSize(); len(data) != need {
		return nil, fmt.Errorf("ggml: dequantize %s: %d values need %d bytes, got %d", t, n, need, len(data))
	}
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	if t == TypeF32 {
		copy(out, unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), n))
		return out, nil
	}
	if C.da3_to_float(C.enum_ggml_type(t), unsafe.Pointer(&data[0]), (*C.float)(unsafe.Pointer(&out[0])), C.int64_t(n)) == 0 {
		return nil, fmt.Errorf("ggml: dequantize: %s has no float conversion", t)
	}
	return out, nil
}
