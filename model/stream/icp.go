package stream

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/da3-go/da3-go/model"

	"github.com/da3-go/da3-go/internal/par"
)

// ICPOptions tune the point-to-plane refinement (ICP) of the alignments between windows: of each seam
// (seeded by the Umeyama fit on the shared frames) and of each loop closure. The zero value uses the
// defaults.
type ICPOptions struct {
	// Seams refines each seam's Umeyama fit (off by default: on the synthetic tests, whose windows place
	// a frame's pixels consistently, the same-pixel Umeyama fit is the more accurate; see
	// docs/streaming.md). Loop closures, which have no same-pixel pairs, are always refined.
	Seams bool
	// MaxIterations caps the Gauss–Newton steps (default 30); it stops earlier when a step moves the
	// points by less than 1e-7 of their spread.
	MaxIterations int
	// MaxPoints caps the source points, taken at a uniform stride over the valid pixels (default 20000).
	MaxPoints int
	// Radius: a source point is paired with the nearest target point within Radius pixels of where it
	// projects in the target view (default 2).
	Radius int
	// Gate: pairs whose points are further apart than Gate × their depth are not used (default 0.1).
	Gate float64
	// NormalStep: a target point's normal is the sum of the cross products of the vectors to its
	// neighbours NormalStep pixels away, up, down, left and right (default 2).
	NormalStep int
	// MinPoints: with fewer pairs the refinement is not trusted and the seed is kept (default 200).
	MinPoints int
	// MinConditioning: when the smallest eigenvalue of the normalised Gauss–Newton matrix is below
	// MinConditioning × its largest, a direction of motion (e.g. along a single plane) is not constrained
	// by the geometry and the seed is kept (default 0.005: one plane seen with 0.2 % depth noise measures
	// 0.001, a furnished room's overlaps 0.01–0.2).
	MinConditioning float64
}

func (o ICPOptions) withDefaults() ICPOptions {
	if o.MaxIterations <= 0 {
		o.MaxIterations = 30
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = 20000
	}
	o.Radius = max(0, o.Radius)
	if !(o.Gate > 0) {
		o.Gate = 0.1
	}
	if o.NormalStep <= 0 {
		o.NormalStep = 2
	}
	if o.MinPoints <= 0 {
		o.MinPoints = 200
	}
	if !(o.MinConditioning > 0) {
		o.MinConditioning = 0.005
	}
	return o
}

// ICPStats describe a refinement.
type ICPStats struct {
	// Points is the number of pairs of the last step, Iterations the steps run.
	Points, Iterations int
	// Conditioning is the smallest eigenvalue of the normalised Gauss–Newton matrix over its largest, at
	// the first step.
	Conditioning float64
	// Before and After are the seam error of the seed and of the result: the median point-to-plane
	// distance of the pairs, as a fraction of the target points' RMS spread.
	Before, After float64
	// Kept says the refinement was kept; when it was not, Reason says why (the seed is returned).
	Kept   bool
	Reason string
}

// errICPDegenerate is the reason of a refinement whose geometry does not constrain every direction.
var errICPDegenerate = errors.New("the overlap's geometry leaves a direction unconstrained")

// viewPair is a source view (its points in the source window's frame) and the target view its points are
// paired with (in the target window's frame).
type viewPair struct {
	src, dst *model.Result
}

// RefineSeam refines the transform from window b's frame to window a's (seed: the Umeyama fit on the
// frames they share) by point-to-plane ICP between the shared frames: prev holds a's results for them and
// next b's, in frame order. The first step pairs each pixel with the same pixel of the frame in the
// other window; the next pair it with the nearest point within ICPOptions.Radius pixels of where it
// projects (projective association). fixedScale keeps the seed's scale (windows in metres). It returns
// the seed, saying why in the stats, when the refinement is not trusted: too few pairs, a geometry that
// leaves a direction unconstrained (a single plane), or a seam error no better than the seed's.
func RefineSeam(prev, next []model.Result, seed Sim3, fixedScale bool, opt ICPOptions) (Sim3, ICPStats, error) {
	if len(prev) == 0 || len(prev) != len(next) {
		return seed, ICPStats{}, fmt.Errorf("icp: %d and %d shared views", len(prev), len(next))
	}
	if _, err := checkShared(prev, next); err != nil {
		return seed, ICPStats{}, fmt.Errorf("icp: %w", err)
	}
	pairs := make([]viewPair, len(prev))
	for i := range prev {
		pairs[i] = viewPair{src: &next[i], dst: &prev[i]}
	}
	mode := scaleSpread
	if fixedScale {
		mode = scaleFixed
	}
	return refineICP(pairs, seed, true, mode, opt)
}

