package export

import (
	"math"
	"slices"
)

// The official exporters select points with numpy statistics; these reproduce them bit for bit so that the
// same arrays give the same points.

// Products are converted explicitly before they are added: Go may otherwise fuse them into one FMA on some
// architectures, which rounds differently from numpy.

// percentile is numpy.percentile(v, q) (method "linear"), evaluated in the data's own precision as numpy
// does (float32 data: float32 arithmetic): index = (n−1)·p with p = q/100 (float64), lo = ⌊index⌋,
// γ = index − lo, then a + (b−a)·γ for γ < 0.5 and b − (b−a)·(1−γ) otherwise. sorted must be ascending.
func percentile[T float32 | float64](sorted []T, q float64) T {
	n := len(sorted)
	if n == 0 {
		return T(math.NaN())
	}
	lo, g := clampIndex(float64(n-1)*(q/100), n)
	hi := min(lo+1, n-1)
	a, b := sorted[lo], sorted[hi]
	d := b - a
	if g >= 0.5 {
		return b - T(d*T(1-g))
	}
	return a + T(d*T(g))
}

// clampIndex splits a virtual index into its floor (clamped to [0, n−1], as numpy clips the indices) and
// the fraction.
func clampIndex(idx float64, n int) (int, float64) {
	f := math.Floor(idx)
	g := idx - f
	lo := int(f)
	if lo < 0 {
		lo, g = 0, 0
	}
	if lo > n-1 {
		lo, g = n-1, 0
	}
	return lo, g
}

// median64 is numpy.median: the middle value, or the mean of the two middle values. v is sorted in place.
func median64(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// round32 is numpy.round(x, decimals) for float32, which numpy evaluates in float32:
// rint(x·10^d)/10^d with ties to even.
func round32(x float32, decimals int) float32 {
	f := float32(math.Pow10(decimals))
	y := float32(x * f)
	return float32(math.RoundToEven(float64(y))) / f
}

// sorted32 returns an ascending copy of v.
func sorted32(v []float32) []float32 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}
