package tile_test

import (
	"context"
	"errors"
	"image"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/tile"
)

// The synthetic network's process resolution: the 2000×1500 scene is seen
// 12.5 times coarser by the global pass, and its 500-pixel tiles about 3
// times coarser.
const fakeRes = 160

// fitAffine fits a·x + b ≈ y over the pixels mask keeps and returns the fit
// and the RMS of the residual.
func fitAffine(x, y []float32, mask func(i int) bool) (a, b, rms float64) {
	var n, sx, sy, sxx, sxy float64
	for i := range x {
		if mask(i) {
			n++
			sx += float64(x[i])
			sy += float64(y[i])
			sxx += float64(x[i]) * float64(x[i])
			sxy += float64(x[i]) * float64(y[i])
		}
	}
	a = (sxy/n - sx/n*sy/n) / (sxx/n - sx/n*sx/n)
	b = sy/n - a*sx/n
	var ss float64
	for i := range x {
		if mask(i) {
			r := a*float64(x[i]) + b - float64(y[i])
			ss += r * r
		}
	}
	return a, b, math.Sqrt(ss / n)
}

// aligned is d brought to the truth by the affine fit over the flat pixels.
func aligned(s *scene, d []float32) []float32 {
	a, b, _ := fitAffine(d, s.truth, func(i int) bool { return s.flat(i%s.W, i/s.W, 40) })
	out := make([]float32, len(d))
	for i, v := range d {
		out[i] = float32(a*float64(v) + b)
	}
	return out
}

// edgeWidth is the mean 10–90% width, in pixels, of the rises at the left
// and right edges of the scene's boxes (the first six; rows through their
// middle), in d aligned to the truth.
func edgeWidth(s *scene, d []float32) float64 {
	var sum float64
	var n int
	for _, b := range s.boxes[:6] {
		for _, y := range []int{(b.Min.Y + b.Max.Y) / 2, (b.Min.Y+b.Max.Y)/2 + 7} {
			row := d[y*s.W : (y+1)*s.W]
			sum += riseWidth(row, b.Min.X, 40, 1) + riseWidth(row, b.Max.X-1, 40, -1)
			n += 2
		}
	}
	return sum / float64(n)
}

// riseWidth is the 10–90% width of the rise at the edge at x of row (dir
// 1: rising to the right, −1: to the left), the levels taken r pixels
// either side.
func riseWidth(row []float32, x, r, dir int) float64 {
	lo, hi := float64(row[x-dir*r]), float64(row[x+dir*r])
	cross := func(level float64) float64 {
		for k := -r; k < r; k++ {
			v0, v1 := float64(row[x+dir*k]), float64(row[x+dir*(k+1)])
			f0, f1 := (v0-lo)/(hi-lo), (v1-lo)/(hi-lo)
			if f0 < level && f1 >= level {
				return float64(k) + (level-f0)/(f1-f0)
			}
		}
		return math.NaN()
	}
	return cross(0.9) - cross(0.1)
}

// poleContrast is the mean share of the poles' and wire's true step that d
// (aligned to the truth) shows at their middles.
func poleContrast(s *scene, d []float32) float64 {
	var sum float64
	thin := s.boxes[6:]
	for _, b := range thin {
		cx, cy := (b.Min.X+b.Max.X)/2, (b.Min.Y+b.Max.Y)/2
		out := cx + 40 // beside a pole
		if b.Dx() > b.Dy() {
			out = cx // above the wire
			sum += (float64(d[cy*s.W+cx]) - float64(d[(cy-40)*s.W+out])) / Step
			continue
		}
		sum += (float64(d[cy*s.W+cx]) - float64(d[cy*s.W+out])) / Step
	}
	return sum / float64(len(thin))
}

// maxJump is the largest step between neighbouring flat pixels of d
// (aligned to the truth) beyond the truth's own: a seam between tiles
// shows as one.
func maxJump(s *scene, d []float32) float64 {
	var worst float64
	for y := 1; y < s.H; y++ {
		for x := 1; x < s.W; x++ {
			if !s.flat(x, y, 40) || !s.flat(x-1, y, 40) || !s.flat(x, y-1, 40) {
				continue
			}
			i := y*s.W + x
			dx := math.Abs(float64(d[i]-d[i-1]) - float64(s.truth[i]-s.truth[i-1]))
			dy := math.Abs(float64(d[i]-d[i-s.W]) - float64(s.truth[i]-s.truth[i-s.W]))
			worst = max(worst, dx, dy)
		}
	}
	return worst
}

