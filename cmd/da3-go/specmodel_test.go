package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
)

// TestWriteSpecModel writes DA3-SMALL with random weights (drawn again from tests/fixtures/specs: the
// statistics of tests/oracle's seeded checkpoint, the real architecture and size) as a GGUF at
// $DA3_SPEC_GGUF, for benchmarks (benchmarks/stream_bench.py); skipped without it.
func TestWriteSpecModel(t *testing.T) {
	dst := os.Getenv("DA3_SPEC_GGUF")
	if dst == "" {
		t.Skip("DA3_SPEC_GGUF not set")
	}
	specs := filepath.Join("..", "..", "tests", "fixtures", "specs")
	src := t.TempDir()
	testutil.SynthCheckpoint(t, filepath.Join(specs, "da3-small.json"), src)
	cfg, err := os.ReadFile(filepath.Join(specs, "da3-small.config.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), cfg, 0o644))
	require.NoError(t, convert.Convert(context.Background(), src, dst, convert.Options{}))
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(50<<20), "a spec-size model")
}