// icpScale is how refineICP estimates the scale.
type icpScale int

const (
	// scaleSpread corrects the scale at each step in closed form, as the ratio of the pairs' weighted RMS
	// spreads about their centroids (the rule Align uses: least squares would shrink the scale by σ²/(σ² +
	// σ²_noise) with noisy source points, a bias that compounds along a chain of windows). For seams.
	scaleSpread icpScale = iota
	// scaleJoint estimates the scale with the rotation and translation, a 7th Gauss–Newton parameter. It
	// has the least-squares bias, of no consequence for a single loop edge, but follows the residuals where
	// the spread ratio cannot: pairs that match (the majority's planes fitting) while the scale is off
	// about a point they share (a corner). For loops.
	scaleJoint
	// scaleFixed keeps the seed's scale (windows in metres).
	scaleFixed
)

// refineICP is point-to-plane ICP of the source views onto the target views from seed. Each step pairs
// the points (samePixel: the first step pairs each source pixel with the same target pixel), corrects the
// scale as mode says, then takes a Gauss–Newton step on the linearised residuals nᵀ·(Δ(p) − q) with Tukey
// weights (4.685 × the residuals' robust deviation 1.4826·MAD, at least 1e-3 of L). The increment Δ(p) =
// c + e^σ·Exp(ω)·(p − c) + L·υ is taken about the first pairs' target centroid c, L their RMS spread, so
// its parameters (ω, υ and, with scaleJoint, σ) are of one magnitude. It returns the seed, with the reason
// in the stats, when the refinement is not trusted: too few pairs, a Gauss–Newton matrix whose smallest
// eigenvalue is below MinConditioning × its largest at the first or the last step (a direction the
// geometry does not constrain), or a seam error no better than the seed's.
func refineICP(pairs []viewPair, seed Sim3, samePixel bool, mode icpScale, opt ICPOptions) (Sim3, ICPStats, error) {
	opt = opt.withDefaults()
	return refineWith(newICP(pairs, opt), seed, samePixel, mode, opt)
}

// refineWith is refineICP over the points and surfaces of ic, made by newICP with opt (with its defaults).
// It changes ic's frame and scratch: see clone.
func refineWith(ic *icp, seed Sim3, samePixel bool, mode icpScale, opt ICPOptions) (Sim3, ICPStats, error) {
	st := ICPStats{}
	if len(ic.src) < opt.MinPoints {
		st.Reason = fmt.Sprintf("%d source points (need %d)", len(ic.src), opt.MinPoints)
		return seed, st, nil
	}
	cur := seed
	first := ic.associate(cur, samePixel)
	if len(first) < opt.MinPoints {
		st.Reason = fmt.Sprintf("%d pairs at the seed (need %d)", len(first), opt.MinPoints)
		return seed, st, nil
	}
	ic.frame(first)
	np := 6
	if mode == scaleJoint {
		np = 7
	}
	for st.Iterations < opt.MaxIterations {
		m := first
		if st.Iterations > 0 {
			m = ic.associate(cur, false)
		}
		if len(m) < opt.MinPoints {
			st.Reason = fmt.Sprintf("%d pairs after %d steps (need %d)", len(m), st.Iterations, opt.MinPoints)
			return seed, st, nil
		}
		ds := 0.0
		if mode == scaleSpread {
			var k Sim3
			k, ds = ic.rescale(cur, m)
			cur = k.Compose(cur)
		}
		h, g, sw := ic.system(cur, m, np, st.Iterations)
		if st.Iterations == 0 {
			st.Conditioning = conditioning(h, np, sw)
			if st.Conditioning < opt.MinConditioning {
				st.Reason = fmt.Sprintf("%v (conditioning %.2g < %.2g)", errICPDegenerate, st.Conditioning, opt.MinConditioning)
				return seed, st, nil
			}
		}
		d, ok := solveSym(h, g, np)
		st.Iterations++
		st.Points = len(m)
		if !ok {
			st.Reason = "singular Gauss–Newton matrix"
			return seed, st, nil
		}
		cur = ic.increment(d).Compose(cur)
		if norm(d)+ds < 1e-6 {
			break
		}
	}
	// The last step's matrix, at the result: a fit that slid into a configuration the geometry does not pin
	// (along the planes the pairs kept) is not trusted either.
	h, _, sw := ic.system(cur, ic.associate(cur, false), np, opt.MaxIterations)
	if c := conditioning(h, np, sw); c < opt.MinConditioning {
		st.Conditioning = c
		st.Reason = fmt.Sprintf("%v at the result (conditioning %.2g < %.2g)", errICPDegenerate, c, opt.MinConditioning)
		return seed, st, nil
	}
	st.Before = ic.seamError(seed)
	st.After = ic.seamError(cur)
	if !(st.After <= st.Before) {
		st.Reason = fmt.Sprintf("seam error %.3g, not below the seed's %.3g", st.After, st.Before)
		return seed, st, nil
	}
	st.Kept = true
	return cur, st, nil
}

