package stream

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/model"
)

func TestPlan(t *testing.T) {
	type span [4]int // start, end, own start, own end
	for _, tc := range []struct {
		frames, size, overlap int
		want                  []span
	}{
		{5, 8, 2, []span{{0, 5, 0, 5}}},
		{8, 8, 2, []span{{0, 8, 0, 8}}},
		{1, 1, 0, []span{{0, 1, 0, 1}}},
		{14, 8, 2, []span{{0, 8, 0, 7}, {6, 14, 7, 14}}},
		{10, 8, 2, []span{{0, 8, 0, 5}, {2, 10, 5, 10}}}, // last window moved back: 6 shared
		{20, 8, 3, []span{{0, 8, 0, 7}, {5, 13, 7, 12}, {10, 18, 12, 15}, {12, 20, 15, 20}}},
		{6, 4, 3, []span{{0, 4, 0, 3}, {1, 5, 3, 4}, {2, 6, 4, 6}}},
		{9, 2, 1, []span{{0, 2, 0, 2}, {1, 3, 2, 3}, {2, 4, 3, 4}, {3, 5, 4, 5}, {4, 6, 5, 6}, {5, 7, 6, 7}, {6, 8, 7, 8}, {7, 9, 8, 9}}},
	} {
		ws, err := Plan(tc.frames, tc.size, tc.overlap)
		require.NoError(t, err, "%+v", tc)
		var got []span
		for i, w := range ws {
			assert.Equal(t, i, w.Index)
			got = append(got, span{w.Start, w.End, w.OwnStart, w.OwnEnd})
			if tc.frames > tc.size {
				assert.Equal(t, tc.size, w.Len(), "every window runs the same number of frames")
			}
		}
		assert.Equal(t, tc.want, got, "%d frames, windows of %d, overlap %d", tc.frames, tc.size, tc.overlap)
	}
	for _, bad := range [][3]int{{0, 8, 2}, {10, 1, 0}, {10, 8, 0}, {10, 8, 8}, {10, 8, -1}} {
		_, err := Plan(bad[0], bad[1], bad[2])
		assert.Error(t, err, "%v", bad)
	}
}

// TestPlanOwnership: every frame is owned by exactly one window that runs it, for many shapes.
func TestPlanOwnership(t *testing.T) {
	for frames := 1; frames < 40; frames++ {
		for size := 2; size < 12; size++ {
			for overlap := 1; overlap < size; overlap++ {
				ws, err := Plan(frames, size, overlap)
				require.NoError(t, err)
				next := 0
				for i, w := range ws {
					require.Equal(t, next, w.OwnStart, "%d/%d/%d window %d", frames, size, overlap, i)
					require.Less(t, w.OwnStart, w.OwnEnd, "every window owns a frame")
					require.True(t, w.Start <= w.OwnStart && w.OwnEnd <= w.End)
					if i > 0 {
						require.GreaterOrEqual(t, ws[i-1].End-w.Start, overlap, "shares at least overlap frames")
					}
					next = w.OwnEnd
				}
				require.Equal(t, frames, next)
			}
		}
	}
}

func truthPoses(s *windowScene) [][3][4]float64 {
	out := make([][3][4]float64, s.n)
	for i := range out {
		out[i] = s.room.pose(i, s.n)
	}
	return out
}

func runSynth(t *testing.T, s *windowScene, dir string, window, overlap int, mod func(*Options)) (*Reconstruction, Stats, error) {
	t.Helper()
	opt := Options{Window: window, Overlap: overlap, Dir: dir, Fingerprint: "synthetic"}
	if mod != nil {
		mod(&opt)
	}
	return Run(context.Background(), s, synthFrames(s.n, s.room.w, s.room.h, nil, nil), opt)
}

