package quantize

import (
	"fmt"
	"math"
)

// Agreement measures how closely b follows a.
type Agreement struct {
	// Corr is the Pearson correlation of a and b.
	Corr float64
	// MaxAbs is max |a−b|, and MaxRel is MaxAbs over max |a|.
	MaxAbs, MaxRel float64
}

// Compare returns the agreement of two equally long outputs (the f32 and the
// quantized model's depth, say). Two constant sequences correlate 1 when
// equal and 0 otherwise.
func Compare(a, b []float32) (Agreement, error) {
	if len(a) != len(b) {
		return Agreement{}, fmt.Errorf("compare: %d values against %d", len(a), len(b))
	}
	if len(a) == 0 {
		return Agreement{}, fmt.Errorf("compare: no values")
	}
	var ma, mb float64
	for i := range a {
		ma += float64(a[i])
		mb += float64(b[i])
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb, maxAbs, maxA float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			return Agreement{}, fmt.Errorf("compare: NaN at index %d", i)
		}
		dx, dy := x-ma, y-mb
		sab += dx * dy
		saa += dx * dx
		sbb += dy * dy
		maxAbs = max(maxAbs, math.Abs(x-y))
		maxA = max(maxA, math.Abs(x))
	}
	r := Agreement{MaxAbs: maxAbs}
	switch {
	case saa > 0 && sbb > 0:
		r.Corr = sab / math.Sqrt(saa*sbb)
	case maxAbs == 0:
		r.Corr = 1
	}
	if maxA > 0 {
		r.MaxRel = maxAbs / maxA
	}
	return r, nil
}
