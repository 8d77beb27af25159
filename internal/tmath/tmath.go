// Package tmath holds small numerical routines that reproduce PyTorch's
// float32 semantics exactly (quantiles, linspace), shared by the model
// packages that must match the reference bit for bit.
package tmath

import "slices"

// Quantile is torch.quantile's default (linear interpolation) on a copy of v,
// in float32 as torch computes it: r = q·(n−1), lo = ⌊r⌋, hi = ⌈r⌉,
// w = r − lo, then torch.lerp (which counts from the nearer end).
func Quantile(v []float32, q float64) float32 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	r := float32(q) * float32(len(s)-1)
	lo := int(r)
	hi := lo
	if float32(lo) < r {
		hi = lo + 1
	}
	if hi >= len(s) {
		hi = len(s) - 1
	}
	w := r - float32(lo)
	a, b := s[lo], s[hi]
	if w < 0.5 {
		return a + w*(b-a)
	}
	return b - (b-a)*(1-w)
}

// Linspace32 is torch.linspace(start, end, n) in float32: the step
// (end−start)/(n−1) in float32, the first half counted from start and the
// second half back from end.
func Linspace32(start, end float64, n int) []float32 {
	lo, hi := float32(start), float32(end)
	out := make([]float32, n)
	if n == 1 {
		out[0] = lo
		return out
	}
	step := (hi - lo) / float32(n-1)
	for i := range out {
		if i < n/2 {
			out[i] = lo + step*float32(i)
		} else {
			out[i] = hi - step*float32(n-1-i)
		}
	}
	return out
}
