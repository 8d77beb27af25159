package stream

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/da3-go/da3-go/model"
)

// AlignOptions tune the alignment of a window to the one before it. The zero value uses the defaults.
type AlignOptions struct {
	// Scale is how the scale is estimated (default ScaleAuto: upstream's ScaleRMS, or ScaleFixed for
	// depth in metres).
	Scale ScaleMethod
	// HuberDelta: residuals longer than HuberDelta·σ (σ the weighted RMS spread of the previous window's
	// points about their centroid) are down-weighted by δ/r in the re-weighted fits (default 0.05).
	// Upstream uses an absolute 0.1 in its scenes' units; relative to σ it does not depend on the unit
	// of the model's depth (arbitrary for relative models, metres for metric ones).
	HuberDelta float64
	// Iterations of re-weighting after the first fit (default 5, upstream's setting).
	Iterations int
	// MaxPoints caps the correspondences, taken at a uniform stride over the valid pixels (default 262144).
	MaxPoints int
	// MinPoints: fewer valid correspondences are an error (default 64).
	MinPoints int
}

func (o AlignOptions) withDefaults() AlignOptions {
	if o.HuberDelta <= 0 {
		o.HuberDelta = 0.05
	}
	if o.Iterations <= 0 {
		o.Iterations = 5
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = 1 << 18
	}
	if o.MinPoints <= 0 {
		o.MinPoints = 64
	}
	return o
}

// AlignStats describe one alignment.
type AlignStats struct {
	// Points is the number of correspondences used; Valid the number of valid pixel pairs they were taken
	// from.
	Points, Valid int
	// ConfThreshold: pixels whose confidence − 1 is not above it in both windows were left out (upstream:
	// 0.1 × the smaller of the two windows' median confidence − 1); NaN without confidence.
	ConfThreshold float64
	// RMS is the weighted RMS residual after the alignment, as a fraction of the target points' RMS spread.
	RMS float64
	// Iterations of re-weighting run.
	Iterations int
	// ICP describes the point-to-plane refinement that followed (nil when none ran).
	ICP *ICPStats
}

// RobustUmeyama fits src onto dst as Umeyama does, then re-weights the points Huber-style (iteratively
// re-weighted least squares, as depth_anything_3's da3_streaming robust_weighted_estimate_sim3): each
// point's weight is w·min(1, δ/r) with r its residual under the current fit, until the transform or the
// Huber cost stops changing.
func RobustUmeyama(src, dst, w []float64, opt AlignOptions) (Sim3, AlignStats, error) {
	opt = opt.withDefaults()
	n := len(src) / 3
	st := AlignStats{Points: n, Valid: n, ConfThreshold: math.NaN()}
	cur, err := Umeyama(src, dst, w, opt.Scale)
	if err != nil {
		return Sim3{}, st, err
	}
	sigma := spread(dst, w)
	h := huber{src: src, dst: dst, w: w, delta: opt.HuberDelta * sigma, res: make([]float64, n)}
	cw := make([]float64, n)
	prev := math.Inf(1)
	for st.Iterations < opt.Iterations {
		cost := h.residuals(cur)
		for i := range n {
			cw[i] = weightAt(w, i)
			if h.res[i] > h.delta {
				cw[i] *= h.delta / h.res[i]
			}
		}
		next, err := Umeyama(src, dst, cw, opt.Scale)
		if err != nil {
			break // keep the last good fit
		}
		st.Iterations++
		ds, da, dt := math.Abs(next.S-cur.S), rotationAngle(next.R, cur.R), 0.0
		for k := range 3 {
			dt = max(dt, math.Abs(next.T[k]-cur.T[k]))
		}
		cur = next
		if (ds+dt <= 1e-9*max(1, sigma) && da < 0.1*math.Pi/180) || math.Abs(prev-cost) <= 1e-9*prev {
			break
		}
		prev = cost
	}
	h.residuals(cur)
	var sw, ss float64
	for i := range n {
		wi := weightAt(w, i)
		sw += wi
		ss += wi * h.res[i] * h.res[i]
	}
	st.RMS = math.Sqrt(ss/sw) / sigma
	return cur, st, nil
}

// huber is RobustUmeyama's Huber cost of the residuals |dstᵢ − a(srcᵢ)|, quadratic up to delta.
type huber struct {
	src, dst, w []float64
	delta       float64
	res         []float64 // the residuals of the last transform measured
}

