package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

func openGGUF(t *testing.T, path string) *loader.File {
	t.Helper()
	f, err := loader.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func reversed(s []int64) []uint64 {
	out := make([]uint64, len(s))
	for i, d := range s {
		out[len(s)-1-i] = uint64(d)
	}
	return out
}

// checkMapping asserts that every source tensor appears under its expected
// GGUF name with the reversed shape and bit-identical F32 data (or its f16
// rounding where the F16 rule applies), and that the file holds nothing else.
func checkMapping(t *testing.T, f *loader.File, src []stTensor, name func(string) string, typ loader.Type) {
	t.Helper()
	want := map[string]bool{}
	for _, s := range src {
		n := name(s.name)
		if n == "" {
			continue
		}
		want[n] = true
		ti, ok := f.Tensor(n)
		if !assert.True(t, ok, "%s -> %s missing", s.name, n) {
			continue
		}
		assert.Equal(t, reversed(s.shape), ti.Shape, n)
		data, err := f.TensorData(n)
		require.NoError(t, err)
		wantType := loader.TypeF32
		if typ == loader.TypeF16 && len(s.shape) >= 2 && strings.HasSuffix(n, ".weight") {
			wantType = loader.TypeF16
		}
		assert.Equal(t, wantType, ti.Type, n)
		if wantType == loader.TypeF16 {
			assert.Equal(t, encodeValues("F16", s.data), data, "%s: f16 bits", n)
		} else {
			assert.Equal(t, encodeValues("F32", s.data), data, "%s: f32 bits", n)
		}
	}
	for _, ti := range f.Tensors() {
		assert.True(t, want[ti.Name], "unexpected tensor %s", ti.Name)
	}
}

type kvWant struct {
	key string
	typ loader.ValueType
	val any
}

// checkKVs asserts the exact ordered key list, types and values.
func checkKVs(t *testing.T, f *loader.File, want []kvWant) {
	t.Helper()
	var got []string
	for k := range f.KV().All() {
		got = append(got, k)
	}
	var keys []string
	for _, w := range want {
		keys = append(keys, w.key)
	}
	assert.Equal(t, keys, got)
	for _, w := range want {
		v, ok := f.KV().Get(w.key)
		if !assert.True(t, ok, w.key) {
			continue
		}
		if v.Type() == loader.ValueArray {
			assert.Equal(t, w.typ, v.ElemType(), "%s element type", w.key)
		} else {
			assert.Equal(t, w.typ, v.Type(), "%s type", w.key)
		}
		if w.val != nil {
			assert.Equal(t, w.val, v.Any(), w.key)
		}
	}
}

const (
	tStr  = loader.ValueString
	tU32  = loader.ValueUint32
	tI32  = loader.ValueInt32
	tF32  = loader.ValueFloat32
	tBool = loader.ValueBool
)

func vitKVWant(p string, c, depth, heads, hidden uint32, ffn string, init float32, start int32, cat bool, grid uint32, out []int32) []kvWant {
	p = "depthanything3." + p + "."
	return []kvWant{
		{p + "embed_dim", tU32, c}, {p + "depth", tU32, depth}, {p + "num_heads", tU32, heads},
		{p + "head_dim", tU32, c / heads}, {p + "mlp_hidden", tU32, hidden}, {p + "ffn_type", tStr, ffn},
		{p + "num_register_tokens", tU32, uint32(0)}, {p + "init_values", tF32, init},
		{p + "alt_start", tI32, start}, {p + "rope_start", tI32, start}, {p + "qknorm_start", tI32, start},
		{p + "rope_freq", tF32, float32(100)}, {p + "cat_token", tBool, cat}, {p + "qkv_bias", tBool, true},
		{p + "ln_eps", tF32, float32(1e-6)}, {p + "interpolate_offset", tF32, float32(0.1)},
		{p + "interpolate_antialias", tBool, false}, {p + "pos_embed_grid", tU32, grid}, {p + "out_layers", tI32, out},
	}
}

func baseKVWant(arch, name string) []kvWant {
	return []kvWant{
		{"general.architecture", tStr, "depthanything3"}, {"general.name", tStr, name},
		{"depthanything3.arch", tStr, arch}, {"depthanything3.checkpoint_name", tStr, name},
		{"depthanything3.patch_size", tU32, uint32(14)},
	}
}

func imgKVWant(mode string, target uint32) []kvWant {
	return []kvWant{
		{"depthanything3.img.mean", tF32, []float32{0.485, 0.456, 0.406}},
		{"depthanything3.img.std", tF32, []float32{0.229, 0.224, 0.225}},
		{"depthanything3.img.resize_mode", tStr, mode}, {"depthanything3.img.resize_target", tU32, target},
	}
}

func TestConvertDA2(t *testing.T) {
	dir := t.TempDir()
	src := da2Original(tinyDA2)
	st := filepath.Join(dir, "da2.safetensors")
	writeSafetensors(t, st, src)
	opts := Options{OutLayers: []int{0, 1, 2, 3}, Name: "tiny"}

	fam, err := Inspect(st)
	require.NoError(t, err)
	assert.Equal(t, FamilyDA2, fam)

	for _, typ := range []loader.Type{loader.TypeF32, loader.TypeF16} {
		t.Run(typ.String(), func(t *testing.T) {
			out := filepath.Join(dir, "out-"+typ.String()+".gguf")
			opts.Type = typ
			require.NoError(t, Convert(context.Background(), st, out, opts))
			f := openGGUF(t, out)
			checkMapping(t, f, src, func(k string) string { return expectedName(k, false) }, typ)
			assert.Len(t, f.Tensors(), len(src)-1, "all but mask_token")
			want := baseKVWant("depthanything2", "tiny")
			want = append(want, vitKVWant("vit", 64, 4, 1, 256, "mlp", 1, -1, false, 3, []int32{0, 1, 2, 3})...)
			want = append(want, imgKVWant("lower_bound", 518)...)
			want = append(want, []kvWant{
				{"depthanything3.head.features", tU32, uint32(8)},
				{"depthanything3.head.out_channels", tI32, []int32{4, 8, 12, 16}},
				{"depthanything3.head.output_dim", tU32, uint32(1)},
				{"depthanything3.head.pos_embed", tBool, false},
				{"depthanything3.head.activation", tStr, "relu"},
				{"depthanything3.head.norm_type", tStr, "idt"},
			}...)
			checkKVs(t, f, want)
		})
	}

	t.Run("metric", func(t *testing.T) {
		out := filepath.Join(dir, "metric.gguf")
		require.NoError(t, Convert(context.Background(), st, out, Options{OutLayers: []int{0, 1, 2, 3}, Heads: 2, MaxDepth: 20}))
		f := openGGUF(t, out)
		act, err := f.KV().String("depthanything3.head.activation")
		require.NoError(t, err)
		assert.Equal(t, "sigmoid", act)
		md, err := f.KV().Float32("depthanything3.head.max_depth")
		require.NoError(t, err)
		assert.Equal(t, float32(20), md)
		heads, err := f.KV().Uint32("depthanything3.vit.num_heads")
		require.NoError(t, err)
		assert.Equal(t, uint32(2), heads)
		name, err := f.KV().String("general.name")
		require.NoError(t, err)
		assert.Equal(t, "da2", name, "default name: file name without extension")
	})
}

// TestConvertDA2PthMatchesSafetensors converts the same state dict from a
// .pth and a .safetensors file.
func TestConvertDA2PthMatchesSafetensors(t *testing.T) {
	dir := t.TempDir()
	src := da2Original(tinyDA2)
	var pts []pthTensor
	for _, s := range src {
		shape := make([]int, len(s.shape))
		for i, d := range s.shape {
			shape[i] = int(d)
		}
		pts = append(pts, pthTensor{s.name, shape, s.data})
	}
	pkl, storages := stateDictPickle(pts)
	pth := writeFile(t, dir, "m.pth", buildPth(t, pkl, storages, 0))
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, src)
	opts := Options{OutLayers: []int{0, 1, 2, 3}, Name: "same"}
	require.NoError(t, Convert(context.Background(), pth, filepath.Join(dir, "a.gguf"), opts))
	require.NoError(t, Convert(context.Background(), st, filepath.Join(dir, "b.gguf"), opts))
	a, err := os.ReadFile(filepath.Join(dir, "a.gguf"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "b.gguf"))
	require.NoError(t, err)
	assert.Equal(t, a, b, "byte-identical GGUF from both formats")
}

