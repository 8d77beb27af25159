package export

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Options select the pixels that become points. Start from DefaultOptions or COLMAPOptions: the zero value
// keeps every pixel with a positive, finite depth except sky.
//
// With confidence maps, a pixel is kept when conf ≥ thr, thr = min(max(ConfThreshold, P_lo), P_hi), where
// P_lo and P_hi are the ConfPercentile and EnsurePercentile percentiles (numpy's linear method) of the
// confidence of all views' non-sky pixels (of all pixels when 10 or fewer are non-sky), as the official
// glb exporter's get_conf_thresh computes it.
type Options struct {
	ConfThreshold    float64 // base threshold (official: 1.05; -Inf for COLMAP)
	ConfPercentile   float64 // lower percentile, 0–100 (official: 40)
	EnsurePercentile float64 // upper percentile clamp, 0–100 (official: 90; 100 for COLMAP)
	// SkyThreshold: pixels whose sky value is ≥ it are sky (0.3, the threshold DA3 uses for its sky
	// depth fill, so exactly the pixels whose depth was overwritten). Sky pixels are dropped unless KeepSky.
	SkyThreshold float32
	KeepSky      bool
	// FilterBlackBG, FilterWhiteBG drop near-black (all channels < 16) or near-white (all ≥ 240) pixels,
	// as the official options of the same names do (they set those pixels' confidence to 1.0).
	FilterBlackBG, FilterWhiteBG bool
}

// DefaultOptions are the official glb exporter's defaults (conf_thresh 1.05, conf_thresh_percentile 40,
// ensure_thresh_percentile 90), used for GLB and PLY.
func DefaultOptions() Options {
	return Options{ConfThreshold: 1.05, ConfPercentile: 40, EnsurePercentile: 90, SkyThreshold: 0.3}
}

// COLMAPOptions are the official colmap exporter's selection: thr = the 40th percentile of the confidence,
// with neither the 1.05 floor nor the 90th-percentile clamp.
func COLMAPOptions() Options {
	return Options{ConfThreshold: math.Inf(-1), ConfPercentile: 40, EnsurePercentile: 100, SkyThreshold: 0.3}
}

// PointCloud is a coloured point cloud in the views' world frame (OpenCV axes), in view, row, column order.
type PointCloud struct {
	Points []float32 // x, y, z per point
	Colors []uint8   // r, g, b per point
	Conf   []float32 // per point; nil when the views have no confidence
	View   []int32   // index of the view each point comes from
	Pixel  []int32   // its pixel in that view, row·Width + column
	// Threshold is the confidence threshold applied (NaN without confidence).
	Threshold float32
}

// Len returns the number of points.
func (pc *PointCloud) Len() int { return len(pc.View) }

// NewPointCloud back-projects every selected pixel of every view: X_cam = K⁻¹·[u, v, 1]·depth at the
// integer pixel (u, v) = (column, row), X_world = E⁻¹·[X_cam; 1] with E the view's world-to-camera
// extrinsics; the colour is the view's RGB at that pixel (grey 128 without RGB). Points are computed in
// float64 and stored as float32; non-finite points are dropped.
func NewPointCloud(views []View, opt Options) (*PointCloud, error) {
	if err := checkViews(views, true); err != nil {
		return nil, err
	}
	if opt.ConfPercentile < 0 || opt.ConfPercentile > 100 || opt.EnsurePercentile < 0 || opt.EnsurePercentile > 100 {
		return nil, fmt.Errorf("confidence percentiles %g, %g out of range 0–100", opt.ConfPercentile, opt.EnsurePercentile)
	}
	if math.IsNaN(opt.ConfThreshold) {
		return nil, fmt.Errorf("confidence threshold is NaN")
	}
	conf := effectiveConf(views, opt)
	thr := confThreshold(views, conf, opt)
	pc := &PointCloud{Threshold: thr}
	hasConf := !math.IsNaN(float64(thr))
	for vi := range views {
		v := &views[vi]
		kinv, _ := inverse3(v.Camera.Intrinsics)
		c2w, _ := camToWorld(v.Camera.Extrinsics)
		for y := range v.Height {
			for x := range v.Width {
				i := y*v.Width + x
				d := v.Depth[i]
				if !(d > 0) || math.IsInf(float64(d), 1) {
					continue
				}
				var c float32
				switch {
				case conf[vi] != nil:
					if c = conf[vi][i]; !(c >= thr) {
						continue
					}
				case opt.background(v, i):
					continue
				}
				if v.Sky != nil && !opt.KeepSky && v.Sky[i] >= opt.SkyThreshold {
					continue
				}
				u, w, dd := float64(x), float64(y), float64(d)
				pcam := [3]float64{
					(kinv[0][0]*u + kinv[0][1]*w + kinv[0][2]) * dd,
					(kinv[1][0]*u + kinv[1][1]*w + kinv[1][2]) * dd,
					(kinv[2][0]*u + kinv[2][1]*w + kinv[2][2]) * dd,
				}
				p := apply34(c2w, pcam)
				p32 := [3]float32{float32(p[0]), float32(p[1]), float32(p[2])}
				if !finite32(p32[0]) || !finite32(p32[1]) || !finite32(p32[2]) {
					continue
				}
				pc.Points = append(pc.Points, p32[:]...)
				if v.RGB != nil {
					pc.Colors = append(pc.Colors, v.RGB[3*i:3*i+3]...)
				} else {
					pc.Colors = append(pc.Colors, 128, 128, 128)
				}
				if hasConf {
					if conf[vi] == nil {
						c = float32(math.NaN())
					}
					pc.Conf = append(pc.Conf, c)
				}
				pc.View = append(pc.View, int32(vi))
				pc.Pixel = append(pc.Pixel, int32(i))
			}
		}
	}
	return pc, nil
}

