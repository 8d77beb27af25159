package main

import (
	"context"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
)

// TestTileFigures measures `depth -tile on` against a plain run, wall time
// and peak RSS (each in a child process), with the spec-size DA2-Small
// drawn with random weights (tests/fixtures/specs) on synthetic JPEGs of
// the sizes in DA3_TILE_FIGURES (e.g. "4000x3000,8000x6000"). Skipped
// without it: a 12 Mpx image takes minutes on two cores.
// benchmarks/tile_figures.sh runs it.
func TestTileFigures(t *testing.T) {
	sizes := os.Getenv("DA3_TILE_FIGURES")
	if sizes == "" {
		t.Skip("set DA3_TILE_FIGURES=WxH[,WxH...] to measure tiled runs")
	}
	m := specGGUF(t, "da2-small")
	dir := t.TempDir()
	for _, s := range strings.Split(sizes, ",") {
		var w, h int
		_, err := fmt.Sscanf(s, "%dx%d", &w, &h)
		require.NoError(t, err, "size %q", s)
		img := filepath.Join(dir, fmt.Sprintf("scene_%s.jpg", s))
		f, err := os.Create(img)
		require.NoError(t, err)
		require.NoError(t, jpeg.Encode(f, syntheticImage(w, h, 0), &jpeg.Options{Quality: 92}))
		require.NoError(t, f.Close())
		for _, mode := range []string{"off", "on"} {
			out := filepath.Join(dir, "out_"+mode)
			start := time.Now()
			code, stderr, peak := runChild(t, "depth", "-model", m, "-tile", mode, "-format", "npy", "-quiet", "-o", out, img)
			wall := time.Since(start)
			require.Equal(t, 0, code, stderr)
			t.Logf("%s (%.0f Mpx) -tile %s: wall %.1f s, peak RSS %.0f MiB", s, float64(w*h)/1e6, mode, wall.Seconds(), float64(peak)/(1<<20))
			fmt.Printf("TILE-FIGURE size=%s tile=%s wall_s=%.1f peak_rss_mib=%.0f\n", s, mode, wall.Seconds(), float64(peak)/(1<<20))
		}
	}
}

// specGGUF draws the checkpoint of tests/fixtures/specs/NAME.json (random
// weights of the real architecture's shapes), converts it and returns the
// GGUF's path.
func specGGUF(t *testing.T, name string) string {
	t.Helper()
	specs := filepath.Join("..", "..", "tests", "fixtures", "specs")
	if _, err := os.Stat(filepath.Join(specs, name+".json")); err != nil {
		t.Skipf("spec %s not present", name)
	}
	src := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(src, 0o755))
	testutil.SynthCheckpoint(t, filepath.Join(specs, name+".json"), src)
	cfg, err := os.ReadFile(filepath.Join(specs, name+".config.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), cfg, 0o644))
	dst := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, convert.Options{}))
	return dst
}
