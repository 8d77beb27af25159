// Package refview chooses the reference view of a DA3 scene of three or more
// views from the tokens entering block alt_start−1, as the strategies of
// depth_anything_3's reference-view selection do; the chosen view is put
// first before the remaining blocks run.
package refview

import "math"

// classTokens returns each view's token 0 of x ([C, T, S] tokens) in float64,
// divided by its norm, and the norms.
func classTokens(x []float32, c, t, s int) (unit [][]float64, norms []float64) {
	unit = make([][]float64, s)
	norms = make([]float64, s)
	for v := 0; v < s; v++ {
		row := x[v*c*t : v*c*t+c]
		var n float64
		for _, a := range row {
			n += float64(a) * float64(a)
		}
		n = math.Sqrt(n)
		norms[v] = n
		u := make([]float64, c)
		for i, a := range row {
			u[i] = float64(a) / n
		}
		unit[v] = u
	}
	return unit, norms
}

func dot(a, b []float64) float64 {
	var d float64
	for i := range a {
		d += a[i] * b[i]
	}
	return d
}

// SaddleSimRange is depth_anything_3's saddle_sim_range reference-view
// selection on x ([C, T, S] tokens entering block alt_start−1): with ĉ_s each
// view's normalised token 0 and sim = ĉ·ĉᵀ − I (the diagonal kept, as
// ĉ_s·ĉ_s − 1 ≈ 0), the view whose row of sim has the largest max − min
// wins, the first on ties. When every similarity is positive (real photos)
// the diagonal is each row's minimum, and the two views of the most similar
// pair have the same range up to rounding: upstream's float32 rounding of
// ĉ_s·ĉ_s − 1 then decides between them, here ranges within 1e-6 are ties
// and the first of the two wins.
func SaddleSimRange(x []float32, c, t, s int) int {
	u, _ := classTokens(x, c, t, s)
	best, bestRange := 0, math.Inf(-1)
	for v := 0; v < s; v++ {
		lo, hi := math.Inf(1), math.Inf(-1)
		for w := 0; w < s; w++ {
			d := dot(u[v], u[w])
			if w == v {
				d -= 1
			}
			lo, hi = math.Min(lo, d), math.Max(hi, d)
		}
		if hi-lo > bestRange+1e-6 {
			best, bestRange = v, hi-lo
		}
	}
	return best
}

// SaddleBalanced is depth_anything_3's saddle_balanced reference-view selection
// (the default) on x ([C, T, S] tokens entering block alt_start−1): for each view's token 0,
// its norm, its mean cosine similarity to the other views and the variance of
// its normalised entries are min-max normalised over views; the view whose
// three scores are all nearest 0.5 (sum of |score−0.5|) wins, the first on ties.
func SaddleBalanced(x []float32, c, t, s int) int {
	toks, norms := classTokens(x, c, t, s)
	sim := make([]float64, s)
	vari := make([]float64, s)
	for v := 0; v < s; v++ {
		var sum float64
		for w := 0; w < s; w++ {
			if w == v {
				continue
			}
			sum += dot(toks[v], toks[w])
		}
		sim[v] = sum / float64(s-1)
		var mean float64
		for _, a := range toks[v] {
			mean += a
		}
		mean /= float64(c)
		var ss float64
		for _, a := range toks[v] {
			ss += (a - mean) * (a - mean)
		}
		vari[v] = ss / float64(c-1)
	}
	norm01 := func(m []float64) []float64 {
		lo, hi := m[0], m[0]
		for _, a := range m {
			lo, hi = math.Min(lo, a), math.Max(hi, a)
		}
		out := make([]float64, len(m))
		for i, a := range m {
			out[i] = (a - lo) / (hi - lo + 1e-8)
		}
		return out
	}
	ns, ss, vs := norm01(norms), norm01(sim), norm01(vari)
	best, bestScore := 0, math.Inf(1)
	for v := 0; v < s; v++ {
		score := math.Abs(ss[v]-0.5) + math.Abs(ns[v]-0.5) + math.Abs(vs[v]-0.5)
		if score < bestScore {
			best, bestScore = v, score
		}
	}
	return best
}
