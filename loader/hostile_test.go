package loader_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

// raw builds GGUF bytes field by field, including invalid ones.
type raw struct{ b []byte }

func (r *raw) u8(x uint8) *raw   { r.b = append(r.b, x); return r }
func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) bytes(p ...byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// header starts a v3 file with the given counts.
func header(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{}
	r.bytes('G', 'G', 'U', 'F').u32(version).u64(nTensors).u64(nKV)
	return r
}

// tensorInfo appends one descriptor.
func (r *raw) tensorInfo(name string, typ loader.Type, offset uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(offset)
}

// pad aligns to 32 bytes.
func (r *raw) pad() *raw {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	return r
}

func openBytes(t *testing.T, b []byte) (*loader.File, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := loader.Open(path)
	if f != nil {
		t.Cleanup(func() { _ = f.Close() })
	}
	return f, err
}

// smallValidFile is a file with every kind of field: keys of several types,
// arrays, and two tensors (the last one not a multiple of the alignment).
func smallValidFile(t *testing.T) (b []byte, lastEnd int) {
	t.Helper()
	var buf bytes.Buffer
	kv := []loader.KeyValue{
		{Key: "depthanything3.arch", Value: loader.ValueOf[string]("depthanything3")},
		{Key: "depthanything3.patch_size", Value: loader.ValueOf[uint32](14)},
		{Key: "depthanything3.vit.out_layers", Value: loader.ArrayOf[int32]([]int32{5, 7, 9, 11})},
		{Key: "names", Value: loader.ArrayOf[string]([]string{"a", "bc"})},
		{Key: "nested", Value: loader.ArrayValue([]loader.Value{loader.ArrayOf[bool]([]bool{true})})},
	}
	tensors := []loader.WriterTensor{
		{Name: "w", Type: loader.TypeQ8_0, Shape: []uint64{32, 2}, Data: loader.BytesTensor(make([]byte, 68))},
		{Name: "b", Type: loader.TypeF32, Shape: []uint64{3}, Data: loader.Float32Bytes([]float32{1, 2, 3})},
	}
	require.NoError(t, loader.Write(&buf, kv, tensors, 0))
	f, err := openBytes(t, buf.Bytes())
	require.NoError(t, err)
	last, ok := f.Tensor("b")
	require.True(t, ok)
	return buf.Bytes(), int(last.Offset + last.Size)
}

func TestTruncatedPrefixes(t *testing.T) {
	b, lastEnd := smallValidFile(t)
	require.Less(t, lastEnd, len(b), "the file ends with padding")
	dir := t.TempDir()
	path := filepath.Join(dir, "p.gguf")
	for n := 0; n <= len(b); n++ {
		require.NoError(t, os.WriteFile(path, b[:n], 0o644))
		var f *loader.File
		var err error
		require.NotPanics(t, func() { f, err = loader.Open(path) }, "prefix %d", n)
		if n < lastEnd {
			require.Error(t, err, "prefix of %d bytes", n)
			if n >= 4 {
				assert.NotErrorIs(t, err, loader.ErrNotGGUF, "prefix of %d bytes", n)
			}
			continue
		}
		require.NoError(t, err, "prefix of %d bytes keeps all tensor data", n)
		require.NoError(t, f.Close())
	}
}

func TestHostileFiles(t *testing.T) {
	const huge = uint64(1) << 62
	cases := []struct {
		name string
		b    []byte
		err  string
		is   error
	}{
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), `magic "GGML"`, loader.ErrNotGGUF},
		{"short magic", []byte("GG"), "", loader.ErrNotGGUF},
		{"version 1", header(1, 0, 0).b, "1, want 2 or 3", loader.ErrUnsupportedVersion},
		{"version 4", header(4, 0, 0).b, "4, want 2 or 3", loader.ErrUnsupportedVersion},
		{"version 0", header(0, 0, 0).b, "0, want 2 or 3", loader.ErrUnsupportedVersion},
		{"big endian", header(0x03000000, 0, 0).b, "big-endian", loader.ErrUnsupportedVersion},
		{"no counts", (&raw{}).bytes('G', 'G', 'U', 'F').u32(3).u64(0).b, "metadata count", nil},
		{"huge kv count", header(3, 0, huge).b, "metadata count 4611686018427387904", nil},
		{"max kv count", header(3, 0, ^uint64(0)).b, "metadata count", nil},
		{"huge tensor count", header(3, huge, 0).b, "tensor count 4611686018427387904", nil},
		{"huge key length", header(3, 0, 1).u64(huge).u64(0).b, "length 4611686018427387904 exceeds", nil},
		{"key past end", header(3, 0, 1).str("abcdefghijklmnop").b[:len(header(3, 0, 1).str("abcdefghijklmnop").b)-1], "metadata key 0 at offset", nil},
		{"empty key", header(3, 0, 1).str("").u32(uint32(loader.ValueUint8)).u8(1).b, "empty key", nil},
		{"huge string", header(3, 0, 1).str("k").u32(uint32(loader.ValueString)).u64(huge).b, `key "k": string at offset`, nil},
		{"huge array", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(uint32(loader.ValueUint32)).u64(huge).b, `key "k": array length 4611686018427387904`, nil},
		{"huge string array", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(uint32(loader.ValueString)).u64(huge).b, `key "k": array length`, nil},
		{"huge nested array", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(uint32(loader.ValueArray)).u64(huge).b, `key "k": array length`, nil},
		{"array overflow", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(uint32(loader.ValueFloat64)).u64(1 << 61).b, `key "k": array length 2305843009213693952`, nil},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).b, `key "k": unknown value type 13`, nil},
		{"unknown elem type", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(99).u64(0).b, `key "k": array of unknown value type 99`, nil},
		{"bad bool", header(3, 0, 1).str("k").u32(uint32(loader.ValueBool)).u8(2).b, `key "k": bool value 2`, nil},
		{"bad bool in array", header(3, 0, 1).str("k").u32(uint32(loader.ValueArray)).u32(uint32(loader.ValueBool)).u64(2).u8(1).u8(7).b, `key "k": element 1: bool value 7`, nil},
		{"duplicate key", header(3, 0, 2).str("k").u32(uint32(loader.ValueUint8)).u8(1).str("k").u32(uint32(loader.ValueUint8)).u8(2).b, `duplicate metadata key "k"`, nil},
		{"nesting too deep", nestedArrays(9), "nested deeper than 8", nil},
		{"alignment zero", header(3, 0, 1).str("general.alignment").u32(uint32(loader.ValueUint32)).u32(0).b, "alignment 0 is not a power of 2", nil},
		{"alignment three", header(3, 0, 1).str("general.alignment").u32(uint32(loader.ValueUint32)).u32(3).b, "alignment 3 is not a power of 2", nil},
		{"alignment string", header(3, 0, 1).str("general.alignment").u32(uint32(loader.ValueString)).str("32").b, `key "general.alignment": want uint32, got string`, nil},
		{"alignment u64", header(3, 0, 1).str("general.alignment").u32(uint32(loader.ValueUint64)).u64(32).b, `key "general.alignment": want uint32, got uint64`, nil},
		{"five dims", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 0, 1, 1, 1, 1, 1).b, `tensor "t": 5 dimensions, ggml allows at most 4`, nil},
		{"dims overflow", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 0, 1<<32, 1<<32).b, `tensor "t": shape [4294967296 4294967296]: element count overflows`, nil},
		{"negative dim", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 0, 1<<63).b, `tensor "t": dimension 0 has 9223372036854775808 elements`, nil},
		{"bytes overflow", header(3, 1, 0).tensorInfo("t", loader.TypeF64, 0, 1<<62).pad().b, `tensor "t": f64 row of 4611686018427387904 elements: size overflows`, nil},
		{"unknown tensor type", header(3, 1, 0).tensorInfo("t", 4, 0, 32).b, `tensor "t": unknown tensor type 4`, nil},
		{"type out of range", header(3, 1, 0).tensorInfo("t", 1000, 0, 32).b, `tensor "t": unknown tensor type 1000`, nil},
		{"bad block", header(3, 1, 0).tensorInfo("t", loader.TypeQ4K, 0, 384).b, `tensor "t": q4_K row of 384 elements is not a multiple of the block size 256`, nil},
		{"empty tensor name", header(3, 1, 0).tensorInfo("", loader.TypeF32, 0, 1).b, "tensor 0: empty tensor name", nil},
		{"long tensor name", header(3, 1, 0).tensorInfo(string(bytes.Repeat([]byte("x"), 64)), loader.TypeF32, 0, 1).b, "at most 63", nil},
		{"duplicate tensor", header(3, 2, 0).tensorInfo("t", loader.TypeF32, 0, 8).tensorInfo("t", loader.TypeF32, 32, 8).pad().bytes(make([]byte, 64)...).b, `duplicate tensor name "t"`, nil},
		{"misaligned offset", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 4, 1).pad().bytes(make([]byte, 64)...).b, `tensor "t": data offset 4 is not a multiple of the alignment 32`, nil},
		{"tensor past EOF", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 0, 16).pad().bytes(make([]byte, 63)...).b, `tensor "t": data [0, +64) at data offset`, nil},
		{"tensor offset past EOF", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 1<<40, 1).pad().b, `tensor "t": data [1099511627776, +4)`, nil},
		{"tensor offset overflow", header(3, 1, 0).tensorInfo("t", loader.TypeF32, ^uint64(31), 8).pad().b, `tensor "t"`, nil},
		{"missing padding", header(3, 1, 0).tensorInfo("t", loader.TypeF32, 0, 1).bytes(0, 0, 0, 0).b, `tensor "t": data [0, +4)`, nil},
		{"overlap", header(3, 2, 0).tensorInfo("a", loader.TypeF32, 0, 16).tensorInfo("b", loader.TypeF32, 32, 8).pad().bytes(make([]byte, 96)...).b, `tensor "b": data`, nil},
		{"tensor count too large for the rest", header(3, 2, 0).tensorInfo("t", loader.TypeF32, 0, 1).b, "tensor", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = openBytes(t, tc.b) })
			require.Error(t, err)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			} else {
				assert.NotErrorIs(t, err, loader.ErrNotGGUF)
				assert.NotErrorIs(t, err, loader.ErrUnsupportedVersion)
			}
		})
	}
}