// globalMap is the fake network's first call (the global pass) upsampled
// to the image size as a run's maps are.
func globalMap(f *fakeNet) []float32 {
	return imgproc.BilinearAlignCorners(f.global, f.gw, f.gh, f.s.W, f.s.H)
}

// TestDepthMergesTilesAgainstTruth: on a 2000×1500 scene of planes, boxes
// and thin poles, a synthetic network that sees each crop at its process
// resolution (160) under a random scale and shift per call: the tiled map
// is (a) in the global pass's scale, without seams, (b) as sharp at the
// boxes' edges as the tiles see them, far sharper than the global pass,
// (d) computed one tile at a time.
func TestDepthMergesTilesAgainstTruth(t *testing.T) {
	s := newScene(2000, 1500)
	net := newFakeNet(s, fakeRes, model.Disparity, true, 1)
	res, err := tile.Depth(context.Background(), net, s.img, tile.Options{})
	require.NoError(t, err)
	require.Equal(t, [2]int{2000, 1500}, [2]int{res.Width, res.Height})
	require.Len(t, res.Depth, 2000*1500)
	assert.Equal(t, model.Disparity, res.Unit)
	lay, err := tile.Plan(2000, 1500, 0, 0, fakeRes)
	require.NoError(t, err)
	assert.Equal(t, 500, lay.Size, "AutoSize: a quarter of the long side")
	require.Len(t, lay.Tiles, 20, "5×4 tiles")
	assert.Equal(t, 21, net.calls, "the global pass and 20 tiles")

	glob := globalMap(net)
	all := func(int) bool { return true }
	flat := func(i int) bool { return s.flat(i%s.W, i/s.W, 40) }

	// (a) In the global pass's scale and shift: over the flat parts the
	// merged map is the global pass's (affine fit ≈ identity), and it fits
	// the truth by one affine map with a small residual, everywhere far
	// smaller than the global pass's.
	a, b, rmsFlat := fitAffine(res.Depth, glob, flat)
	t.Logf("merged vs global pass over flat pixels: scale %.5f shift %.5f rms %.2e", a, b, rmsFlat)
	assert.InDelta(t, 1, a, 0.01)
	assert.InDelta(t, 0, b, 0.02)
	_, _, rmsMerged := fitAffine(res.Depth, s.truth, all)
	_, _, rmsGlobal := fitAffine(glob, s.truth, all)
	_, _, rmsMergedFlat := fitAffine(res.Depth, s.truth, flat)
	t.Logf("affine fit to the truth, RMS residual (truth range 1–2.5): merged %.4f (flat pixels %.2e), global pass %.4f", rmsMerged, rmsMergedFlat, rmsGlobal)
	assert.Less(t, rmsMergedFlat, 2e-3, "flat parts exact up to the fits")
	assert.Less(t, rmsMerged, 0.6*rmsGlobal, "the residual is at the edges: narrower edges, smaller residual")
	jump := maxJump(s, aligned(s, res.Depth))
	t.Logf("largest step between flat neighbours beyond the truth's: %.2e", jump)
	assert.Less(t, jump, 1e-3, "no seams")

	// (b) Edges: 10–90% width at the boxes' edges (the truth's is under a
	// pixel), and the share of the thin poles' step seen.
	wTruth, wMerged, wGlobal := edgeWidth(s, s.truth), edgeWidth(s, aligned(s, res.Depth)), edgeWidth(s, aligned(s, glob))
	cTruth, cMerged, cGlobal := poleContrast(s, s.truth), poleContrast(s, aligned(s, res.Depth)), poleContrast(s, aligned(s, glob))
	t.Logf("10–90%% edge width (px): truth %.2f, merged %.2f, global pass %.2f", wTruth, wMerged, wGlobal)
	t.Logf("6-pixel poles and 4-pixel wire, share of the step seen: truth %.2f, merged %.2f, global pass %.2f", cTruth, cMerged, cGlobal)
	assert.Less(t, wTruth, 1.0)
	assert.Less(t, wMerged, 4.0, "the tiles' resolution (3.1 image pixels a processed pixel)")
	assert.Greater(t, wGlobal, 3*wMerged, "the global pass is far blurrier")
	assert.Greater(t, cMerged, 0.75)
	assert.Less(t, cGlobal, 0.5)

	// (d) One tile at a time: no two runs at once, and of the outputs
	// returned only the global pass's is kept while a tile runs.
	t.Logf("outputs live at the start of a run, at most: %d", net.maxLive)
	assert.Equal(t, 1, net.maxInFlight)
	assert.LessOrEqual(t, net.maxLive, int64(2), "tiles' outputs held at once")
}

