package loader_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// allValues has one entry per metadata type, scalar and array.
func allValues() []loader.KeyValue {
	return []loader.KeyValue{
		{Key: "t.u8", Value: loader.ValueOf[uint8](250)},
		{Key: "t.i8", Value: loader.ValueOf[int8](-100)},
		{Key: "t.u16", Value: loader.ValueOf[uint16](65000)},
		{Key: "t.i16", Value: loader.ValueOf[int16](-32000)},
		{Key: "t.u32", Value: loader.ValueOf[uint32](4_000_000_000)},
		{Key: "t.i32", Value: loader.ValueOf[int32](-2_000_000_000)},
		{Key: "t.f32", Value: loader.ValueOf[float32](1.5e-6)},
		{Key: "t.bool", Value: loader.ValueOf[bool](true)},
		{Key: "t.str", Value: loader.ValueOf[string]("depthanything3 ✓")},
		{Key: "t.u64", Value: loader.ValueOf[uint64](math.MaxUint64)},
		{Key: "t.i64", Value: loader.ValueOf[int64](math.MinInt64)},
		{Key: "t.f64", Value: loader.ValueOf[float64](math.Pi)},
		{Key: "t.empty_str", Value: loader.ValueOf[string]("")},
		{Key: "a.u8", Value: loader.ArrayOf[uint8]([]uint8{0, 1, 255})},
		{Key: "a.i8", Value: loader.ArrayOf[int8]([]int8{-128, 0, 127})},
		{Key: "a.u16", Value: loader.ArrayOf[uint16]([]uint16{1, 65535})},
		{Key: "a.i16", Value: loader.ArrayOf[int16]([]int16{-32768, 32767})},
		{Key: "a.u32", Value: loader.ArrayOf[uint32]([]uint32{7, math.MaxUint32})},
		{Key: "a.i32", Value: loader.ArrayOf[int32]([]int32{5, 7, 9, 11})},
		{Key: "a.f32", Value: loader.ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: "a.bool", Value: loader.ArrayOf[bool]([]bool{true, false, true})},
		{Key: "a.str", Value: loader.ArrayOf[string]([]string{"a", "", "ünïcode", "x y"})},
		{Key: "a.u64", Value: loader.ArrayOf[uint64]([]uint64{0, 1 << 63})},
		{Key: "a.i64", Value: loader.ArrayOf[int64]([]int64{-1, 1 << 62})},
		{Key: "a.f64", Value: loader.ArrayOf[float64]([]float64{-0.5, 1e300})},
		{Key: "a.empty", Value: loader.ArrayOf[int32](nil)},
		{Key: "a.empty_str", Value: loader.ArrayOf[string]([]string{})},
		{Key: "a.nested", Value: loader.ArrayValue([]loader.Value{
			loader.ArrayOf[int32]([]int32{1, 2}),
			loader.ArrayOf[string]([]string{"p", "q"}),
			loader.ArrayValue([]loader.Value{loader.ArrayOf[float32]([]float32{3})}),
		})},
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	kv := allValues()
	path := testutil.WriteGGUF(t, kv, nil)
	f, err := loader.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })

	assert.Equal(t, uint32(3), f.Version())
	assert.Equal(t, uint64(32), f.Alignment())
	assert.Equal(t, path, f.Path())
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, st.Size(), f.Size())
	assert.Empty(t, f.Tensors())

	require.Equal(t, len(kv), f.KV().Len())
	i := 0
	for key, v := range f.KV().All() {
		want := kv[i]
		assert.Equal(t, want.Key, key, "file order")
		assert.Equal(t, want.Value.Type(), v.Type(), key)
		assert.Equal(t, want.Value.ElemType(), v.ElemType(), key)
		assert.Equal(t, want.Value.Len(), v.Len(), key)
		assert.Equal(t, want.Value.Any(), v.Any(), key)
		assert.Equal(t, want.Value.String(), v.String(), key)
		i++
	}
	assert.Equal(t, len(kv), i)

	// Early exit from the iterator.
	n := 0
	for range f.KV().All() {
		n++
		if n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)

	v, ok := f.KV().Get("a.str")
	require.True(t, ok)
	assert.Equal(t, loader.ValueArray, v.Type())
	assert.Equal(t, loader.ValueString, v.ElemType())
	assert.Equal(t, []string{"a", "", "ünïcode", "x y"}, v.Any())
	_, ok = f.KV().Get("missing")
	assert.False(t, ok)
}