func mergedPoses(t *testing.T, r *Reconstruction) [][3][4]float64 {
	t.Helper()
	out := make([][3][4]float64, r.Len())
	for i := range out {
		res, err := r.Result(i)
		require.NoError(t, err)
		out[i] = res.Camera.Extrinsics
	}
	return out
}

// TestRunRecoversExactTransforms: windows whose frames differ from the truth by an exact similarity each
// (no noise) merge into the true trajectory and depth, up to window 0's similarity, to rounding.
func TestRunRecoversExactTransforms(t *testing.T) {
	s := &windowScene{room: newRoom(32, 24), n: 60, failAt: -1}
	r, st, err := runSynth(t, s, t.TempDir(), 10, 3, nil)
	require.NoError(t, err)
	assert.Equal(t, Stats{Windows: 9, Ran: 9}, st)
	truth := truthPoses(s)
	ate, rot, err := trajectoryError(mergedPoses(t, r), truth)
	require.NoError(t, err)
	t.Logf("exact windows: ATE %.2g of the trajectory spread, rotation %.2g°", ate, rot)
	assert.Less(t, ate, 1e-6)
	assert.Less(t, rot, 1e-4)
	// Depth: the run's frame is window 0's, whose scale is 1/median depth of frame 0.
	scale := 1 / median32(s.depth(0))
	for _, i := range []int{0, 17, 33, 59} {
		res, err := r.Result(i)
		require.NoError(t, err)
		gt := s.depth(i)
		for p := range gt {
			require.InDelta(t, float64(gt[p])*scale, float64(res.Depth[p]), 2e-6*float64(gt[p])*scale, "frame %d pixel %d", i, p)
		}
	}
	// The windows' depth is float32 (relative rounding 6e-8), so the recovered scales are exact to ~1e-8.
	for w := range r.Windows() {
		assert.Less(t, math.Abs(r.ToWorld(w).S/(median32(s.depth(r.Windows()[w].Start))*scale)-1), 1e-7, "window %d scale", w)
	}
}

// TestRunNoisy: 1 % depth noise per pixel and 0.2° of camera noise per view, 300 frames in windows of 12
// with overlap 3 (33 windows chained): the merged trajectory stays within 2 % of its spread (camera
// centres, after one Sim(3)) and 3° (rotations) of the truth (measured 0.57 %, 1.65°).
func TestRunNoisy(t *testing.T) {
	s := &windowScene{room: newRoom(32, 24), n: 300, noise: 0.01, poseNoise: 0.2 * math.Pi / 180, failAt: -1}
	r, st, err := runSynth(t, s, t.TempDir(), 12, 3, nil)
	require.NoError(t, err)
	require.Equal(t, 33, st.Windows)
	ate, rot, err := trajectoryError(mergedPoses(t, r), truthPoses(s))
	require.NoError(t, err)
	t.Logf("noisy windows: ATE %.3g of the trajectory spread, worst rotation %.3g°", ate, rot)
	assert.Less(t, ate, 0.02)
	assert.Less(t, rot, 3.0)
	assert.Nil(t, r.man.Graph, "no loop on this trajectory (70 % of an ellipse): loop closure changes nothing")
}

// TestRunMetricRigid: windows in metres with Metric.Rigid are aligned rigidly: the scale stays 1.
func TestRunMetricRigid(t *testing.T) {
	s := &windowScene{room: newRoom(24, 18), n: 30, unit: model.Metres, rigid: true, failAt: -1}
	r, _, err := runSynth(t, s, t.TempDir(), 8, 2, func(o *Options) { o.Metric.Rigid = true })
	require.NoError(t, err)
	for w := range r.Windows() {
		assert.Equal(t, 1.0, r.ToWorld(w).S)
	}
	ate, rot, err := trajectoryError(mergedPoses(t, r), truthPoses(s))
	require.NoError(t, err)
	assert.Less(t, ate, 1e-6)
	assert.Less(t, rot, 1e-4)
}

