package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// quantFixture writes a small DA3-like model with ViT-S widths: two blocks,
// a camera decoder and a few head convolutions.
func quantFixture(t *testing.T) string {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
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
	add("vit.patch_embed.weight", 14, 14, 3, c)
	add("vit.patch_embed.bias", c)
	add("vit.cls_token", c, 1, 1)
	add("vit.camera_token", c, 2, 1)
	add("vit.pos_embed", c, 50, 1)
	for i := range 2 {
		p := fmt.Sprintf("vit.blk.%d.", i)
		add(p+"norm1.weight", c)
		add(p+"attn_qkv.weight", c, 3*c)
		add(p+"attn_qkv.bias", 3*c)
		add(p+"attn_proj.weight", c, c)
		add(p+"ls1", c)
		add(p+"mlp_fc1.weight", c, 4*c)
		add(p+"mlp_fc2.weight", 4*c, c)
	}
	add("cam.bb0.weight", 2*c, 2*c)
	add("cam.fc_t.weight", 2*c, 3)
	add("head.proj.0.weight", 1, 1, 2*c, 48)
	add("head.resize.0.weight", 4, 4, 48, 48)
	add("head.scratch.rn1.out.weight", 3, 3, 64, 64)
	kv := []loader.KeyValue{
		{Key: "general.architecture", Value: loader.ValueOf[string]("depthanything3")},
		{Key: "depthanything3.arch", Value: loader.ValueOf[string]("depthanything3")},
	}
	return testutil.WriteGGUF(t, kv, ts)
}

func TestQuantizeDryRunGolden(t *testing.T) {
	in := quantFixture(t)
	code, stdout, stderr := runCmd(t, "quantize", "-dry-run", "-type", "q4_k", in)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr)
	got := strings.ReplaceAll(stdout, in, "IN.gguf")
	checkGolden(t, "quantize_plan.golden", []byte(got))
	assert.Contains(t, got, "vit.blk.*.attn_qkv.weight")
	assert.Contains(t, got, "rows of 384 do not fit the q4_K block of 256; q4_1 is the nearest type at least as accurate that fits")
	entries, err := os.ReadDir(filepath.Dir(in))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "dry run wrote a file")

	// -conv f16 moves the convolution kernels, not the transposed one.
	code, stdout, _ = runCmd(t, "quantize", "-dry-run", "-conv", "f16", in, "OUT.gguf")
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "convolution kernel: f16 as requested")
	assert.Contains(t, stdout, "transposed-convolution kernel: kept f32")
}

func TestQuantizeRun(t *testing.T) {
	in := quantFixture(t)
	out := filepath.Join(t.TempDir(), "q4.gguf")
	// Flags may follow the positional arguments.
	code, stdout, stderr := runCmd(t, "quantize", in, out, "-type", "Q4_K", "-conv", "f16", "-threads", "2")
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr)
	// Block 0 is the first quarter of this 2-block model: its matrices get q8_0.
	assert.Regexp(t, `^wrote .*q4\.gguf: 10 weight matrices: 3 q4_K, 3 q4_1 \(rows that do not fit the q4_K block\), 4 q8_0 \(first blocks; -pure to quantize them too\), .* MiB → .* (KiB|MiB) \([0-9.]+%\)\n$`, stdout)

	f, err := loader.Open(out)
	require.NoError(t, err)
	defer f.Close()
	for name, typ := range map[string]loader.Type{
		"vit.blk.0.attn_qkv.weight": loader.TypeQ8_0, "vit.blk.0.mlp_fc2.weight": loader.TypeQ8_0,
		"vit.blk.1.attn_qkv.weight": loader.TypeQ4_1, "vit.blk.1.mlp_fc2.weight": loader.TypeQ4K,
		"cam.bb0.weight": loader.TypeQ4K, "head.scratch.rn1.out.weight": loader.TypeF16,
		"head.resize.0.weight": loader.TypeF32, "vit.pos_embed": loader.TypeF32,
	} {
		ti, ok := f.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, typ, ti.Type, name)
	}
	assert.Equal(t, "q4_K", f.KV().StringOr("depthanything3.quantize.type", ""))
	assert.Equal(t, "f16", f.KV().StringOr("depthanything3.quantize.conv_type", ""))
	st, err := os.Stat(in)
	require.NoError(t, err)
	assert.Less(t, f.Size(), st.Size())

	// Requantizing warns on stderr and still succeeds; -quiet drops the result line.
	out2 := filepath.Join(t.TempDir(), "q8.gguf")
	code, stdout, stderr = runCmd(t, "quantize", "-quiet", "-type", "q8_0", out, out2)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "da3-go: warning: input is already quantized (q8_0, q4_1, q4_K)")
	assert.Contains(t, stderr, "da3-go: warning: ")
	assert.Contains(t, stderr, "the accuracy the input lost cannot come back")

	// -pure gives the first block the requested type too.
	out3 := filepath.Join(t.TempDir(), "pure.gguf")
	code, stdout, stderr = runCmd(t, "quantize", "-pure", "-type", "q4_k", in, out3)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "10 weight matrices: 4 q4_K, 6 q4_1 (rows that do not fit the q4_K block), ")
	fp, err := loader.Open(out3)
	require.NoError(t, err)
	defer fp.Close()
	ti, _ := fp.Tensor("vit.blk.0.attn_qkv.weight")
	assert.Equal(t, loader.TypeQ4_1, ti.Type)
}