// residuals measures the residuals of a into h.res and returns their weighted Huber cost.
func (h *huber) residuals(a Sim3) (cost float64) {
	src, dst, delta := h.src, h.dst, h.delta
	for i := range h.res {
		p := a.Apply([3]float64{src[3*i], src[3*i+1], src[3*i+2]})
		dx, dy, dz := dst[3*i]-p[0], dst[3*i+1]-p[1], dst[3*i+2]-p[2]
		r := math.Sqrt(dx*dx + dy*dy + dz*dz)
		h.res[i] = r
		hc := 0.5 * r * r
		if r > delta {
			hc = delta * (r - 0.5*delta)
		}
		cost += hc * weightAt(h.w, i)
	}
	return cost
}

func weightAt(w []float64, i int) float64 {
	if w == nil {
		return 1
	}
	return w[i]
}

// spread is the weighted RMS distance of the points from their weighted centroid.
func spread(p, w []float64) float64 {
	n := len(p) / 3
	var sw float64
	var c [3]float64
	for i := range n {
		wi := weightAt(w, i)
		sw += wi
		for k := range 3 {
			c[k] += wi * p[3*i+k]
		}
	}
	for k := range 3 {
		c[k] /= sw
	}
	var ss float64
	for i := range n {
		for k := range 3 {
			d := p[3*i+k] - c[k]
			ss += weightAt(w, i) * d * d
		}
	}
	return math.Sqrt(ss / sw)
}

// rotationAngle is the angle of a·bᵀ in radians.
func rotationAngle(a, b [3][3]float64) float64 {
	m := mul33(a, transpose33(b))
	return math.Acos(max(-1, min(1, (m[0][0]+m[1][1]+m[2][2]-1)/2)))
}

// skyThreshold: pixels whose sky value is at least this are sky (the threshold DA3 fills sky depth at).
const skyThreshold = 0.3

// Align returns the transform from the world frame of window b to that of window a, estimated on the
// frames both ran: prev holds a's results for those frames and next b's, in frame order, at the processed
// size. Every pixel with a positive finite depth in both, no sky, and a confidence above the threshold in
// both becomes a pair of points (back-projected in each window's world frame) weighted by
// √((c_a − 1)·(c_b − 1)), as da3_streaming's weighted_align_point_maps pairs them.
func Align(prev, next []model.Result, opt AlignOptions) (Sim3, AlignStats, error) {
	opt = opt.withDefaults()
	if opt.Scale == ScaleAuto && len(next) > 0 && next[0].Unit == model.Metres {
		opt.Scale = ScaleFixed
	}
	st := AlignStats{ConfThreshold: math.NaN()}
	if len(prev) == 0 || len(prev) != len(next) {
		return Sim3{}, st, fmt.Errorf("align: %d and %d shared views", len(prev), len(next))
	}
	hasConf, err := checkShared(prev, next)
	if err != nil {
		return Sim3{}, st, err
	}
	pf := pairFilter{hasConf: hasConf, thr: math.Inf(-1)}
	if hasConf {
		pf.thr = 0.1 * min(medianConf(prev), medianConf(next))
		st.ConfThreshold = pf.thr
	}
	st.Valid = pf.count(prev, next)
	if st.Valid < opt.MinPoints {
		return Sim3{}, st, fmt.Errorf("align: %d valid pixel pairs in %d shared views (need %d): %w", st.Valid, len(prev), opt.MinPoints, ErrDegenerate)
	}
	src, dst, w := pf.sample(prev, next, st.Valid, opt.MaxPoints)
	s, rst, err := RobustUmeyama(src, dst, w, opt)
	rst.Valid, rst.ConfThreshold = st.Valid, st.ConfThreshold
	if err != nil {
		return Sim3{}, rst, fmt.Errorf("align: %w", err)
	}
	return s, rst, nil
}

// checkShared checks that the shared views have cameras and the same size in both windows, and says
// whether all of them have confidences.
func checkShared(prev, next []model.Result) (hasConf bool, err error) {
	hasConf = true
	for i := range prev {
		a, b := &prev[i], &next[i]
		n := a.Width * a.Height
		if a.Camera == nil || b.Camera == nil {
			return false, errors.New("align: views without cameras")
		}
		if a.Width != b.Width || a.Height != b.Height || len(a.Depth) != n || len(b.Depth) != n {
			return false, fmt.Errorf("align: shared view %d is %dx%d in one window and %dx%d in the other", i, a.Width, a.Height, b.Width, b.Height)
		}
		hasConf = hasConf && len(a.Conf) == n && len(b.Conf) == n
	}
	return hasConf, nil
}