// TestRunResumes: a run that fails in its fourth window keeps three windows on disk; running again
// runs only the rest, and the outcome is bit for bit that of an uninterrupted run.
func TestRunResumes(t *testing.T) {
	dir := t.TempDir()
	s := &windowScene{room: newRoom(24, 18), n: 40, noise: 0.01, failAt: 3, failErr: errBoom}
	_, st, err := runSynth(t, s, dir, 10, 3, nil)
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, 3, st.Ran)
	_, err = Open(dir)
	assert.ErrorContains(t, err, "run it again to resume")
	var seen []int
	s2 := &windowScene{room: s.room, n: s.n, noise: 0.01, failAt: -1}
	r, st, err := runSynth(t, s2, dir, 10, 3, func(o *Options) {
		o.OnWindow = func(w Window, views []model.Result) error {
			seen = append(seen, w.Index)
			assert.Len(t, views, w.Len())
			return nil
		}
	})
	require.NoError(t, err)
	assert.Equal(t, Stats{Windows: 6, Ran: 3, Resumed: 3}, st)
	assert.Equal(t, [][2]int{{21, 31}, {28, 38}, {30, 40}}, s2.calls, "only the missing windows ran")
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, seen, "OnWindow sees resumed windows too, in order")

	s3 := &windowScene{room: s.room, n: s.n, noise: 0.01, failAt: -1}
	whole, _, err := runSynth(t, s3, t.TempDir(), 10, 3, nil)
	require.NoError(t, err)
	for i := range r.Len() {
		a, err := r.Result(i)
		require.NoError(t, err)
		b, err := whole.Result(i)
		require.NoError(t, err)
		require.Equal(t, b.Depth, a.Depth, "frame %d", i)
		require.Equal(t, b.Camera.Extrinsics, a.Camera.Extrinsics, "frame %d", i)
	}

	// A third run finds everything done.
	s4 := &windowScene{room: s.room, n: s.n, failAt: -1}
	_, st, err = runSynth(t, s4, dir, 10, 3, nil)
	require.NoError(t, err)
	assert.Equal(t, 6, st.Resumed)
	assert.Empty(t, s4.calls)

	// A corrupt window file is run again.
	require.NoError(t, os.Truncate(windowPath(dir, 4), 100))
	_, st, err = runSynth(t, s4, dir, 10, 3, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Ran)
	assert.Equal(t, [][2]int{{28, 38}}, s4.calls)
}

func TestRunRefusesAnotherRun(t *testing.T) {
	dir := t.TempDir()
	s := &windowScene{room: newRoom(16, 12), n: 12, failAt: -1}
	_, _, err := runSynth(t, s, dir, 6, 2, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		n    int
		want string
	}{
		{"fingerprint", func(o *Options) { o.Fingerprint = "other model" }, 12, "model or settings"},
		{"seam ICP", func(o *Options) { o.ICP.Seams = true }, 12, "model or settings"},
		{"window", func(o *Options) { o.Window = 5 }, 12, "windows of"},
		{"frames", nil, 13, "not 13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &windowScene{room: newRoom(16, 12), n: tc.n, failAt: -1}
			_, _, err := runSynth(t, s, dir, 6, 2, tc.mod)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "restart")
		})
	}
	s = &windowScene{room: newRoom(16, 12), n: 12, failAt: -1}
	_, st, err := runSynth(t, s, dir, 6, 2, func(o *Options) { o.Fingerprint, o.Restart = "other model", true })
	require.NoError(t, err)
	assert.Equal(t, st.Windows, st.Ran, "restart runs every window")
}