// TestDepthSeamsWithoutShift: the seam measure has teeth: fitting a scale
// only to tiles that differ by a shift leaves steps between them.
func TestDepthSeamsWithoutShift(t *testing.T) {
	s := newScene(2000, 1500)
	res, err := tile.Depth(context.Background(), newFakeNet(s, fakeRes, model.Disparity, true, 1), s.img, tile.Options{Fit: tile.FitScale})
	require.NoError(t, err)
	jump := maxJump(s, aligned(s, res.Depth))
	t.Logf("largest step with scale-only fits: %.2e", jump)
	assert.Greater(t, jump, 3e-3)
}

// TestDepthMetricScale: a metric network (scale only per call) is fitted
// by scale: the merged map keeps the global pass's metres, without seams.
func TestDepthMetricScale(t *testing.T) {
	s := newScene(2000, 1500)
	net := newFakeNet(s, fakeRes, model.Metres, false, 7)
	res, err := tile.Depth(context.Background(), net, s.img, tile.Options{})
	require.NoError(t, err)
	glob := globalMap(net)
	var ratio, n float64
	for i := range res.Depth {
		if s.flat(i%s.W, i/s.W, 40) {
			ratio += float64(res.Depth[i] / glob[i])
			n++
		}
	}
	assert.InDelta(t, 1, ratio/n, 1e-3, "merged / global pass over flat pixels")
	// Scale-only alignment of the merged map to the truth.
	var num, den float64
	for i := range res.Depth {
		num += float64(res.Depth[i]) * float64(s.truth[i])
		den += float64(res.Depth[i]) * float64(res.Depth[i])
	}
	k := num / den
	scaled := make([]float32, len(res.Depth))
	for i, v := range res.Depth {
		scaled[i] = float32(k * float64(v))
	}
	assert.Less(t, maxJump(s, scaled), 1e-3)
}

// TestDepthConfidenceAndSky: confidence and sky are blended with the same
// weights (a constant confidence stays that constant, which also checks
// the weights sum to 1 in the merge), and the sky takes the global pass's
// sky depth rather than each tile's.
func TestDepthConfidenceAndSky(t *testing.T) {
	s := newScene(800, 600)
	net := newFakeNet(s, 64, model.Relative, true, 5)
	net.maps = true
	res, err := tile.Depth(context.Background(), net, s.img, tile.Options{Size: 200})
	require.NoError(t, err)
	require.Len(t, res.Conf, 800*600)
	require.Len(t, res.Sky, 800*600)
	assert.Greater(t, net.calls, 10)
	var worst float64
	for _, c := range res.Conf {
		worst = max(worst, math.Abs(float64(c)-3))
	}
	assert.Less(t, worst, 1e-5, "confidence 3 everywhere")
	skyDepth := net.global[0] // the global pass's top-left pixel is sky
	var skyPixels int
	for i, v := range res.Sky {
		if v >= 0.3 {
			skyPixels++
			require.Equal(t, skyDepth, res.Depth[i], "pixel %d", i)
		}
	}
	assert.InDelta(t, 800*60, skyPixels, 800*8, "the top tenth is sky")
}

// TestWeightsSumToOne (c): for many image and tile sizes and overlaps, the
// tiles' blend weights sum to 1 at every pixel, are near 0 at a tile's
// edges inside the image, and the tiles cover the image within its
// bounds.
func TestWeightsSumToOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][4]float64{{2000, 1500, 0, 0}, {160, 120, 48, 0.25}, {1000, 37, 64, 0.5}, {517, 517, 100, 0.1}, {300, 200, 400, 0}}
	for range 20 {
		cases = append(cases, [4]float64{float64(50 + rng.IntN(900)), float64(50 + rng.IntN(900)), float64(20 + rng.IntN(300)), 0.05 + 0.45*rng.Float64()})
	}
	for _, c := range cases {
		w, h := int(c[0]), int(c[1])
		lay, err := tile.Plan(w, h, int(c[2]), c[3], fakeRes)
		require.NoError(t, err)
		sum := make([]float64, w*h)
		var edge float32
		for i, r := range lay.Tiles {
			require.True(t, r.In(image.Rect(0, 0, w, h)), "tile %v in %dx%d", r, w, h)
			wt := lay.Weights(i)
			require.Len(t, wt, r.Dx()*r.Dy())
			for y := range r.Dy() {
				for x := range r.Dx() {
					sum[(r.Min.Y+y)*w+r.Min.X+x] += float64(wt[y*r.Dx()+x])
				}
			}
			// A tile's edge inside the image has weight about 0.
			if r.Min.X > 0 {
				edge = max(edge, wt[r.Dy()/2*r.Dx()])
			}
			if r.Max.Y < h {
				edge = max(edge, wt[(r.Dy()-1)*r.Dx()+r.Dx()/2])
			}
		}
		var worst float64
		for _, v := range sum {
			worst = max(worst, math.Abs(v-1))
		}
		assert.Less(t, worst, 1e-6, "%dx%d, tiles %d, overlap %.2f: weights sum to 1", w, h, lay.Size, c[3])
		if float64(lay.Size)*c[3] < 16 {
			continue // too few pixels of overlap to fall near 0
		}
		assert.Less(t, edge, float32(0.01), "%dx%d, tiles %d, overlap %.2f: weight at inner edges", w, h, lay.Size, c[3])
	}
}

