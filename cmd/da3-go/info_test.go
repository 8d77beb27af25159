package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// update rewrites golden files: go test ./cmd/da3-go -update.
// Other tests of package main share this flag.
var update = flag.Bool("update", false, "rewrite golden files")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./cmd/da3-go -update")
	assert.Equal(t, string(want), string(got), "output differs from %s (rerun with -update if intended)", path)
}

// infoFixture writes a small DA3-like GGUF with f32, f16, q8_0 and q4_K
// tensors.
func infoFixture(t *testing.T) string {
	t.Helper()
	long := make([]int32, 20)
	for i := range long {
		long[i] = int32(i * i)
	}
	const p = "depthanything3."
	kv := []loader.KeyValue{
		{Key: "general.architecture", Value: loader.ValueOf[string]("depthanything3")},
		{Key: p + "arch", Value: loader.ValueOf[string]("depthanything3")},
		{Key: p + "checkpoint_name", Value: loader.ValueOf[string]("DA3-TINY")},
		{Key: p + "patch_size", Value: loader.ValueOf[uint32](14)},
		{Key: p + "vit.embed_dim", Value: loader.ValueOf[uint32](64)},
		{Key: p + "vit.ffn_type", Value: loader.ValueOf[string]("mlp")},
		{Key: p + "vit.alt_start", Value: loader.ValueOf[int32](-1)},
		{Key: p + "vit.ln_eps", Value: loader.ValueOf[float32](1e-6)},
		{Key: p + "vit.cat_token", Value: loader.ValueOf[bool](true)},
		{Key: p + "vit.out_layers", Value: loader.ArrayOf[int32]([]int32{5, 7, 9, 11})},
		{Key: p + "img.mean", Value: loader.ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: "test.long", Value: loader.ArrayOf[int32](long)},
		{Key: "test.strings", Value: loader.ArrayOf[string]([]string{"a", "b c"})},
		{Key: "test.bytes", Value: loader.ArrayOf[uint8]([]uint8{1, 255})},
		{Key: "test.nan", Value: loader.ValueOf[float32](float32(math.NaN()))},
		{Key: "test.escape", Value: loader.ValueOf[string]("x\x1b[31my")},
		{Key: "test\tkey", Value: loader.ValueOf[uint64](1 << 40)},
	}
	f32 := func(name string, shape ...uint64) loader.WriterTensor {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		return testutil.F32Tensor(t, name, make([]float32, n), shape...)
	}
	quant := func(name string, typ loader.Type, shape ...uint64) loader.WriterTensor {
		size, err := typ.ByteSize(shape)
		require.NoError(t, err)
		return loader.WriterTensor{Name: name, Type: typ, Shape: shape, Data: loader.BytesTensor(make([]byte, size))}
	}
	tensors := []loader.WriterTensor{
		f32("vit.cls_token", 64, 1, 1),
		f32("vit.patch_embed.weight", 14, 14, 3, 64),
		f32("vit.patch_embed.bias", 64),
		quant("vit.blk.0.attn_qkv.weight", loader.TypeQ8_0, 64, 192),
		quant("vit.blk.0.mlp_fc1.weight", loader.TypeQ4K, 256, 4),
		quant("vit.blk.0.mlp_fc2.weight", loader.TypeQ4K, 256, 2),
		quant("head.proj.0.weight", loader.TypeF16, 1, 1, 64, 48),
	}
	return testutil.WriteGGUF(t, kv, tensors)
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInfoTable(t *testing.T) {
	path := infoFixture(t)
	code, out, errOut := runCmd(t, "info", path)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	out = strings.ReplaceAll(out, path, "FIXTURE.gguf")
	checkGolden(t, "info.golden", []byte(out))

	// Independent of the golden file: the facts that must be there.
	assert.Contains(t, out, "architecture:  depthanything3\n")
	assert.Contains(t, out, "gguf version:  3 (alignment 32)\n")
	assert.Regexp(t, `(?m)^  depthanything3\.vit\.out_layers\s+\[\]int32\s+\[5, 7, 9, 11\]$`, out)
	assert.Regexp(t, `(?m)^  test\.long\s+\[\]int32\s+\[0, 1, 4, 9, 16, 25, 36, 49, \.\.\. \(20 total\)\]$`, out)
	assert.Contains(t, out, `"x\x1b[31my"`, "control characters are escaped")
	assert.NotContains(t, out, "\x1b")
	assert.Contains(t, out, `"test\tkey"`)
	const params = 64 + 14*14*3*64 + 64 + 64*192 + 256*4 + 256*2 + 64*48
	assert.Contains(t, out, fmt.Sprintf("parameters:    %d (54.66 K)\n", params))
	assert.Regexp(t, `(?m)^\s+f32\s+3\s+37760\s+151040\s`, out)
	assert.Regexp(t, `(?m)^\s+f16\s+1\s+3072\s+6144\s`, out)
	assert.Regexp(t, `(?m)^\s+q8_0\s+1\s+12288\s+13056\s`, out)
	assert.Regexp(t, `(?m)^\s+q4_K\s+2\s+1536\s+864\s`, out)
	assert.Regexp(t, `(?m)^\s+total\s+7\s+54656\s+171104\s`, out)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Contains(t, out, "size:          "+strconv.FormatInt(st.Size(), 10)+" bytes")
	assert.NotContains(t, out, "vit.patch_embed.weight", "no tensor list without -tensors")
}

func TestInfoTensorList(t *testing.T) {
	path := infoFixture(t)
	code, out, errOut := runCmd(t, "info", "-tensors", path)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^  vit\.patch_embed\.weight\s+f32\s+\[14, 14, 3, 64\]\s+150528\s+\d+$`, out)
	assert.Regexp(t, `(?m)^  vit\.blk\.0\.mlp_fc1\.weight\s+q4_K\s+\[256, 4\]\s+576\s+\d+$`, out)
}

func TestInfoJSON(t *testing.T) {
	path := infoFixture(t)
	code, out, errOut := runCmd(t, "info", "-json", path)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	checkGolden(t, "info.json.golden", []byte(strings.ReplaceAll(out, jsonString(path), jsonString("FIXTURE.gguf"))))

	var rep struct {
		Path         string `json:"path"`
		Version      uint32 `json:"version"`
		Architecture string `json:"architecture"`
		Parameters   uint64 `json:"parameters"`
		TensorCount  int    `json:"tensor_count"`
		Metadata     []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"metadata"`
		Types []struct {
			Type     string `json:"type"`
			Count    int    `json:"count"`
			Elements uint64 `json:"elements"`
			Bytes    uint64 `json:"bytes"`
		} `json:"types"`
		Tensors []struct {
			Name  string   `json:"name"`
			Shape []uint64 `json:"shape"`
		} `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, path, rep.Path)
	assert.Equal(t, uint32(3), rep.Version)
	assert.Equal(t, "depthanything3", rep.Architecture)
	assert.Equal(t, uint64(54656), rep.Parameters)
	assert.Equal(t, 7, rep.TensorCount)
	require.Len(t, rep.Tensors, 7)
	assert.Equal(t, []uint64{14, 14, 3, 64}, rep.Tensors[1].Shape)
	require.Len(t, rep.Types, 4)
	assert.Equal(t, "f32", rep.Types[0].Type, "types in ggml id order")
	assert.Equal(t, "q4_K", rep.Types[3].Type)

	values := map[string]any{}
	types := map[string]string{}
	for _, m := range rep.Metadata {
		values[m.Key] = m.Value
		types[m.Key] = m.Type
	}
	require.Len(t, rep.Metadata, 17)
	assert.Equal(t, "general.architecture", rep.Metadata[0].Key, "file order")
	assert.Len(t, values["test.long"], 20, "arrays are complete in JSON")
	assert.Equal(t, []any{1.0, 255.0}, values["test.bytes"], "byte arrays are numbers, not base64")
	assert.Equal(t, "NaN", values["test.nan"])
	assert.Equal(t, "[]int32", types["depthanything3.vit.out_layers"])
	assert.Equal(t, []any{0.485, 0.456, 0.406}, values["depthanything3.img.mean"], "float32 printed at float32 precision")
	assert.Equal(t, 1e-6, values["depthanything3.vit.ln_eps"])
	assert.Equal(t, "x\x1b[31my", values["test.escape"])
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestInfoErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "image.png")
	require.NoError(t, os.WriteFile(notGGUF, []byte("\x89PNG\r\n\x1a\n rest of a png"), 0o644))
	good, err := os.ReadFile(infoFixture(t))
	require.NoError(t, err)
	truncated := filepath.Join(dir, "truncated.gguf")
	require.NoError(t, os.WriteFile(truncated, good[:len(good)/2], 0o644))
	v4 := filepath.Join(dir, "v4.gguf")
	require.NoError(t, os.WriteFile(v4, []byte("GGUF\x04\x00\x00\x00"+strings.Repeat("\x00", 16)), 0o644))

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"missing file", []string{"info", filepath.Join(dir, "nope.gguf")}, exitFailure, []string{"da3-go: open ", "nope.gguf", "no such file"}},
		{"not gguf", []string{"info", notGGUF}, exitFailure, []string{"da3-go: open ", "not a GGUF file"}},
		{"truncated", []string{"info", truncated}, exitFailure, []string{"da3-go: open ", "file truncated"}},
		{"version 4", []string{"info", v4}, exitFailure, []string{"unsupported GGUF version: 4"}},
		{"directory", []string{"info", dir}, exitFailure, []string{"not a regular file"}},
		{"no file", []string{"info"}, exitUsage, []string{"want one GGUF file, got 0 arguments", "Run 'da3-go help info' for usage."}},
		{"two files", []string{"info", "a.gguf", "b.gguf"}, exitUsage, []string{"got 2 arguments"}},
		{"unknown flag", []string{"info", "-bogus", "a.gguf"}, exitUsage, []string{"da3-go info: unknown flag -bogus\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			assert.Equal(t, tc.code, code)
			assert.Empty(t, out, "nothing on stdout")
			for _, s := range tc.stderr {
				assert.Contains(t, errOut, s)
			}
		})
	}
}

func TestInfoHelp(t *testing.T) {
	code, out, errOut := runCmd(t, "info", "-h")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "usage: da3-go info [-json] [-tensors] FILE.gguf")
	assert.Contains(t, out, "-json")

	code, out, _ = runCmd(t, "help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "info")
}

func TestInfoCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"info", infoFixture(t)}, &out, &errb)
	assert.Equal(t, exitInterrupted, code)
	assert.Empty(t, out.String())
}