// TestConvertDA2HF checks transformers' layout against the original: the
// q/k/v fusion, the reversed fusion stage and config.json must reproduce the
// original conversion byte for byte (but for the name).
func TestConvertDA2HF(t *testing.T) {
	dir := t.TempDir()
	src := da2Original(tinyDA2)
	orig := filepath.Join(dir, "orig.safetensors")
	writeSafetensors(t, orig, src)
	hf := filepath.Join(dir, "Depth-Anything-V2-Tiny-hf")
	require.NoError(t, os.Mkdir(hf, 0o755))
	writeSafetensors(t, filepath.Join(hf, "model.safetensors"), da2ToHF(src, tinyDA2.C))
	writeJSON(t, filepath.Join(hf, "config.json"), map[string]any{
		"backbone_config": map[string]any{
			"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 4,
			"out_indices": []int{1, 2, 3, 4}, "layerscale_value": 1.0, "use_swiglu_ffn": false,
		},
		"depth_estimation_type": "relative", "max_depth": 1,
	})

	fam, err := Inspect(hf)
	require.NoError(t, err)
	assert.Equal(t, FamilyDA2HF, fam)

	a := filepath.Join(dir, "a.gguf")
	b := filepath.Join(dir, "b.gguf")
	require.NoError(t, Convert(context.Background(), orig, a, Options{Name: "x", Heads: 2, OutLayers: []int{0, 1, 2, 3}}))
	require.NoError(t, Convert(context.Background(), hf, b, Options{Name: "x"}))
	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, ab, bb, "HF conversion must equal the original's")

	f := openGGUF(t, b)
	ti, ok := f.Tensor("vit.blk.2.attn_qkv.weight")
	require.True(t, ok)
	assert.Equal(t, []uint64{64, 192}, ti.Shape)

	t.Run("metric from config", func(t *testing.T) {
		writeJSON(t, filepath.Join(hf, "config.json"), map[string]any{
			"backbone_config":       map[string]any{"num_attention_heads": 2, "out_indices": []int{1, 2, 3, 4}},
			"depth_estimation_type": "metric", "max_depth": 80,
		})
		out := filepath.Join(dir, "m.gguf")
		require.NoError(t, Convert(context.Background(), hf, out, Options{}))
		f := openGGUF(t, out)
		md, err := f.KV().Float32("depthanything3.head.max_depth")
		require.NoError(t, err)
		assert.Equal(t, float32(80), md)
		name, err := f.KV().String("depthanything3.checkpoint_name")
		require.NoError(t, err)
		assert.Equal(t, "Depth-Anything-V2-Tiny-hf", name)
	})

	t.Run("absurd config", func(t *testing.T) {
		// Sizes from config.json are bounded before anything is sized by them.
		for _, bb := range []map[string]any{
			{"num_attention_heads": 2, "num_hidden_layers": 1e12, "out_indices": []int{1, 2, 3, 4}},
			{"num_attention_heads": 1e12, "num_hidden_layers": 4, "out_indices": []int{1, 2, 3, 4}},
		} {
			writeJSON(t, filepath.Join(hf, "config.json"), map[string]any{"backbone_config": bb})
			err := Convert(context.Background(), hf, filepath.Join(dir, "huge.gguf"), Options{})
			require.Error(t, err)
			assert.Regexp(t, "blocks: more than 256|heads is outside", err.Error())
		}
	})

	t.Run("missing qkv part", func(t *testing.T) {
		bad := filepath.Join(dir, "bad")
		require.NoError(t, os.Mkdir(bad, 0o755))
		var ts []stTensor
		for _, x := range da2ToHF(src, tinyDA2.C) {
			if x.name != "backbone.encoder.layer.1.attention.attention.key.weight" {
				ts = append(ts, x)
			}
		}
		writeSafetensors(t, filepath.Join(bad, "model.safetensors"), ts)
		err := Convert(context.Background(), bad, filepath.Join(dir, "bad.gguf"), Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}})
		var me *MissingTensorsError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, []string{"vit.blk.1.attn_qkv.weight (key part)"}, me.Names)
	})
}