// icp holds the target surfaces and source points of a refinement.
type icp struct {
	opt ICPOptions
	// workers: the goroutines the loops over the source points take (at most; 0 or 1: one)
	workers int
	dst     []surface
	src     []srcPoint
	c       [3]float64 // centroid of the first pairs' target points
	l       float64    // their RMS spread
	res     []float64  // scratch: residuals
	pair    []match    // scratch
}

// clone is a copy of ic for another refinement: the points and surfaces shared (nothing changes them),
// the frame and the scratch its own.
func (ic *icp) clone() *icp {
	c := *ic
	c.res, c.pair = nil, nil
	return &c
}

// srcPoint is a source pixel's point in the source window's frame.
type srcPoint struct {
	p    [3]float64
	view int
	pix  int
	w    float64
}

// match pairs source point i with target point q (normal n) of its view.
type match struct {
	i    int
	q, n [3]float64
	w    float64
}

func newICP(pairs []viewPair, opt ICPOptions) *icp {
	ic := &icp{opt: opt}
	var srcViews []model.Result
	for _, p := range pairs {
		srcViews = append(srcViews, *p.src)
	}
	srcThr := confThreshold(srcViews)
	var dstViews []model.Result
	for _, p := range pairs {
		dstViews = append(dstViews, *p.dst)
	}
	dstThr := confThreshold(dstViews)
	valid := 0
	for _, p := range pairs {
		ic.dst = append(ic.dst, newSurface(p.dst, dstThr, opt.NormalStep))
		for i := range p.src.Depth {
			if _, ok := pointWeight(p.src, i, srcThr); ok {
				valid++
			}
		}
	}
	stride := max(1, (valid+opt.MaxPoints-1)/opt.MaxPoints)
	k := 0
	for v, p := range pairs {
		u := newUnprojector(p.src)
		for i := range p.src.Depth {
			w, ok := pointWeight(p.src, i, srcThr)
			if !ok {
				continue
			}
			if k%stride == 0 {
				ic.src = append(ic.src, srcPoint{p: u.point(i%p.src.Width, i/p.src.Width, p.src.Depth[i]), view: v, pix: i, w: w})
			}
			k++
		}
	}
	return ic
}

// confThreshold is Align's confidence threshold over views (0.1 × the median of confidence − 1), or −∞
// when a view has no confidence.
func confThreshold(views []model.Result) float64 {
	for i := range views {
		if len(views[i].Conf) != len(views[i].Depth) {
			return math.Inf(-1)
		}
	}
	return 0.1 * medianConf(views)
}

// pointWeight says whether pixel i of r is a point for ICP (positive finite depth, no sky, confidence − 1
// above thr) and its weight (confidence − 1, or 1 without confidence).
func pointWeight(r *model.Result, i int, thr float64) (float64, bool) {
	d := r.Depth[i]
	if !(d > 0) || math.IsInf(float64(d), 0) || (r.Sky != nil && r.Sky[i] >= skyThreshold) {
		return 0, false
	}
	if len(r.Conf) != len(r.Depth) {
		return 1, true
	}
	c := float64(r.Conf[i]) - 1
	if !(c > thr) {
		return 0, false
	}
	return c, true
}