func finite32(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

// background reports whether pixel i of v is filtered as near-black or near-white background.
func (o *Options) background(v *View, i int) bool {
	if v.RGB == nil || (!o.FilterBlackBG && !o.FilterWhiteBG) {
		return false
	}
	r, g, b := v.RGB[3*i], v.RGB[3*i+1], v.RGB[3*i+2]
	return (o.FilterBlackBG && r < 16 && g < 16 && b < 16) || (o.FilterWhiteBG && r >= 240 && g >= 240 && b >= 240)
}

// effectiveConf returns each view's confidence with the background filters applied (a copy only when a
// filter changes it); nil for views without confidence.
func effectiveConf(views []View, opt Options) [][]float32 {
	out := make([][]float32, len(views))
	for vi := range views {
		v := &views[vi]
		out[vi] = v.Conf
		if v.Conf == nil || v.RGB == nil || (!opt.FilterBlackBG && !opt.FilterWhiteBG) {
			continue
		}
		c := slices.Clone(v.Conf)
		for i := range c {
			if opt.background(v, i) {
				c[i] = 1
			}
		}
		out[vi] = c
	}
	return out
}

// confThreshold is the official get_conf_thresh, in float32 as numpy compares a float32 map with it; NaN
// when no view has confidence. NaN confidences are left out of the percentiles.
func confThreshold(views []View, conf [][]float32, opt Options) float32 {
	var all, nonSky []float32
	nNonSky := 0
	for vi := range views {
		if conf[vi] == nil {
			continue
		}
		sky := views[vi].Sky
		for i, c := range conf[vi] {
			isSky := sky != nil && sky[i] >= opt.SkyThreshold
			if !isSky {
				nNonSky++
			}
			if math.IsNaN(float64(c)) {
				continue
			}
			all = append(all, c)
			if !isSky {
				nonSky = append(nonSky, c)
			}
		}
	}
	if len(all) == 0 {
		return float32(math.NaN())
	}
	pix := all
	if nNonSky > 10 && nNonSky < len(all) {
		pix = nonSky
	}
	s := sorted32(pix)
	lower, upper := percentile(s, opt.ConfPercentile), percentile(s, opt.EnsurePercentile)
	return min(max(float32(opt.ConfThreshold), lower), upper)
}

// Subsample returns at most n points chosen uniformly without replacement (seeded, so runs are
// reproducible), kept in their original order; n ≤ 0 or n ≥ Len returns pc itself. The official exporter
// draws with numpy.random.choice, so its selection cannot be reproduced.
func (pc *PointCloud) Subsample(n int, seed uint64) *PointCloud {
	total := pc.Len()
	if n <= 0 || n >= total {
		return pc
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	idx := r.Perm(total)[:n]
	slices.Sort(idx)
	out := &PointCloud{Threshold: pc.Threshold, Points: make([]float32, 0, 3*n), Colors: make([]uint8, 0, 3*n),
		View: make([]int32, 0, n), Pixel: make([]int32, 0, n)}
	if pc.Conf != nil {
		out.Conf = make([]float32, 0, n)
	}
	for _, i := range idx {
		out.Points = append(out.Points, pc.Points[3*i:3*i+3]...)
		out.Colors = append(out.Colors, pc.Colors[3*i:3*i+3]...)
		if pc.Conf != nil {
			out.Conf = append(out.Conf, pc.Conf[i])
		}
		out.View = append(out.View, pc.View[i])
		out.Pixel = append(out.Pixel, pc.Pixel[i])
	}
	return out
}

// check validates the cloud's slice lengths.
func (pc *PointCloud) check() error {
	n := pc.Len()
	if len(pc.Points) != 3*n || len(pc.Colors) != 3*n || len(pc.Pixel) != n || (pc.Conf != nil && len(pc.Conf) != n) {
		return fmt.Errorf("inconsistent point cloud: %d points, %d coordinates, %d colour values, %d pixels, %d confidences",
			n, len(pc.Points), len(pc.Colors), len(pc.Pixel), len(pc.Conf))
	}
	return nil
}
