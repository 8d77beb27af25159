// Package sky fills the sky of DA3's mono and metric models as
// depth_anything_3's _process_mono_sky_estimation does.
package sky

import "github.com/da3-go/da3-go/internal/tmath"

// Threshold separates sky (sky map ≥ Threshold) from non-sky.
const Threshold = 0.3

// Fill sets the depth where sky ≥ Threshold to the 0.99 quantile (linear
// interpolation, torch.quantile) of the non-sky depth, unless either region
// has 10 pixels or fewer. The reference estimates the quantile from a random
// sample of 100 000 pixels (drawn with replacement) on larger maps; this
// computes it exactly, so large maps differ from the reference by the
// sampling noise only.
func Fill(depth, sky []float32) {
	if len(depth) != len(sky) {
		return
	}
	var non []float32
	for i, s := range sky {
		if s < Threshold {
			non = append(non, depth[i])
		}
	}
	nSky := len(sky) - len(non)
	if len(non) <= 10 || nSky <= 10 {
		return
	}
	q := tmath.Quantile(non, 0.99)
	for i, s := range sky {
		if s >= Threshold {
			depth[i] = q
		}
	}
}
