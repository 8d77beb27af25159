package model

import "github.com/da3-go/da3-go/internal/tmath"

// SkyThreshold separates sky from non-sky in the mono/metric sky map.
const SkyThreshold = 0.3

// FillSky is DA3's _process_mono_sky_estimation: where sky ≥ 0.3 the depth is
// set to the 0.99 quantile (linear interpolation, torch.quantile) of the
// non-sky depth, unless either region has 10 pixels or fewer. The reference
// estimates the quantile from a random sample of 100 000 pixels (drawn with
// replacement) on larger maps; this computes it exactly, so large maps differ
// from the reference by the sampling noise only.
func FillSky(depth, sky []float32) {
	if len(depth) != len(sky) {
		return
	}
	var non []float32
	for i, s := range sky {
		if s < SkyThreshold {
			non = append(non, depth[i])
		}
	}
	nSky := len(sky) - len(non)
	if len(non) <= 10 || nSky <= 10 {
		return
	}
	q := Quantile(non, 0.99)
	for i, s := range sky {
		if s >= SkyThreshold {
			depth[i] = q
		}
	}
}

// Quantile is torch.quantile's default (linear interpolation) on a copy of v,
// in float32 as torch computes it (see tmath.Quantile).
func Quantile(v []float32, q float64) float32 { return tmath.Quantile(v, q) }
