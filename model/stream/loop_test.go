package stream

import (
	"bytes"
	"log/slog"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopScene is 120 frames once around a furnished room, with drift injected at every seam (1.5° of yaw,
// 0.3° of pitch, 2 % of scale and 2 % of the depth forward, with jitter 0.003: see windowScene.drift) for
// windows sharing 4 frames, 1 % depth noise and 0.2° of camera noise.
func loopScene() *windowScene {
	s := &windowScene{room: newRoom(64, 48), n: 120, noise: 0.01, poseNoise: 0.2 * math.Pi / 180, failAt: -1,
		drift: Vec7{0.3 * math.Pi / 180, 1.5 * math.Pi / 180, 0, 0, 0, 0.02, 0.02}, driftJitter: 0.003, driftFrames: 4}
	s.room.closed, s.room.boxes = true, furnished
	return s
}

// TestLoopClosureRemovesDrift: windows of 16 (overlap 4) around a closed loop, with drift injected at
// every seam: loop closure finds the loop where the last windows come back to the first, and the merged
// trajectory's error (ATE after one Sim(3), as a fraction of the trajectory's spread) falls by 3× or more.
func TestLoopClosureRemovesDrift(t *testing.T) {
	run := func(off bool) (float64, float64, string, *Reconstruction) {
		s := loopScene()
		var log bytes.Buffer
		r, _, err := runSynth(t, s, t.TempDir(), 16, 4, func(o *Options) {
			o.Loop.Off = off
			o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		})
		require.NoError(t, err)
		ate, rot, err := trajectoryError(mergedPoses(t, r), truthPoses(s))
		require.NoError(t, err)
		return ate, rot, log.String(), r
	}
	ateOff, rotOff, _, _ := run(true)
	ateOn, rotOn, log, r := run(false)
	t.Logf("drifting loop: ATE %.4f → %.4f of the trajectory's spread, worst rotation %.2f° → %.2f°", ateOff, ateOn, rotOff, rotOn)
	assert.Less(t, ateOn, ateOff/3)
	assert.Less(t, rotOn, rotOff)
	assert.Contains(t, log, "loops closed")
	require.NotNil(t, r.man.Graph)
	accepted := 0
	for _, l := range r.man.Graph.Loops {
		if l.Accepted {
			accepted++
			assert.GreaterOrEqual(t, l.Windows[1]-l.Windows[0], 3)
		}
	}
	assert.Positive(t, accepted)
}

// TestLoopClosureRecorded: the optimised transforms live in the manifest; Open applies them while the
// windows' chained transforms are those they came from, a resumed run finds the same loops, and a run
// without loop closure goes back to the chain.
func TestLoopClosureRecorded(t *testing.T) {
	dir := t.TempDir()
	s := loopScene()
	r, _, err := runSynth(t, s, dir, 16, 4, nil)
	require.NoError(t, err)
	require.NotNil(t, r.man.Graph)
	opened, err := Open(dir)
	require.NoError(t, err)
	chained := make([]Sim3, len(r.Windows()))
	for w := range chained {
		assert.Equal(t, r.ToWorld(w), opened.ToWorld(w), "window %d", w)
		c := r.man.Graph.Chained[w]
		chained[w] = Sim3{S: c.Scale, R: c.Rotation, T: c.Translation}
	}
	assert.NotEqual(t, chained[len(chained)-1], opened.ToWorld(len(chained)-1), "the last window moved")

	// Resumed: nothing runs again, the same transforms.
	s2 := loopScene()
	r2, st, err := runSynth(t, s2, dir, 16, 4, nil)
	require.NoError(t, err)
	assert.Equal(t, st.Windows, st.Resumed)
	for w := range chained {
		assert.Equal(t, r.ToWorld(w), r2.ToWorld(w), "window %d", w)
	}
	// Two workers (each candidate's seeds at once) and six (each seed's point loops in runs too): the
	// same loops and transforms.
	defer func(m int) { minRun = m }(minRun)
	minRun = 256 // the scene's few thousand points in runs
	for _, workers := range []int{2, 6} {
		r4, _, err := runSynth(t, loopScene(), t.TempDir(), 16, 4, func(o *Options) { o.Loop.Workers = workers })
		require.NoError(t, err)
		require.NotNil(t, r4.man.Graph)
		assert.Equal(t, r.man.Graph.Loops, r4.man.Graph.Loops, "%d workers", workers)
		for w := range chained {
			assert.Equal(t, r.ToWorld(w), r4.ToWorld(w), "%d workers, window %d", workers, w)
		}
	}
	// Without loop closure: the chain.
	r3, _, err := runSynth(t, loopScene(), dir, 16, 4, func(o *Options) { o.Loop.Off = true })
	require.NoError(t, err)
	assert.Nil(t, r3.man.Graph)
	for w := range chained {
		assert.Equal(t, chained[w], r3.ToWorld(w), "window %d", w)
	}
	// A graph whose chained transforms are not the windows' any more is ignored.
	g := *r.man.Graph
	g.Chained = append([]sim3JSON(nil), g.Chained...)
	g.Chained[2].Scale *= 1.01
	_, ok := g.optimised(chained)
	assert.False(t, ok)
}