// TestConvertDA2Fixture converts the committed V2 tiny fixture from both
// its original .pth and its transformers checkpoint.
func TestConvertDA2Fixture(t *testing.T) {
	dir := filepath.Join("..", "tests", "fixtures", "da2-tiny")
	pth := filepath.Join(dir, "model.pth")
	if _, err := os.Stat(pth); err != nil {
		t.Skipf("fixture %s not present (written by tests/oracle/da2_oracle.py)", pth)
	}
	out := t.TempDir()
	a := filepath.Join(out, "pth.gguf")
	b := filepath.Join(out, "hf.gguf")
	require.NoError(t, Convert(context.Background(), pth, a, Options{Name: "da2-tiny", Heads: 2, OutLayers: []int{0, 1, 2, 3}}))
	fa := openGGUF(t, a)
	assert.Len(t, fa.Tensors(), 238-8*14, "DA2-Small schema (14 tensors per block) with 4 instead of 12 blocks")
	c, err := OpenPth(pth)
	require.NoError(t, err)
	defer c.Close()
	for _, n := range c.Names() {
		gg := expectedName(n, false)
		if gg == "" {
			continue
		}
		tn, _ := c.Tensor(n)
		vals, err := tn.Float32s()
		require.NoError(t, err)
		data, err := fa.TensorData(gg)
		require.NoError(t, err, gg)
		assert.Equal(t, []byte(loader.Float32Bytes(vals)), data, gg)
	}
	hf := filepath.Join(dir, "hf")
	if _, err := os.Stat(filepath.Join(hf, "model.safetensors")); err != nil {
		t.Skip("no hf/model.safetensors in the fixture")
	}
	require.NoError(t, Convert(context.Background(), hf, b, Options{Name: "da2-tiny"}))
	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, ab, bb, "the original and transformers checkpoints convert identically")
}

