package stream

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/da3-go/da3-go/internal/par"
	"github.com/da3-go/da3-go/model"
)

// LoopOptions tune loop closure: after the last window, windows far apart in the sequence whose cameras
// are close (a place seen again) are aligned directly, and the windows' transforms are re-estimated by a
// Sim(3) pose-graph optimisation over the seams and these loops. The zero value uses the defaults.
type LoopOptions struct {
	// Off skips loop closure: the windows keep their chained transforms.
	Off bool
	// MinGap: only windows at least MinGap apart in the sequence are candidates (default 3).
	MinGap int
	// MaxDistance: a candidate has a frame whose camera centre is within MaxDistance × the scene's median
	// depth of one of the other window's, after the chaining (default 0.5).
	MaxDistance float64
	// MaxAngle: … and whose viewing directions differ by at most MaxAngle degrees (default 30).
	MaxAngle float64
	// MinTravel: … and the camera went away in between: it travelled at least MinTravel × the scene's
	// median depth along the chained trajectory, or turned by 180° or more (default 2). Windows a few
	// apart along a path see the same places without the trajectory having closed a loop.
	MinTravel float64
	// Pairs is the number of frame pairs (the closest) a candidate is verified and aligned on (default 2).
	Pairs int
	// PerWindow caps the candidates of each window with the windows before it, the closest first (default 2).
	PerWindow int
	// DepthTolerance: a point verifies a loop when, moved into the other window and projected into its
	// frame, its depth is within DepthTolerance × that frame's depth there (default 0.05).
	DepthTolerance float64
	// MinInliers: a loop is accepted when at least this fraction of the points that project into the
	// other frame verify it (default 0.6), and at least MinPoints do.
	MinInliers float64
	MinPoints  int // default 500
	// Weight is a loop edge's weight relative to a seam's (default 10). Equal weights would spread the
	// inconsistency of a cycle of n seams and one loop evenly over its n + 1 edges, leaving the window
	// that closes it off by n/(n + 1) of one seam's drift; but the drift is in the seams (the frames two
	// windows share are at the edge of both their contexts) while a verified loop is one direct
	// measurement, so a loop counts as several seams.
	Weight float64
	// Workers: with 2 or more, a candidate's two alignments (from its two seeds) run at once, and with
	// 4 or more each splits its loops over the points among Workers/2 goroutines (default 1). The results
	// are the same.
	Workers int
	// Graph tunes the pose-graph optimisation (its Length is the scene's median depth unless set).
	Graph GraphOptions
}

func (o LoopOptions) withDefaults() LoopOptions {
	if o.MinGap <= 0 {
		o.MinGap = 3
	}
	if !(o.MaxDistance > 0) {
		o.MaxDistance = 0.5
	}
	if !(o.MaxAngle > 0) {
		o.MaxAngle = 30
	}
	if !(o.MinTravel > 0) {
		o.MinTravel = 2
	}
	if o.Pairs <= 0 {
		o.Pairs = 2
	}
	if o.PerWindow <= 0 {
		o.PerWindow = 2
	}
	if !(o.DepthTolerance > 0) {
		o.DepthTolerance = 0.05
	}
	if !(o.MinInliers > 0) {
		o.MinInliers = 0.6
	}
	if o.MinPoints <= 0 {
		o.MinPoints = 500
	}
	if !(o.Weight > 0) {
		o.Weight = 10
	}
	return o
}

// frameCam is a frame's camera as one window placed it in the run's frame (chained).
type frameCam struct {
	window, frame int
	centre, dir   [3]float64
	depth         float64 // median depth in the run's frame
}

// camerasOf summarises window w's views placed by g.
func camerasOf(w Window, raw []model.Result, g Sim3) []frameCam {
	out := make([]frameCam, 0, len(raw))
	for k := range raw {
		e := g.Camera(raw[k].Camera.Extrinsics)
		out = append(out, frameCam{window: w.Index, frame: w.Start + k, centre: cameraCentre(e),
			dir: [3]float64{e[2][0], e[2][1], e[2][2]}, depth: g.S * sampledMedian(raw[k].Depth)})
	}
	return out
}

// cameraCentre returns the centre −Rᵀ·t of world-to-camera extrinsics.
func cameraCentre(e [3][4]float64) [3]float64 { return extrinsicsToSim3(e).Inverse().T }

