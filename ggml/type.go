package ggml

// #include "da3_ggml.h"
import "C"

// Type mirrors enum ggml_type. The values are declared from the C constants so
// they cannot drift from the vendored headers.
type Type int32

// The ggml tensor types.
const (
	TypeF32    Type = C.GGML_TYPE_F32
	TypeF16    Type = C.GGML_TYPE_F16
	TypeQ4_0   Type = C.GGML_TYPE_Q4_0
	TypeQ4_1   Type = C.GGML_TYPE_Q4_1
	TypeQ5_0   Type = C.GGML_TYPE_Q5_0
	TypeQ5_1   Type = C.GGML_TYPE_Q5_1
	TypeQ8_0   Type = C.GGML_TYPE_Q8_0
	TypeQ8_1   Type = C.GGML_TYPE_Q8_1
	TypeQ2K    Type = C.GGML_TYPE_Q2_K
	TypeQ3K    Type = C.GGML_TYPE_Q3_K
	TypeQ4K    Type = C.GGML_TYPE_Q4_K
	TypeQ5K    Type = C.GGML_TYPE_Q5_K
	TypeQ6K    Type = C.GGML_TYPE_Q6_K
	TypeQ8K    Type = C.GGML_TYPE_Q8_K
	TypeIQ2XXS Type = C.GGML_TYPE_IQ2_XXS
	TypeIQ2XS  Type = C.GGML_TYPE_IQ2_XS
	TypeIQ3XXS Type = C.GGML_TYPE_IQ3_XXS
	TypeIQ1S   Type = C.GGML_TYPE_IQ1_S
	TypeIQ4NL  Type = C.GGML_TYPE_IQ4_NL
	TypeIQ3S   Type = C.GGML_TYPE_IQ3_S
	TypeIQ2S   Type = C.GGML_TYPE_IQ2_S
	TypeIQ4XS  Type = C.GGML_TYPE_IQ4_XS
	TypeI8     Type = C.GGML_TYPE_I8
	TypeI16    Type = C.GGML_TYPE_I16
	TypeI32    Type = C.GGML_TYPE_I32
	TypeI64    Type = C.GGML_TYPE_I64
	TypeF64    Type = C.GGML_TYPE_F64
	TypeIQ1M   Type = C.GGML_TYPE_IQ1_M
	TypeBF16   Type = C.GGML_TYPE_BF16
	TypeTQ1_0  Type = C.GGML_TYPE_TQ1_0
	TypeTQ2_0  Type = C.GGML_TYPE_TQ2_0
	TypeMXFP4  Type = C.GGML_TYPE_MXFP4
	typeCount  Type = C.GGML_TYPE_COUNT
)

// Types lists every type ggml supports (removed enum values are skipped).
func Types() []Type {
	var ts []Type
	for t := Type(0); t < typeCount; t++ {
		if t.Valid() {
			ts = append(ts, t)
		}
	}
	return ts
}

// Valid reports whether t is a type ggml still supports.
func (t Type) Valid() bool {
	if t < 0 || t >= typeCount {
		return false
	}
	return C.ggml_blck_size(C.enum_ggml_type(t)) > 0 && C.ggml_type_size(C.enum_ggml_type(t)) > 0
}

// String is ggml_type_name ("f32", "q8_0", "q4_K").
func (t Type) String() string {
	if !t.Valid() {
		return "invalid"
	}
	return C.GoString(C.ggml_type_name(C.enum_ggml_type(t)))
}

// BlockSize is ggml_blck_size: elements per quantization block (1 for plain types).
func (t Type) BlockSize() int {
	if !t.Valid() {
		return 0
	}
	return int(C.ggml_blck_size(C.enum_ggml_type(t)))
}

// TypeSize is ggml_type_size: bytes per block.
func (t Type) TypeSize() int {
	if !t.Valid() {
		return 0
	}
	return int(C.ggml_type_size(C.enum_ggml_type(t)))
}

// RowSize is ggml_row_size: bytes of a row of n elements. n must be a multiple
// of BlockSize; RowSize panics with a *ShapeError otherwise.
func (t Type) RowSize(n int) int {
	bs := t.BlockSize()
	if bs == 0 || n%bs != 0 {
		panic(&ShapeError{Op: "row_size", Shapes: [][]int{{n}}, Msg: "row of " + itoa(n) + " elements is not a multiple of the " + t.String() + " block size " + itoa(bs)})
	}
	return n / bs * t.TypeSize()
}

// IsQuantized is ggml_is_quantized.
func (t Type) IsQuantized() bool {
	return t.Valid() && bool(C.ggml_is_quantized(C.enum_ggml_type(t)))
}

// ParseType parses a type name as ggml prints it, case-insensitively ("q4_k", "F16").
func ParseType(s string) (Type, bool) {
	for _, t := range Types() {
		if equalFold(t.String(), s) {
			return t, true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