func da3TinyConfig() map[string]any {
	return map[string]any{
		"model_name": "da3-tiny",
		"arch": map[string]any{
			"backbone": map[string]any{
				"embed_dim": 64, "depth": 4, "num_heads": 2, "ffn_layer": "mlp", "out_layers": []int{0, 1, 2, 3},
				"alt_start": 2, "qknorm_start": 2, "rope_start": 2, "rope_freq": 100, "cat_token": true,
				"interpolate_offset": 0.1, "init_values": 1.0,
			},
			"head":    map[string]any{"dim_in": 128, "output_dim": 2, "features": 8, "out_channels": []int{4, 8, 12, 16}},
			"cam_dec": map[string]any{"dim_in": 128},
		},
	}
}

func TestConvertDA3AnyView(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "DA3-TINY")
	require.NoError(t, os.Mkdir(dir, 0o755))
	src := da3AnyView("model.", tinyDA3, false)
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), src)
	writeJSON(t, filepath.Join(dir, "config.json"), da3TinyConfig())

	fam, err := Inspect(dir)
	require.NoError(t, err)
	assert.Equal(t, FamilyDA3, fam)

	headWant := func(aux bool) []kvWant {
		w := []kvWant{
			{"depthanything3.head.features", tU32, uint32(8)},
			{"depthanything3.head.out_channels", tI32, []int32{4, 8, 12, 16}},
			{"depthanything3.head.output_dim", tU32, uint32(2)},
			{"depthanything3.head.pos_embed", tBool, true},
			{"depthanything3.head.down_ratio", tU32, uint32(1)},
			{"depthanything3.head.activation", tStr, "exp"},
			{"depthanything3.head.conf_activation", tStr, "expp1"},
		}
		if aux {
			w = append(w, kvWant{"depthanything3.head.has_aux", tBool, true},
				kvWant{"depthanything3.head.aux_ray_dim", tU32, uint32(6)},
				kvWant{"depthanything3.head.aux_levels", tU32, uint32(4)})
		}
		return append(w, kvWant{"depthanything3.cam.dim_in", tU32, uint32(128)},
			kvWant{"depthanything3.cam_enc.embed_dim", tU32, uint32(64)},
			kvWant{"depthanything3.cam_enc.depth", tU32, uint32(2)},
			kvWant{"depthanything3.cam_enc.num_heads", tU32, uint32(16)},
			kvWant{"depthanything3.cam_enc.mlp_hidden", tU32, uint32(256)},
			kvWant{"depthanything3.cam_enc.ln_eps", tF32, float32(1e-5)})
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"f32", Options{}},
		{"f16", Options{Type: loader.TypeF16}},
		{"f32 with aux", Options{WithAux: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.gguf")
			require.NoError(t, Convert(context.Background(), dir, out, tc.opts))
			f := openGGUF(t, out)
			checkMapping(t, f, src, func(k string) string { return expectedName(k, tc.opts.WithAux) }, tc.opts.Type)
			want := baseKVWant("depthanything3", "DA3-TINY")
			want = append(want, vitKVWant("vit", 64, 4, 2, 256, "mlp", 1, 2, true, 2, []int32{0, 1, 2, 3})...)
			want = append(want, imgKVWant("upper_bound", 504)...)
			want = append(want, headWant(tc.opts.WithAux)...)
			checkKVs(t, f, want)
			_, ok := f.Tensor("head.scratch.rn4.rc1.c1.weight")
			assert.False(t, ok, "DA3 refinenet4 has no resConfUnit1")
			_, ok = f.Tensor("head.scratch.out2_aux_ln.weight")
			assert.Equal(t, tc.opts.WithAux, ok)
		})
	}

	t.Run("without config", func(t *testing.T) {
		bare := t.TempDir()
		writeSafetensors(t, filepath.Join(bare, "model.safetensors"), src)
		err := Convert(context.Background(), bare, filepath.Join(bare, "x.gguf"), Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "give them (-out-layers)")
		out := filepath.Join(bare, "y.gguf")
		require.NoError(t, Convert(context.Background(), bare, out, Options{OutLayers: []int{0, 1, 2, 3}}))
		f := openGGUF(t, out)
		heads, err := f.KV().Uint32("depthanything3.vit.num_heads")
		require.NoError(t, err)
		assert.Equal(t, uint32(2), heads, "heads from the q-norm width")
		qk, err := f.KV().Int32("depthanything3.vit.qknorm_start")
		require.NoError(t, err)
		assert.Equal(t, int32(2), qk, "first block with q/k-norm")
	})

	t.Run("heads disagree with q-norm", func(t *testing.T) {
		err := Convert(context.Background(), dir, filepath.Join(t.TempDir(), "x.gguf"), Options{Heads: 4})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "q/k-norm")
	})

	t.Run("camera encoder", func(t *testing.T) {
		write := func(ts []stTensor, cfg map[string]any) string {
			d := t.TempDir()
			writeSafetensors(t, filepath.Join(d, "model.safetensors"), ts)
			writeJSON(t, filepath.Join(d, "config.json"), cfg)
			return d
		}
		// Without any cam_enc tensor the file converts without one.
		var noEnc, partial []stTensor
		for _, x := range src {
			if !strings.HasPrefix(x.name, "model.cam_enc.") {
				noEnc = append(noEnc, x)
			}
			if x.name != "model.cam_enc.trunk_norm.bias" {
				partial = append(partial, x)
			}
		}
		out := filepath.Join(t.TempDir(), "o.gguf")
		require.NoError(t, Convert(context.Background(), write(noEnc, da3TinyConfig()), out, Options{}))
		f := openGGUF(t, out)
		_, ok := f.KV().Get("depthanything3.cam_enc.embed_dim")
		assert.False(t, ok)
		// A partial one is reported.
		err := Convert(context.Background(), write(partial, da3TinyConfig()), filepath.Join(t.TempDir(), "x.gguf"), Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cam_enc.trunk_norm.bias")
		// The head count comes from config.json's arch.cam_enc.num_heads.
		cfg := da3TinyConfig()
		cfg["arch"].(map[string]any)["cam_enc"] = map[string]any{"dim_out": 64, "num_heads": 4}
		require.NoError(t, Convert(context.Background(), write(src, cfg), out, Options{}))
		heads, err := openGGUF(t, out).KV().Uint32("depthanything3.cam_enc.num_heads")
		require.NoError(t, err)
		assert.Equal(t, uint32(4), heads)
		cfg["arch"].(map[string]any)["cam_enc"] = map[string]any{"dim_out": 64, "num_heads": 3}
		err = Convert(context.Background(), write(src, cfg), filepath.Join(t.TempDir(), "y.gguf"), Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not divisible by 3 heads")
	})
}

func TestConvertDA3Mono(t *testing.T) {
	dir := t.TempDir()
	src := da3Mono("model.", tinyDA3)
	st := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, st, src)
	fam, err := Inspect(st)
	require.NoError(t, err)
	assert.Equal(t, FamilyDA3Mono, fam)
	out := filepath.Join(dir, "mono.gguf")
	require.NoError(t, Convert(context.Background(), st, out, Options{Heads: 1, OutLayers: []int{0, 1, 2, 3}, Name: "mono"}))
	f := openGGUF(t, out)
	checkMapping(t, f, src, func(k string) string { return expectedName(k, false) }, loader.TypeF32)
	want := baseKVWant("depthanything3", "mono")
	want = append(want, vitKVWant("vit", 64, 4, 1, 256, "mlp", 0, -1, false, 2, []int32{0, 1, 2, 3})...)
	want = append(want, imgKVWant("upper_bound", 504)...)
	want = append(want, []kvWant{
		{"depthanything3.head.features", tU32, uint32(8)},
		{"depthanything3.head.out_channels", tI32, []int32{4, 8, 12, 16}},
		{"depthanything3.head.output_dim", tU32, uint32(1)},
		{"depthanything3.head.pos_embed", tBool, false},
		{"depthanything3.head.down_ratio", tU32, uint32(1)},
		{"depthanything3.head.activation", tStr, "exp"},
		{"depthanything3.head.conf_activation", tStr, "expp1"},
		{"depthanything3.head.sky_activation", tStr, "relu"},
		{"depthanything3.head.norm_type", tStr, "idt"},
	}...)
	checkKVs(t, f, want)

	err = Convert(context.Background(), st, out, Options{WithAux: true, OutLayers: []int{0, 1, 2, 3}})
	require.Error(t, err, "mono models have no aux head")
	err = Convert(context.Background(), st, out, Options{MaxDepth: 20, OutLayers: []int{0, 1, 2, 3}})
	require.Error(t, err, "max depth is a DA2 option")
}

