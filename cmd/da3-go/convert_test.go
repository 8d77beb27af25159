package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

func TestConvertUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", []string{"convert"}, "want SRC and OUT.gguf"},
		{"bad type", []string{"convert", "-type", "q8_0", "a", "b"}, "want f32 or f16"},
		{"three out layers", []string{"convert", "-out-layers", "1,2,3", "a", "b"}, "want 4 layers"},
		{"non-numeric out layer", []string{"convert", "-out-layers", "1,x,3,4", "a", "b"}, "not a layer index"},
		{"negative heads", []string{"convert", "-heads", "-2", "a", "b"}, "must be positive"},
		{"unknown flag", []string{"convert", "-bogus", "a", "b"}, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestConvertMissingSource(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"convert", filepath.Join(t.TempDir(), "none.pth"), "out.gguf"}, &stdout, &stderr)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr.String(), "da3-go: ")
	assert.Empty(t, stdout.String())
}

func TestConvertFixture(t *testing.T) {
	src := filepath.Join("..", "..", "tests", "fixtures", "da2-tiny", "model.pth")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	out := filepath.Join(t.TempDir(), "da2.gguf")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"convert", "-type", "f16", "-heads", "2", "-out-layers", "0,1,2,3", "-name", "tiny", src, out}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Equal(t, "wrote "+out+" (Depth Anything V2)\n", stdout.String())
	f, err := loader.Open(out)
	require.NoError(t, err)
	defer f.Close()
	ti, ok := f.Tensor("vit.blk.0.attn_qkv.weight")
	require.True(t, ok)
	assert.Equal(t, loader.TypeF16, ti.Type)
	ti, ok = f.Tensor("vit.blk.0.norm1.weight")
	require.True(t, ok)
	assert.Equal(t, loader.TypeF32, ti.Type)
	name, err := f.KV().String("general.name")
	require.NoError(t, err)
	assert.Equal(t, "tiny", name)

	t.Run("quiet", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"convert", "-quiet", "-heads", "2", "-out-layers", "0,1,2,3", src, out}, &stdout, &stderr)
		require.Equal(t, exitOK, code, stderr.String())
		assert.Empty(t, stdout.String())
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stdout, stderr bytes.Buffer
		dst := filepath.Join(t.TempDir(), "x.gguf")
		code := run(ctx, []string{"convert", "-heads", "2", "-out-layers", "0,1,2,3", src, dst}, &stdout, &stderr)
		assert.Equal(t, exitInterrupted, code)
		_, err := os.Stat(dst)
		assert.True(t, os.IsNotExist(err))
	})
	t.Run("missing options", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"convert", src, filepath.Join(t.TempDir(), "x.gguf")}, &stdout, &stderr)
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr.String(), "give the number of heads (-heads)")
	})
}

// TestConvertMetricDA2NeedsMaxDepth: a V2 metric checkpoint (known by its
// file name: its tensors are those of a relative one) is refused without
// -max-depth instead of silently becoming a relative model, and converts
// with it.
func TestConvertMetricDA2NeedsMaxDepth(t *testing.T) {
	src := filepath.Join("..", "..", "tests", "fixtures", "da2-tiny", "model.pth")
	dir := t.TempDir()
	metric := filepath.Join(dir, "depth_anything_v2_metric_hypersim_vits.pth")
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(metric, b, 0o644))
	dst := filepath.Join(dir, "m.gguf")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"convert", "-quiet", "-heads", "2", "-out-layers", "0,1,2,3", metric, dst}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "-max-depth")
	assert.NoFileExists(t, dst)
	stderr.Reset()
	code = run(context.Background(), []string{"convert", "-quiet", "-heads", "2", "-out-layers", "0,1,2,3", "-max-depth", "20", metric, dst}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.FileExists(t, dst)
}