func TestTensorsRoundTrip(t *testing.T) {
	f32 := make([]float32, 6*5)
	for i := range f32 {
		f32[i] = float32(i) - 7.25
	}
	pattern := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31) + seed
		}
		return b
	}
	tensors := []loader.WriterTensor{
		{Name: "vit.pos_embed", Type: loader.TypeF32, Shape: []uint64{6, 5}, Data: loader.Float32Bytes(f32)},
		{Name: "odd.f16", Type: loader.TypeF16, Shape: []uint64{3}, Data: loader.BytesTensor(pattern(6, 1))},
		{Name: "blk.q8", Type: loader.TypeQ8_0, Shape: []uint64{64, 3}, Data: loader.BytesTensor(pattern(2*34*3, 2))},
		{Name: "blk.q4k", Type: loader.TypeQ4K, Shape: []uint64{256, 2, 1, 1}, Data: loader.BytesTensor(pattern(2*144, 3))},
		{Name: "blk.q6k", Type: loader.TypeQ6K, Shape: []uint64{512}, Data: loader.BytesTensor(pattern(2*210, 4))},
		{Name: "scalar", Type: loader.TypeBF16, Shape: nil, Data: loader.BytesTensor{0x80, 0x3f}},
		{Name: "empty", Type: loader.TypeF32, Shape: []uint64{0, 4}, Data: loader.BytesTensor(nil)},
		{Name: "last.i8", Type: loader.TypeI8, Shape: []uint64{5}, Data: loader.BytesTensor(pattern(5, 5))},
	}
	for _, alignment := range []uint64{0, 32, 64, 1, 4096} {
		t.Run("align"+strconv.FormatUint(alignment, 10), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			kv := []loader.KeyValue{{Key: "general.architecture", Value: loader.ValueOf[string]("depthanything3")}}
			require.NoError(t, loader.WriteFile(path, kv, tensors, alignment))
			f, err := loader.Open(path)
			require.NoError(t, err)
			defer f.Close()

			wantAlign := alignment
			if wantAlign == 0 {
				wantAlign = 32
			}
			assert.Equal(t, wantAlign, f.Alignment())
			a, err := f.KV().Uint32(loader.AlignmentKey)
			if wantAlign == 32 {
				assert.ErrorIs(t, err, loader.ErrKeyNotFound, "default alignment is not written")
			} else {
				require.NoError(t, err)
				assert.Equal(t, uint32(wantAlign), a)
			}

			got := f.Tensors()
			require.Len(t, got, len(tensors))
			for i, want := range tensors {
				ti := got[i]
				assert.Equal(t, want.Name, ti.Name, "file order")
				assert.Equal(t, want.Type, ti.Type, want.Name)
				if want.Shape == nil {
					assert.Empty(t, ti.Shape)
				} else {
					assert.Equal(t, want.Shape, ti.Shape, want.Name)
				}
				size, err := want.Type.ByteSize(want.Shape)
				require.NoError(t, err)
				assert.Equal(t, size, ti.Size, want.Name)
				assert.Zero(t, ti.Offset%wantAlign, "%s offset %d aligned", want.Name, ti.Offset)

				var buf bytes.Buffer
				_, err = want.Data.WriteTo(&buf)
				require.NoError(t, err)
				data, err := f.TensorData(want.Name)
				require.NoError(t, err)
				assert.Equal(t, append([]byte{}, buf.Bytes()...), append([]byte{}, data...), want.Name)
				assert.Equal(t, len(data), cap(data), "capacity limited to the tensor")

				r, err := f.TensorReader(want.Name)
				require.NoError(t, err)
				assert.Equal(t, int64(size), r.Size())
				all, err := io.ReadAll(r)
				require.NoError(t, err)
				assert.Equal(t, append([]byte{}, buf.Bytes()...), append([]byte{}, all...), want.Name)

				byName, ok := f.Tensor(want.Name)
				require.True(t, ok)
				assert.Equal(t, ti, byName)
			}
			assert.Equal(t, uint64(30), got[0].Elements())
			assert.Equal(t, uint64(1), got[5].Elements(), "scalar")
			assert.Equal(t, uint64(0), got[6].Elements())
		})
	}
}

func TestFloat32TensorValues(t *testing.T) {
	want := []float32{1, -2.5, float32(math.Inf(1)), 3e-20}
	path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{testutil.F32Tensor(t, "x", want, 2, 2)})
	f, err := loader.Open(path)
	require.NoError(t, err)
	defer f.Close()
	data, err := f.TensorData("x")
	require.NoError(t, err)
	require.Len(t, data, 16)
	assert.Equal(t, []byte(loader.Float32Bytes(want)), append([]byte{}, data...))
	assert.Equal(t, math.Float32bits(-2.5), uint32(data[4])|uint32(data[5])<<8|uint32(data[6])<<16|uint32(data[7])<<24)
}