// TestConvertDA3Nested splits a nested checkpoint into its any-view (with a
// GS head and SwiGLU FFN, as in the giant) and metric files.
func TestConvertDA3Nested(t *testing.T) {
	dir := t.TempDir()
	av := tinyDA3
	av.swiglu = true
	var src []stTensor
	src = append(src, da3AnyView("model.da3.", av, true)...)
	src = append(src, da3Mono("model.da3_metric.", tinyDA3)...)
	st := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, st, src)
	fam, err := Inspect(st)
	require.NoError(t, err)
	assert.Equal(t, FamilyDA3Nested, fam)

	out := filepath.Join(dir, "nested.gguf")
	require.NoError(t, Convert(context.Background(), st, out, Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}, Name: "N"}))
	_, err = os.Stat(out)
	assert.True(t, os.IsNotExist(err), "only the two branch files are written")

	var anySrc, metSrc []stTensor
	for _, s := range src {
		if strings.HasPrefix(s.name, "model.da3_metric.") {
			s.name = strings.TrimPrefix(s.name, "model.da3_metric.")
			metSrc = append(metSrc, s)
		} else {
			s.name = strings.TrimPrefix(s.name, "model.da3.")
			anySrc = append(anySrc, s)
		}
	}
	fa := openGGUF(t, filepath.Join(dir, "nested-anyview.gguf"))
	checkMapping(t, fa, anySrc, func(k string) string { return expectedName(k, false) }, loader.TypeF32)
	name, err := fa.KV().String("depthanything3.checkpoint_name")
	require.NoError(t, err)
	assert.Equal(t, "N-anyview", name)
	ffn, err := fa.KV().String("depthanything3.vit.ffn_type")
	require.NoError(t, err)
	assert.Equal(t, "swiglu", ffn)
	gsDim, err := fa.KV().Uint32("depthanything3.gs.output_dim")
	require.NoError(t, err)
	assert.Equal(t, uint32(38), gsDim)
	gsOC, err := fa.KV().Int32s("depthanything3.gs.out_channels")
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 8, 12, 16}, gsOC)

	fm := openGGUF(t, filepath.Join(dir, "nested-metric.gguf"))
	checkMapping(t, fm, metSrc, func(k string) string {
		n := expectedName(k, false)
		if strings.HasPrefix(n, "vit.") || strings.HasPrefix(n, "head.") {
			n = "m_" + n
		}
		return n
	}, loader.TypeF32)
	want := baseKVWant("depthanything3", "N-metric")
	want = append(want, vitKVWant("m_vit", 64, 4, 2, 256, "mlp", 0, -1, false, 2, []int32{0, 1, 2, 3})...)
	want = append(want, []kvWant{
		{"depthanything3.m_head.features", tU32, uint32(8)},
		{"depthanything3.m_head.out_channels", tI32, []int32{4, 8, 12, 16}},
		{"depthanything3.m_head.output_dim", tU32, uint32(1)},
		{"depthanything3.m_head.down_ratio", tU32, uint32(1)},
		{"depthanything3.m_head.activation", tStr, "exp"},
		{"depthanything3.m_head.conf_activation", tStr, "expp1"},
		{"depthanything3.m_head.sky_activation", tStr, "relu"},
		{"depthanything3.m_head.norm_type", tStr, "idt"},
	}...)
	checkKVs(t, fm, want)
}

