package quantize_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/quantize"
)

// synthKV is the metadata of the synthetic model.
func synthKV() []loader.KeyValue {
	return []loader.KeyValue{
		{Key: "general.architecture", Value: loader.ValueOf[string]("depthanything3")},
		{Key: "depthanything3.arch", Value: loader.ValueOf[string]("depthanything3")},
		{Key: "depthanything3.vit.embed_dim", Value: loader.ValueOf[uint32](384)},
		{Key: "depthanything3.vit.out_layers", Value: loader.ArrayOf[int32]([]int32{0, 1, 1, 1})},
		{Key: "depthanything3.img.mean", Value: loader.ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: "depthanything3.vit.cat_token", Value: loader.ValueOf[bool](true)},
	}
}

// synthTensors returns a two-block model with ViT-S widths under root (vit
// or m_vit), with a camera decoder and head tensors when withCam.
func synthTensors(t *testing.T, root string, withCam bool) []loader.WriterTensor {
	r := rand.New(rand.NewPCG(7, uint64(len(root))))
	var ts []loader.WriterTensor
	add := func(name string, shape ...uint64) {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(0.02 * r.NormFloat64())
		}
		ts = append(ts, testutil.F32Tensor(t, name, x, shape...))
	}
	const c = 384
	add(root+".patch_embed.weight", 14, 14, 3, c)
	add(root+".patch_embed.bias", c)
	add(root+".cls_token", c, 1, 1)
	add(root+".pos_embed", c, 50, 1)
	for i := range 2 {
		p := fmt.Sprintf("%s.blk.%d.", root, i)
		add(p+"norm1.weight", c)
		add(p+"attn_qkv.weight", c, 3*c)
		add(p+"attn_qkv.bias", 3*c)
		add(p+"attn_proj.weight", c, c)
		add(p+"ls1", c)
		add(p+"mlp_fc1.weight", c, 4*c)
		add(p+"mlp_fc2.weight", 4*c, c)
		add(p+"mlp_fc2.bias", c)
	}
	add(root+".norm.weight", c)
	head := "head"
	if root == "m_vit" {
		head = "m_head"
	}
	add(head+".proj.0.weight", 1, 1, c, 48)
	add(head+".resize.0.weight", 4, 4, 48, 48)
	add(head+".scratch.rn1.out.weight", 3, 3, 64, 64)
	add(head+".scratch.rn1.out.bias", 64)
	if withCam {
		add(root+".camera_token", c, 2, 1)
		add("cam.bb0.weight", 2*c, 2*c)
		add("cam.fc_t.weight", 2*c, 3)
		add("cam.fc_t.bias", 3)
	}
	return ts
}

func writeSynth(t *testing.T) string {
	t.Helper()
	return testutil.WriteGGUF(t, synthKV(), synthTensors(t, "vit", true))
}

func dequant(t *testing.T, f *loader.File, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, name)
	data, err := f.TensorData(name)
	require.NoError(t, err)
	x, err := ggml.ToFloat32(ggml.Type(ti.Type), data, int(ti.Elements()))
	require.NoError(t, err, name)
	return x
}

func relErr(a, b []float32) float64 {
	var e, r float64
	for i := range a {
		d := float64(a[i] - b[i])
		e += d * d
		r += float64(a[i]) * float64(a[i])
	}
	return math.Sqrt(e / r)
}

// maxRelErr bounds the round-trip error of each type on N(0, 0.02²)
// weights, about twice what TestLadderOrder measures.
var maxRelErr = map[ggml.Type]float64{
	ggml.TypeF32: 0, ggml.TypeF16: 5e-4, ggml.TypeBF16: 3.5e-3, ggml.TypeQ8_0: 0.011, ggml.TypeQ6K: 0.035,
	ggml.TypeQ5_1: 0.07, ggml.TypeQ5K: 0.07, ggml.TypeQ5_0: 0.08, ggml.TypeQ4_1: 0.14, ggml.TypeQ4K: 0.15, ggml.TypeQ4_0: 0.17,
}

