package stream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFigureData writes the numbers behind docs/streaming.md's loop-closure and ICP figures as CSV
// files into $DA3_STREAM_FIGURES (skipped without it); benchmarks/stream_loop_figure.py draws them.
func TestWriteFigureData(t *testing.T) {
	out := os.Getenv("DA3_STREAM_FIGURES")
	if out == "" {
		t.Skip("DA3_STREAM_FIGURES not set")
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	writeTrajectories(t, out)
	writeSeamErrors(t, out)
	writeICPPipeline(t, out)
}

// writeTrajectories: the drifting loop's camera centres (x, z), truth and estimates aligned to it by one
// Sim(3), without and with loop closure.
func writeTrajectories(t *testing.T, out string) {
	var b strings.Builder
	b.WriteString("frame,truth_x,truth_z,chained_x,chained_z,closed_x,closed_z\n")
	s := loopScene()
	truth := truthPoses(s)
	var est [2][][3][4]float64
	for k, off := range []bool{true, false} {
		r, _, err := runSynth(t, loopScene(), t.TempDir(), 16, 4, func(o *Options) { o.Loop.Off = off })
		require.NoError(t, err)
		est[k] = mergedPoses(t, r)
		ate, rot, err := trajectoryError(est[k], truth)
		require.NoError(t, err)
		t.Logf("loop closure %v: ATE %.4f, worst rotation %.2f°", !off, ate, rot)
	}
	al := [2]Sim3{alignCentres(t, est[0], truth), alignCentres(t, est[1], truth)}
	for i := range truth {
		ct := cameraCentre(truth[i])
		a, c := al[0].Apply(cameraCentre(est[0][i])), al[1].Apply(cameraCentre(est[1][i]))
		fmt.Fprintf(&b, "%d,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f\n", i, ct[0], ct[2], a[0], a[2], c[0], c[2])
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "loop_trajectories.csv"), []byte(b.String()), 0o644))
}

func alignCentres(t *testing.T, est, truth [][3][4]float64) Sim3 {
	var a, b []float64
	for i := range est {
		ca, cb := cameraCentre(est[i]), cameraCentre(truth[i])
		a, b = append(a, ca[:]...), append(b, cb[:]...)
	}
	g, err := Umeyama(a, b, nil, ScaleLeastSquares)
	require.NoError(t, err)
	return g
}

// writeSeamErrors: the seam error (see seamTruthError) of 20 poor seeds and of the Umeyama fit, before
// and after ICP, at three depth noise levels.
func writeSeamErrors(t *testing.T, out string) {
	var b strings.Builder
	b.WriteString("noise,seed,before,after\n")
	for _, noise := range []float64{0.005, 0.01, 0.02} {
		s := &windowScene{room: newRoom(64, 48), n: 120, noise: noise, failAt: -1}
		s.room.closed, s.room.boxes = true, furnished
		prev, next, truth := seamPair(t, s, 12, 16)
		um, _, err := Align(prev, next, AlignOptions{})
		require.NoError(t, err)
		got, _, err := RefineSeam(prev, next, um, false, ICPOptions{})
		require.NoError(t, err)
		fmt.Fprintf(&b, "%g,umeyama,%.6f,%.6f\n", noise, seamTruthError(next, um, truth), seamTruthError(next, got, truth))
		r := rand.New(rand.NewPCG(31, 32))
		for range 20 {
			dir := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			n := math.Sqrt(dot3(dir, dir))
			ang := 3 * math.Pi / 180
			seed := truth.Compose(Exp(Vec7{ang * dir[0] / n, ang * dir[1] / n, ang * dir[2] / n, 0.05 * r.NormFloat64(), 0.05 * r.NormFloat64(), 0.05 * r.NormFloat64(), 0.05 * r.NormFloat64()}))
			got, st, err := RefineSeam(prev, next, seed, false, ICPOptions{})
			require.NoError(t, err)
			if !st.Kept {
				t.Logf("noise %g: seed kept: %s", noise, st.Reason)
			}
			fmt.Fprintf(&b, "%g,poor,%.6f,%.6f\n", noise, seamTruthError(next, seed, truth), seamTruthError(next, got, truth))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "seam_errors.csv"), []byte(b.String()), 0o644))
}

// writeICPPipeline: whole runs with the seams refined by ICP or not (loop closure off): ATE and worst
// rotation on five synthetic conditions.
func writeICPPipeline(t *testing.T, out string) {
	var b strings.Builder
	b.WriteString("scene,icp,ate,rot_deg\n")
	for _, c := range []struct {
		name                 string
		noise, pose, outlier float64
		furnished            bool
		w, h, n, win, o      int
	}{
		{"bare room, 300 frames, windows of 12", 0.01, 0.2, 0, false, 32, 24, 300, 12, 3},
		{"furnished loop, 120 frames, windows of 16", 0.01, 0.2, 0, true, 64, 48, 120, 16, 4},
		{"… camera noise 1°", 0.01, 1, 0, true, 64, 48, 120, 16, 4},
		{"… depth noise 3 %", 0.03, 0.2, 0, true, 64, 48, 120, 16, 4},
		{"… 20 % outlier pixels", 0.01, 0.2, 0.2, true, 64, 48, 120, 16, 4},
	} {
		for _, icp := range []bool{false, true} {
			s := &windowScene{room: newRoom(c.w, c.h), n: c.n, noise: c.noise, poseNoise: c.pose * math.Pi / 180, outliers: c.outlier, failAt: -1}
			if c.furnished {
				s.room.closed, s.room.boxes = true, furnished
			}
			r, _, err := runSynth(t, s, t.TempDir(), c.win, c.o, func(o *Options) { o.ICP.Seams, o.Loop.Off = icp, true })
			require.NoError(t, err)
			ate, rot, err := trajectoryError(mergedPoses(t, r), truthPoses(s))
			require.NoError(t, err)
			fmt.Fprintf(&b, "%q,%v,%.5f,%.3f\n", c.name, icp, ate, rot)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "icp_pipeline.csv"), []byte(b.String()), 0o644))
}