func TestConvertReportsAllMissingAndUnknown(t *testing.T) {
	dir := t.TempDir()
	var src []stTensor
	drop := []string{"pretrained.blocks.1.ls2.gamma", "depth_head.scratch.layer3_rn.weight", "depth_head.resize_layers.3.bias"}
	for _, s := range da2Original(tinyDA2) {
		if !slices.Contains(drop, s.name) {
			src = append(src, s)
		}
	}
	src = append(src,
		stTensor{"pretrained.blocks.0.attn.rel_pos", "F32", []int64{2}, []float32{1, 2}},
		stTensor{"depth_head.scratch.refinenet9.out_conv.bias", "F32", []int64{8}, make([]float32, 8)},
		stTensor{"aux_classifier.weight", "F32", []int64{2}, []float32{1, 2}},
	)
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, src)
	out := filepath.Join(dir, "out.gguf")
	err := Convert(context.Background(), st, out, Options{OutLayers: []int{0, 1, 2, 3}})
	var me *MissingTensorsError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, []string{"head.resize.3.bias", "head.scratch.layer3_rn.weight", "vit.blk.1.ls2"}, me.Names)
	var ue *UnknownTensorsError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []string{"aux_classifier.weight", "depth_head.scratch.refinenet9.out_conv.bias", "pretrained.blocks.0.attn.rel_pos"}, ue.Names)
	_, statErr := os.Stat(out)
	assert.True(t, os.IsNotExist(statErr), "no output on error")
}