func TestRunEveryType(t *testing.T) {
	in := writeSynth(t)
	src, err := loader.Open(in)
	require.NoError(t, err)
	defer src.Close()
	inSize := src.Size()

	for _, typ := range quantize.Types() {
		for _, conv := range []ggml.Type{ggml.TypeF32, ggml.TypeF16} {
			t.Run(typ.String()+"/conv_"+conv.String(), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out.gguf")
				opts := quantize.Options{Conv: conv}
				plan, err := quantize.DryRun(context.Background(), in, typ, opts)
				require.NoError(t, err)
				var last, total int64
				calls := 0
				opts.Progress = func(done, tot int64) {
					assert.GreaterOrEqual(t, done, last, "progress goes backwards")
					last, total = done, tot
					calls++
				}
				rep, err := quantize.Run(context.Background(), in, out, typ, opts)
				require.NoError(t, err)
				assert.Greater(t, calls, 1)
				assert.Equal(t, total, last, "progress ends at the total")

				st, err := os.Stat(out)
				require.NoError(t, err)
				assert.Equal(t, st.Size(), rep.OutSize, "reported size")
				assert.Equal(t, plan.OutSize, rep.OutSize, "dry-run size")
				assert.Equal(t, inSize, rep.InSize)
				if typ != ggml.TypeF32 {
					assert.Less(t, rep.OutSize, inSize, "%s file is not smaller than f32", typ)
				} else if conv == ggml.TypeF32 {
					// Only the header grows: three keys, then padding to 32.
					assert.GreaterOrEqual(t, rep.OutSize, inSize)
					assert.LessOrEqual(t, rep.OutSize, inSize+quantKVBytes(typ, conv)+32)
				}

				f, err := loader.Open(out)
				require.NoError(t, err)
				defer f.Close()
				// Metadata: copied in order, plus the quantization keys.
				var keys []string
				for k := range f.KV().All() {
					keys = append(keys, k)
				}
				var inKeys []string
				for k, v := range src.KV().All() {
					inKeys = append(inKeys, k)
					got, ok := f.KV().Get(k)
					require.True(t, ok, k)
					assert.Equal(t, v.String(), got.String(), k)
					assert.Equal(t, v.Type(), got.Type(), k)
				}
				assert.Equal(t, append(inKeys, quantize.KeyQuantizationVersion, quantize.KeyType, quantize.KeyConvType), keys)
				assert.Equal(t, typ.String(), f.KV().StringOr(quantize.KeyType, ""))
				assert.Equal(t, conv.String(), f.KV().StringOr(quantize.KeyConvType, ""))
				assert.Equal(t, uint32(2), f.KV().Uint32Or(quantize.KeyQuantizationVersion, 0))

				// Tensors: the planned types, same shapes and order, values close.
				outTs := f.Tensors()
				require.Len(t, outTs, len(rep.Decisions))
				for i, in := range src.Tensors() {
					d := rep.Decisions[i]
					o := outTs[i]
					require.Equal(t, in.Name, o.Name)
					assert.Equal(t, in.Shape, o.Shape, in.Name)
					assert.Equal(t, d.To, ggml.Type(o.Type), in.Name)
					want := dequant(t, src, in.Name)
					got := dequant(t, f, in.Name)
					switch {
					case d.To == ggml.TypeF32:
						assert.Equal(t, want, got, "%s is not a verbatim f32 copy", in.Name)
					default:
						e := relErr(want, got)
						assert.LessOrEqual(t, e, maxRelErr[d.To], "%s as %s", in.Name, d.To)
						assert.Greater(t, e, 0.0, "%s as %s: no rounding at all", in.Name, d.To)
					}
				}
			})
		}
	}
}

// quantKVBytes is the size of the three quantization keys in a GGUF header.
func quantKVBytes(typ, conv ggml.Type) int64 {
	kv := func(key string, val int) int64 { return 8 + int64(len(key)) + 4 + int64(val) }
	return kv(quantize.KeyQuantizationVersion, 4) + kv(quantize.KeyType, 8+len(typ.String())) + kv(quantize.KeyConvType, 8+len(conv.String()))
}