func TestOverlapNamesBoth(t *testing.T) {
	b := header(3, 2, 0).tensorInfo("first", loader.TypeF32, 0, 16).tensorInfo("second", loader.TypeF32, 32, 8).pad().bytes(make([]byte, 96)...).b
	_, err := openBytes(t, b)
	assert.ErrorContains(t, err, `tensor "second": data [`)
	assert.ErrorContains(t, err, `overlaps tensor "first"`)

	// A zero-size tensor between two overlapping ones does not hide the overlap.
	b = header(3, 3, 0).tensorInfo("a", loader.TypeF32, 0, 24).tensorInfo("z", loader.TypeF32, 32, 0).
		tensorInfo("c", loader.TypeF32, 64, 8).pad().bytes(make([]byte, 128)...).b
	_, err = openBytes(t, b)
	assert.ErrorContains(t, err, `tensor "c"`)
	assert.ErrorContains(t, err, `overlaps tensor "a"`)
}

func TestHostileAccepted(t *testing.T) {
	// Things GGUF allows that are odd but harmless.
	cases := []struct {
		name string
		b    []byte
	}{
		{"no tensors no padding", header(3, 0, 1).str("k").u32(uint32(loader.ValueUint8)).u8(1).b},
		{"zero dims tensor", header(3, 1, 0).tensorInfo("s", loader.TypeF32, 0).pad().bytes(1, 2, 3, 4).b},
		{"out of order offsets", header(3, 2, 0).tensorInfo("a", loader.TypeF32, 32, 1).tensorInfo("b", loader.TypeF32, 0, 1).pad().bytes(make([]byte, 36)...).b},
		{"trailing bytes", header(3, 1, 0).tensorInfo("a", loader.TypeF32, 0, 1).pad().bytes(make([]byte, 100)...).b},
		{"nested 8 deep", nestedArrays(8)},
		{"v2", header(2, 0, 0).b},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := openBytes(t, tc.b)
			require.NoError(t, err)
			for _, ti := range f.Tensors() {
				data, err := f.TensorData(ti.Name)
				require.NoError(t, err)
				assert.Len(t, data, int(ti.Size))
			}
		})
	}
}

// nestedArrays returns a file with one key holding depth nested arrays.
func nestedArrays(depth int) []byte {
	r := header(3, 0, 1).str("deep").u32(uint32(loader.ValueArray))
	for range depth - 1 {
		r.u32(uint32(loader.ValueArray)).u64(1)
	}
	return r.u32(uint32(loader.ValueUint8)).u64(1).u8(7).b
}