func TestConvertShapeMismatch(t *testing.T) {
	dir := t.TempDir()
	src := da2Original(tinyDA2)
	for i := range src {
		if src[i].name == "depth_head.scratch.layer2_rn.weight" {
			src[i].shape = []int64{8, 9, 3, 3}
			src[i].data = make([]float32, 8*9*9)
		}
	}
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, src)
	err := Convert(context.Background(), st, filepath.Join(dir, "o.gguf"), Options{OutLayers: []int{0, 1, 2, 3}})
	var se *ShapeError
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Mismatches, 1)
	assert.Contains(t, se.Mismatches[0], "head.scratch.layer2_rn.weight")
}

func TestConvertUnexpectedBlock(t *testing.T) {
	dir := t.TempDir()
	src := da3AnyView("model.", tinyDA3, false)
	src = append(src, stTensor{"model.backbone.pretrained.blocks.4.ls1.gamma", "F32", []int64{64}, make([]float32, 64)})
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), src)
	writeJSON(t, filepath.Join(dir, "config.json"), da3TinyConfig())
	err := Convert(context.Background(), dir, filepath.Join(dir, "o.gguf"), Options{})
	var ue *UnknownTensorsError
	require.ErrorAs(t, err, &ue, "config.json says 4 blocks")
	assert.Equal(t, []string{"model.backbone.pretrained.blocks.4.ls1.gamma"}, ue.Names)
}

