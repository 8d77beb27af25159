package loader_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

func newKV(t *testing.T) *loader.KV {
	t.Helper()
	kv, err := loader.NewKV([]loader.KeyValue{
		{Key: "u8", Value: loader.ValueOf[uint8](14)},
		{Key: "u16", Value: loader.ValueOf[uint16](504)},
		{Key: "u32", Value: loader.ValueOf[uint32](768)},
		{Key: "u32.big", Value: loader.ValueOf[uint32](math.MaxUint32)},
		{Key: "u64.small", Value: loader.ValueOf[uint64](37)},
		{Key: "u64.big", Value: loader.ValueOf[uint64](1 << 40)},
		{Key: "i8.neg", Value: loader.ValueOf[int8](-1)},
		{Key: "i32", Value: loader.ValueOf[int32](-1)},
		{Key: "i32.pos", Value: loader.ValueOf[int32](12)},
		{Key: "i64.pos", Value: loader.ValueOf[int64](4)},
		{Key: "f32", Value: loader.ValueOf[float32](0.1)},
		{Key: "f64", Value: loader.ValueOf[float64](100)},
		{Key: "bool", Value: loader.ValueOf[bool](true)},
		{Key: "str", Value: loader.ValueOf[string]("mlp")},
		{Key: "ints", Value: loader.ArrayOf[int32]([]int32{5, 7, 9, 11})},
		{Key: "u8s", Value: loader.ArrayOf[uint8]([]uint8{1, 2})},
		{Key: "i64s.big", Value: loader.ArrayOf[int64]([]int64{1, 1 << 40})},
		{Key: "floats", Value: loader.ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: "doubles", Value: loader.ArrayOf[float64]([]float64{0.5, 0.25})},
		{Key: "strs", Value: loader.ArrayOf[string]([]string{"a", "b"})},
	})
	require.NoError(t, err)
	return kv
}

func TestKVGetters(t *testing.T) {
	kv := newKV(t)
	type result struct {
		v   any
		err error
	}
	get := func(v any, err error) result { return result{v, err} }
	cases := []struct {
		name string
		got  result
		want any    // expected value when err == ""
		err  string // substring; "" means success
	}{
		{"uint32 from u8", get(kv.Uint32("u8")), uint32(14), ""},
		{"uint32 from u16", get(kv.Uint32("u16")), uint32(504), ""},
		{"uint32", get(kv.Uint32("u32")), uint32(768), ""},
		{"uint32 from small u64", get(kv.Uint32("u64.small")), uint32(37), ""},
		{"uint32 from positive i32", get(kv.Uint32("i32.pos")), uint32(12), ""},
		{"uint32 from big u64", get(kv.Uint32("u64.big")), nil, `key "u64.big": want uint32, got uint64 1099511627776 (out of range)`},
		{"uint32 from negative", get(kv.Uint32("i32")), nil, "out of range"},
		{"uint32 from string", get(kv.Uint32("str")), nil, `key "str": want uint32, got string`},
		{"uint32 from array", get(kv.Uint32("ints")), nil, "got []int32"},
		{"uint32 from float", get(kv.Uint32("f32")), nil, "got float32"},
		{"uint64 from u8", get(kv.Uint64("u8")), uint64(14), ""},
		{"uint64 from negative", get(kv.Uint64("i8.neg")), nil, "out of range"},
		{"int32", get(kv.Int32("i32")), int32(-1), ""},
		{"int32 from i8", get(kv.Int32("i8.neg")), int32(-1), ""},
		{"int32 from i64", get(kv.Int32("i64.pos")), int32(4), ""},
		{"int32 from u16", get(kv.Int32("u16")), int32(504), ""},
		{"int32 from big u32", get(kv.Int32("u32.big")), nil, "out of range"},
		{"int32 from bool", get(kv.Int32("bool")), nil, "want int32, got bool"},
		{"float32", get(kv.Float32("f32")), float32(0.1), ""},
		{"float32 from f64", get(kv.Float32("f64")), float32(100), ""},
		{"float32 from int", get(kv.Float32("u32")), nil, "want float32, got uint32"},
		{"bool", get(kv.Bool("bool")), true, ""},
		{"bool from int", get(kv.Bool("u8")), nil, "want bool, got uint8"},
		{"string", get(kv.String("str")), "mlp", ""},
		{"string from strings", get(kv.String("strs")), nil, "want string, got []string"},
		{"int32s", get(kv.Int32s("ints")), []int32{5, 7, 9, 11}, ""},
		{"int32s from u8s", get(kv.Int32s("u8s")), []int32{1, 2}, ""},
		{"int32s out of range", get(kv.Int32s("i64s.big")), nil, "out of range"},
		{"int32s from floats", get(kv.Int32s("floats")), nil, "want []int32, got []float32"},
		{"int32s from scalar", get(kv.Int32s("i32")), nil, "want []int32, got int32"},
		{"float32s", get(kv.Float32s("floats")), []float32{0.485, 0.456, 0.406}, ""},
		{"float32s from f64s", get(kv.Float32s("doubles")), []float32{0.5, 0.25}, ""},
		{"float32s from ints", get(kv.Float32s("ints")), nil, "want []float32, got []int32"},
		{"strings", get(kv.Strings("strs")), []string{"a", "b"}, ""},
		{"strings from string", get(kv.Strings("str")), nil, "want []string, got string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == "" {
				require.NoError(t, tc.got.err)
				assert.Equal(t, tc.want, tc.got.v)
				return
			}
			require.Error(t, tc.got.err)
			assert.ErrorContains(t, tc.got.err, tc.err)
			var te *loader.KVTypeError
			assert.True(t, errors.As(tc.got.err, &te), "error is a *KVTypeError: %v", tc.got.err)
		})
	}
}