// TestPlan: tile sizes follow the image and the process resolution, and
// bad options are refused.
func TestPlan(t *testing.T) {
	assert.Equal(t, 1000, tile.AutoSize(4000, 3000, 504))
	assert.Equal(t, 2000, tile.AutoSize(8000, 6000, 504))
	assert.Equal(t, 2016, tile.AutoSize(12000, 9000, 504), "at most 4× the process resolution")
	assert.Equal(t, 518, tile.AutoSize(1200, 900, 518), "at least the process resolution")
	lay, err := tile.Plan(4000, 3000, 0, 0, 504)
	require.NoError(t, err)
	assert.Len(t, lay.Tiles, 20)
	for i := 1; i < 5; i++ {
		ov := lay.Tiles[i-1].Max.X - lay.Tiles[i].Min.X
		assert.GreaterOrEqual(t, ov, 250, "overlap at least a quarter of the tile")
	}
	lay, err = tile.Plan(300, 200, 400, 0, 504)
	require.NoError(t, err)
	assert.Equal(t, []image.Rectangle{image.Rect(0, 0, 300, 200)}, lay.Tiles, "an image within one tile")
	for _, o := range []float64{-0.1, 0.6, math.NaN()} {
		_, err := tile.Plan(300, 200, 100, o, 504)
		assert.Error(t, err, "overlap %g", o)
	}
	_, err = tile.Plan(300, 200, 4, 0, 504)
	assert.Error(t, err)
}

// TestDepthOneTile: an image within one tile is the global pass alone, at
// the image size.
func TestDepthOneTile(t *testing.T) {
	s := newScene(300, 200)
	net := newFakeNet(s, fakeRes, model.Disparity, true, 1)
	res, err := tile.Depth(context.Background(), net, s.img, tile.Options{Size: 400})
	require.NoError(t, err)
	assert.Equal(t, 1, net.calls)
	assert.Equal(t, [2]int{300, 200}, [2]int{res.Width, res.Height})
	assert.Len(t, res.Depth, 300*200)
}

// TestDepthProgress: every run is told as a part of the tiled run.
func TestDepthProgress(t *testing.T) {
	s := newScene(400, 300)
	var parts []int
	net := progressNet{newFakeNet(s, 64, model.Disparity, true, 1)}
	opt := tile.Options{Size: 160, Run: model.RunOptions{Progress: func(p model.Progress) {
		assert.Equal(t, tile.Stage, p.Stage)
		parts = append(parts, p.Part, p.Parts)
	}}}
	_, err := tile.Depth(context.Background(), net, s.img, opt)
	require.NoError(t, err)
	lay, _ := tile.Plan(400, 300, 160, 0, 64)
	n := len(lay.Tiles) + 1
	require.Len(t, parts, 2*n)
	for k := range n {
		assert.Equal(t, []int{k + 1, n}, parts[2*k:2*k+2])
	}
}

// progressNet reports one graph per run.
type progressNet struct{ *fakeNet }

func (p progressNet) Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error) {
	if opt.Progress != nil {
		opt.Progress(model.Progress{Stage: "network", Part: 1, Parts: 1, Done: 1, Total: 1})
	}
	return p.fakeNet.Depth(ctx, img, opt)
}

// TestDepthRefuses: options a tiled run cannot honour are input errors.
func TestDepthRefuses(t *testing.T) {
	s := newScene(400, 300)
	for name, o := range map[string]model.RunOptions{
		"crop":      {Method: model.UpperBoundCrop},
		"gaussians": {Gaussians: true},
		"taps":      {Taps: func(string) bool { return true }},
	} {
		_, err := tile.Depth(context.Background(), newFakeNet(s, 64, model.Relative, true, 1), s.img, tile.Options{Run: o})
		assert.True(t, errors.Is(err, model.ErrInvalidInput), "%s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tile.Depth(ctx, newFakeNet(s, 64, model.Relative, true, 1), s.img, tile.Options{Size: 100})
	assert.ErrorIs(t, err, context.Canceled)
}
