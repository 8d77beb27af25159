package testutil

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Stats compares got with want over their common length and returns the
// largest and mean absolute difference and the Pearson correlation. A NaN
// difference makes maxAbs and meanAbs NaN; the correlation is NaN when
// either side is constant (unless both are identical) or empty.
func Stats(want, got []float32) (maxAbs, meanAbs, corr float64) {
	n := min(len(want), len(got))
	if n == 0 {
		return 0, 0, math.NaN()
	}
	var sumAbs, sumW, sumG float64
	identical := true
	for i := range n {
		w, g := float64(want[i]), float64(got[i])
		d := math.Abs(g - w)
		if want[i] != got[i] {
			identical = false
			if w == g { // both infinite with the same sign: d is NaN
				d = 0
			}
		}
		if math.IsNaN(d) || d > maxAbs { // once NaN, maxAbs stays NaN
			maxAbs = d
		}
		sumAbs += d
		sumW += w
		sumG += g
	}
	meanAbs = sumAbs / float64(n)
	mw, mg := sumW/float64(n), sumG/float64(n)
	var cov, vw, vg float64
	for i := range n {
		dw, dg := float64(want[i])-mw, float64(got[i])-mg
		cov += dw * dg
		vw += dw * dw
		vg += dg * dg
	}
	switch {
	case vw > 0 && vg > 0:
		corr = cov / math.Sqrt(vw*vg)
	case identical && !math.IsNaN(mw):
		corr = 1
	default:
		corr = math.NaN()
	}
	return maxAbs, meanAbs, corr
}

// AllClose checks |got[i] - want[i]| <= atol + rtol*|want[i]| for every
// element (NaN never matches; equal infinities do). On failure it reports
// the sizes or the number of failing elements, max|d|, mean|d|, the
// correlation and the worst element (largest excess over its tolerance) with
// both values, and returns false. msgAndArgs are as in testify.
func AllClose(t testing.TB, want, got []float32, atol, rtol float64, msgAndArgs ...any) bool {
	t.Helper()
	if len(want) != len(got) {
		return assert.Fail(t, fmt.Sprintf("size mismatch: want %d elements, got %d", len(want), len(got)), msgAndArgs...)
	}
	bad, worst := 0, -1
	worstExcess := math.Inf(-1)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if w == g {
			continue
		}
		d := math.Abs(g - w)
		tol := atol + rtol*math.Abs(w)
		finite := !math.IsInf(w, 0) && !math.IsInf(g, 0)
		if finite && d <= tol { // NaN fails the comparison
			continue
		}
		bad++
		excess := d - tol
		if !finite || math.IsNaN(d) {
			excess = math.Inf(1)
		}
		if worst < 0 || excess > worstExcess {
			worst, worstExcess = i, excess
		}
	}
	if bad == 0 {
		return true
	}
	maxAbs, meanAbs, corr := Stats(want, got)
	msg := fmt.Sprintf("%d of %d elements differ beyond atol=%g rtol=%g\n"+
		"max|d|=%.6g mean|d|=%.6g corr=%.8f\n"+
		"worst [%d]: want %.8g, got %.8g (|d|=%.6g, tol %.6g)",
		bad, len(want), atol, rtol, maxAbs, meanAbs, corr,
		worst, want[worst], got[worst], math.Abs(float64(got[worst])-float64(want[worst])),
		atol+rtol*math.Abs(float64(want[worst])))
	return assert.Fail(t, msg, msgAndArgs...)
}