func TestKVTypeErrorFields(t *testing.T) {
	kv := newKV(t)
	_, err := kv.String("u32")
	var te *loader.KVTypeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, loader.KVTypeError{Key: "u32", Want: "string", Got: "uint32"}, *te)
}

func TestKVMissing(t *testing.T) {
	kv := newKV(t)
	getters := map[string]func(string) error{
		"String":   func(k string) error { _, err := kv.String(k); return err },
		"Uint32":   func(k string) error { _, err := kv.Uint32(k); return err },
		"Uint64":   func(k string) error { _, err := kv.Uint64(k); return err },
		"Int32":    func(k string) error { _, err := kv.Int32(k); return err },
		"Float32":  func(k string) error { _, err := kv.Float32(k); return err },
		"Bool":     func(k string) error { _, err := kv.Bool(k); return err },
		"Int32s":   func(k string) error { _, err := kv.Int32s(k); return err },
		"Float32s": func(k string) error { _, err := kv.Float32s(k); return err },
		"Strings":  func(k string) error { _, err := kv.Strings(k); return err },
	}
	for name, get := range getters {
		err := get("depthanything3.vit.depth")
		assert.ErrorIs(t, err, loader.ErrKeyNotFound, name)
		assert.ErrorContains(t, err, `"depthanything3.vit.depth"`, name)
	}
}

func TestKVOr(t *testing.T) {
	kv := newKV(t)
	assert.Equal(t, "mlp", kv.StringOr("str", "x"))
	assert.Equal(t, "x", kv.StringOr("missing", "x"))
	assert.Equal(t, "x", kv.StringOr("u8", "x"), "wrong type gives the default")
	assert.Equal(t, uint32(14), kv.Uint32Or("u8", 3))
	assert.Equal(t, uint32(3), kv.Uint32Or("missing", 3))
	assert.Equal(t, uint32(3), kv.Uint32Or("i32", 3), "out of range gives the default")
	assert.Equal(t, int32(-1), kv.Int32Or("i32", 3))
	assert.Equal(t, int32(3), kv.Int32Or("missing", 3))
	assert.Equal(t, float32(0.1), kv.Float32Or("f32", 2))
	assert.Equal(t, float32(2), kv.Float32Or("missing", 2))
	assert.True(t, kv.BoolOr("bool", false))
	assert.True(t, kv.BoolOr("missing", true))
	assert.False(t, kv.BoolOr("missing", false))
}

func TestKVCopies(t *testing.T) {
	kv := newKV(t)
	ints, err := kv.Int32s("ints")
	require.NoError(t, err)
	ints[0] = 99
	again, err := kv.Int32s("ints")
	require.NoError(t, err)
	assert.Equal(t, int32(5), again[0], "getters return copies")

	entries := kv.Entries()
	require.Len(t, entries, kv.Len())
	entries[0].Key = "changed"
	_, ok := kv.Get("u8")
	assert.True(t, ok)
}