func TestFileLookupAndClose(t *testing.T) {
	path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{
		{Name: "a", Type: loader.TypeF32, Shape: []uint64{4}, Data: loader.Float32Bytes([]float32{1, 2, 3, 4})},
	})
	f, err := loader.Open(path)
	require.NoError(t, err)

	_, ok := f.Tensor("nope")
	assert.False(t, ok)
	_, err = f.TensorData("nope")
	assert.ErrorContains(t, err, `tensor "nope": not found`)
	_, err = f.TensorReader("nope")
	assert.ErrorContains(t, err, `"nope"`)

	// Callers cannot mutate the file's descriptors.
	ts := f.Tensors()
	ts[0].Shape[0] = 99
	ts[0].Name = "changed"
	ti, ok := f.Tensor("a")
	require.True(t, ok)
	assert.Equal(t, []uint64{4}, ti.Shape)

	r, err := f.TensorReader("a")
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = r.ReadAt(buf, 0)
	require.NoError(t, err)

	require.NoError(t, f.Close())
	require.NoError(t, f.Close(), "Close is idempotent")

	_, err = f.TensorData("a")
	assert.ErrorIs(t, err, loader.ErrClosed)
	_, err = f.TensorReader("a")
	assert.ErrorIs(t, err, loader.ErrClosed)
	_, err = r.ReadAt(buf, 0)
	assert.ErrorIs(t, err, loader.ErrClosed, "a reader made before Close fails after it")
	_, err = f.ReadAt(buf, 0)
	assert.ErrorIs(t, err, loader.ErrClosed)

	// Metadata stays available.
	assert.Len(t, f.Tensors(), 1)
	assert.Equal(t, uint32(3), f.Version())
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := loader.Open(filepath.Join(dir, "missing.gguf"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorContains(t, err, "missing.gguf")

	_, err = loader.Open(dir)
	assert.ErrorContains(t, err, "not a regular file")

	empty := filepath.Join(dir, "empty.gguf")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = loader.Open(empty)
	assert.ErrorIs(t, err, loader.ErrNotGGUF)

	png := filepath.Join(dir, "x.png")
	require.NoError(t, os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n0000000000000000"), 0o644))
	_, err = loader.Open(png)
	assert.ErrorIs(t, err, loader.ErrNotGGUF)
	assert.ErrorContains(t, err, `"\x89PNG"`)
}

func TestVersion2(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, loader.Write(&buf, []loader.KeyValue{{Key: "k", Value: loader.ValueOf[uint32](7)}},
		[]loader.WriterTensor{{Name: "t", Type: loader.TypeF32, Shape: []uint64{2}, Data: loader.Float32Bytes([]float32{1, 2})}}, 0))
	b := buf.Bytes()
	b[4] = 2 // v2 has the same layout as v3 (64-bit counts)
	path := filepath.Join(t.TempDir(), "v2.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := loader.Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, uint32(2), f.Version())
	u, err := f.KV().Uint32("k")
	require.NoError(t, err)
	assert.Equal(t, uint32(7), u)
	data, err := f.TensorData("t")
	require.NoError(t, err)
	assert.Equal(t, []byte(loader.Float32Bytes([]float32{1, 2})), append([]byte{}, data...))
}

// shortWriter fails after n bytes.
type shortWriter struct{ n int }

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

// badData writes a fixed number of bytes regardless of the shape.
type badData int

func (b badData) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(make([]byte, int(b)))
	return int64(n), err
}

// failData fails.
type failData struct{}

func (failData) WriteTo(io.Writer) (int64, error) { return 0, errors.New("source unreadable") }

func TestWriteValidation(t *testing.T) {
	f32 := func(name string, shape ...uint64) loader.WriterTensor {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		return loader.WriterTensor{Name: name, Type: loader.TypeF32, Shape: shape, Data: badData(4 * n)}
	}
	cases := []struct {
		name      string
		kv        []loader.KeyValue
		tensors   []loader.WriterTensor
		alignment uint64
		err       string
	}{
		{"duplicate key", []loader.KeyValue{{Key: "a", Value: loader.ValueOf[bool](true)}, {Key: "a", Value: loader.ValueOf[bool](false)}}, nil, 0, `duplicate metadata key "a"`},
		{"empty key", []loader.KeyValue{{Key: "", Value: loader.ValueOf[bool](true)}}, nil, 0, "empty metadata key"},
		{"zero value", []loader.KeyValue{{Key: "z"}}, nil, 0, `key "z": invalid (zero) value`},
		{"nested non-array", []loader.KeyValue{{Key: "n", Value: loader.ArrayValue([]loader.Value{loader.ValueOf[uint8](1)})}}, nil, 0, `key "n": element 0: array of arrays holds a uint8`},
		{"too deep", []loader.KeyValue{{Key: "d", Value: deepArray(9)}}, nil, 0, "nested deeper than 8"},
		{"duplicate tensor", nil, []loader.WriterTensor{f32("t", 1), f32("t", 1)}, 0, `duplicate tensor name "t"`},
		{"empty name", nil, []loader.WriterTensor{f32("", 1)}, 0, "empty tensor name"},
		{"long name", nil, []loader.WriterTensor{f32(string(make([]byte, 64)), 1)}, 0, "at most 63"},
		{"five dims", nil, []loader.WriterTensor{f32("t", 1, 1, 1, 1, 1)}, 0, `tensor "t": 5 dimensions, ggml allows at most 4`},
		{"bad block", nil, []loader.WriterTensor{{Name: "q", Type: loader.TypeQ8_0, Shape: []uint64{48}, Data: badData(0)}}, 0, `tensor "q": q8_0 row of 48 elements is not a multiple of the block size 32`},
		{"unknown type", nil, []loader.WriterTensor{{Name: "u", Type: 4, Shape: []uint64{1}, Data: badData(0)}}, 0, `tensor "u": unknown tensor type 4`},
		{"nil data", nil, []loader.WriterTensor{{Name: "n", Type: loader.TypeF32, Shape: []uint64{1}}}, 0, `tensor "n": no data`},
		{"short data", nil, []loader.WriterTensor{{Name: "s", Type: loader.TypeF32, Shape: []uint64{4}, Data: badData(15)}}, 0, `tensor "s": data wrote 15 bytes, want 16`},
		{"long data", nil, []loader.WriterTensor{{Name: "l", Type: loader.TypeF32, Shape: []uint64{4}, Data: badData(17)}}, 0, `tensor "l": data writes more than the 16 bytes`},
		{"failing data", nil, []loader.WriterTensor{{Name: "f", Type: loader.TypeF32, Shape: []uint64{1}, Data: failData{}}}, 0, `tensor "f": source unreadable`},
		{"alignment not power of 2", nil, nil, 24, "alignment 24 is not a power of 2"},
		{"alignment too large", nil, nil, 1 << 32, "fits in uint32"},
		{"alignment conflict", []loader.KeyValue{{Key: loader.AlignmentKey, Value: loader.ValueOf[uint32](64)}}, nil, 128, "alignment 128 disagrees with general.alignment = 64"},
		{"alignment wrong type", []loader.KeyValue{{Key: loader.AlignmentKey, Value: loader.ValueOf[uint64](64)}}, nil, 0, `key "general.alignment": want uint32, got uint64`},
		{"element overflow", nil, []loader.WriterTensor{{Name: "o", Type: loader.TypeI8, Shape: []uint64{1 << 32, 1 << 32}, Data: badData(0)}}, 0, "overflow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := loader.Write(&buf, tc.kv, tc.tensors, tc.alignment)
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

func deepArray(depth int) loader.Value {
	v := loader.ArrayOf[int32]([]int32{1})
	for range depth - 1 {
		v = loader.ArrayValue([]loader.Value{v})
	}
	return v
}

func TestWriteAlignmentFromKV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.gguf")
	kv := []loader.KeyValue{{Key: loader.AlignmentKey, Value: loader.ValueOf[uint32](128)}}
	tensors := []loader.WriterTensor{
		{Name: "a", Type: loader.TypeF32, Shape: []uint64{3}, Data: loader.Float32Bytes([]float32{1, 2, 3})},
		{Name: "b", Type: loader.TypeF32, Shape: []uint64{1}, Data: loader.Float32Bytes([]float32{4})},
	}
	require.NoError(t, loader.WriteFile(path, kv, tensors, 0))
	f, err := loader.Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, uint64(128), f.Alignment())
	assert.Equal(t, 1, f.KV().Len(), "no second alignment key")
	b, _ := f.Tensor("b")
	a, _ := f.Tensor("a")
	assert.Equal(t, a.Offset+128, b.Offset)
}

func TestWriteErrorsPropagate(t *testing.T) {
	tensors := []loader.WriterTensor{{Name: "big", Type: loader.TypeI8, Shape: []uint64{3 << 20}, Data: badData(3 << 20)}}
	err := loader.Write(&shortWriter{n: 100}, nil, tensors, 0)
	assert.ErrorContains(t, err, "disk full")
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	require.NoError(t, os.WriteFile(path, []byte("previous"), 0o644))

	bad := []loader.WriterTensor{{Name: "s", Type: loader.TypeF32, Shape: []uint64{4}, Data: badData(3)}}
	err := loader.WriteFile(path, nil, bad, 0)
	assert.ErrorContains(t, err, "out.gguf")
	assert.ErrorContains(t, err, "data wrote 3 bytes, want 16")
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "previous", string(old), "a failed write leaves the old file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "temporary file removed")

	require.NoError(t, loader.WriteFile(path, nil, nil, 0))
	f, err := loader.Open(path)
	require.NoError(t, err)
	assert.Equal(t, 0, f.KV().Len())
	require.NoError(t, f.Close())
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	err = loader.WriteFile(filepath.Join(dir, "no-such-dir", "x.gguf"), nil, nil, 0)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
