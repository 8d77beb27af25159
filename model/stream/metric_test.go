package stream

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

var _ MetricScene = nested.Scene{}

// metricScene is a nested model over a windowScene: each window's any-view output is the windowScene's
// (true depth and cameras in a frame of the window's own: its first camera, scaled to a median depth of
// 1, so an arbitrary scale per window), and its metric branch measures the scale that brings it to metres
// with a relative error drawn per window (sd noise), or off by the factor outliers gives for the windows
// starting at that frame.
type metricScene struct {
	*windowScene
	noise    float64
	outliers map[int]float64
	scales   map[int]float64 // the metric scale given to the window starting at each frame
}

func (m *metricScene) MetricMultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, float64, error) {
	res, err := m.windowScene.MultiView(ctx, imgs, opt)
	if err != nil {
		return nil, 0, err
	}
	first := imgs[0].(frameImage).i
	r := rand.New(rand.NewPCG(uint64(first), 7))
	scale := (1 + m.noise*r.NormFloat64()) / m.windowFrame(first).S
	if f, ok := m.outliers[first]; ok {
		scale *= f
	}
	if m.scales == nil {
		m.scales = map[int]float64{}
	}
	m.scales[first] = scale
	for k := range res {
		for p := range res[k].Depth {
			res[k].Depth[p] *= float32(scale)
		}
		for row := range 3 {
			res[k].Camera.Extrinsics[row][3] *= scale
		}
		res[k].Unit = model.Metres
	}
	return res, scale, nil
}

func (m *metricScene) MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
	res, _, err := m.MetricMultiView(ctx, imgs, opt)
	return res, err
}

// newMetricScene is 100 frames along 70 % of an ellipse in a furnished room (32×24 maps, 1 % depth noise,
// 0.2° camera noise), whose windows' metric scales are off by 3 % (sd) each, with seamDrift of log scale
// injected at every seam of windows sharing 3 frames (the chain's scale drifts by it at every seam).
func newMetricScene(seamDrift float64) *metricScene {
	s := &windowScene{room: newRoom(32, 24), n: 100, noise: 0.01, poseNoise: 0.2 * math.Pi / 180, failAt: -1,
		drift: Vec7{6: seamDrift}, driftJitter: 0.002, driftFrames: 3}
	s.room.boxes = furnished
	return &metricScene{windowScene: s, noise: 0.03}
}

// scaleErrors are the merged run's scale errors against the truth (metres): each frame's median ratio of
// merged to true depth, their median − 1 (the run's scale error) and the largest |ratio − 1| (the worst
// frame's); and the scale of the Sim(3) that best fits the merged camera centres onto the true ones − 1.
func scaleErrors(t *testing.T, s *metricScene, r *Reconstruction) (global, worst, centres float64) {
	t.Helper()
	ratios := make([]float64, r.Len())
	for i := range ratios {
		res, err := r.Result(i)
		require.NoError(t, err)
		assert.Equal(t, model.Metres, res.Unit)
		truth := s.depth(i)
		v := make([]float64, 0, len(truth))
		for p, d := range res.Depth {
			v = append(v, float64(d)/float64(truth[p]))
		}
		ratios[i] = median(v)
		worst = max(worst, math.Abs(ratios[i]-1))
	}
	global = median(append([]float64(nil), ratios...)) - 1
	var a, b []float64
	truth := truthPoses(s.windowScene)
	for i, e := range mergedPoses(t, r) {
		ca, cb := cameraCentre(e), cameraCentre(truth[i])
		a, b = append(a, ca[:]...), append(b, cb[:]...)
	}
	g, err := Umeyama(a, b, nil, ScaleLeastSquares)
	require.NoError(t, err)
	return global, worst, 1/g.S - 1
}

// TestMetricStream: windows whose any-view depth has an arbitrary scale each and whose metric branch gives
// metres within 3 % (sd) come out of a run in metres: the run's scale (the median over frames of the merged
// depth's ratio to the true depth) within 1.5 %, every frame's within 3 %, the camera trajectory's within
// 2 %, with an exact chain and with one whose scale drifts by 1 % at every seam (10 % over the run, which
// the windows' metric scales pull back); every window's metric, chained and final scale is reported.
func TestMetricStream(t *testing.T) {
	for _, drift := range []float64{0, 0.01} {
		s := newMetricScene(drift)
		r, st, err := runMetric(t, s, nil)
		require.NoError(t, err)
		global, worst, centres := scaleErrors(t, s, r)
		rep := r.Metric()
		require.NotNil(t, rep)
		t.Logf("seam drift %g: scale error %.4f (worst frame %.4f), trajectory scale error %.4f; windows' chained spread %.4f, final %.4f",
			drift, global, worst, centres, rep.ChainedSpread, rep.Spread)
		assert.Less(t, math.Abs(global), 0.015)
		assert.Less(t, worst, 0.03)
		assert.Less(t, math.Abs(centres), 0.02)
		require.Len(t, rep.Windows, st.Windows)
		for k, w := range rep.Windows {
			assert.InDelta(t, s.scales[r.Windows()[k].Start], w.MetricScale, 1e-12, "window %d's metric scale is the scene's", k)
			assert.InDelta(t, r.ToWorld(k).S, w.Final, 1e-12, "window %d's final scale is its transform's", k)
			assert.Positive(t, w.Weight)
		}
		if drift > 0 {
			assert.Greater(t, rep.ChainedSpread, 0.03, "the chain drifts")
			assert.Less(t, rep.Spread, rep.ChainedSpread, "the metric scales pull the drift back")
		}
	}
}

