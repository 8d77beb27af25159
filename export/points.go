package export

import (
	"errors"
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
	// Sources are the Source paths of the views the points come from: WritePLY refuses to replace them.
	Sources []string
}

// Len returns the number of points.
func (pc *PointCloud) Len() int { return len(pc.View) }

// NewPointCloud back-projects every selected pixel of every view: X_cam = K⁻¹·[u, v, 1]·depth at the
// integer pixel (u, v) = (column, row) (for a camera with a Lens: the lens's ray through the pixel's
// centre, scaled to z = 1, times depth), X_world = E⁻¹·[X_cam; 1] with E the view's world-to-camera
// extrinsics; the colour is the view's RGB at that pixel (grey 128 without RGB). Points are computed in
// float64 and stored as float32; non-finite points are dropped.
func NewPointCloud(views []View, opt Options) (*PointCloud, error) {
	if err := checkViews(views, true); err != nil {
		return nil, err
	}
	pc, err := newPointCloud(ViewSlice(views), opt, 0, 0)
	if pc != nil {
		pc.Sources = sources(views)
	}
	return pc, err
}

// NewPointCloudFrom builds the cloud of NewPointCloud from views read one at a time, for scenes too large
// to hold (a streamed reconstruction on disk), and keeps at most maxPoints of its points (≤ 0: all),
// chosen uniformly without replacement (reservoir sampling, seeded) and kept in view, row, column order.
// The confidence threshold is the one NewPointCloud computes over all the views, found exactly in constant
// memory (two passes over the views' confidence); a third pass selects the points. Memory holds one view
// and the points kept. Its sample differs from Subsample's for the same seed.
func NewPointCloudFrom(src ViewSource, opt Options, maxPoints int, seed uint64) (*PointCloud, error) {
	if src.Len() == 0 {
		return nil, errors.New("no views")
	}
	return newPointCloud(src, opt, maxPoints, seed)
}

func newPointCloud(src ViewSource, opt Options, maxPoints int, seed uint64) (*PointCloud, error) {
	if opt.ConfPercentile < 0 || opt.ConfPercentile > 100 || opt.EnsurePercentile < 0 || opt.EnsurePercentile > 100 {
		return nil, fmt.Errorf("confidence percentiles %g, %g out of range 0–100", opt.ConfPercentile, opt.EnsurePercentile)
	}
	if math.IsNaN(opt.ConfThreshold) {
		return nil, fmt.Errorf("confidence threshold is NaN")
	}
	thr, err := confThreshold(src, opt)
	if err != nil {
		return nil, err
	}
	hasConf := !math.IsNaN(float64(thr))
	res := newReservoir(maxPoints, seed, hasConf)
	for vi := range src.Len() {
		v, err := readView(src, vi)
		if err != nil {
			return nil, err
		}
		conf := opt.effectiveConf(&v)
		ray := pixelRays(v.Camera, v.Width, v.Height)
		c2w, _ := camToWorld(v.Camera.Extrinsics)
		for y := range v.Height {
			for x := range v.Width {
				i := y*v.Width + x
				d := v.Depth[i]
				if !(d > 0) || math.IsInf(float64(d), 1) {
					continue
				}
				c := float32(math.NaN())
				switch {
				case conf != nil:
					if c = conf[i]; !(c >= thr) {
						continue
					}
				case opt.background(&v, i):
					continue
				}
				if v.Sky != nil && !opt.KeepSky && v.Sky[i] >= opt.SkyThreshold {
					continue
				}
				r, ok := ray(x, y)
				if !ok {
					continue
				}
				dd := float64(d)
				p := apply34(c2w, [3]float64{r[0] * dd, r[1] * dd, r[2] * dd})
				p32 := [3]float32{float32(p[0]), float32(p[1]), float32(p[2])}
				if !finite32(p32[0]) || !finite32(p32[1]) || !finite32(p32[2]) {
					continue
				}
				col := [3]uint8{128, 128, 128}
				if v.RGB != nil {
					col = [3]uint8(v.RGB[3*i : 3*i+3])
				}
				res.offer(p32, col, c, int32(vi), int32(i))
			}
		}
	}
	pc := res.cloud()
	pc.Threshold = thr
	return pc, nil
}

// pixelRays returns the function giving the back-projection direction of pixel (x, y) of a view's w × h
// maps, scaled so that its z is 1 (a point is the direction times the z-depth): K⁻¹·[x, y, 1] for a
// pinhole camera, the lens's ray through the pixel's centre divided by its z for a camera with a Lens
// (ok is false where the lens has no ray or the ray is at or beyond 90° from the axis).
func pixelRays(c *Camera, w, h int) func(x, y int) ([3]float64, bool) {
	if c.Lens != nil {
		l := c.Lens.Rescaled(w, h)
		return func(x, y int) ([3]float64, bool) {
			r, ok := l.Unproject(float64(x)+0.5, float64(y)+0.5)
			if !ok || !(r[2] > 1e-12) {
				return r, false
			}
			return [3]float64{r[0] / r[2], r[1] / r[2], 1}, true
		}
	}
	kinv, _ := inverse3(c.Intrinsics)
	return func(x, y int) ([3]float64, bool) {
		u, w := float64(x), float64(y)
		return [3]float64{
			kinv[0][0]*u + kinv[0][1]*w + kinv[0][2],
			kinv[1][0]*u + kinv[1][1]*w + kinv[1][2],
			kinv[2][0]*u + kinv[2][1]*w + kinv[2][2],
		}, true
	}
}