// surface is a target view's points (in its window's frame) on the pixel grid, with normals.
type surface struct {
	w, h int
	pts  [][3]float64
	nrm  [][3]float64
	wt   []float64 // 0: no point or no normal
	cam  Sim3      // world-to-camera
	k    [3][3]float64
}

func newSurface(r *model.Result, thr float64, step int) surface {
	n := r.Width * r.Height
	s := surface{w: r.Width, h: r.Height, pts: make([][3]float64, n), nrm: make([][3]float64, n), wt: make([]float64, n),
		cam: extrinsicsToSim3(r.Camera.Extrinsics), k: r.Camera.Intrinsics}
	u := newUnprojector(r)
	ok := make([]bool, n)
	for i := range n {
		if _, v := pointWeight(r, i, thr); v {
			s.pts[i] = u.point(i%s.w, i/s.w, r.Depth[i])
			ok[i] = true
		}
	}
	centre := u.c2w.T
	for i := range n {
		if !ok[i] {
			continue
		}
		nv, good := s.normal(r, ok, i, step)
		if !good {
			continue
		}
		// Towards the camera.
		if dot3(nv, sub3(centre, s.pts[i])) < 0 {
			nv = [3]float64{-nv[0], -nv[1], -nv[2]}
		}
		s.nrm[i] = nv
		s.wt[i], _ = pointWeight(r, i, thr)
	}
	return s
}

// normal is the cross product of the central differences between pixel i's neighbours step pixels right
// and left, down and up; where one is missing, the unit sum of the cross products of the vectors from pixel
// i to the neighbours there are (taken in turn). Neighbours are points at a depth within 10 % × step of
// pixel i's.
func (s *surface) normal(r *model.Result, ok []bool, i, step int) ([3]float64, bool) {
	x, y := i%s.w, i/s.w
	d0 := float64(r.Depth[i])
	offs := [4][2]int{{step, 0}, {0, step}, {-step, 0}, {0, -step}}
	var vec [4][3]float64
	var has [4]bool
	for k, o := range offs {
		xx, yy := x+o[0], y+o[1]
		if xx < 0 || yy < 0 || xx >= s.w || yy >= s.h {
			continue
		}
		j := yy*s.w + xx
		if !ok[j] || math.Abs(float64(r.Depth[j])-d0) > 0.1*float64(step)*d0 {
			continue
		}
		vec[k], has[k] = sub3(s.pts[j], s.pts[i]), true
	}
	var n [3]float64
	if has[0] && has[1] && has[2] && has[3] {
		// Central differences: the pixel's own (noisy) point does not tilt its normal.
		n = cross3(sub3(vec[0], vec[2]), sub3(vec[1], vec[3]))
	} else {
		for k := range 4 {
			if has[k] && has[(k+1)%4] {
				c := cross3(vec[k], vec[(k+1)%4])
				n = [3]float64{n[0] + c[0], n[1] + c[1], n[2] + c[2]}
			}
		}
	}
	l := math.Sqrt(dot3(n, n))
	if !(l > 0) {
		return n, false
	}
	return [3]float64{n[0] / l, n[1] / l, n[2] / l}, true
}

// project returns the pixel of point p (target window's frame) and its depth.
func (s *surface) project(p [3]float64) (x, y int, z float64, ok bool) {
	c := s.cam.Apply(p)
	if !(c[2] > 0) {
		return 0, 0, 0, false
	}
	u := s.k[0][0]*c[0]/c[2] + s.k[0][1]*c[1]/c[2] + s.k[0][2]
	v := s.k[1][1]*c[1]/c[2] + s.k[1][2]
	if !(u > -0.5 && v > -0.5 && u < float64(s.w)-0.5 && v < float64(s.h)-0.5) {
		return 0, 0, 0, false
	}
	return int(math.Round(u)), int(math.Round(v)), c[2], true
}

// associate pairs the source points, moved by a, with target points: the same pixel (samePixel), or the
// nearest within Radius pixels of where they project, dropping pairs further apart than Gate × depth.
func (ic *icp) associate(a Sim3, samePixel bool) []match {
	runs := ic.runs()
	if len(runs) == 1 {
		ic.pair = ic.associateRun(ic.pair[:0], 0, len(ic.src), a, samePixel)
		return ic.pair
	}
	parts := make([][]match, len(runs))
	par.For(len(runs), len(runs), func(k int) { parts[k] = ic.associateRun(nil, runs[k][0], runs[k][1], a, samePixel) })
	ic.pair = ic.pair[:0]
	for _, p := range parts {
		ic.pair = append(ic.pair, p...)
	}
	return ic.pair
}