// sampledMedian is the median of the positive finite values of every 7th pixel.
func sampledMedian(d []float32) float64 {
	var v []float64
	for i := 0; i < len(d); i += 7 {
		if x := float64(d[i]); x > 0 && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// loopCandidate is a pair of windows whose cameras came close, and their closest frame pairs.
type loopCandidate struct {
	i, j   int      // windows, i < j
	frames [][2]int // frame pairs (frame of i, frame of j), closest first
	score  float64
}

// travel is the path length and the turning (radians) of the chained trajectory up to each frame, each
// frame placed by the first window that holds it.
func travel(cams []frameCam) (path, turn []float64) {
	var frames []*frameCam
	for i := range cams {
		if f := cams[i].frame; f >= len(frames) {
			frames = append(frames, make([]*frameCam, f+1-len(frames))...)
		}
		if frames[cams[i].frame] == nil {
			frames[cams[i].frame] = &cams[i]
		}
	}
	path, turn = make([]float64, len(frames)), make([]float64, len(frames))
	for f := 1; f < len(frames); f++ {
		path[f], turn[f] = path[f-1], turn[f-1]
		if a, b := frames[f-1], frames[f]; a != nil && b != nil {
			path[f] += math.Sqrt(dist2(a.centre, b.centre))
			turn[f] += math.Acos(max(-1, min(1, dot3(a.dir, b.dir))))
		}
	}
	return path, turn
}

// findCandidates lists the window pairs at least MinGap apart with frames within MaxDistance·scale and
// MaxAngle of each other between which the camera went away (MinTravel); for each window, the PerWindow
// closest earlier windows.
func findCandidates(cams []frameCam, scale float64, opt LoopOptions) []loopCandidate {
	type fp struct {
		a, b  int
		score float64
	}
	cosMax := math.Cos(opt.MaxAngle * math.Pi / 180)
	path, turn := travel(cams)
	byPair := map[[2]int][]fp{}
	for x := range cams {
		for y := x + 1; y < len(cams); y++ {
			a, b := &cams[x], &cams[y]
			if b.window-a.window < opt.MinGap {
				continue
			}
			d := math.Sqrt(dist2(a.centre, b.centre)) / scale
			c := dot3(a.dir, b.dir)
			if d > opt.MaxDistance || c < cosMax {
				continue
			}
			lo, hi := min(a.frame, b.frame), max(a.frame, b.frame)
			if path[hi]-path[lo] < opt.MinTravel*scale && turn[hi]-turn[lo] < math.Pi {
				continue
			}
			ang := math.Acos(max(-1, min(1, c))) * 180 / math.Pi
			key := [2]int{a.window, b.window}
			byPair[key] = append(byPair[key], fp{a.frame, b.frame, d/opt.MaxDistance + ang/opt.MaxAngle})
		}
	}
	perJ := map[int][]loopCandidate{}
	for key, list := range byPair {
		slices.SortFunc(list, func(p, q fp) int { return cmp.Compare(p.score, q.score) })
		c := loopCandidate{i: key[0], j: key[1], score: list[0].score}
		usedA, usedB := map[int]bool{}, map[int]bool{}
		for _, p := range list {
			if len(c.frames) == opt.Pairs {
				break
			}
			if usedA[p.a] || usedB[p.b] {
				continue
			}
			usedA[p.a], usedB[p.b] = true, true
			c.frames = append(c.frames, [2]int{p.a, p.b})
		}
		perJ[key[1]] = append(perJ[key[1]], c)
	}
	var out []loopCandidate
	for _, list := range perJ {
		slices.SortFunc(list, func(p, q loopCandidate) int { return cmp.Compare(p.score, q.score) })
		out = append(out, list[:min(len(list), opt.PerWindow)]...)
	}
	slices.SortFunc(out, func(p, q loopCandidate) int { return cmp.Or(cmp.Compare(p.j, q.j), cmp.Compare(p.i, q.i)) })
	return out
}

// loopStats describe one verified loop.
type loopStats struct {
	// I, J are the windows (I < J), Frames the frame pairs it was aligned on.
	I, J   int
	Frames [][2]int
	// Inliers is the fraction of the points projecting into the other frame whose depth agrees, Points
	// their number.
	Inliers float64
	Points  int
	// Accepted: the loop entered the pose graph; Weight is its final robust weight there.
	Accepted bool
	Weight   float64
	// Z is the transform from window J's frame to window I's.
	Z Sim3
}

// loopCloser verifies loop candidates on the windows' stored results.
type loopCloser struct {
	dir     string
	opt     LoopOptions
	icp     ICPOptions
	fixed   bool // rigid (windows in metres)
	toWorld []Sim3
	cache   map[int]*storedWindow
}

// window returns window w's stored results (raw, in its frame), keeping the last few read.
func (lc *loopCloser) window(w int) (*storedWindow, error) {
	if sw, ok := lc.cache[w]; ok {
		return sw, nil
	}
	if len(lc.cache) >= 3 {
		clear(lc.cache)
	}
	sw, err := readWindow(windowPath(lc.dir, w), nil)
	if err != nil {
		return nil, err
	}
	lc.cache[w] = sw
	return sw, nil
}

// verify aligns candidate c's frames of window j onto those of window i, from two seeds (the chain's
// transform, and the one that puts the first pair's cameras at one place with the scale of their median
// depths), by iterated reprojection correspondences and the robust Umeyama fit, then ICP; of the
// alignments ICP trusts (enough pairs, every direction constrained), the one that verifies more points
// wins.
func (lc *loopCloser) verify(c loopCandidate) (loopStats, error) {
	st := loopStats{I: c.i, J: c.j, Frames: c.frames}
	wi, err := lc.window(c.i)
	if err != nil {
		return st, err
	}
	wj, err := lc.window(c.j)
	if err != nil {
		return st, err
	}
	var pairs []viewPair
	for _, f := range c.frames {
		pairs = append(pairs, viewPair{src: &wj.results[f[1]-wj.meta.Window.Start], dst: &wi.results[f[0]-wi.meta.Window.Start]})
	}
	seeds := []Sim3{lc.toWorld[c.i].Inverse().Compose(lc.toWorld[c.j]), coincident(pairs[0], lc.fixed)}
	opt := lc.icp.withDefaults()
	base := newICP(pairs, opt) // the points and surfaces, once for every seed and stage
	base.workers = max(1, lc.opt.Workers/len(seeds))
	type outcome struct {
		kept    bool
		frac    float64
		n       int
		refined Sim3
	}
	out := make([]outcome, len(seeds))
	try := func(k int) {
		z := lc.projectiveFit(base, seeds[k])
		mode := scaleJoint
		if lc.fixed {
			mode = scaleFixed
		}
		refined, ist, err := refineWith(base.clone(), z, false, mode, opt)
		if err != nil || !ist.Kept {
			return // not constrained enough to trust
		}
		frac, n := lc.inliers(base, refined, lc.opt.DepthTolerance)
		out[k] = outcome{kept: true, frac: frac, n: n, refined: refined}
	}
	// the seeds at once with 2 or more workers, one at a time otherwise
	par.For(min(lc.opt.Workers, len(seeds)), len(seeds), try)
	for _, o := range out { // in the seeds' order, whichever finished first
		if o.kept && (o.frac > st.Inliers || st.Points == 0) {
			st.Inliers, st.Points, st.Z = o.frac, o.n, o.refined
		}
	}
	st.Accepted = st.Inliers >= lc.opt.MinInliers && st.Points >= lc.opt.MinPoints
	return st, nil
}

// coincident is the transform from p.src's window frame to p.dst's that puts the two cameras at one place,
// with the ratio of their median depths as the scale (1 when fixed).
func coincident(p viewPair, fixed bool) Sim3 {
	k := 1.0
	if !fixed {
		k = sampledMedian(p.dst.Depth) / sampledMedian(p.src.Depth)
		if !(k > 0) || math.IsInf(k, 0) {
			k = 1
		}
	}
	return extrinsicsToSim3(p.dst.Camera.Extrinsics).Inverse().Compose(Sim3{S: k, R: Identity().R}).Compose(extrinsicsToSim3(p.src.Camera.Extrinsics))
}

// projectiveFit refines a transform between the windows of ic's pairs by reprojection (ic unchanged): the source points, moved
// and projected into their target frame, are paired with the target points at those pixels when the depths
// agree within a tolerance that shrinks from 30 % to DepthTolerance, and the robust Umeyama fit of those
// pairs is the next transform.
func (lc *loopCloser) projectiveFit(ic *icp, z Sim3) Sim3 {
	scale := ScaleRMS
	if lc.fixed {
		scale = ScaleFixed
	}
	var sched []float64
	for _, tol := range []float64{0.3, 0.2, 0.1, lc.opt.DepthTolerance} {
		for range 8 {
			sched = append(sched, tol)
		}
	}
	for _, tol := range sched {
		src, dst, w := lc.reprojected(ic, z, tol)
		if len(w) < lc.opt.MinPoints/2 {
			break
		}
		next, _, err := RobustUmeyama(src, dst, w, AlignOptions{Scale: scale})
		if err != nil {
			break
		}
		z = next
	}
	return z
}

// reprojected pairs the source points moved by z with the target points at the pixels they project to,
// when their depths agree within tol.
func (lc *loopCloser) reprojected(ic *icp, z Sim3, tol float64) (src, dst, w []float64) {
	runs := ic.runs()
	if len(runs) == 1 {
		return lc.reprojectedRun(ic, 0, len(ic.src), z, tol)
	}
	type part struct{ src, dst, w []float64 }
	parts := make([]part, len(runs))
	par.For(len(runs), len(runs), func(k int) {
		p := &parts[k]
		p.src, p.dst, p.w = lc.reprojectedRun(ic, runs[k][0], runs[k][1], z, tol)
	})
	for _, p := range parts { // in order: the loop's pairs
		src, dst, w = append(src, p.src...), append(dst, p.dst...), append(w, p.w...)
	}
	return src, dst, w
}

// reprojectedRun is reprojected of source points [i0, i1).
func (lc *loopCloser) reprojectedRun(ic *icp, i0, i1 int, z Sim3, tol float64) (src, dst, w []float64) {
	for _, sp := range ic.src[i0:i1] {
		s := &ic.dst[sp.view]
		p := z.Apply(sp.p)
		x, y, depth, ok := s.project(p)
		if !ok {
			continue
		}
		j := y*s.w + x
		if s.wt[j] == 0 {
			continue
		}
		dq := s.cam.Apply(s.pts[j])[2]
		if math.Abs(depth-dq) > tol*dq {
			continue
		}
		src = append(src, sp.p[:]...)
		dst = append(dst, s.pts[j][:]...)
		w = append(w, math.Sqrt(sp.w*s.wt[j]))
	}
	return src, dst, w
}

// inliers is, of ic's pairs (ic unchanged), the fraction of the source points moved by z that project
// into their target frame onto a point whose depth agrees within tol, and the number of those that
// project onto a point.
func (lc *loopCloser) inliers(ic *icp, z Sim3, tol float64) (float64, int) {
	runs := ic.runs()
	counts := make([][2]int, len(runs)) // per run: agreeing, projecting onto a point
	par.For(len(runs), len(runs), func(k int) {
		for _, sp := range ic.src[runs[k][0]:runs[k][1]] {
			s := &ic.dst[sp.view]
			x, y, depth, ok := s.project(z.Apply(sp.p))
			if !ok {
				continue
			}
			j := y*s.w + x
			if s.wt[j] == 0 {
				continue
			}
			counts[k][1]++
			if dq := s.cam.Apply(s.pts[j])[2]; math.Abs(depth-dq) <= tol*dq {
				counts[k][0]++
			}
		}
	})
	var in, all int
	for _, c := range counts {
		in, all = in+c[0], all+c[1]
	}
	if all == 0 {
		return 0, 0
	}
	return float64(in) / float64(all), in
}

// closeLoops finds, verifies and closes the loops of a run whose windows have the chained transforms
// toWorld and the cameras cams (unless opt.Off), and optimises the windows' transforms over the seams, the
// loops accepted and the scale priors (a run in metres: the windows' metric scales): the optimised
// transforms, the loops tried and the priors' final robust weights. With neither a loop accepted nor a
// prior, the chained transforms are returned.
func closeLoops(dir string, toWorld []Sim3, cams []frameCam, fixed bool, icpOpt ICPOptions, opt LoopOptions, priors []ScalePrior, log *slog.Logger) ([]Sim3, []loopStats, []float64, error) {
	opt = opt.withDefaults()
	if len(toWorld) < 2 || opt.Off && len(priors) == 0 {
		return toWorld, nil, nil, nil
	}
	var depths []float64
	for _, c := range cams {
		if c.depth > 0 {
			depths = append(depths, c.depth)
		}
	}
	if len(depths) == 0 {
		return toWorld, nil, nil, nil
	}
	slices.Sort(depths)
	scale := depths[len(depths)/2]
	var loops []loopStats
	edges := make([]GraphEdge, 0, len(toWorld)-1)
	for k := 1; k < len(toWorld); k++ {
		edges = append(edges, GraphEdge{I: k - 1, J: k, Z: toWorld[k-1].Inverse().Compose(toWorld[k])})
	}
	if !opt.Off && len(toWorld) > opt.MinGap {
		var err error
		if edges, loops, err = verifyLoops(dir, toWorld, cams, scale, fixed, icpOpt, opt, edges, log); err != nil {
			return nil, nil, nil, err
		}
	}
	edges = fitEnvelope(len(toWorld), edges, loops, log)
	if len(edges) == len(toWorld)-1 && len(priors) == 0 {
		return toWorld, loops, nil, nil
	}
	gopt := opt.Graph
	if !(gopt.Length > 0) {
		gopt.Length = scale
	}
	gopt.Scales = priors
	nodes, gst, err := OptimizeGraph(toWorld, edges, gopt)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("stream: pose graph: %w", err)
	}
	k := 0
	for i := range loops {
		if loops[i].Accepted {
			loops[i].Weight = gst.LoopWeights[k]
			k++
		}
	}
	log.Info("stream: pose graph optimised", "loops", k, "scale_priors", len(priors), "cost_before", gst.InitialCost, "cost_after", gst.FinalCost, "steps", gst.Iterations)
	if k > 0 {
		log.Info("stream: loops closed", "loops", k)
	}
	return nodes, loops, gst.ScaleWeights, nil
}

// fitEnvelope drops the accepted loops that span the most windows, marking them not accepted in loops
// (whose accepted ones are the loop edges in order), until the pose graph's normal equations fit
// maxGraphEntries (with node 0's scale free, as a scale prior makes it). A chain of seams always fits.
func fitEnvelope(n int, edges []GraphEdge, loops []loopStats, log *slog.Logger) []GraphEdge {
	for {
		_, entries := envelope(n, edges, true)
		if entries <= maxGraphEntries {
			return edges
		}
		far, span := -1, 0
		for i, e := range edges {
			if e.Loop && e.J-e.I > span { // a loop's I < J, as verifyLoops adds them
				far, span = i, e.J-e.I
			}
		}
		if far < 0 {
			return edges
		}
		k := 0 // the loop of edge far: the loops before it in edges
		for _, e := range edges[:far] {
			if e.Loop {
				k++
			}
		}
		for i := range loops {
			if loops[i].Accepted {
				if k == 0 {
					loops[i].Accepted = false
					break
				}
				k--
			}
		}
		log.Warn("stream: loop dropped: the pose graph would be too large", "windows", fmt.Sprintf("%d-%d", edges[far].I, edges[far].J),
			"entries", entries, "max", maxGraphEntries)
		edges = slices.Delete(edges, far, far+1)
	}
}

// verifyLoops finds the loop candidates among the windows, verifies them and adds the accepted ones to
// edges: the edges and the loops tried.
func verifyLoops(dir string, toWorld []Sim3, cams []frameCam, scale float64, fixed bool, icpOpt ICPOptions, opt LoopOptions,
	edges []GraphEdge, log *slog.Logger) ([]GraphEdge, []loopStats, error) {
	cands := findCandidates(cams, scale, opt)
	lc := &loopCloser{dir: dir, opt: opt, icp: icpOpt, fixed: fixed, toWorld: toWorld, cache: map[int]*storedWindow{}}
	var loops []loopStats
	for _, c := range cands {
		st, err := lc.verify(c)
		if err != nil {
			return nil, nil, fmt.Errorf("stream: loop closure: %w", err)
		}
		log.Info("stream: loop candidate", "windows", fmt.Sprintf("%d-%d", c.i, c.j), "frames", c.frames,
			"inliers", st.Inliers, "points", st.Points, "accepted", st.Accepted)
		if st.Accepted {
			edges = append(edges, GraphEdge{I: c.i, J: c.j, Z: st.Z, Loop: true, Weight: opt.Weight})
		}
		loops = append(loops, st)
	}
	return edges, loops, nil
}
