package model

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// da2KV is the metadata of a small valid DA2 file (no tensors needed to
// read the config).
func da2KV() []loader.KeyValue {
	p := kvPrefix
	return []loader.KeyValue{
		{Key: p + "arch", Value: loader.ValueOf[string]("depthanything2")},
		{Key: p + "patch_size", Value: loader.ValueOf[uint32](14)},
		{Key: p + "vit.embed_dim", Value: loader.ValueOf[uint32](64)},
		{Key: p + "vit.depth", Value: loader.ValueOf[uint32](4)},
		{Key: p + "vit.num_heads", Value: loader.ValueOf[uint32](1)},
		{Key: p + "vit.out_layers", Value: loader.ArrayOf[int32]([]int32{0, 1, 2, 3})},
		{Key: p + "head.features", Value: loader.ValueOf[uint32](8)},
		{Key: p + "head.out_channels", Value: loader.ArrayOf[int32]([]int32{8, 8, 8, 8})},
	}
}

func configOf(t *testing.T, kv []loader.KeyValue) (Config, error) {
	t.Helper()
	f, err := loader.Open(testutil.WriteGGUF(t, kv, nil))
	require.NoError(t, err)
	defer f.Close()
	return configFromFile(f)
}

func TestConfigBounds(t *testing.T) {
	c, err := configOf(t, da2KV())
	require.NoError(t, err)
	assert.Equal(t, 4, c.ViT.Depth)
	assert.Equal(t, 256, c.ViT.MLPHidden, "mlp_hidden defaults to 4C")
	assert.Equal(t, 14, c.ViT.PatchSize)
	assert.Equal(t, 14, c.Head.Patch, "the head's output size follows the patch size")

	set := func(key string, v loader.Value) []loader.KeyValue {
		kv := da2KV()
		for i := range kv {
			if kv[i].Key == kvPrefix+key {
				kv[i].Value = v
				return kv
			}
		}
		return append(kv, loader.KeyValue{Key: kvPrefix + key, Value: v})
	}
	c16, err := configOf(t, set("patch_size", loader.ValueOf[uint32](16)))
	require.NoError(t, err)
	assert.Equal(t, [2]int{16, 16}, [2]int{c16.ViT.PatchSize, c16.Head.Patch}, "patch size from the file")
	for _, tc := range []struct {
		name string
		kv   []loader.KeyValue
		want string
	}{
		{"huge depth", set("vit.depth", loader.ValueOf[uint32](math.MaxInt32)), "vit.depth: 2147483647 is outside 1..256"},
		{"zero width", set("vit.embed_dim", loader.ValueOf[uint32](0)), "vit.embed_dim: 0 is outside 1..8192"},
		{"huge features", set("head.features", loader.ValueOf[uint32](1<<30)), "head.features: 1073741824 is outside 2..8192"},
		{"out layer past the depth", set("vit.out_layers", loader.ArrayOf[int32]([]int32{0, 1, 2, 4})), "vit.out_layers: value 4 is outside 0..3"},
		{"three out layers", set("vit.out_layers", loader.ArrayOf[int32]([]int32{0, 1, 2})), "want 4 values, got 3"},
		{"optional key of the wrong type", set("vit.ln_eps", loader.ValueOf[string]("x")), `"depthanything3.vit.ln_eps": want float32, got string`},
		{"NaN eps", set("vit.ln_eps", loader.ValueOf[float32](float32(math.NaN()))), "vit.ln_eps: NaN is outside"},
		{"patch 1", set("patch_size", loader.ValueOf[uint32](1)), "patch_size: 1 is outside 2..64"},
		{"negative max depth", set("head.max_depth", loader.ValueOf[float32](-1)), "head.max_depth: -1 is outside"},
		{"zero std", set("img.std", loader.ArrayOf[float32]([]float32{0.2, 0, 0.2})), "img.std: value 0 is outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configOf(t, tc.kv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	// A type error stays reachable through the one-line list.
	_, err = configOf(t, set("vit.depth", loader.ValueOf[string]("x")))
	var te *loader.KVTypeError
	assert.True(t, errors.As(err, &te), "%v", err)
}

func TestFirstNonFinite(t *testing.T) {
	f32 := func(v ...float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	for _, n := range []int{0, 1, 15, 16, 17, 100, 101} {
		long := make([]float32, n)
		for i := range long { // every exponent but all ones, in either half of a word
			long[i] = math.Float32frombits(uint32(i%255)<<23 | uint32(i%2)<<31 | 0x7fffff)
		}
		assert.Equal(t, -1, firstNonFinite(loader.TypeF32, f32(long...)), "%d finite values", n)
	}
	for _, at := range []int{0, 1, 15, 16, 17, 62, 63, 99, 100} {
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			x := make([]float32, 101)
			for i := range x {
				x[i] = math.MaxFloat32
			}
			x[at] = v
			assert.Equal(t, at, firstNonFinite(loader.TypeF32, f32(x...)), "f32 %v at %d", v, at)
			x[min(at+1, 100)], x[max(at-1, 0)] = v, v // the first of several
			assert.Equal(t, max(at-1, 0), firstNonFinite(loader.TypeF32, f32(x...)), "f32 %v at %d and around", v, at)
		}
	}
	assert.Equal(t, -1, firstNonFinite(loader.TypeF32, f32(math.MaxFloat32, -math.MaxFloat32, 1e-45)))

	half := func(n, at int, bits uint16) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(b[2*i:], 0x3c00) // 1.0
		}
		if at >= 0 {
			binary.LittleEndian.PutUint16(b[2*at:], bits)
		}
		return b
	}
	for _, at := range []int{0, 3, 4, 9} {
		assert.Equal(t, at, firstNonFinite(loader.TypeF16, half(10, at, 0x7c00)), "f16 +Inf at %d", at)
		assert.Equal(t, at, firstNonFinite(loader.TypeF16, half(10, at, 0xfe00)), "f16 NaN at %d", at)
		assert.Equal(t, at, firstNonFinite(loader.TypeBF16, half(10, at, 0x7f80)), "bf16 +Inf at %d", at)
	}
	assert.Equal(t, -1, firstNonFinite(loader.TypeF16, half(10, -1, 0)))
	assert.Equal(t, -1, firstNonFinite(loader.TypeF16, half(10, 5, 0x7bff)), "f16 max is finite")
	assert.Equal(t, -1, firstNonFinite(loader.TypeBF16, half(10, 5, 0x7c00)), "a large bf16 is finite")

	// Quantized: the f16 scales of each block.
	q8 := make([]byte, 3*34)
	assert.Equal(t, -1, firstNonFinite(loader.TypeQ8_0, q8))
	binary.LittleEndian.PutUint16(q8[2*34:], 0x7e00)
	assert.Equal(t, 64, firstNonFinite(loader.TypeQ8_0, q8), "third block")
	q6 := make([]byte, 2*210)
	binary.LittleEndian.PutUint16(q6[210+208:], 0x7c00)
	assert.Equal(t, 256, firstNonFinite(loader.TypeQ6K, q6))
	q4k := make([]byte, 144)
	binary.LittleEndian.PutUint16(q4k[2:], 0xfc00) // dmin −Inf
	assert.Equal(t, 0, firstNonFinite(loader.TypeQ4K, q4k))
}

// BenchmarkFirstNonFinite scans 64 MiB of finite float32 weights, as the
// load does every F32 tensor.
func BenchmarkFirstNonFinite(b *testing.B) {
	data := make([]byte, 64<<20)
	for i := 0; i+4 <= len(data); i += 4 {
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(i%1000)*1e-3))
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if firstNonFinite(loader.TypeF32, data) != -1 {
			b.Fatal("a finite tensor flagged")
		}
	}
}