func runMetric(t *testing.T, s *metricScene, mod func(*Options)) (*Reconstruction, Stats, error) {
	t.Helper()
	opt := Options{Window: 12, Overlap: 3, Dir: t.TempDir(), Fingerprint: "metric"}
	if mod != nil {
		mod(&opt)
	}
	return Run(context.Background(), s, synthFrames(s.n, s.room.w, s.room.h, nil, nil), opt)
}

// TestMetricStreamAgainstOthers compares, on the drifting chain, the run's scale with the windows' metric
// scales in the pose graph (the default), with the chain alone scaled by the windows' median (weight near
// 0) and with rigid windows (each keeping its own metric scale): the default's worst frame is the best.
func TestMetricStreamAgainstOthers(t *testing.T) {
	worsts := map[string]float64{}
	for _, c := range []struct {
		name string
		mod  func(*Options)
	}{
		{"metric scales in the graph", nil},
		{"chain, median scale", func(o *Options) { o.Metric.Weight = 1e-9 }},
		{"rigid windows", func(o *Options) { o.Metric.Rigid = true }},
	} {
		s := newMetricScene(0.01)
		r, _, err := runMetric(t, s, c.mod)
		require.NoError(t, err)
		global, worst, centres := scaleErrors(t, s, r)
		ate, rot, err := trajectoryError(mergedPoses(t, r), truthPoses(s.windowScene))
		require.NoError(t, err)
		t.Logf("%s: scale error %.4f (worst frame %.4f), trajectory scale error %.4f, ATE %.4f, rotation %.2f°", c.name, global, worst, centres, ate, rot)
		worsts[c.name] = worst
		if c.name == "rigid windows" {
			assert.Nil(t, r.Metric(), "rigid windows keep their own scales: no report")
			for w := range r.Windows() {
				assert.Equal(t, 1.0, r.ToWorld(w).S)
			}
		}
	}
	assert.Less(t, worsts["metric scales in the graph"], worsts["chain, median scale"])
	assert.Less(t, worsts["metric scales in the graph"], worsts["rigid windows"])
}

// TestMetricStreamOutlier: a window whose metric branch is off by 40 % (a view of mostly sky) barely
// counts: the run stays within 1.5 % of metres, that window's weight falls below 0.2, and the chain keeps
// its geometry (its final scale undoes its metric error).
func TestMetricStreamOutlier(t *testing.T) {
	s := newMetricScene(0)
	s.outliers = map[int]float64{45: 1.4}
	r, _, err := runMetric(t, s, nil)
	require.NoError(t, err)
	global, worst, _ := scaleErrors(t, s, r)
	rep := r.Metric()
	require.NotNil(t, rep)
	k := 5 // the window starting at frame 45 (windows of 12 sharing 3)
	require.Equal(t, 45, r.Windows()[k].Start)
	t.Logf("outlier: scale error %.4f (worst frame %.4f), its weight %.3f, final scale %.4f (neighbours %.4f, %.4f)",
		global, worst, rep.Windows[k].Weight, rep.Windows[k].Final, rep.Windows[k-1].Final, rep.Windows[k+1].Final)
	assert.Less(t, math.Abs(global), 0.015)
	assert.Less(t, worst, 0.04)
	assert.Less(t, rep.Windows[k].Weight, 0.2)
	// The window's metres are (its metric error) × 1.4 true metres; the run undoes that.
	off := s.scales[45] * s.windowFrame(45).S
	assert.InDelta(t, 1, rep.Windows[k].Final*off, 0.03, "the outlier window's metres, off by %.3f, are brought back", off)
}

// TestMetricStreamResumes: the windows' metric scales are kept in their files: a resumed run reports the
// same scales and transforms as the run that computed them.
func TestMetricStreamResumes(t *testing.T) {
	s := newMetricScene(0.01)
	dir := t.TempDir()
	run := func() (*Reconstruction, Stats) {
		r, st, err := runMetric(t, s, func(o *Options) { o.Dir = dir })
		require.NoError(t, err)
		return r, st
	}
	r1, _ := run()
	r2, st := run()
	assert.Equal(t, st.Windows, st.Resumed)
	assert.Equal(t, r1.Metric(), r2.Metric())
	for w := range r1.Windows() {
		assert.Equal(t, r1.ToWorld(w), r2.ToWorld(w))
	}
}
