package align_test

import (
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/align"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
)

// smallMap is 3×2 metres with one hole.
var smallMap = []float32{1.5, 2, 0, 3.25, 4, 5.5}

func TestReadDenseFormats(t *testing.T) {
	dir := t.TempDir()
	npy := filepath.Join(dir, "d.npy")
	require.NoError(t, imgio.WriteNPY(npy, smallMap, 2, 3))
	pfm := filepath.Join(dir, "d.pfm")
	require.NoError(t, imgio.WritePFM(pfm, smallMap, 3, 2))
	metric := filepath.Join(dir, "metric.png")
	require.NoError(t, export.WriteDepthPNG16(metric, export.DepthMap{Width: 3, Height: 2, Depth: smallMap, Unit: export.UnitMetres}, export.PNG16Options{}))
	plain := filepath.Join(dir, "mm.png")
	g := image.NewGray16(image.Rect(0, 0, 3, 2))
	for i, v := range smallMap {
		g.Pix[2*i], g.Pix[2*i+1] = byte(uint16(v*1000)>>8), byte(uint16(v*1000))
	}
	f, err := os.Create(plain)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, g))
	require.NoError(t, f.Close())

	for _, p := range []string{npy, pfm, metric, plain} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			s, err := align.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, 3, s.Width)
			assert.Equal(t, 2, s.Height)
			require.Len(t, s.Dense, 6)
			for i, want := range smallMap {
				got := s.Dense[i]
				if want == 0 {
					assert.True(t, got == 0 || math.IsNaN(float64(got)), "hole at %d: %v", i, got)
					continue
				}
				assert.InDelta(t, want, got, 1e-3, "pixel %d", i)
			}
			assert.Equal(t, 5, s.Len())
		})
	}

	// The same plain PNG in KITTI's steps (values per metre 256): read as 1000/256 times the metres; a
	// da3-go PNG16 says its own step, whatever the option; a bad scale is refused.
	kitti, err := align.ReadFileWith(plain, align.ReadOptions{PNGScale: 256})
	require.NoError(t, err)
	mm, err := align.ReadFile(plain)
	require.NoError(t, err)
	for i := range kitti.Dense {
		assert.InDelta(t, mm.Dense[i]*1000/256, kitti.Dense[i], 1e-5, "pixel %d", i)
	}
	own, err := align.ReadFileWith(metric, align.ReadOptions{PNGScale: 256})
	require.NoError(t, err)
	assert.InDelta(t, smallMap[1], own.Dense[1], 1e-3)
	_, err = align.ReadFileWith(plain, align.ReadOptions{PNGScale: -5})
	assert.ErrorContains(t, err, "values per metre")

	rel := filepath.Join(dir, "rel.png")
	require.NoError(t, export.WriteDepthPNG16(rel, export.DepthMap{Width: 3, Height: 2, Depth: smallMap, Unit: "relative"}, export.PNG16Options{}))
	_, err = align.ReadFile(rel)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `holds "relative" depth, not metres`)

	f64 := filepath.Join(dir, "d64.npy")
	wide := make([]float64, len(smallMap))
	for i, v := range smallMap {
		wide[i] = float64(v)
	}
	out, err := os.Create(f64)
	require.NoError(t, err)
	require.NoError(t, imgio.EncodeNPY(out, wide, 1, 2, 3))
	require.NoError(t, out.Close())
	s, err := align.ReadFile(f64)
	require.NoError(t, err)
	assert.Equal(t, smallMap, s.Dense)
}

func TestReadPoints(t *testing.T) {
	s, err := align.ReadPoints(strings.NewReader("x,y,depth_m\n# a comment\n10, 20, 1.5\n\n3.5 4\t2.25\n"))
	require.NoError(t, err)
	assert.Zero(t, s.Width, "points are in the input image's pixels, set by the caller")
	assert.Equal(t, []align.Sample{{X: 10, Y: 20, Depth: 1.5}, {X: 3.5, Y: 4, Depth: 2.25}}, s.Points)

	_, err = align.ReadPoints(strings.NewReader("1 2 3\n1 2\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	_, err = align.ReadPoints(strings.NewReader("# nothing\n"))
	require.Error(t, err)

	p := filepath.Join(t.TempDir(), "pts.csv")
	require.NoError(t, os.WriteFile(p, []byte("1,2,3\n"), 0o644))
	s, err = align.ReadFile(p)
	require.NoError(t, err)
	assert.Len(t, s.Points, 1)
	_, err = align.ReadFile(filepath.Join(t.TempDir(), "missing.npy"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read metric depth")
}
