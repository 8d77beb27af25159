// Package align brings a predicted depth map to metres with a few metric
// measurements: sparse points (a LiDAR scan, SfM points, a handful of taped
// distances) or a dense metric map (a depth sensor's), at any resolution.
//
// A depth prediction (relative, focal-normalised or metric depth) is fitted
// with one scale, metres ≈ s · depth. A disparity prediction (Depth Anything
// V2's relative output, inverse depth up to scale and shift) is fitted with
// a scale and a shift in inverse depth, 1/metres ≈ s · disparity + t, and
// then metres = 1/(s · disparity + t); where that is not positive the
// output is NaN (no depth).
//
// The fit is robust: RANSAC over minimal samples (one measurement for a
// scale, two for a scale and shift) finds the largest consistent set, then
// iteratively reweighted least squares (Tukey's biweight, or Huber's loss)
// refines it over every measurement, weighted by the model's confidence
// where there is one. Residuals are relative depth errors, so near and far
// measurements count alike. The result reports the scale (and shift), the
// median relative error of the inliers and their share, and Fit refuses a
// fit with too few measurements or too small an inlier share.
//
// Several views of one scene (Fit with several Views) share one scale: the
// views of a multi-view run are in one scale already.
//
// The package reads measurement files (ReadFile: .npy, 16-bit PNG in
// millimetres, .pfm, or text points "x y depth") and is otherwise pure Go
// arithmetic on []float32.
package align

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Errors callers branch on.
var (
	// ErrTooFewSamples: fewer valid measurements than Options.MinSamples
	// fall on valid pixels of the prediction.
	ErrTooFewSamples = errors.New("too few metric depth samples")
	// ErrPoorFit: the inlier share is below Options.MinInlierShare (the
	// measurements and the prediction disagree), or the fit is degenerate.
	ErrPoorFit = errors.New("metric depth samples do not fit the prediction")
)

// Sample is one metric depth measurement at pixel (X, Y) of the grid its
// Samples name; pixel (0, 0) is the top-left pixel, whose centre is at
// (0, 0). Depth is in metres; 0, negative or NaN means no measurement.
type Sample struct{ X, Y, Depth float64 }

// Samples are metric depth measurements in the pixel coordinates of a
// Width×Height image: a dense map (Dense, Width×Height values, row-major,
// top row first; 0 or NaN where there is no measurement) and/or Points. The
// grid may have another resolution than the prediction: coordinates are
// mapped proportionally.
type Samples struct {
	Width, Height int
	Dense         []float32
	Points        []Sample
}

// Len is the number of measurements (dense pixels with a value, and points).
func (s Samples) Len() int {
	n := len(s.Points)
	for _, v := range s.Dense {
		if v > 0 && !math.IsInf(float64(v), 0) {
			n++
		}
	}
	return n
}

// Map is a prediction to align: Width×Height values, row-major.
type Map struct {
	Width, Height int
	// Values are depth (Disparity false) or disparity (larger = nearer).
	Values []float32
	// Conf, when not nil, weighs each pixel in the refit (DA3's confidence).
	Conf []float32
	// Disparity: Values are inverse depth up to scale and shift.
	Disparity bool
}

// View is one image's prediction and its measurements.
type View struct {
	Pred    Map
	Samples Samples
}

// Loss is the robust loss of the refit.
type Loss int

const (
	// Tukey is Tukey's biweight: measurements beyond 4.685 robust standard
	// deviations get no weight (the default).
	Tukey Loss = iota
	// Huber is Huber's loss: quadratic within 1.345 robust standard
	// deviations, linear beyond (every measurement keeps some weight).
	Huber
)

func (l Loss) String() string {
	switch l {
	case Tukey:
		return "tukey"
	case Huber:
		return "huber"
	}
	return fmt.Sprintf("Loss(%d)", int(l))
}

// Options tune Fit. The zero value uses the defaults.
type Options struct {
	// MinSamples is the fewest valid measurements Fit accepts; default 10.
	MinSamples int
	// MinInlierShare is the smallest share of inliers Fit accepts; default 0.5.
	MinInlierShare float64
	// InlierThreshold is the relative depth error |aligned/measured − 1|
	// within which a measurement is an inlier; default 0.1.
	InlierThreshold float64
	// Iterations of RANSAC; default 200 for a scale, 500 for scale and shift.
	Iterations int
	// Loss of the refit; default Tukey.
	Loss Loss
	// MaxSamples bounds the measurements used (a uniform random subset of a
	// larger dense map); default 50000.
	MaxSamples int
	// Seed of the random choices (RANSAC, the subset), for reproducible fits.
	Seed uint64
}