// pairFilter picks the pixel pairs of two windows' shared views that enter the alignment: a positive
// finite depth in both, no sky, and (with confidences) confidence − 1 above thr in both.
type pairFilter struct {
	hasConf bool
	thr     float64
}

// valid says whether pixel i of views a and b is a pair, and its weight √((c_a − 1)·(c_b − 1)).
func (f pairFilter) valid(a, b *model.Result, i int) (float64, bool) {
	da, db := a.Depth[i], b.Depth[i]
	if !(da > 0) || !(db > 0) || math.IsInf(float64(da), 0) || math.IsInf(float64(db), 0) {
		return 0, false
	}
	if (a.Sky != nil && a.Sky[i] >= skyThreshold) || (b.Sky != nil && b.Sky[i] >= skyThreshold) {
		return 0, false
	}
	if !f.hasConf {
		return 1, true
	}
	ca, cb := float64(a.Conf[i])-1, float64(b.Conf[i])-1
	if !(ca > f.thr) || !(cb > f.thr) {
		return 0, false
	}
	return math.Sqrt(ca * cb), true
}

// count is the number of valid pixel pairs of the shared views.
func (f pairFilter) count(prev, next []model.Result) int {
	valid := 0
	for i := range prev {
		for p := range prev[i].Depth {
			if _, ok := f.valid(&prev[i], &next[i], p); ok {
				valid++
			}
		}
	}
	return valid
}

// sample back-projects at most maxPoints of the valid pixel pairs, at a uniform stride over them, into
// each window's world frame: the points of next (src), of prev (dst), and their weights.
func (f pairFilter) sample(prev, next []model.Result, valid, maxPoints int) (src, dst, w []float64) {
	stride := (valid + maxPoints - 1) / maxPoints
	m := valid / stride
	src, dst, w = make([]float64, 0, 3*m+3), make([]float64, 0, 3*m+3), make([]float64, 0, m+1)
	k := 0
	for i := range prev {
		a, b := &prev[i], &next[i]
		pa, pb := newUnprojector(a), newUnprojector(b)
		for p := range a.Depth {
			wt, ok := f.valid(a, b, p)
			if !ok {
				continue
			}
			if k%stride == 0 {
				x, y := p%a.Width, p/a.Width
				qa, qb := pa.point(x, y, a.Depth[p]), pb.point(x, y, b.Depth[p])
				dst = append(dst, qa[:]...)
				src = append(src, qb[:]...)
				w = append(w, wt)
			}
			k++
		}
	}
	return src, dst, w
}

// medianConf is the median of confidence − 1 over the views' pixels (numpy.median).
func medianConf(views []model.Result) float64 {
	var c []float32
	for i := range views {
		c = append(c, views[i].Conf...)
	}
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return float64(c[n/2]) - 1
	}
	return (float64(c[n/2-1])+float64(c[n/2]))/2 - 1
}

// unprojector back-projects pixels of a view into its world frame: X = E⁻¹·(K⁻¹·[u, v, 1]·depth).
type unprojector struct {
	kinv [3][3]float64
	c2w  Sim3
}

func newUnprojector(r *model.Result) unprojector {
	k := r.Camera.Intrinsics
	// K = [[fx, s, cx], [0, fy, cy], [0, 0, 1]].
	fx, s, cx, fy, cy := k[0][0], k[0][1], k[0][2], k[1][1], k[1][2]
	kinv := [3][3]float64{{1 / fx, -s / (fx * fy), (s*cy - cx*fy) / (fx * fy)}, {0, 1 / fy, -cy / fy}, {0, 0, 1}}
	return unprojector{kinv: kinv, c2w: extrinsicsToSim3(r.Camera.Extrinsics).Inverse()}
}

func (u unprojector) point(x, y int, d float32) [3]float64 {
	fx, fy, dd := float64(x), float64(y), float64(d)
	c := [3]float64{
		(u.kinv[0][0]*fx + u.kinv[0][1]*fy + u.kinv[0][2]) * dd,
		(u.kinv[1][1]*fy + u.kinv[1][2]) * dd,
		dd,
	}
	return u.c2w.Apply(c)
}

// extrinsicsToSim3 reads a world-to-camera [R | t] as a rigid transform.
func extrinsicsToSim3(e [3][4]float64) Sim3 {
	a := Sim3{S: 1}
	for i := range 3 {
		copy(a.R[i][:], e[i][:3])
		a.T[i] = e[i][3]
	}
	return a
}
