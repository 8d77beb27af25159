package tests

import (
	"context"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

// Accuracy with real weights on the NYU and KITTI samples of ../shared/data.
// No pretrained weights can be obtained in this project's build environment:
// these tests run only when DA3_TEST_MODEL (a DA3 any-view GGUF) or
// DA3_TEST_MODEL_DA2 (a V2 GGUF) point at real files.

type sample struct {
	Set        string     `json:"set"`
	RGB        string     `json:"rgb"`
	Depth      string     `json:"depth"`
	DepthScale float64    `json:"depth_scale"`
	Intrinsics [4]float64 `json:"intrinsics"`
}

func dataDir(t *testing.T) string {
	d := os.Getenv("DA3_TEST_DATA")
	if d == "" {
		d = filepath.Join("..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(d, "manifest.json")); err != nil {
		t.Skipf("test data not found at %s (set DA3_TEST_DATA)", d)
	}
	return d
}

func samples(t *testing.T, dir string) []sample {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var m struct{ Samples []sample }
	require.NoError(t, json.Unmarshal(b, &m))
	return m.Samples
}

func groundTruth(t *testing.T, path string, scale float64) ([]float64, int, int) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	g, ok := img.(*image.Gray16)
	require.True(t, ok, "%s: ground truth must be 16-bit grey", path)
	w, h := g.Bounds().Dx(), g.Bounds().Dy()
	out := make([]float64, w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			out[y*w+x] = float64(g.Gray16At(x, y).Y) / scale
		}
	}
	return out, w, h
}

