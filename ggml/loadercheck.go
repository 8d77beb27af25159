package ggml

// #include "da3_ggml.h"
import "C"

import "github.com/da3-go/da3-go/loader"

// Compile-time checks that the cgo-free loader's tensor type ids equal ggml's
// enum ggml_type values (the stringer index trick): each index is 0 when they
// agree; otherwise it is out of range (C > loader) or overflows loader.Type's
// uint32 (C < loader), and the package does not compile. Block and byte sizes
// are compared at test time (loadercheck_test.go).
var typeIDs [1]struct{}

func _() {
	_ = typeIDs[C.GGML_TYPE_F32-loader.TypeF32]
	_ = typeIDs[C.GGML_TYPE_F16-loader.TypeF16]
	_ = typeIDs[C.GGML_TYPE_Q4_0-loader.TypeQ4_0]
	_ = typeIDs[C.GGML_TYPE_Q4_1-loader.TypeQ4_1]
	_ = typeIDs[C.GGML_TYPE_Q5_0-loader.TypeQ5_0]
	_ = typeIDs[C.GGML_TYPE_Q5_1-loader.TypeQ5_1]
	_ = typeIDs[C.GGML_TYPE_Q8_0-loader.TypeQ8_0]
	_ = typeIDs[C.GGML_TYPE_Q8_1-loader.TypeQ8_1]
	_ = typeIDs[C.GGML_TYPE_Q2_K-loader.TypeQ2K]
	_ = typeIDs[C.GGML_TYPE_Q3_K-loader.TypeQ3K]
	_ = typeIDs[C.GGML_TYPE_Q4_K-loader.TypeQ4K]
	_ = typeIDs[C.GGML_TYPE_Q5_K-loader.TypeQ5K]
	_ = typeIDs[C.GGML_TYPE_Q6_K-loader.TypeQ6K]
	_ = typeIDs[C.GGML_TYPE_Q8_K-loader.TypeQ8K]
	_ = typeIDs[C.GGML_TYPE_IQ2_XXS-loader.TypeIQ2XXS]
	_ = typeIDs[C.GGML_TYPE_IQ2_XS-loader.TypeIQ2XS]
	_ = typeIDs[C.GGML_TYPE_IQ3_XXS-loader.TypeIQ3XXS]
	_ = typeIDs[C.GGML_TYPE_IQ1_S-loader.TypeIQ1S]
	_ = typeIDs[C.GGML_TYPE_IQ4_NL-loader.TypeIQ4NL]
	_ = typeIDs[C.GGML_TYPE_IQ3_S-loader.TypeIQ3S]
	_ = typeIDs[C.GGML_TYPE_IQ2_S-loader.TypeIQ2S]
	_ = typeIDs[C.GGML_TYPE_IQ4_XS-loader.TypeIQ4XS]
	_ = typeIDs[C.GGML_TYPE_I8-loader.TypeI8]
	_ = typeIDs[C.GGML_TYPE_I16-loader.TypeI16]
	_ = typeIDs[C.GGML_TYPE_I32-loader.TypeI32]
	_ = typeIDs[C.GGML_TYPE_I64-loader.TypeI64]
	_ = typeIDs[C.GGML_TYPE_F64-loader.TypeF64]
	_ = typeIDs[C.GGML_TYPE_IQ1_M-loader.TypeIQ1M]
	_ = typeIDs[C.GGML_TYPE_BF16-loader.TypeBF16]
	_ = typeIDs[C.GGML_TYPE_TQ1_0-loader.TypeTQ1_0]
	_ = typeIDs[C.GGML_TYPE_TQ2_0-loader.TypeTQ2_0]
	_ = typeIDs[C.GGML_TYPE_MXFP4-loader.TypeMXFP4]
}