func (o Options) withDefaults(disparity bool) Options {
	if o.MinSamples <= 0 {
		o.MinSamples = 10
	}
	if o.MinInlierShare <= 0 {
		o.MinInlierShare = 0.5
	}
	if o.InlierThreshold <= 0 {
		o.InlierThreshold = 0.1
	}
	if o.Iterations <= 0 {
		o.Iterations = 200
		if disparity {
			o.Iterations = 500
		}
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 50000
	}
	return o
}

// Alignment is a fitted map from a prediction to metres.
type Alignment struct {
	// Disparity: metres = 1/(Scale·v + Shift); else metres = Scale·v.
	Disparity bool
	Scale     float64
	Shift     float64
	// Residual is the median relative depth error |aligned/measured − 1| of
	// the inliers.
	Residual float64
	// Samples is the number of valid measurements used, Inliers how many of
	// them are within Options.InlierThreshold, InlierShare their ratio.
	Samples, Inliers int
	InlierShare      float64
}

// Metres is the aligned depth of one predicted value: NaN where the
// prediction is not finite or (disparity) the aligned inverse depth is not
// positive.
func (a Alignment) Metres(v float32) float32 {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return float32(math.NaN())
	}
	if !a.Disparity {
		return float32(a.Scale * float64(v))
	}
	q := a.Scale*float64(v) + a.Shift
	if !(q > 0) {
		return float32(math.NaN())
	}
	return float32(1 / q)
}

// Apply returns the prediction's values in metres (Metres of each).
func (a Alignment) Apply(values []float32) []float32 {
	out := make([]float32, len(values))
	for i, v := range values {
		out[i] = a.Metres(v)
	}
	return out
}

// String is the report line: "scale 2.5013 (shift 0.0200), residual 1.4%,
// inliers 81% of 500".
func (a Alignment) String() string {
	s := fmt.Sprintf("scale %.6g", a.Scale)
	if a.Disparity {
		s = fmt.Sprintf("inverse depth = %.6g·disparity %+.6g", a.Scale, a.Shift)
	}
	return fmt.Sprintf("%s, residual %.2f%% (median relative error of inliers), inliers %.1f%% of %d samples",
		s, 100*a.Residual, 100*a.InlierShare, a.Samples)
}

// pair is one measurement at a valid pixel: the predicted value p, the
// measured metres d, and the weight w.
type pair struct{ p, d, w float64 }

// Fit aligns the views' predictions with their measurements: one scale (and
// shift, for disparity) for all of them. The views must agree on Disparity.
func Fit(views []View, opts Options) (Alignment, error) {
	if len(views) == 0 {
		return Alignment{}, errors.New("align: no views")
	}
	disp := views[0].Pred.Disparity
	for _, v := range views {
		if v.Pred.Disparity != disp {
			return Alignment{}, errors.New("align: views mix depth and disparity predictions")
		}
	}
	opts = opts.withDefaults(disp)
	var pairs []pair
	for i, v := range views {
		ps, err := gather(v)
		if err != nil {
			return Alignment{}, fmt.Errorf("align: view %d: %w", i, err)
		}
		pairs = append(pairs, ps...)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x616c69676e))
	if len(pairs) > opts.MaxSamples {
		for i := range opts.MaxSamples { // partial Fisher–Yates
			j := i + rng.IntN(len(pairs)-i)
			pairs[i], pairs[j] = pairs[j], pairs[i]
		}
		pairs = pairs[:opts.MaxSamples]
	}
	if len(pairs) < opts.MinSamples {
		return Alignment{}, fmt.Errorf("%w: %d valid (at least %d needed: a measurement counts where its depth is positive and the prediction at its pixel is valid)",
			ErrTooFewSamples, len(pairs), opts.MinSamples)
	}
	m := fitter{pairs: pairs, opts: opts, disp: disp}
	a, ok := m.ransac(rng)
	if !ok {
		return Alignment{}, fmt.Errorf("%w: no consistent %s found", ErrPoorFit, map[bool]string{false: "scale", true: "scale and shift"}[disp])
	}
	a = m.irls(a)
	m.score(&a)
	if !(a.Scale > 0) || math.IsInf(a.Scale, 0) || math.IsNaN(a.Shift) || math.IsInf(a.Shift, 0) {
		return a, fmt.Errorf("%w: degenerate fit (scale %g, shift %g)", ErrPoorFit, a.Scale, a.Shift)
	}
	if a.InlierShare < opts.MinInlierShare {
		return a, fmt.Errorf("%w: only %.1f%% of %d samples within %.0f%% of the fit (at least %.0f%% needed): %s",
			ErrPoorFit, 100*a.InlierShare, a.Samples, 100*opts.InlierThreshold, 100*opts.MinInlierShare, a)
	}
	return a, nil
}

