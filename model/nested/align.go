package nested

import (
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/internal/sky"
	"github.com/da3-go/da3-go/internal/tmath"
	"github.com/da3-go/da3-go/model"
)

// Constants of depth_anything_3's NestedDepthAnything3Net and its helpers
// in utils/alignment.py.
const (
	// SkyThreshold: pixels with a sky value below it are not sky
	// (compute_sky_mask; the mono models' sky fill uses the same).
	SkyThreshold = sky.Threshold
	// MinMetricDepth and MinDepth exclude near-zero depths from the fit
	// (compute_alignment_mask).
	MinMetricDepth = 1e-2
	MinDepth       = 1e-3
	// MaxSkyDepth caps the depth given to sky pixels, in metres
	// (_handle_sky_regions' sky_depth_def).
	MaxSkyDepth = 200
	// SkyQuantile of the aligned non-sky depth is the depth of the sky.
	SkyQuantile = 0.99
	// minNonSky: upstream asserts more than 10 non-sky pixels.
	minNonSky = 11
)

// View is one view's outputs of both branches at the processed size: the
// input of Align.
type View struct {
	// Depth and Conf are the any-view branch's relative depth and
	// confidence; Align rewrites both in place.
	Depth, Conf []float32
	// MetricDepth is the metric branch's focal-normalised depth (with or
	// without its own sky fill: only non-sky pixels are read). Not modified.
	MetricDepth []float32
	// Sky is the metric branch's sky map (relu of the sky logit).
	Sky []float32
	// Focal is (fx+fy)/2 of the any-view branch's intrinsics for this view,
	// in pixels of the processed image.
	Focal float64
}

// Alignment is what Align measured.
type Alignment struct {
	// Scale multiplies the any-view depth and camera translations to give
	// metres (upstream's scale_factor).
	Scale float32
	// MedianConf is the median confidence of the non-sky pixels; only
	// pixels at least this confident enter the fit.
	MedianConf float32
	// NonSky and Pixels count the non-sky pixels and those in the fit.
	NonSky, Pixels int
	// SkyDepth is the depth given to sky pixels: the 0.99 quantile of the
	// aligned non-sky depth, at most 200 m.
	SkyDepth float32
}

// ErrNoScale reports a scene from which no metric scale can be estimated.
var ErrNoScale = errors.New("no metric scale can be estimated")

// Align puts the any-view depth of all views of one scene into metres, as
// NestedDepthAnything3Net.forward does (_apply_metric_scaling,
// _apply_depth_alignment, _handle_sky_regions):
//
//  1. metric depth dm = MetricDepth · focal/300 per view;
//  2. non-sky pixels: sky < 0.3, jointly over all views (more than 10
//     needed);
//  3. the median confidence med of the non-sky pixels;
//  4. fit pixels: conf ≥ med, non-sky, dm > 0.01, depth > 0.001;
//  5. scale = Σ dm·depth / max(Σ depth², 1e-12) over the fit pixels;
//  6. depth ← depth · scale;
//  7. sky pixels get depth min(quantile(depth[non-sky], 0.99), 200) and
//     confidence 1.
//
// Quantiles are exact (torch.quantile, linear interpolation) where upstream
// estimates them from a random sample of 100 000 values on larger inputs.
// Where upstream would return all-zero depth (no pixel qualifies for the
// fit) Align returns ErrNoScale instead; with too few non-sky pixels, where
// upstream's assertion fails, it returns ErrNoScale too.
func Align(views []View) (Alignment, error) {
	var a Alignment
	if len(views) == 0 {
		return a, errors.New("align: no views")
	}
	metric := make([][]float32, len(views))
	var conf []float32
	for i, v := range views {
		dm, err := metricDepth(i, v)
		if err != nil {
			return a, err
		}
		metric[i] = dm
		for p, sk := range v.Sky {
			if sk < SkyThreshold {
				conf = append(conf, v.Conf[p])
			}
		}
	}
	a.NonSky = len(conf)
	if a.NonSky < minNonSky {
		return a, fmt.Errorf("%w: only %d non-sky pixels (sky map < %g); more than 10 are needed", ErrNoScale, a.NonSky, SkyThreshold)
	}
	a.MedianConf = tmath.Quantile(conf, 0.5)
	num, den, pixels := fitSums(views, metric, a.MedianConf)
	a.Pixels = pixels
	if a.Pixels == 0 {
		return a, fmt.Errorf("%w: no confident non-sky pixel has positive depth in both branches", ErrNoScale)
	}
	a.Scale = float32(num / max(den, 1e-12))
	a.SkyDepth = scaleDepth(views, a.Scale, a.NonSky)
	for _, v := range views {
		for p, sk := range v.Sky {
			if sk >= SkyThreshold {
				v.Depth[p] = a.SkyDepth
				v.Conf[p] = 1
			}
		}
	}
	return a, nil
}

// metricDepth checks view i's sizes and focal length and returns its metric
// depth, apply_metric_scaling's depth · (focal / 300) in float32.
func metricDepth(i int, v View) ([]float32, error) {
	n := len(v.Depth)
	if n == 0 || len(v.Conf) != n || len(v.MetricDepth) != n || len(v.Sky) != n {
		return nil, fmt.Errorf("align: view %d: depth, confidence, metric depth and sky sizes %d, %d, %d, %d differ",
			i, n, len(v.Conf), len(v.MetricDepth), len(v.Sky))
	}
	if !(v.Focal > 0) {
		return nil, fmt.Errorf("align: view %d: focal length %g is not positive", i, v.Focal)
	}
	// apply_metric_scaling in float32: depth · (focal / 300).
	s := float32(v.Focal) / model.MetricFocalBase
	dm := make([]float32, n)
	for p, d := range v.MetricDepth {
		dm[p] = d * s
	}
	return dm, nil
}

// fitSums are the least-squares sums Σ dm·depth and Σ depth² over the fit
// pixels (conf ≥ medianConf, non-sky, dm > 0.01, depth > 0.001), and their
// number.
func fitSums(views []View, metric [][]float32, medianConf float32) (num, den float64, pixels int) {
	for i, v := range views {
		for p, sk := range v.Sky {
			d, dm := v.Depth[p], metric[i][p]
			if v.Conf[p] >= medianConf && sk < SkyThreshold && dm > MinMetricDepth && d > MinDepth {
				num += float64(dm) * float64(d)
				den += float64(d) * float64(d)
				pixels++
			}
		}
	}
	return num, den, pixels
}

// scaleDepth multiplies the views' depth by scale in place and returns the
// depth of the sky: the SkyQuantile of the scaled non-sky depth (nonSky
// pixels), at most MaxSkyDepth.
func scaleDepth(views []View, scale float32, nonSky int) float32 {
	kept := make([]float32, 0, nonSky)
	for _, v := range views {
		for p := range v.Depth {
			v.Depth[p] *= scale
			if v.Sky[p] < SkyThreshold {
				kept = append(kept, v.Depth[p])
			}
		}
	}
	return min(tmath.Quantile(kept, SkyQuantile), MaxSkyDepth)
}