func TestRunTypesAndReport(t *testing.T) {
	in := writeSynth(t)
	out := filepath.Join(t.TempDir(), "q4k.gguf")
	rep, err := quantize.Run(context.Background(), in, out, ggml.TypeQ4K, quantize.Options{Conv: ggml.TypeF16, Pure: true})
	require.NoError(t, err)
	f, err := loader.Open(out)
	require.NoError(t, err)
	defer f.Close()
	want := map[string]loader.Type{
		"vit.blk.0.attn_qkv.weight":   loader.TypeQ4_1, // rows of 384
		"vit.blk.1.attn_proj.weight":  loader.TypeQ4_1,
		"vit.blk.0.mlp_fc1.weight":    loader.TypeQ4_1,
		"vit.blk.0.mlp_fc2.weight":    loader.TypeQ4K, // rows of 1536
		"cam.bb0.weight":              loader.TypeQ4K, // rows of 768
		"cam.fc_t.weight":             loader.TypeQ4K,
		"cam.fc_t.bias":               loader.TypeF32,
		"vit.patch_embed.weight":      loader.TypeF16,
		"head.proj.0.weight":          loader.TypeF16,
		"head.scratch.rn1.out.weight": loader.TypeF16,
		"head.resize.0.weight":        loader.TypeF32,
		"vit.pos_embed":               loader.TypeF32,
		"vit.cls_token":               loader.TypeF32,
		"vit.camera_token":            loader.TypeF32,
		"vit.blk.0.ls1":               loader.TypeF32,
		"vit.blk.0.norm1.weight":      loader.TypeF32,
	}
	for name, typ := range want {
		got, ok := f.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, typ, got.Type, name)
	}
	assert.Equal(t, 4, rep.Requested, "fc2 ×2 and two camera matrices")
	assert.Equal(t, 6, rep.Fallback, "qkv, proj, fc1 ×2")
	var sumIn, sumOut int64
	n := 0
	for _, g := range rep.Groups {
		sumIn += g.InBytes
		sumOut += g.OutBytes
		n += g.Count
	}
	assert.Equal(t, len(rep.Decisions), n)
	var tensorBytes int64
	for _, ti := range f.Tensors() {
		tensorBytes += int64(ti.Size)
	}
	assert.Equal(t, tensorBytes, sumOut)
	assert.Less(t, sumOut, sumIn)
	assert.Empty(t, rep.Warnings)

	// By default block 0 (the first quarter of 2 blocks) takes q8_0.
	mixed := filepath.Join(t.TempDir(), "mixed.gguf")
	rep, err = quantize.Run(context.Background(), in, mixed, ggml.TypeQ4K, quantize.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3, 4}, []int{rep.Requested, rep.Fallback, rep.Raised})
	m, err := loader.Open(mixed)
	require.NoError(t, err)
	defer m.Close()
	for name, typ := range map[string]loader.Type{
		"vit.blk.0.attn_qkv.weight": loader.TypeQ8_0, "vit.blk.0.mlp_fc2.weight": loader.TypeQ8_0,
		"vit.blk.1.attn_qkv.weight": loader.TypeQ4_1, "vit.blk.1.mlp_fc2.weight": loader.TypeQ4K,
	} {
		got, _ := m.Tensor(name)
		assert.Equal(t, typ, got.Type, name)
	}
	assert.Greater(t, m.Size(), f.Size())
}

func TestRunNestedMetric(t *testing.T) {
	in := testutil.WriteGGUF(t, synthKV(), synthTensors(t, "m_vit", false))
	out := filepath.Join(t.TempDir(), "m.gguf")
	rep, err := quantize.Run(context.Background(), in, out, ggml.TypeQ8_0, quantize.Options{Pure: true})
	require.NoError(t, err)
	assert.Equal(t, 8, rep.Requested)
	f, err := loader.Open(out)
	require.NoError(t, err)
	defer f.Close()
	for _, name := range []string{"m_vit.blk.0.attn_qkv.weight", "m_vit.blk.1.mlp_fc2.weight"} {
		ti, ok := f.Tensor(name)
		require.True(t, ok)
		assert.Equal(t, loader.TypeQ8_0, ti.Type, name)
	}
	ti, _ := f.Tensor("m_head.scratch.rn1.out.weight")
	assert.Equal(t, loader.TypeF32, ti.Type)
}

func TestRunDeterministicAcrossThreads(t *testing.T) {
	in := writeSynth(t)
	dir := t.TempDir()
	var files [][]byte
	for _, threads := range []int{1, 3, 8} {
		out := filepath.Join(dir, fmt.Sprintf("t%d.gguf", threads))
		_, err := quantize.Run(context.Background(), in, out, ggml.TypeQ4K, quantize.Options{Threads: threads})
		require.NoError(t, err)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		files = append(files, b)
	}
	assert.Equal(t, files[0], files[1])
	assert.Equal(t, files[0], files[2])
}