// gather pairs each measurement of v with the prediction at its place.
func gather(v View) ([]pair, error) {
	p, s := v.Pred, v.Samples
	if p.Width <= 0 || p.Height <= 0 || len(p.Values) != p.Width*p.Height {
		return nil, fmt.Errorf("prediction of %dx%d with %d values", p.Width, p.Height, len(p.Values))
	}
	if p.Conf != nil && len(p.Conf) != len(p.Values) {
		return nil, fmt.Errorf("confidence of %d values for %d predicted", len(p.Conf), len(p.Values))
	}
	if s.Width <= 0 || s.Height <= 0 {
		return nil, fmt.Errorf("samples on a %dx%d grid: the grid's size must be given", s.Width, s.Height)
	}
	if s.Dense != nil && len(s.Dense) != s.Width*s.Height {
		return nil, fmt.Errorf("dense samples of %d values for a %dx%d grid", len(s.Dense), s.Width, s.Height)
	}
	sx, sy := float64(p.Width)/float64(s.Width), float64(p.Height)/float64(s.Height)
	var out []pair
	add := func(x, y, d float64) {
		if !(d > 0) || math.IsInf(d, 0) || !(x >= -0.5 && x < float64(s.Width)-0.5 && y >= -0.5 && y < float64(s.Height)-0.5) {
			return
		}
		// Pixel centres map to pixel centres: (x+½)·sx − ½.
		pv, w, ok := p.at((x+0.5)*sx-0.5, (y+0.5)*sy-0.5)
		if ok {
			out = append(out, pair{p: pv, d: d, w: w})
		}
	}
	for i, d := range s.Dense {
		add(float64(i%s.Width), float64(i/s.Width), float64(d))
	}
	for _, q := range s.Points {
		add(q.X, q.Y, q.Depth)
	}
	return out, nil
}