func TestNewKVErrors(t *testing.T) {
	_, err := loader.NewKV([]loader.KeyValue{{Key: "a", Value: loader.ValueOf[bool](true)}, {Key: "a", Value: loader.ValueOf[uint8](1)}})
	assert.ErrorContains(t, err, `duplicate metadata key "a"`)
	_, err = loader.NewKV([]loader.KeyValue{{Key: "a"}})
	assert.ErrorContains(t, err, "invalid (zero) value")
	_, err = loader.NewKV([]loader.KeyValue{{Key: "", Value: loader.ValueOf[bool](true)}})
	assert.ErrorContains(t, err, "empty metadata key")
}

func TestValueString(t *testing.T) {
	long := make([]int32, 20)
	for i := range long {
		long[i] = int32(i)
	}
	cases := []struct {
		name  string
		v     loader.Value
		full  string
		short string // Short(3)
	}{
		{"string", loader.ValueOf[string]("DA3-BASE"), `"DA3-BASE"`, `"DA3-BASE"`},
		{"control chars escaped", loader.ValueOf[string]("a\x1b[2Jb\n"), `"a\x1b[2Jb\n"`, `"a\x1b[2Jb\n"`},
		{"uint32", loader.ValueOf[uint32](14), "14", "14"},
		{"int32", loader.ValueOf[int32](-1), "-1", "-1"},
		{"float32", loader.ValueOf[float32](0.1), "0.1", "0.1"},
		{"float64", loader.ValueOf[float64](1e-6), "1e-06", "1e-06"},
		{"nan", loader.ValueOf[float32](float32(math.NaN())), "NaN", "NaN"},
		{"bool", loader.ValueOf[bool](false), "false", "false"},
		{"ints", loader.ArrayOf[int32]([]int32{5, 7, 9, 11}), "[5, 7, 9, 11]", "[5, 7, 9, ... (4 total)]"},
		{"short array", loader.ArrayOf[int32]([]int32{1, 2}), "[1, 2]", "[1, 2]"},
		{"empty", loader.ArrayOf[float32](nil), "[]", "[]"},
		{"floats", loader.ArrayOf[float32]([]float32{0.485, 0.456}), "[0.485, 0.456]", "[0.485, 0.456]"},
		{"strings", loader.ArrayOf[string]([]string{"a", "b\"c"}), `["a", "b\"c"]`, `["a", "b\"c"]`},
		{"bools", loader.ArrayOf[bool]([]bool{true, false}), "[true, false]", "[true, false]"},
		{"nested", loader.ArrayValue([]loader.Value{loader.ArrayOf[uint8]([]uint8{1, 2, 3, 4})}), "[[1, 2, 3, 4]]", "[[1, 2, 3, ... (4 total)]]"},
		{"long", loader.ArrayOf[int32](long), "", "[0, 1, 2, ... (20 total)]"},
		{"zero", loader.Value{}, "<invalid>", "<invalid>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.full != "" {
				assert.Equal(t, tc.full, tc.v.String())
			}
			assert.Equal(t, tc.short, tc.v.Short(3))
		})
	}
	assert.Equal(t, "[... (20 total)]", loader.ArrayOf[int32](long).Short(0))
}

func TestValueTypes(t *testing.T) {
	names := map[loader.ValueType]string{
		loader.ValueUint8: "uint8", loader.ValueInt8: "int8", loader.ValueUint16: "uint16", loader.ValueInt16: "int16",
		loader.ValueUint32: "uint32", loader.ValueInt32: "int32", loader.ValueFloat32: "float32", loader.ValueBool: "bool",
		loader.ValueString: "string", loader.ValueArray: "array", loader.ValueUint64: "uint64", loader.ValueInt64: "int64",
		loader.ValueFloat64: "float64",
	}
	for vt, name := range names {
		assert.True(t, vt.Known())
		assert.Equal(t, name, vt.String())
	}
	assert.Equal(t, loader.ValueType(12), loader.ValueFloat64, "GGUF ids")
	assert.Equal(t, loader.ValueType(9), loader.ValueArray)
	assert.False(t, loader.ValueType(13).Known())
	assert.Equal(t, "valuetype(13)", loader.ValueType(13).String())

	v := loader.ArrayOf[int32]([]int32{1, 2, 3})
	assert.Equal(t, loader.ValueArray, v.Type())
	assert.Equal(t, loader.ValueInt32, v.ElemType())
	assert.Equal(t, 3, v.Len())
	s := loader.ValueOf[string]("x")
	assert.Equal(t, loader.ValueString, s.Type())
	assert.Equal(t, loader.ValueString, s.ElemType())
	assert.Equal(t, 1, s.Len())
	assert.False(t, loader.Value{}.Type().Known())
}
