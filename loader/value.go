package loader

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is a GGUF metadata value type (enum gguf_type in gguf.h).
type ValueType uint32

// Metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
	valueCount   ValueType = 13
)

var valueTypeNames = [valueCount]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

// fixed sizes in bytes of the scalar value types (0 for string and array).
var valueTypeSizes = [valueCount]int{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

// Known reports whether t is a GGUF value type.
func (t ValueType) Known() bool { return t < valueCount }

// String returns the GGUF name of the type ("uint32", "string", "array").
func (t ValueType) String() string {
	if !t.Known() {
		return fmt.Sprintf("valuetype(%d)", uint32(t))
	}
	return valueTypeNames[t]
}

// Value is one GGUF metadata value: a scalar, a string or an array. The zero
// Value is invalid (Type returns an unknown type) and cannot be written.
//
// Arrays hold a Go slice of the natural element type ([]uint8 ... []float64,
// []bool, []string) or, for arrays of arrays, []Value.
type Value struct {
	typ  ValueType
	elem ValueType // element type of arrays
	v    any
	set  bool
}

// Type returns the value type (ValueArray for arrays).
func (v Value) Type() ValueType {
	if !v.set {
		return valueCount
	}
	return v.typ
}

// ElemType returns the element type of an array, or the Value's own type
// for a scalar.
func (v Value) ElemType() ValueType {
	if v.typ == ValueArray {
		return v.elem
	}
	return v.Type()
}

// Len returns the number of elements of an array, or 1 for a scalar.
func (v Value) Len() int {
	if v.typ != ValueArray {
		return 1
	}
	return arrayLen(v.v)
}

// Any returns the Go value: uint8, int8, uint16, int16, uint32, int32,
// float32, bool, string, uint64, int64 or float64 for scalars, a slice of
// those for arrays, and []Value for arrays of arrays. The returned slices are
// shared: do not modify them.
func (v Value) Any() any { return v.v }

// String returns a human-readable form: numbers as decimals, strings quoted
// with Go escapes (safe to print on a terminal) and arrays in brackets.
func (v Value) String() string { return v.Short(-1) }

// Short is String with arrays abbreviated to their first maxElems elements
// followed by "... (N total)"; a negative maxElems prints every element.
func (v Value) Short(maxElems int) string {
	var b strings.Builder
	v.format(&b, maxElems)
	return b.String()
}

func (v Value) format(b *strings.Builder, maxElems int) {
	if !v.set {
		b.WriteString("<invalid>")
		return
	}
	if v.typ != ValueArray {
		b.WriteString(formatScalar(v.v))
		return
	}
	n := arrayLen(v.v)
	shown := n
	if maxElems >= 0 && n > maxElems {
		shown = maxElems
	}
	b.WriteByte('[')
	for i := range shown {
		if i > 0 {
			b.WriteString(", ")
		}
		if inner, ok := v.v.([]Value); ok {
			inner[i].format(b, maxElems)
		} else {
			b.WriteString(formatScalar(arrayIndex(v.v, i)))
		}
	}
	if shown < n {
		if shown > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "... (%d total)", n)
	}
	b.WriteByte(']')
}

func formatScalar(x any) string {
	switch x := x.(type) {
	case string:
		return strconv.Quote(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

func arrayLen(x any) int {
	switch x := x.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

func arrayIndex(x any, i int) any {
	switch x := x.(type) {
	case []uint8:
		return x[i]
	case []int8:
		return x[i]
	case []uint16:
		return x[i]
	case []int16:
		return x[i]
	case []uint32:
		return x[i]
	case []int32:
		return x[i]
	case []float32:
		return x[i]
	case []bool:
		return x[i]
	case []string:
		return x[i]
	case []uint64:
		return x[i]
	case []int64:
		return x[i]
	case []float64:
		return x[i]
	case []Value:
		return x[i]
	}
	return nil
}

// goTypeName is the name used in KVTypeError: "uint32", "[]int32", "[][]...".
func (v Value) goTypeName() string {
	if !v.set {
		return "invalid"
	}
	if v.typ == ValueArray {
		if inner, ok := v.v.([]Value); ok && len(inner) > 0 {
			return "[]" + inner[0].goTypeName()
		}
		return "[]" + v.elem.String()
	}
	return v.typ.String()
}

func scalar(t ValueType, x any) Value { return Value{typ: t, elem: t, v: x, set: true} }

func array(elem ValueType, x any) Value { return Value{typ: ValueArray, elem: elem, v: x, set: true} }

// Scalar is the Go type of a GGUF scalar.
type Scalar interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | uint64 | int64 | float32 | float64 | bool | string
}

// ValueOf is the GGUF value of a scalar, e.g. ValueOf[uint32](3) or
// ValueOf("name").
func ValueOf[T Scalar](x T) Value { return scalar(scalarType(x), x) }

// ArrayOf is the GGUF array of scalars x. The slice is kept, not copied: do
// not modify it while the Value is in use. A nil slice is an empty array.
func ArrayOf[T Scalar](x []T) Value {
	var zero T
	return array(scalarType(zero), nonNil(x))
}

// scalarType is the GGUF type of a scalar's Go type.
func scalarType(x any) ValueType {
	switch x.(type) {
	case uint8:
		return ValueUint8
	case int8:
		return ValueInt8
	case uint16:
		return ValueUint16
	case int16:
		return ValueInt16
	case uint32:
		return ValueUint32
	case int32:
		return ValueInt32
	case uint64:
		return ValueUint64
	case int64:
		return ValueInt64
	case float32:
		return ValueFloat32
	case float64:
		return ValueFloat64
	case bool:
		return ValueBool
	}
	return ValueString
}

// ArrayValue returns an array of arrays. GGUF allows them, ggml's own reader
// does not; this package reads them up to a nesting depth of 8. Every
// element must be an array of the same element type (checked by Write).
func ArrayValue(x []Value) Value { return array(ValueArray, nonNil(x)) }

func nonNil[T any](x []T) []T {
	if x == nil {
		return []T{}
	}
	return x
}

// asUint64 returns an integer value as uint64 when it is non-negative.
func asUint64(x any) (uint64, bool) {
	switch x := x.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// asInt64 returns an integer value as int64 when it fits.
func asInt64(x any) (int64, bool) {
	switch x := x.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

func isInteger(t ValueType) bool {
	switch t {
	case ValueUint8, ValueInt8, ValueUint16, ValueInt16, ValueUint32, ValueInt32, ValueUint64, ValueInt64:
		return true
	}
	return false
}