func TestRunRequantizeWarns(t *testing.T) {
	in := writeSynth(t)
	dir := t.TempDir()
	q8 := filepath.Join(dir, "q8.gguf")
	var warns []string
	warn := func(s string) { warns = append(warns, s) }
	_, err := quantize.Run(context.Background(), in, q8, ggml.TypeQ8_0, quantize.Options{Warn: warn, Conv: ggml.TypeF16, Pure: true})
	require.NoError(t, err)
	require.Empty(t, warns, "f32 input")

	q4 := filepath.Join(dir, "q4.gguf")
	rep, err := quantize.Run(context.Background(), q8, q4, ggml.TypeQ4K, quantize.Options{Warn: warn, Pure: true})
	require.NoError(t, err)
	require.Len(t, warns, 2)
	assert.Contains(t, warns[0], "input is already quantized (q8_0): dequantizing and requantizing to q4_K")
	// f16 conv kernels return to f32 without -conv f16.
	assert.Contains(t, warns[1], "3 tensors go from f16 to f32, which has more bits")
	assert.Equal(t, warns, rep.Warnings)
	// The requantized weights still follow the originals.
	src, err := loader.Open(in)
	require.NoError(t, err)
	defer src.Close()
	f, err := loader.Open(q4)
	require.NoError(t, err)
	defer f.Close()
	assert.Less(t, relErr(dequant(t, src, "vit.blk.0.mlp_fc2.weight"), dequant(t, f, "vit.blk.0.mlp_fc2.weight")), 0.15)

	warns = nil
	back := filepath.Join(dir, "back.gguf")
	_, err = quantize.Run(context.Background(), q4, back, ggml.TypeQ8_0, quantize.Options{Warn: warn, Pure: true})
	require.NoError(t, err)
	joined := strings.Join(warns, "\n")
	assert.Contains(t, joined, "input is already quantized (q4_1, q4_K)")
	assert.Contains(t, joined, "tensors go from q4_1 to q8_0, which has more bits: the accuracy the input lost cannot come back")
	assert.Contains(t, joined, "tensors go from q4_K to q8_0, which has more bits")

	// The same type again copies the quantized data verbatim: no warning.
	warns = nil
	again := filepath.Join(dir, "again.gguf")
	_, err = quantize.Run(context.Background(), q8, again, ggml.TypeQ8_0, quantize.Options{Warn: warn, Conv: ggml.TypeF16, Pure: true})
	require.NoError(t, err)
	assert.Empty(t, warns)
	a, err := loader.Open(again)
	require.NoError(t, err)
	defer a.Close()
	qa, err := a.TensorData("vit.blk.0.attn_qkv.weight")
	require.NoError(t, err)
	q8f, err := loader.Open(q8)
	require.NoError(t, err)
	defer q8f.Close()
	qb, err := q8f.TensorData("vit.blk.0.attn_qkv.weight")
	require.NoError(t, err)
	assert.Equal(t, qb, qa)
}

func TestRunErrors(t *testing.T) {
	in := writeSynth(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")

	_, err := quantize.Run(context.Background(), in, out, ggml.TypeQ3K, quantize.Options{})
	assert.ErrorIs(t, err, quantize.ErrUnknownType)
	assert.ErrorContains(t, err, "known types are f32, f16, bf16, q8_0, q6_K, q5_1, q5_K, q5_0, q4_1, q4_K, q4_0")

	_, err = quantize.Run(context.Background(), in, in, ggml.TypeQ8_0, quantize.Options{})
	assert.ErrorContains(t, err, "the output is the input file")

	_, err = quantize.Run(context.Background(), filepath.Join(dir, "missing.gguf"), out, ggml.TypeQ8_0, quantize.Options{})
	assert.ErrorIs(t, err, os.ErrNotExist)

	notModel := testutil.WriteGGUF(t, synthKV(), []loader.WriterTensor{testutil.F32Tensor(t, "vit.norm.weight", make([]float32, 384), 384)})
	_, err = quantize.Run(context.Background(), notModel, out, ggml.TypeQ8_0, quantize.Options{})
	assert.ErrorContains(t, err, "not a Depth Anything model file")

	_, err = quantize.Run(context.Background(), in, filepath.Join(dir, "no", "such", "dir.gguf"), ggml.TypeQ8_0, quantize.Options{})
	assert.Error(t, err)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing may be left in the output directory")
}

func TestRunCancelRemovesTemp(t *testing.T) {
	in := writeSynth(t)
	for _, at := range []string{"before", "during"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.gguf")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if at == "before" {
				cancel()
			}
			calls := 0
			_, err := quantize.Run(ctx, in, out, ggml.TypeQ4K, quantize.Options{Threads: 2, Progress: func(done, total int64) {
				calls++
				if calls == 5 { // a few tensors in
					cancel()
				}
			}})
			require.ErrorIs(t, err, context.Canceled)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "temporary file left behind")
		})
	}
}

func TestDryRunMatchesPlan(t *testing.T) {
	in := writeSynth(t)
	rep, err := quantize.DryRun(context.Background(), in, ggml.TypeQ5K, quantize.Options{})
	require.NoError(t, err)
	src, err := loader.Open(in)
	require.NoError(t, err)
	defer src.Close()
	decs, err := quantize.Plan(src.Tensors(), ggml.TypeQ5K, quantize.Options{})
	require.NoError(t, err)
	assert.Equal(t, decs, rep.Decisions)
	assert.Less(t, rep.OutSize, src.Size())
	// Nothing was written next to the input.
	entries, err := os.ReadDir(filepath.Dir(in))
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}
