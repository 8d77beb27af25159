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
	lo, hi, g := percentileRanks(n, q)
	return lerpPercentile(sorted[lo], sorted[hi], g)
}

// percentileRanks returns the two order statistics (0-based ranks) numpy's linear percentile q of n > 0
// values interpolates between, and the fraction.
func percentileRanks(n int, q float64) (lo, hi int, g float64) {
	lo, g = clampIndex(float64(n-1)*(q/100), n)
	return lo, min(lo+1, n-1), g
}

// lerpPercentile interpolates between the order statistics a ≤ b as numpy does.
func lerpPercentile[T float32 | float64](a, b T, g float64) T {
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

// radixSelect finds order statistics of float32 values with constant memory, for data too large to hold
// and sort (the confidences of a long streamed scene): the values are seen in two passes; the first
// counts them by the top 16 bits of an order-preserving key, the second by the low 16 bits within the
// bins that hold the ranks asked for (want). NaN values must be left out by the caller.
type radixSelect struct {
	n  int
	hi []uint64
	lo map[uint32][]uint64
}

// key maps a float32 to a uint32 with the same order (−0 just below +0).
func key(x float32) uint32 {
	b := math.Float32bits(x)
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}

func unkey(k uint32) float32 {
	if k&0x80000000 != 0 {
		return math.Float32frombits(k &^ 0x80000000)
	}
	return math.Float32frombits(^k)
}

// add1 counts a value in the first pass.
func (r *radixSelect) add1(x float32) {
	if r.hi == nil {
		r.hi = make([]uint64, 1<<16)
	}
	r.hi[key(x)>>16]++
	r.n++
}

// want prepares the second pass for the given ranks (0-based, < n).
func (r *radixSelect) want(ranks ...int) {
	r.lo = map[uint32][]uint64{}
	for _, k := range ranks {
		if b, _ := r.bin(k); r.lo[b] == nil {
			r.lo[b] = make([]uint64, 1<<16)
		}
	}
}

// bin returns the first-level bin that holds rank k and the rank within it.
func (r *radixSelect) bin(k int) (uint32, int) {
	c := uint64(k)
	for b, n := range r.hi {
		if c < n {
			return uint32(b), int(c)
		}
		c -= n
	}
	panic("radixSelect: rank out of range")
}

// add2 counts a value in the second pass (the same values as the first).
func (r *radixSelect) add2(x float32) {
	k := key(x)
	if h := r.lo[k>>16]; h != nil {
		h[k&0xffff]++
	}
}

// value returns the value of rank k after the second pass.
func (r *radixSelect) value(k int) float32 {
	b, c := r.bin(k)
	for l, n := range r.lo[b] {
		if uint64(c) < n {
			return unkey(b<<16 | uint32(l))
		}
		c -= int(n)
	}
	panic("radixSelect: second pass saw other values than the first")
}