func TestQuantizeUsageErrors(t *testing.T) {
	in := quantFixture(t)
	out := filepath.Join(t.TempDir(), "out.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown type", []string{"-type", "q3_k", in, out}, `unknown quantization type "q3_k": known types are f32, f16, bf16, q8_0, q6_K, q5_1, q5_K, q5_0, q4_1, q4_K, q4_0`},
		{"bad conv", []string{"-conv", "q8_0", in, out}, `-conv "q8_0": want f32 or f16`},
		{"one arg", []string{in}, "want IN.gguf and OUT.gguf, got 1 arguments"},
		{"three args", []string{in, out, out}, "want IN.gguf and OUT.gguf, got 3 arguments"},
		{"dry-run no arg", []string{"-dry-run"}, "want IN.gguf (and optionally OUT.gguf), got 0 arguments"},
		{"dry-run check", []string{"-dry-run", "-check", "x.png", in}, "-check needs a real run"},
		{"negative threads", []string{"-threads", "-1", in, out}, "-threads -1"},
		{"unknown flag", []string{"-bogus", in, out}, "da3-go quantize: unknown flag -bogus\n"},
		{"near miss", []string{"-tpye", "q8_0", in, out}, "da3-go quantize: unknown flag -tpye; did you mean -type?\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, append([]string{"quantize"}, tc.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Equal(t, "Run 'da3-go help quantize' for usage.\n", lastLine(stderr), "one line and the pointer to the help, not the flag list")
			assert.NotContains(t, stderr, "usage: da3-go quantize")
		})
	}
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestQuantizeFailures(t *testing.T) {
	in := quantFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")

	code, _, stderr := runCmd(t, "quantize", in, in)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "the output is the input file")

	var o, e bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code = run(ctx, []string{"quantize", in, out}, &o, &e)
	assert.Equal(t, exitInterrupted, code, e.String())
	assert.Contains(t, e.String(), "da3-go: interrupted")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestQuantizeHelp(t *testing.T) {
	code, stdout, stderr := runCmd(t, "help", "quantize")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "usage: da3-go quantize [-type T] [-conv f32|f16] [-pure] [-dry-run] [-check IMAGE] IN.gguf OUT.gguf")
	assert.Contains(t, stdout, "f32, f16, bf16, q8_0, q6_k, q5_1, q5_k, q5_0, q4_1, q4_k, q4_0")
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		typ  string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, "q8_0"},
		{[]string{"-type", "f16", "a", "b"}, []string{"a", "b"}, "f16"},
		{[]string{"a", "-type", "f16", "b"}, []string{"a", "b"}, "f16"},
		{[]string{"a", "b", "-type=f16"}, []string{"a", "b"}, "f16"},
		{[]string{"a", "--", "-type", "b"}, []string{"a", "-type", "b"}, "q8_0"},
	} {
		fs := newFlags(command{name: "x"}, &bytes.Buffer{}, &bytes.Buffer{})
		typ := fs.String("type", "q8_0", "")
		pos, _, ok := parseInterspersed(fs, tc.args)
		require.True(t, ok, tc.args)
		assert.Equal(t, tc.pos, pos, tc.args)
		assert.Equal(t, tc.typ, *typ, tc.args)
	}
}

func TestQuantizeCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("model runs skipped in -short mode")
	}
	in := filepath.Join(t.TempDir(), "da2-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), "../../tests/fixtures/da2-tiny/hf", in,
		convert.Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}}))
	out := filepath.Join(t.TempDir(), "q8.gguf")
	img := "../../tests/fixtures/da2-tiny/image.png"
	code, stdout, stderr := runCmd(t, "quantize", "-quiet", "-device", "cpu", "-check", img, in, out)
	require.Equal(t, exitOK, code, stderr)
	m := regexp.MustCompile(`^check \S+image\.png: depth correlation ([0-9.]+), max\|d\| \S+ \(\S+% of the largest depth\)\n$`).FindStringSubmatch(stdout)
	require.NotNil(t, m, "stdout: %q", stdout)
	corr, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, corr, 0.9999, "q8_0 depth correlation")

	// A bad image fails before any work.
	out2 := filepath.Join(t.TempDir(), "q4.gguf")
	code, _, stderr = runCmd(t, "quantize", "-check", "no-such.png", in, out2)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "da3-go: check: ")
	assert.Contains(t, stderr, "no-such.png")
	_, err = os.Stat(out2)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