// readView reads view i of src and validates it (with its camera and maps).
func readView(src ViewSource, i int) (View, error) {
	v, err := src.View(i)
	if err != nil {
		return View{}, fmt.Errorf("view %d: %w", i, err)
	}
	return v, v.check(i, true, true)
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

// effectiveConf returns the view's confidence with the background filters applied (a copy only when a
// filter changes it); nil for a view without confidence.
func (o *Options) effectiveConf(v *View) []float32 {
	if v.Conf == nil || v.RGB == nil || (!o.FilterBlackBG && !o.FilterWhiteBG) {
		return v.Conf
	}
	c := slices.Clone(v.Conf)
	for i := range c {
		if o.background(v, i) {
			c[i] = 1
		}
	}
	return c
}

// confThreshold is the official get_conf_thresh, in float32 as numpy compares a float32 map with it; NaN
// when no view has confidence. NaN confidences are left out of the percentiles. The percentiles' order
// statistics are found with two passes over the views (radixSelect), so the views need not be held.
func confThreshold(src ViewSource, opt Options) (float32, error) {
	pass := func(fn func(c float32, sky bool)) error {
		for vi := range src.Len() {
			v, err := readView(src, vi)
			if err != nil {
				return err
			}
			for i, c := range opt.effectiveConf(&v) {
				fn(c, v.Sky != nil && v.Sky[i] >= opt.SkyThreshold)
			}
		}
		return nil
	}
	var all, nonSky radixSelect
	nNonSky := 0
	err := pass(func(c float32, sky bool) {
		if !sky {
			nNonSky++
		}
		if math.IsNaN(float64(c)) {
			return
		}
		all.add1(c)
		if !sky {
			nonSky.add1(c)
		}
	})
	if err != nil || all.n == 0 {
		return float32(math.NaN()), err
	}
	sel, skipSky := &all, false
	if nNonSky > 10 && nNonSky < all.n {
		sel, skipSky = &nonSky, true
	}
	l0, l1, lg := percentileRanks(sel.n, opt.ConfPercentile)
	u0, u1, ug := percentileRanks(sel.n, opt.EnsurePercentile)
	sel.want(l0, l1, u0, u1)
	err = pass(func(c float32, sky bool) {
		if !math.IsNaN(float64(c)) && !(skipSky && sky) {
			sel.add2(c)
		}
	})
	if err != nil {
		return 0, err
	}
	lower := lerpPercentile(sel.value(l0), sel.value(l1), lg)
	upper := lerpPercentile(sel.value(u0), sel.value(u1), ug)
	return min(max(float32(opt.ConfThreshold), lower), upper), nil
}

// reservoir collects points: all of them, or a uniform sample of at most n (Vitter's algorithm R: the
// k-th point offered replaces a random slot with probability n/k), put back in the order they came in.
type reservoir struct {
	n       int
	rng     *rand.Rand
	offered int
	order   []int // the offer index of each slot
	pc      PointCloud
	conf    bool
}

func newReservoir(n int, seed uint64, conf bool) *reservoir {
	return &reservoir{n: n, rng: rand.New(rand.NewPCG(seed, 0x243f6a8885a308d3)), conf: conf}
}

func (r *reservoir) offer(p [3]float32, col [3]uint8, c float32, view, pixel int32) {
	k := r.offered
	r.offered++
	slot := len(r.order)
	if r.n > 0 && slot >= r.n {
		if slot = r.rng.IntN(k + 1); slot >= r.n {
			return
		}
		copy(r.pc.Points[3*slot:], p[:])
		copy(r.pc.Colors[3*slot:], col[:])
		if r.conf {
			r.pc.Conf[slot] = c
		}
		r.pc.View[slot], r.pc.Pixel[slot], r.order[slot] = view, pixel, k
		return
	}
	r.pc.Points = append(r.pc.Points, p[:]...)
	r.pc.Colors = append(r.pc.Colors, col[:]...)
	if r.conf {
		r.pc.Conf = append(r.pc.Conf, c)
	}
	r.pc.View = append(r.pc.View, view)
	r.pc.Pixel = append(r.pc.Pixel, pixel)
	r.order = append(r.order, k)
}

// cloud returns the points in the order they were offered.
func (r *reservoir) cloud() *PointCloud {
	if slices.IsSorted(r.order) {
		return &r.pc
	}
	idx := make([]int, len(r.order))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return r.order[a] - r.order[b] })
	return r.pc.pick(idx)
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
	return pc.pick(idx)
}

// pick returns the points idx, in that order, with pc's threshold.
func (pc *PointCloud) pick(idx []int) *PointCloud {
	n := len(idx)
	out := &PointCloud{Threshold: pc.Threshold, Sources: pc.Sources, Points: make([]float32, 0, 3*n), Colors: make([]uint8, 0, 3*n),
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
