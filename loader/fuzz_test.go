package loader

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the FuzzOpen seed corpus in testdata/fuzz/FuzzOpen")

// FuzzOpen feeds arbitrary bytes to the parser Open uses. Rejected inputs
// must fail with an error (never a panic); accepted ones must satisfy the
// invariants callers rely on and survive a Write/parse round trip.
//
//	go test -fuzz=FuzzOpen ./loader
func FuzzOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := newFile("fuzz.gguf", data, nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		checkInvariants(t, gf, data)

		// Round trip: parse(Write(parse(x))) must write back identically.
		first := rewrite(t, gf)
		gf2, err := newFile("rewritten.gguf", first, nil)
		if err != nil {
			t.Fatalf("re-parse of written file: %v", err)
		}
		checkInvariants(t, gf2, first)
		if second := rewrite(t, gf2); !bytes.Equal(first, second) {
			t.Fatalf("rewrite not stable: %d vs %d bytes", len(first), len(second))
		}
		if err := gf.Close(); err != nil {
			t.Fatal(err)
		}
		if len(gf.tensors) > 0 {
			if _, err := gf.TensorData(gf.tensors[0].Name); err == nil {
				t.Fatal("TensorData after Close succeeded")
			}
		}
	})
}

func checkInvariants(t *testing.T, f *File, data []byte) {
	t.Helper()
	if f.version != 2 && f.version != 3 {
		t.Fatalf("version %d accepted", f.version)
	}
	if f.alignment == 0 || f.alignment&(f.alignment-1) != 0 {
		t.Fatalf("alignment %d accepted", f.alignment)
	}
	for key, v := range f.KV().All() {
		_ = v.String()
		_ = v.Short(2)
		_ = v.Len()
		if got, ok := f.KV().Get(key); !ok || got.Type() != v.Type() {
			t.Fatalf("Get(%q) disagrees with All", key)
		}
		_, _ = f.KV().Uint32(key)
		_, _ = f.KV().Int32(key)
		_, _ = f.KV().Int32s(key)
		_, _ = f.KV().Float32s(key)
	}
	for _, ti := range f.Tensors() {
		if len(ti.Shape) > MaxDims {
			t.Fatalf("tensor %q: %d dims accepted", ti.Name, len(ti.Shape))
		}
		size, err := ti.Type.ByteSize(ti.Shape)
		if err != nil || size != ti.Size {
			t.Fatalf("tensor %q: size %d, ByteSize %d, %v", ti.Name, ti.Size, size, err)
		}
		if ti.Offset%f.alignment != 0 || ti.Offset+ti.Size > uint64(len(data)) || ti.Offset+ti.Size < ti.Offset {
			t.Fatalf("tensor %q: bad placement [%d, +%d) in %d bytes", ti.Name, ti.Offset, ti.Size, len(data))
		}
		_ = ti.Elements()
		td, err := f.TensorData(ti.Name)
		if err != nil || uint64(len(td)) != ti.Size {
			t.Fatalf("tensor %q: TensorData %d bytes, %v", ti.Name, len(td), err)
		}
	}
}

// rewrite writes f's metadata and tensors with Write.
func rewrite(t *testing.T, f *File) []byte {
	t.Helper()
	var ts []WriterTensor
	for _, ti := range f.Tensors() {
		td, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, WriterTensor{Name: ti.Name, Type: ti.Type, Shape: ti.Shape, Data: BytesTensor(td)})
	}
	var buf bytes.Buffer
	if err := Write(&buf, f.KV().Entries(), ts, 0); err != nil {
		t.Fatalf("Write of an accepted file failed: %v", err)
	}
	return buf.Bytes()
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzOpen with -update-seeds;
// otherwise it checks that every committed seed still has the expected
// outcome (the valid ones parse).
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if *updateSeeds {
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for name, b := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	for name, b := range seeds {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, "seed %s missing: run go test ./loader -run TestWriteFuzzSeeds -update-seeds", name)
		require.Equal(t, fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b), string(got), "seed %s is stale", name)
		_, err = newFile(name, b, nil)
		if name[:5] == "valid" {
			require.NoError(t, err, name)
		} else {
			require.Error(t, err, name)
		}
	}
}

// fuzzSeeds returns small valid files and corruptions of them.
func fuzzSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	write := func(kv []KeyValue, ts []WriterTensor, alignment uint64) []byte {
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, kv, ts, alignment))
		return buf.Bytes()
	}
	full := write([]KeyValue{
		{Key: "depthanything3.arch", Value: ValueOf[string]("depthanything3")},
		{Key: "depthanything3.patch_size", Value: ValueOf[uint32](14)},
		{Key: "depthanything3.vit.alt_start", Value: ValueOf[int32](-1)},
		{Key: "depthanything3.vit.ln_eps", Value: ValueOf[float32](1e-6)},
		{Key: "depthanything3.vit.cat_token", Value: ValueOf[bool](true)},
		{Key: "depthanything3.vit.out_layers", Value: ArrayOf[int32]([]int32{5, 7, 9, 11})},
		{Key: "depthanything3.img.mean", Value: ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: "s", Value: ArrayOf[string]([]string{"a", "bc"})},
		{Key: "u64", Value: ValueOf[uint64](1 << 40)},
		{Key: "nested", Value: ArrayValue([]Value{ArrayOf[uint8]([]uint8{1, 2}), ArrayOf[string]([]string{"x"})})},
	}, []WriterTensor{
		{Name: "vit.cls_token", Type: TypeF32, Shape: []uint64{4, 1, 1}, Data: Float32Bytes([]float32{1, 2, 3, 4})},
		{Name: "vit.blk.0.attn_qkv.weight", Type: TypeQ8_0, Shape: []uint64{32, 2}, Data: BytesTensor(bytes.Repeat([]byte{7}, 68))},
		{Name: "f16", Type: TypeF16, Shape: []uint64{3}, Data: BytesTensor{1, 2, 3, 4, 5, 6}},
	}, 0)
	aligned := write([]KeyValue{{Key: "k", Value: ArrayOf[int8]([]int8{-1})}}, []WriterTensor{
		{Name: "a", Type: TypeF32, Shape: []uint64{1}, Data: Float32Bytes([]float32{1})},
		{Name: "b", Type: TypeQ4K, Shape: []uint64{256}, Data: BytesTensor(make([]byte, 144))},
	}, 64)
	empty := write(nil, nil, 0)

	corrupt := func(b []byte, off int, x byte) []byte {
		c := bytes.Clone(b)
		c[off] = x
		return c
	}
	seeds := map[string][]byte{
		"valid-full":            full,
		"valid-aligned64":       aligned,
		"valid-empty":           empty,
		"bad-magic":             corrupt(full, 0, 'X'),
		"bad-version":           corrupt(full, 4, 9),
		"bad-truncated-header":  full[:40],
		"bad-truncated-data":    full[:len(full)-40],
		"bad-huge-kv-count":     corrupt(full, 23, 0x40),
		"bad-huge-tensor-count": corrupt(full, 15, 0x40),
		"bad-tensor-type":       corrupt(full, bytes.Index(full, []byte("f16"))+3+4+8, 4),
		"bad-ndims":             corrupt(full, bytes.Index(full, []byte("f16"))+3, 5),
		"bad-key-length":        corrupt(full, 24+7, 0x7f),
		"bad-alignment-value":   corrupt(aligned, bytes.Index(aligned, []byte("general.alignment"))+17+4, 48),
	}
	return seeds
}