// at samples the prediction (and confidence) bilinearly at (x, y), clamped
// to the map; ok is false where a pixel it reads is not valid (not finite,
// or a depth that is not positive).
func (m Map) at(x, y float64) (v, w float64, ok bool) {
	x = min(max(x, 0), float64(m.Width-1))
	y = min(max(y, 0), float64(m.Height-1))
	x0, y0 := int(x), int(y)
	x1, y1 := min(x0+1, m.Width-1), min(y0+1, m.Height-1)
	fx, fy := x-float64(x0), y-float64(y0)
	idx := [4]int{y0*m.Width + x0, y0*m.Width + x1, y1*m.Width + x0, y1*m.Width + x1}
	wt := [4]float64{(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy}
	w = 1
	if m.Conf != nil {
		w = 0
	}
	for k, i := range idx {
		if wt[k] == 0 {
			continue
		}
		pv := float64(m.Values[i])
		if math.IsNaN(pv) || math.IsInf(pv, 0) || (!m.Disparity && pv <= 0) {
			return 0, 0, false
		}
		v += wt[k] * pv
		if m.Conf != nil {
			c := float64(m.Conf[i])
			if !(c > 0) || math.IsInf(c, 0) {
				return 0, 0, false
			}
			w += wt[k] * c
		}
	}
	return v, w, true
}

// fitter holds one fit's measurements.
type fitter struct {
	pairs []pair
	opts  Options
	disp  bool
}

// relErr is the relative depth error aligned/measured − 1 of one pair under
// (s, t); +Inf where a disparity fit gives no depth.
func (m *fitter) relErr(q pair, s, t float64) float64 {
	if !m.disp {
		return s*q.p/q.d - 1
	}
	inv := s*q.p + t
	if !(inv > 0) {
		return math.Inf(1)
	}
	return 1/(inv*q.d) - 1
}

// inliers counts the pairs within the threshold under (s, t), with the sum
// of their absolute errors to break ties.
func (m *fitter) inliers(s, t float64) (n int, sum float64) {
	for _, q := range m.pairs {
		if e := math.Abs(m.relErr(q, s, t)); e <= m.opts.InlierThreshold {
			n++
			sum += e
		}
	}
	return n, sum
}

// ransac tries minimal-sample hypotheses and keeps the one with the most
// inliers.
func (m *fitter) ransac(rng *rand.Rand) (Alignment, bool) {
	best, bestSum, found := -1, 0.0, false
	var a Alignment
	n := len(m.pairs)
	for range m.opts.Iterations {
		var s, t float64
		if !m.disp {
			q := m.pairs[rng.IntN(n)]
			s = q.d / q.p
		} else {
			i, j := rng.IntN(n), rng.IntN(n)
			qi, qj := m.pairs[i], m.pairs[j]
			dp := qi.p - qj.p
			if math.Abs(dp) < 1e-12*max(math.Abs(qi.p), math.Abs(qj.p), 1e-30) {
				continue
			}
			s = (1/qi.d - 1/qj.d) / dp
			t = 1/qi.d - s*qi.p
		}
		if !(s > 0) || math.IsInf(s, 0) || math.IsNaN(t) {
			continue
		}
		k, sum := m.inliers(s, t)
		if k > best || (k == best && sum < bestSum) {
			best, bestSum, found = k, sum, true
			a = Alignment{Disparity: m.disp, Scale: s, Shift: t}
		}
	}
	return a, found && best > 0
}

// linResidual is the residual the refit minimises: the relative error of
// the aligned depth (depth), or of the aligned inverse depth (disparity),
// both linear in the parameters.
func (m *fitter) linResidual(q pair, s, t float64) float64 {
	if !m.disp {
		return s*q.p/q.d - 1
	}
	return (s*q.p+t)*q.d - 1
}

// irls refines a by iteratively reweighted least squares under the robust
// loss, the residual scale taken from the RANSAC inliers.
func (m *fitter) irls(a Alignment) Alignment {
	var abs []float64
	for _, q := range m.pairs {
		if r := math.Abs(m.linResidual(q, a.Scale, a.Shift)); r <= m.opts.InlierThreshold {
			abs = append(abs, r)
		}
	}
	sigma := max(1.4826*median(abs), 1e-4)
	c := 4.685 * sigma
	if m.opts.Loss == Huber {
		c = 1.345 * sigma
	}
	s, t := a.Scale, a.Shift
	for range 50 {
		var swaa, swa, swab, swbb, swb float64 // normal equations
		for _, q := range m.pairs {
			r := m.linResidual(q, s, t)
			w := q.w * lossWeight(m.opts.Loss, r, c)
			if w == 0 {
				continue
			}
			if !m.disp {
				u := q.p / q.d // s·u ≈ 1
				swaa += w * u * u
				swa += w * u
				continue
			}
			u, v := q.p*q.d, q.d // s·u + t·v ≈ 1
			swaa += w * u * u
			swab += w * u * v
			swbb += w * v * v
			swa += w * u
			swb += w * v
		}
		ns, nt := s, t
		if !m.disp {
			if swaa == 0 {
				break
			}
			ns = swa / swaa
		} else {
			det := swaa*swbb - swab*swab
			if det == 0 || math.IsNaN(det) {
				break
			}
			ns = (swa*swbb - swb*swab) / det
			nt = (swaa*swb - swab*swa) / det
		}
		done := math.Abs(ns-s) <= 1e-10*math.Abs(s) && math.Abs(nt-t) <= 1e-10*max(math.Abs(t), math.Abs(s)*1e-3)
		s, t = ns, nt
		if done {
			break
		}
	}
	a.Scale, a.Shift = s, t
	return a
}

// lossWeight is the IRLS weight of a residual r under the loss with tuning
// constant c.
func lossWeight(l Loss, r, c float64) float64 {
	ar := math.Abs(r)
	if l == Huber {
		if ar <= c {
			return 1
		}
		return c / ar
	}
	if ar >= c {
		return 0
	}
	u := 1 - (r/c)*(r/c)
	return u * u
}

// score fills the inlier counts and the residual of a.
func (m *fitter) score(a *Alignment) {
	var errs []float64
	for _, q := range m.pairs {
		if e := math.Abs(m.relErr(q, a.Scale, a.Shift)); e <= m.opts.InlierThreshold {
			errs = append(errs, e)
		}
	}
	a.Samples, a.Inliers = len(m.pairs), len(errs)
	a.InlierShare = float64(a.Inliers) / float64(a.Samples)
	a.Residual = median(errs)
}

// median of xs (reordered); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.SortFunc(xs, cmp.Compare[float64])
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
