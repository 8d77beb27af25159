package loader

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Type is a ggml tensor type id, as stored in GGUF tensor descriptors.
//
// The values mirror enum ggml_type in ggml.h of the pinned ggml
// (github.com/ollama/ollama v0.17.4, ml/backend/ggml/ggml/include/ggml.h);
// the ggml package checks them against the C constants at compile time.
type Type uint32

// Tensor types. Ids 4, 5 and 31..33, 36..38 were removed from ggml and are
// not Known.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2K     Type = 10
	TypeQ3K     Type = 11
	TypeQ4K     Type = 12
	TypeQ5K     Type = 13
	TypeQ6K     Type = 14
	TypeQ8K     Type = 15
	TypeIQ2XXS  Type = 16
	TypeIQ2XS   Type = 17
	TypeIQ3XXS  Type = 18
	TypeIQ1S    Type = 19
	TypeIQ4NL   Type = 20
	TypeIQ3S    Type = 21
	TypeIQ2S    Type = 22
	TypeIQ4XS   Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1M    Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	typeCount   Type = 40  // GGML_TYPE_COUNT
	qkK              = 256 // QK_K, the k-quant super-block size
	qk32             = 32  // QK4_0, QK8_0, QK4_NL, QK_MXFP4, ...
	maxTypeName      = 8
)

// typeTraits mirrors the type_traits table of ggml.c: name, elements per
// block and bytes per block (sizeof(block_*) from ggml-common.h).
type typeTraits struct {
	name      string
	blockSize int
	typeSize  int
	quantized bool
}

var traits = [typeCount]typeTraits{
	TypeF32:    {"f32", 1, 4, false},
	TypeF16:    {"f16", 1, 2, false},
	TypeQ4_0:   {"q4_0", qk32, 2 + qk32/2, true},               // 18
	TypeQ4_1:   {"q4_1", qk32, 2*2 + qk32/2, true},             // 20
	TypeQ5_0:   {"q5_0", qk32, 2 + 4 + qk32/2, true},           // 22
	TypeQ5_1:   {"q5_1", qk32, 2*2 + 4 + qk32/2, true},         // 24
	TypeQ8_0:   {"q8_0", qk32, 2 + qk32, true},                 // 34
	TypeQ8_1:   {"q8_1", qk32, 2*2 + qk32, true},               // 36
	TypeQ2K:    {"q2_K", qkK, 2*2 + qkK/16 + qkK/4, true},      // 84
	TypeQ3K:    {"q3_K", qkK, 2 + qkK/4 + qkK/8 + 12, true},    // 110
	TypeQ4K:    {"q4_K", qkK, 2*2 + 12 + qkK/2, true},          // 144
	TypeQ5K:    {"q5_K", qkK, 2*2 + 12 + qkK/2 + qkK/8, true},  // 176
	TypeQ6K:    {"q6_K", qkK, 2 + qkK/16 + 3*qkK/4, true},      // 210
	TypeQ8K:    {"q8_K", qkK, 4 + qkK + qkK/16*2, true},        // 292
	TypeIQ2XXS: {"iq2_xxs", qkK, 2 + qkK/8*2, true},            // 66
	TypeIQ2XS:  {"iq2_xs", qkK, 2 + qkK/8*2 + qkK/32, true},    // 74
	TypeIQ3XXS: {"iq3_xxs", qkK, 2 + 3*(qkK/8), true},          // 98
	TypeIQ1S:   {"iq1_s", qkK, 2 + qkK/8 + qkK/16, true},       // 50
	TypeIQ4NL:  {"iq4_nl", qk32, 2 + qk32/2, true},             // 18
	TypeIQ3S:   {"iq3_s", qkK, 2 + 13*(qkK/32) + qkK/64, true}, // 110
	TypeIQ2S:   {"iq2_s", qkK, 2 + qkK/4 + qkK/16, true},       // 82
	TypeIQ4XS:  {"iq4_xs", qkK, 2 + 2 + qkK/64 + qkK/2, true},  // 136
	TypeI8:     {"i8", 1, 1, false},
	TypeI16:    {"i16", 1, 2, false},
	TypeI32:    {"i32", 1, 4, false},
	TypeI64:    {"i64", 1, 8, false},
	TypeF64:    {"f64", 1, 8, false},
	TypeIQ1M:   {"iq1_m", qkK, qkK/8 + qkK/16 + qkK/32, true}, // 56
	TypeBF16:   {"bf16", 1, 2, false},
	TypeTQ1_0:  {"tq1_0", qkK, 2 + qkK/64 + (qkK-4*qkK/64)/5, true}, // 54
	TypeTQ2_0:  {"tq2_0", qkK, 2 + qkK/4, true},                     // 66
	TypeMXFP4:  {"mxfp4", qk32, 1 + qk32/2, true},                   // 17
}