// TestRunOpensFramesLazily: each window decodes its own frames when it runs, nothing ahead.
func TestRunOpensFramesLazily(t *testing.T) {
	s := &windowScene{room: newRoom(16, 12), n: 25, failAt: -1}
	var opens []int
	var mu sync.Mutex
	var atCall [][]int
	scene := sceneFunc(func(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
		mu.Lock()
		atCall = append(atCall, append([]int(nil), opens...))
		opens = opens[:0]
		mu.Unlock()
		assert.True(t, opt.ProcessedSize, "maps at the processed size")
		return s.MultiView(ctx, imgs, opt)
	})
	_, _, err := Run(context.Background(), scene, synthFrames(s.n, 16, 12, &opens, &mu), Options{Window: 8, Overlap: 2, Dir: t.TempDir()})
	require.NoError(t, err)
	for k, c := range s.calls {
		var want []int
		for i := c[0]; i < c[1]; i++ {
			want = append(want, i)
		}
		assert.Equal(t, want, atCall[k], "call %d", k)
	}
}

type sceneFunc func(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error)

func (f sceneFunc) MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
	return f(ctx, imgs, opt)
}

func TestRunErrors(t *testing.T) {
	s := &windowScene{room: newRoom(16, 12), n: 12, failAt: -1}
	frames := synthFrames(12, 16, 12, nil, nil)
	_, _, err := Run(context.Background(), s, frames, Options{Window: 6, Overlap: 2})
	assert.ErrorContains(t, err, "no directory")
	frames[3].Name = frames[2].Name
	_, _, err = Run(context.Background(), s, frames, Options{Window: 6, Overlap: 2, Dir: t.TempDir()})
	assert.ErrorContains(t, err, "same name")
	_, _, err = Run(context.Background(), s, synthFrames(12, 16, 12, nil, nil), Options{Window: 6, Overlap: 0, Dir: t.TempDir()})
	assert.ErrorContains(t, err, "overlap")
	// A scene whose windows disagree in size.
	odd := sceneFunc(func(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
		res, err := s.MultiView(ctx, imgs, opt)
		if imgs[0].(frameImage).i > 0 {
			for i := range res {
				res[i].Width, res[i].Height = 12, 16
			}
		}
		return res, err
	})
	_, _, err = Run(context.Background(), odd, synthFrames(12, 16, 12, nil, nil), Options{Window: 6, Overlap: 2, Dir: t.TempDir()})
	assert.ErrorContains(t, err, "one size")
	// Cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = Run(ctx, s, synthFrames(12, 16, 12, nil, nil), Options{Window: 6, Overlap: 2, Dir: t.TempDir()})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestReconstructionExports: the merged run is a ViewSource for the export writers; the cameras-only
// views place the same cameras.
func TestReconstructionExports(t *testing.T) {
	dir := t.TempDir()
	s := &windowScene{room: newRoom(24, 18), n: 20, noise: 0.01, failAt: -1}
	r, _, err := runSynth(t, s, filepath.Join(dir, "run"), 8, 2, nil)
	require.NoError(t, err)
	pc, err := export.NewPointCloudFrom(r, export.DefaultOptions(), 1000, 1)
	require.NoError(t, err)
	assert.Equal(t, 1000, pc.Len())
	cams, err := r.Cameras()
	require.NoError(t, err)
	require.Len(t, cams, 20)
	for i, c := range cams {
		v, err := r.View(i)
		require.NoError(t, err)
		assert.Equal(t, v.Camera, c.Camera)
		assert.Nil(t, c.Depth)
		assert.Equal(t, r.Names()[i], c.Name)
	}
	require.NoError(t, export.WriteGLB(filepath.Join(dir, "scene.glb"), pc, cams, export.DefaultGLBOptions()))
	require.NoError(t, export.WriteCOLMAP(dir, pc, cams, false))
	require.NoError(t, export.WriteNPZFrom(filepath.Join(dir, "results.npz"), r, false))
	sparse, err := export.ReadCOLMAP(dir)
	require.NoError(t, err)
	assert.Len(t, sparse.Images, 20)
	assert.Len(t, sparse.Points, 1000)
	require.NoError(t, r.Remove())
	assert.NoDirExists(t, filepath.Join(dir, "run"))
}