// depthMetrics returns AbsRel and δ1 of pred against gt over valid pixels,
// after scaling pred by median(gt)/median(pred) when medianScale is set.
func depthMetrics(pred []float32, gt []float64, medianScale bool) (absRel, delta1 float64, n int) {
	var ps, gs []float64
	for i, g := range gt {
		if g > 0 && !math.IsNaN(float64(pred[i])) && pred[i] > 0 {
			ps = append(ps, float64(pred[i]))
			gs = append(gs, g)
		}
	}
	if len(ps) == 0 {
		return math.NaN(), math.NaN(), 0
	}
	s := 1.0
	if medianScale {
		s = median(gs) / median(ps)
	}
	ok := 0
	for i := range ps {
		p := ps[i] * s
		absRel += math.Abs(p-gs[i]) / gs[i]
		if math.Max(p/gs[i], gs[i]/p) < 1.25 {
			ok++
		}
	}
	return absRel / float64(len(ps)), float64(ok) / float64(len(ps)), len(ps)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func runRealWeights(t *testing.T, env string, check func(t *testing.T, m *model.Model, s sample, r *model.Result, gt []float64)) {
	path := os.Getenv(env)
	if path == "" {
		t.Skipf("%s not set: no real weights available (no pretrained Depth Anything weights can be obtained here); point it at a GGUF to run", env)
	}
	dir := dataDir(t)
	m := loadModel(t, path)
	for _, s := range samples(t, dir) {
		t.Run(filepath.Base(s.RGB), func(t *testing.T) {
			img, err := imgio.Decode(filepath.Join(dir, s.RGB))
			require.NoError(t, err)
			r, err := m.Depth(context.Background(), img, model.RunOptions{})
			require.NoError(t, err)
			gt, w, h := groundTruth(t, filepath.Join(dir, s.Depth), s.DepthScale)
			require.Equal(t, w, r.Width)
			require.Equal(t, h, r.Height)
			check(t, m, s, r, gt)
		})
	}
}

func TestRealWeightsDA3(t *testing.T) {
	runRealWeights(t, "DA3_TEST_MODEL", func(t *testing.T, m *model.Model, s sample, r *model.Result, gt []float64) {
		absRel, d1, n := depthMetrics(r.Depth, gt, true)
		t.Logf("%s %s: AbsRel %.4f δ1 %.4f (median-scaled, %d px)", m.Config().Name, s.RGB, absRel, d1, n)
		assert.Less(t, absRel, 0.35, "AbsRel")
		assert.Greater(t, d1, 0.5, "δ1")
		if r.Camera != nil {
			fx := r.Camera.IntrinsicsOriginal[0][0]
			rel := math.Abs(fx-s.Intrinsics[0]) / s.Intrinsics[0]
			t.Logf("focal: predicted fx %.1f px, true %.1f px (%.1f%% off)", fx, s.Intrinsics[0], 100*rel)
			assert.Less(t, rel, 0.5, "predicted focal length")
		}
	})
}

func TestRealWeightsDA2(t *testing.T) {
	runRealWeights(t, "DA3_TEST_MODEL_DA2", func(t *testing.T, m *model.Model, s sample, r *model.Result, gt []float64) {
		pred := r.Depth
		if !m.Config().Metric {
			// Relative V2 models predict disparity: invert, then median-scale.
			pred = make([]float32, len(r.Depth))
			for i, d := range r.Depth {
				if d > 1e-6 {
					pred[i] = 1 / d
				}
			}
		}
		absRel, d1, n := depthMetrics(pred, gt, true)
		t.Logf("%s %s: AbsRel %.4f δ1 %.4f (median-scaled, %d px)", m.Config().Name, s.RGB, absRel, d1, n)
		if m.Config().Metric {
			a, d, _ := depthMetrics(pred, gt, false)
			t.Logf("metric, unscaled: AbsRel %.4f δ1 %.4f", a, d)
		}
		assert.Less(t, absRel, 0.35, "AbsRel")
		assert.Greater(t, d1, 0.5, "δ1")
	})
}

// The metric helpers themselves must be right, or the real-weight figures mean nothing.
func TestDepthMetrics(t *testing.T) {
	gt := []float64{1, 2, 4, 0}
	pred := []float32{2, 4, 8, 5}
	a, d, n := depthMetrics(pred, gt, true)
	assert.Equal(t, 3, n, "zero ground truth is excluded")
	assert.InDelta(t, 0, a, 1e-12, "a scaled prediction is perfect after median scaling")
	assert.InDelta(t, 1, d, 1e-12)
	a, d, _ = depthMetrics(pred, gt, false)
	assert.InDelta(t, 1, a, 1e-12)
	assert.InDelta(t, 0, d, 1e-12)
}

// Metric models in metres, without median scaling: DA3METRIC-LARGE given each
// sample's camera (DA3_TEST_MODEL_METRIC), and the nested pair
// (DA3_TEST_MODEL_NESTED="ANYVIEW.gguf,METRIC.gguf").
func TestRealWeightsMetres(t *testing.T) {
	type depthFunc func(img image.Image, s sample) (*model.Result, error)
	ctx := context.Background()
	run := func(t *testing.T, name string, depth depthFunc) {
		dir := dataDir(t)
		for _, s := range samples(t, dir) {
			t.Run(filepath.Base(s.RGB), func(t *testing.T) {
				img, err := imgio.Decode(filepath.Join(dir, s.RGB))
				require.NoError(t, err)
				r, err := depth(img, s)
				require.NoError(t, err)
				require.Equal(t, model.Metres, r.Unit)
				gt, w, h := groundTruth(t, filepath.Join(dir, s.Depth), s.DepthScale)
				require.Equal(t, []int{w, h}, []int{r.Width, r.Height})
				absRel, d1, n := depthMetrics(r.Depth, gt, false)
				t.Logf("%s %s: metres, unscaled: AbsRel %.4f δ1 %.4f (%d px)", name, s.RGB, absRel, d1, n)
				assert.Less(t, absRel, 0.35, "AbsRel")
				assert.Greater(t, d1, 0.5, "δ1")
			})
		}
	}
	t.Run("metric-large", func(t *testing.T) {
		path := os.Getenv("DA3_TEST_MODEL_METRIC")
		if path == "" {
			t.Skip("DA3_TEST_MODEL_METRIC not set: no real weights available (no pretrained Depth Anything weights can be obtained here); point it at a DA3METRIC-LARGE GGUF to run")
		}
		m := loadModel(t, path)
		run(t, m.Config().Name, func(img image.Image, s sample) (*model.Result, error) {
			k := s.Intrinsics
			return m.Depth(ctx, img, model.RunOptions{Intrinsics: &model.Intrinsics{Fx: k[0], Fy: k[1], Cx: k[2], Cy: k[3]}})
		})
	})
	t.Run("nested", func(t *testing.T) {
		pair := strings.Split(os.Getenv("DA3_TEST_MODEL_NESTED"), ",")
		if len(pair) != 2 {
			t.Skip("DA3_TEST_MODEL_NESTED not set to ANYVIEW.gguf,METRIC.gguf: no real weights available (no pretrained Depth Anything weights can be obtained here)")
		}
		n, err := nested.Load(ctx, pair[0], pair[1], model.Options{Options: backend.Options{Device: os.Getenv("DA3_TEST_DEVICE")}})
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		run(t, "nested", func(img image.Image, _ sample) (*model.Result, error) { return n.Depth(ctx, img, model.RunOptions{}) })
	})
}