// Known reports whether t is a tensor type of the pinned ggml.
func (t Type) Known() bool { return t < typeCount && traits[t].blockSize != 0 }

// String returns the ggml type name ("f32", "q8_0", "q4_K"), or "type(N)"
// for an unknown id.
func (t Type) String() string {
	if !t.Known() {
		return fmt.Sprintf("type(%d)", uint32(t))
	}
	return traits[t].name
}

// BlockSize returns the number of elements per block (1 for f32, 32 for
// q8_0, 256 for k-quants), or 0 for an unknown type.
func (t Type) BlockSize() int {
	if !t.Known() {
		return 0
	}
	return traits[t].blockSize
}

// TypeSize returns the number of bytes per block, or 0 for an unknown type.
func (t Type) TypeSize() int {
	if !t.Known() {
		return 0
	}
	return traits[t].typeSize
}

// Quantized reports whether t is a block-quantized type (ggml is_quantized).
func (t Type) Quantized() bool { return t.Known() && traits[t].quantized }

// RowSize returns the bytes taken by a row of ne0 elements (ggml_row_size).
// It fails for an unknown type, a negative ne0, an ne0 that is not a multiple
// of the block size, or an overflowing result.
func (t Type) RowSize(ne0 int64) (int64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if ne0 < 0 {
		return 0, fmt.Errorf("row of %d elements: negative length", ne0)
	}
	n, err := t.rowSize(uint64(ne0))
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("%s row of %d elements: size overflows int64", t, ne0)
	}
	return int64(n), nil
}

func (t Type) rowSize(ne0 uint64) (uint64, error) {
	bs := uint64(traits[t].blockSize)
	if ne0%bs != 0 {
		return 0, fmt.Errorf("%s row of %d elements is not a multiple of the block size %d", t, ne0, bs)
	}
	hi, lo := bits.Mul64(ne0/bs, uint64(traits[t].typeSize))
	if hi != 0 {
		return 0, fmt.Errorf("%s row of %d elements: size overflows uint64", t, ne0)
	}
	return lo, nil
}

// ByteSize returns the bytes taken by a contiguous tensor of the given shape
// (ggml ne order, ne0 first; an empty shape is a scalar). It fails for an
// unknown type, an ne0 that is not a multiple of the block size, or overflow.
func (t Type) ByteSize(shape []uint64) (uint64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	ne0 := uint64(1)
	if len(shape) > 0 {
		ne0 = shape[0]
	}
	size, err := t.rowSize(ne0)
	if err != nil {
		return 0, err
	}
	for i := 1; i < len(shape); i++ {
		hi, lo := bits.Mul64(size, shape[i])
		if hi != 0 {
			return 0, fmt.Errorf("%s tensor of shape %v: size overflows uint64", t, shape)
		}
		size = lo
	}
	return size, nil
}

// ParseType returns the type named s, case-insensitively ("q4_k", "Q4_K",
// "F16", "bf16").
func ParseType(s string) (Type, error) {
	if len(s) <= maxTypeName {
		for t := range typeCount {
			if t.Known() && strings.EqualFold(traits[t].name, s) {
				return t, nil
			}
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", s)
}

// Types returns every known type in id order.
func Types() []Type {
	var ts []Type
	for t := range typeCount {
		if t.Known() {
			ts = append(ts, t)
		}
	}
	return ts
}