// minRun is the fewest source points a goroutine of icp's loops takes (a variable: tests lower it).
var minRun = 2048

// runs are the runs of source points icp's loops take at once (par.Runs), in order.
func (ic *icp) runs() [][2]int { return par.Runs(len(ic.src), ic.workers, minRun) }

// associateRun appends to out the pairs of source points [i0, i1) (associate).
func (ic *icp) associateRun(out []match, i0, i1 int, a Sim3, samePixel bool) []match {
	r := ic.opt.Radius
	for i := i0; i < i1; i++ {
		sp := ic.src[i]
		s := &ic.dst[sp.view]
		if samePixel {
			// The same pixel of the same frame: the pair whatever the seed, no gate.
			if s.wt[sp.pix] > 0 {
				out = append(out, match{i: i, q: s.pts[sp.pix], n: s.nrm[sp.pix], w: math.Sqrt(sp.w * s.wt[sp.pix])})
			}
			continue
		}
		p := a.Apply(sp.p)
		x, y, z, ok := s.project(p)
		if !ok {
			continue
		}
		gate := ic.opt.Gate * z
		best, bd := -1, gate*gate
		for yy := max(0, y-r); yy <= min(s.h-1, y+r); yy++ {
			for xx := max(0, x-r); xx <= min(s.w-1, x+r); xx++ {
				j := yy*s.w + xx
				if s.wt[j] == 0 {
					continue
				}
				if d := dist2(s.pts[j], p); d < bd {
					best, bd = j, d
				}
			}
		}
		if best >= 0 {
			out = append(out, match{i: i, q: s.pts[best], n: s.nrm[best], w: math.Sqrt(sp.w * s.wt[best])})
		}
	}
	return out
}

// frame fixes the increment's centre and length unit from the first pairs' target points.
func (ic *icp) frame(m []match) {
	var sw float64
	var c [3]float64
	for _, p := range m {
		sw += p.w
		for k := range 3 {
			c[k] += p.w * p.q[k]
		}
	}
	for k := range 3 {
		c[k] /= sw
	}
	var ss float64
	for _, p := range m {
		ss += p.w * dist2(p.q, c)
	}
	ic.c, ic.l = c, math.Sqrt(ss/sw)
}

// system builds the Gauss–Newton normal equations (np×np, row-major: rotation, translation and with np = 7
// scale) of the pairs at a, with Tukey weights, and the sum of the weights.
func (ic *icp) system(a Sim3, m []match, np, step int) (h []float64, g []float64, sw float64) {
	ic.res = ic.res[:0]
	for _, p := range m {
		q := a.Apply(ic.src[p.i].p)
		ic.res = append(ic.res, dot3(p.n, sub3(q, p.q))/ic.l)
	}
	// The kernel's width is annealed from Gate (relative to L) down to the residuals' spread, at least 1e-3:
	// a majority of pairs on surfaces that a wrong transform fits as well (a floor and a wall, fitted after
	// sliding along them) must not vote the points that pin the transform out before the fit reaches them.
	floor := max(1e-3, ic.opt.Gate*math.Pow(0.7, float64(step)))
	c := 4.685 * max(1.4826*medianAbs(ic.res), floor)
	h, g = make([]float64, np*np), make([]float64, np)
	var jac [7]float64
	for k, p := range m {
		r := ic.res[k]
		if math.Abs(r) >= c {
			continue
		}
		u := 1 - (r/c)*(r/c)
		w := p.w * u * u
		q := sub3(a.Apply(ic.src[p.i].p), ic.c)
		rn := cross3(q, p.n)
		jac = [7]float64{rn[0] / ic.l, rn[1] / ic.l, rn[2] / ic.l, p.n[0], p.n[1], p.n[2], dot3(p.n, q) / ic.l}
		for i := range np {
			g[i] += w * jac[i] * r
			for j := range np {
				h[i*np+j] += w * jac[i] * jac[j]
			}
		}
		sw += w
	}
	return h, g, sw
}

