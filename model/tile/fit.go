package tile

import (
	"math"
	"slices"
)

// Fit is how a tile's map is brought to the global pass's: v ↦ a·v + b.
type Fit int

const (
	// FitAuto: FitAffine for relative outputs (DA2 disparity, DA3
	// relative depth), FitScale for metric ones (metres, DA3 metric's
	// focal-normalised depth).
	FitAuto Fit = iota
	// FitAffine fits a scale and a shift.
	FitAffine
	// FitScale fits a scale only (b = 0).
	FitScale
)

func (f Fit) String() string {
	switch f {
	case FitAuto:
		return "auto"
	case FitAffine:
		return "affine"
	case FitScale:
		return "scale"
	}
	return "Fit(?)"
}

// affine is v ↦ A·v + B.
type affine struct{ A, B float64 }

// minSamples is the fewest samples a fit is made from.
const minSamples = 8

// robustFit fits a·t + b ≈ g (b = 0 when scaleOnly) by least squares, then
// twice more leaving out the samples whose residual exceeds 3 robust
// standard deviations (1.4826·MAD) of the last fit's: edges the global pass
// blurred, and what the tile's network saw differently, do not pull the
// fit. A fit that is not possible (too few samples, a map without
// contrast for an affine fit, a scale that is not positive) falls back to
// scale only, and ok is false when that fails too.
func robustFit(t, g []float64, scaleOnly bool) (f affine, ok bool) {
	keep := make([]bool, len(t))
	for i := range keep {
		keep[i] = true
	}
	res := make([]float64, 0, len(t))
	for it := range 3 {
		if f, ok = leastSquares(t, g, keep, scaleOnly); !ok && !scaleOnly {
			scaleOnly = true
			f, ok = leastSquares(t, g, keep, true)
		}
		if !ok || it == 2 {
			break
		}
		res = res[:0]
		for i := range t {
			if keep[i] {
				res = append(res, math.Abs(f.A*t[i]+f.B-g[i]))
			}
		}
		cut := 3 * 1.4826 * median(res)
		if cut == 0 {
			break // an exact fit
		}
		n := 0
		for i := range t {
			keep[i] = math.Abs(f.A*t[i]+f.B-g[i]) <= cut
			if keep[i] {
				n++
			}
		}
		if n < minSamples {
			break
		}
	}
	return f, ok
}

// leastSquares fits a·t + b ≈ g over the kept samples; ok is false when the
// samples do not determine a positive scale.
func leastSquares(t, g []float64, keep []bool, scaleOnly bool) (affine, bool) {
	var n, st, sg, stt, stg float64
	for i := range t {
		if keep[i] {
			n++
			st += t[i]
			sg += g[i]
			stt += t[i] * t[i]
			stg += t[i] * g[i]
		}
	}
	if n < minSamples {
		return affine{}, false
	}
	var f affine
	if scaleOnly {
		if !(stt > 0) {
			return affine{}, false
		}
		f.A = stg / stt
	} else {
		mt, mg := st/n, sg/n
		vt := stt/n - mt*mt
		// No contrast in the tile (a wall filling it): its scale is noise.
		if !(vt > 1e-8*(mt*mt+1e-30)) {
			return affine{}, false
		}
		f.A = (stg/n - mt*mg) / vt
		f.B = mg - f.A*mt
	}
	if !(f.A > 0) || math.IsInf(f.A, 0) || math.IsNaN(f.B) || math.IsInf(f.B, 0) {
		return affine{}, false
	}
	return f, true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