func TestConvertProgressAndCancel(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, da2Original(tinyDA2))
	out := filepath.Join(dir, "o.gguf")

	var calls [][2]int64
	opts := Options{OutLayers: []int{0, 1, 2, 3}, Progress: func(done, total int64) { calls = append(calls, [2]int64{done, total}) }}
	require.NoError(t, Convert(context.Background(), st, out, opts))
	f := openGGUF(t, out)
	var size int64
	for _, ti := range f.Tensors() {
		size += int64(ti.Size)
	}
	require.Len(t, calls, len(f.Tensors()))
	for i := 1; i < len(calls); i++ {
		assert.Greater(t, calls[i][0], calls[i-1][0])
	}
	assert.Equal(t, [2]int64{size, size}, calls[len(calls)-1])

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	opts.Progress = func(done, total int64) {
		if n++; n == 10 {
			cancel()
		}
	}
	out2 := filepath.Join(dir, "cancelled.gguf")
	err := Convert(ctx, st, out2, opts)
	require.ErrorIs(t, err, context.Canceled)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"m.safetensors", "o.gguf"}, names, "no partial or temporary file left")
}

func TestConvertRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, da2Original(tinyDA2))
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"quantized type", Options{Type: loader.TypeQ8_0}, "not supported"},
		{"out layers count", Options{OutLayers: []int{0, 1, 2}}, "want 4"},
		{"out layer range", Options{OutLayers: []int{0, 1, 2, 4}}, "outside"},
		{"negative max depth", Options{OutLayers: []int{0, 1, 2, 3}, MaxDepth: -1}, "max depth"},
		{"heads not dividing", Options{OutLayers: []int{0, 1, 2, 3}, Heads: 3}, "divisible"},
		{"aux on DA2", Options{OutLayers: []int{0, 1, 2, 3}, WithAux: true}, "auxiliary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Convert(context.Background(), st, filepath.Join(dir, "o.gguf"), tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestInspectUnknown(t *testing.T) {
	st := filepath.Join(t.TempDir(), "m.safetensors")
	writeSafetensors(t, st, []stTensor{{"encoder.weight", "F32", []int64{1}, []float32{1}}})
	fam, err := Inspect(st)
	require.Error(t, err)
	assert.Equal(t, FamilyUnknown, fam)
	assert.Contains(t, err.Error(), "encoder.weight")
	_, err = Inspect(filepath.Join(t.TempDir(), "nope"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// TestConvertDA3Fixture converts the committed DA3 tiny fixture (written by
// DepthAnything3.save_pretrained, tests/oracle/da3_oracle.py).
func TestConvertDA3Fixture(t *testing.T) {
	dir := filepath.Join("..", "tests", "fixtures", "da3-tiny")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Skipf("fixture %s not present (written by tests/oracle/da3_oracle.py)", dir)
	}
	c, err := OpenCheckpoint(dir)
	require.NoError(t, err)
	defer c.Close()
	var src []stTensor
	for _, n := range c.Names() {
		tn, _ := c.Tensor(n)
		vals, err := tn.Float32s()
		require.NoError(t, err)
		src = append(src, stTensor{name: n, dtype: "F32", shape: tn.Shape, data: vals})
	}
	for _, aux := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "da3-tiny.gguf")
		require.NoError(t, Convert(context.Background(), dir, out, Options{WithAux: aux}))
		f := openGGUF(t, out)
		checkMapping(t, f, src, func(k string) string { return expectedName(k, aux) }, loader.TypeF32)
		ol, err := f.KV().Int32s("depthanything3.vit.out_layers")
		require.NoError(t, err)
		assert.Equal(t, []int32{1, 3, 5, 7}, ol, "from config.json arch")
		dim, err := f.KV().Uint32("depthanything3.cam.dim_in")
		require.NoError(t, err)
		assert.Equal(t, uint32(64), dim, "2C")
	}
}