// rescale is the scale correction of the pairs at a, about the moved source points' centroid: the ratio
// of the target points' weighted RMS spread to the moved source points', and |log| of it.
func (ic *icp) rescale(a Sim3, m []match) (Sim3, float64) {
	src, dst, w := make([]float64, 0, 3*len(m)), make([]float64, 0, 3*len(m)), make([]float64, 0, len(m))
	var c [3]float64
	var sw float64
	for _, p := range m {
		q := a.Apply(ic.src[p.i].p)
		src = append(src, q[:]...)
		dst = append(dst, p.q[:]...)
		w = append(w, p.w)
		sw += p.w
		for k := range 3 {
			c[k] += p.w * q[k]
		}
	}
	for k := range 3 {
		c[k] /= sw
	}
	k := spread(dst, w) / spread(src, w)
	if !(k > 0) || math.IsInf(k, 0) {
		return Identity(), 0
	}
	out := Sim3{S: k, R: Identity().R}
	for i := range 3 {
		out.T[i] = c[i] - k*c[i]
	}
	return out, math.Abs(math.Log(k))
}

// increment is the transform of a Gauss–Newton step d = (ω, υ) or (ω, υ, σ).
func (ic *icp) increment(d []float64) Sim3 {
	r := expSO3([3]float64{d[0], d[1], d[2]})
	a := Sim3{S: 1, R: r}
	if len(d) == 7 {
		a.S = math.Exp(d[6])
	}
	rc := a.Apply(ic.c)
	for k := range 3 {
		a.T[k] = ic.c[k] - rc[k] + ic.l*d[3+k]
	}
	return a
}

// seamError is the median point-to-plane distance of the source points moved by a to their projective
// pairs, over the spread L.
func (ic *icp) seamError(a Sim3) float64 {
	m := ic.associate(a, false)
	if len(m) == 0 {
		return math.Inf(1)
	}
	res := make([]float64, len(m))
	for k, p := range m {
		res[k] = dot3(p.n, sub3(a.Apply(ic.src[p.i].p), p.q)) / ic.l
	}
	return medianAbs(res)
}

// conditioning is the smallest eigenvalue of h (np×np) over its largest.
func conditioning(h []float64, np int, sw float64) float64 {
	if !(sw > 0) {
		return 0
	}
	a := make([][]float64, np)
	for i := range a {
		a[i] = make([]float64, np)
		for j := range np {
			a[i][j] = h[i*np+j] / sw
		}
	}
	ev := symEigenvalues(a)
	lo, hi := slices.Min(ev), slices.Max(ev)
	if !(hi > 0) {
		return 0
	}
	return max(0, lo/hi)
}

// symEigenvalues are the eigenvalues of a symmetric matrix by cyclic Jacobi rotations (a is overwritten).
func symEigenvalues(a [][]float64) []float64 {
	ev, _ := jacobiRows(a, 100)
	return ev
}

// solveSym solves h·d = −g (n×n) by Cholesky; false when h is not positive definite.
func solveSym(h, g []float64, n int) ([]float64, bool) {
	l := slices.Clone(h)
	for j := range n {
		d := l[j*n+j]
		for k := range j {
			d -= l[j*n+k] * l[j*n+k]
		}
		if !(d > 0) {
			return nil, false
		}
		d = math.Sqrt(d)
		l[j*n+j] = d
		for i := j + 1; i < n; i++ {
			v := l[i*n+j]
			for k := range j {
				v -= l[i*n+k] * l[j*n+k]
			}
			l[i*n+j] = v / d
		}
	}
	x := make([]float64, n)
	for i := range n {
		v := -g[i]
		for k := range i {
			v -= l[i*n+k] * x[k]
		}
		x[i] = v / l[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		v := x[i]
		for k := i + 1; k < n; k++ {
			v -= l[k*n+i] * x[k]
		}
		x[i] = v / l[i*n+i]
	}
	return x, true
}

func medianAbs(v []float64) float64 {
	a := make([]float64, len(v))
	for i, x := range v {
		a[i] = math.Abs(x)
	}
	slices.Sort(a)
	if len(a) == 0 {
		return 0
	}
	return a[len(a)/2]
}

func norm(d []float64) float64 {
	var s float64
	for _, x := range d {
		s += x * x
	}
	return math.Sqrt(s)
}

func dot3(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

func sub3(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func cross3(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func dist2(a, b [3]float64) float64 {
	d := sub3(a, b)
	return dot3(d, d)
}
