package export

import (
	"fmt"
	"math"
)

// TrackOptions configure NewCOLMAPModelWithTracks; a zero field takes its default.
type TrackOptions struct {
	// Stride: a view seeds a 3D point at most every Stride pixels of its maps in each direction, and the
	// pixels within Stride/2 of an observation seed no other point; default 4.
	Stride int
	// DepthTolerance: another view observes a point when its own depth at the point's projection is
	// within this fraction of the point's depth in that view; default 0.02.
	DepthTolerance float64
	// ColorTolerance: ... and its colour there is within this many levels (0–255, mean over the channels)
	// of the seed pixel's; default 40; negative: colours are not compared.
	ColorTolerance int
	// MinViews: points observed by fewer views are left out; default 2 (a bundle adjuster learns nothing
	// from a point seen once).
	MinViews int
}

func (o TrackOptions) withDefaults() TrackOptions {
	if o.Stride <= 0 {
		o.Stride = 4
	}
	if o.DepthTolerance <= 0 {
		o.DepthTolerance = 0.02
	}
	if o.ColorTolerance == 0 {
		o.ColorTolerance = 40
	}
	if o.MinViews <= 0 {
		o.MinViews = 2
	}
	return o
}

// NewCOLMAPModelWithTracks builds a sparse model whose points are observed by several images, so that
// a bundle adjuster (COLMAP's, pycolmap's) can refine them with the cameras. Cameras and images are those
// of NewCOLMAPModel. Points come from the cloud's pixels (its confidence and sky selection): each view in
// turn seeds a point at every Stride-th pixel not yet observed; the point is projected into every other
// view, which observes it at the nearest pixel when that pixel is in the cloud, is not observed yet, and
// its depth and colour agree with the point's (TrackOptions). The point is the mean of its observations'
// back-projections, its colour the seed's, its error the mean reprojection error in pixels of the
// original images; each 2D point is its pixel's position in the original image (not truncated).
// The views need their depth maps and pinhole cameras (no Lens).
func NewCOLMAPModelWithTracks(pc *PointCloud, views []View, opt TrackOptions) (*COLMAPModel, error) {
	if err := pc.check(); err != nil {
		return nil, err
	}
	if err := checkAll(views, true, true); err != nil {
		return nil, err
	}
	for i := range views {
		if views[i].Camera.Lens != nil {
			return nil, fmt.Errorf("view %d: COLMAP tracks need pinhole views, and this one has a lens model (keep the undistorted views)", i)
		}
	}
	m, maps, err := colmapCameras(views)
	if err != nil {
		return nil, err
	}
	t, err := newTracker(pc, views, opt.withDefaults())
	if err != nil {
		return nil, err
	}
	s := t.opt.Stride
	for i := range views {
		w, h := views[i].Width, views[i].Height
		for y := s / 2; y < h; y += s {
			for x := s / 2; x < w; x += s {
				if obs, X, ok := t.follow(i, y*w+x); ok {
					m.addTrack(obs, X, pc.Colors[3*t.index[i][y*w+x]:], views, maps)
				}
			}
		}
	}
	return m, nil
}

// observation is a pixel of a view.
type observation struct{ view, pixel int }

// tracker finds the views that observe a point.
type tracker struct {
	pc      *PointCloud
	views   []View
	opt     TrackOptions
	index   [][]int32 // per view and pixel: the cloud's point there, or −1
	claimed [][]bool  // per view and pixel: observed by a point already
}

func newTracker(pc *PointCloud, views []View, opt TrackOptions) (*tracker, error) {
	t := &tracker{pc: pc, views: views, opt: opt, index: make([][]int32, len(views)), claimed: make([][]bool, len(views))}
	for i := range views {
		n := views[i].Width * views[i].Height
		t.index[i] = make([]int32, n)
		for p := range t.index[i] {
			t.index[i][p] = -1
		}
		t.claimed[i] = make([]bool, n)
	}
	for j := range pc.Len() {
		vi, px := int(pc.View[j]), int(pc.Pixel[j])
		if vi < 0 || vi >= len(views) || px < 0 || px >= len(t.index[vi]) {
			return nil, fmt.Errorf("point %d: view %d pixel %d outside the views", j, vi, px)
		}
		t.index[vi][px] = int32(j)
	}
	return t, nil
}

// follow seeds a point at pixel p of view i and finds the other views that observe it. It returns the
// observations, the point (mean of their back-projections) and whether there are at least MinViews;
// when there are, their pixels' neighbourhoods are claimed.
func (t *tracker) follow(i, p int) ([]observation, [3]float64, bool) {
	j := t.index[i][p]
	if j < 0 || t.claimed[i][p] {
		return nil, [3]float64{}, false
	}
	X := t.point(j)
	obs := []observation{{i, p}}
	sum := X
	for k := range t.views {
		if k == i {
			continue
		}
		q, ok := t.observes(k, X, j)
		if !ok {
			continue
		}
		obs = append(obs, observation{k, q})
		Y := t.point(t.index[k][q])
		for c := range 3 {
			sum[c] += Y[c]
		}
	}
	if len(obs) < t.opt.MinViews {
		return nil, [3]float64{}, false
	}
	for _, o := range obs {
		t.claim(o)
	}
	n := float64(len(obs))
	return obs, [3]float64{sum[0] / n, sum[1] / n, sum[2] / n}, true
}

// observes reports the pixel at which view k observes the world point X seeded by the cloud's point j:
// the pixel nearest X's projection, when it is in the cloud, not observed yet, its depth agrees with X's
// (bilinear at the projection) and its colour with the seed's.
func (t *tracker) observes(k int, X [3]float64, j int32) (int, bool) {
	v := &t.views[k]
	u, w, z := projectPoint(v.Camera.Extrinsics, v.Camera.Intrinsics, X)
	if !(z > 0) || math.IsInf(u, 0) || math.IsInf(w, 0) {
		return 0, false
	}
	x, y := int(math.Round(u)), int(math.Round(w))
	if x < 0 || y < 0 || x >= v.Width || y >= v.Height {
		return 0, false
	}
	q := y*v.Width + x
	jq := t.index[k][q]
	if jq < 0 || t.claimed[k][q] {
		return 0, false
	}
	if math.Abs(depthAt(v, u, w, float64(v.Depth[q]))-z) > t.opt.DepthTolerance*z {
		return 0, false
	}
	if t.opt.ColorTolerance >= 0 && colourDistance(t.pc.Colors[3*j:3*j+3], t.pc.Colors[3*jq:3*jq+3]) > float64(t.opt.ColorTolerance) {
		return 0, false
	}
	return q, true
}

// depthAt is the view's depth at the sub-pixel position (u, w), bilinear between the four pixels around
// it when all four have a finite positive depth (on a slanted surface the nearest pixel's depth is off by
// up to half a pixel's slope), else nearest, the pixel's depth.
func depthAt(v *View, u, w, nearest float64) float64 {
	x0, y0 := int(math.Floor(u)), int(math.Floor(w))
	if x0 < 0 || y0 < 0 || x0+1 >= v.Width || y0+1 >= v.Height {
		return nearest
	}
	fx, fy := u-float64(x0), w-float64(y0)
	i := y0*v.Width + x0
	d := [4]float64{float64(v.Depth[i]), float64(v.Depth[i+1]), float64(v.Depth[i+v.Width]), float64(v.Depth[i+v.Width+1])}
	for _, x := range d {
		if !(x > 0) || math.IsInf(x, 0) {
			return nearest
		}
	}
	return (d[0]*(1-fx)+d[1]*fx)*(1-fy) + (d[2]*(1-fx)+d[3]*fx)*fy
}

// claim marks the pixels within Stride/2 of o as observed.
func (t *tracker) claim(o observation) {
	w, h := t.views[o.view].Width, t.views[o.view].Height
	r := t.opt.Stride / 2
	x0, y0 := o.pixel%w, o.pixel/w
	for y := max(y0-r, 0); y <= min(y0+r, h-1); y++ {
		for x := max(x0-r, 0); x <= min(x0+r, w-1); x++ {
			t.claimed[o.view][y*w+x] = true
		}
	}
}

func (t *tracker) point(j int32) [3]float64 {
	p := t.pc.Points[3*j : 3*j+3]
	return [3]float64{float64(p[0]), float64(p[1]), float64(p[2])}
}

// colourDistance is the mean absolute difference of two RGB triples.
func colourDistance(a, b []uint8) float64 {
	d := 0.0
	for c := range 3 {
		d += math.Abs(float64(a[c]) - float64(b[c]))
	}
	return d / 3
}

// projectPoint maps a world point through world-to-camera e and intrinsics k: pixel (u, v) and depth z.
func projectPoint(e [3][4]float64, k [3][3]float64, X [3]float64) (u, v, z float64) {
	var c [3]float64
	for r := range 3 {
		c[r] = e[r][0]*X[0] + e[r][1]*X[1] + e[r][2]*X[2] + e[r][3]
	}
	return (k[0][0]*c[0]+k[0][1]*c[1])/c[2] + k[0][2], k[1][1]*c[1]/c[2] + k[1][2], c[2]
}

// addTrack appends a point observed by obs at X, with colour rgb (3 values), to the model; its error is
// the mean reprojection error in pixels of the original images.
func (m *COLMAPModel) addTrack(obs []observation, X [3]float64, rgb []uint8, views []View, maps []pixelMap) {
	id := uint64(len(m.Points) + 1)
	pt := COLMAPPoint3D{ID: id, XYZ: X, RGB: [3]uint8{rgb[0], rgb[1], rgb[2]}}
	sumErr := 0.0
	for _, o := range obs {
		v := &views[o.view]
		im := &m.Images[o.view]
		x, y := maps[o.view].exact(float64(o.pixel%v.Width), float64(o.pixel/v.Width))
		im.Points2D = append(im.Points2D, COLMAPPoint2D{X: x, Y: y, Point3DID: int64(id)})
		pt.Track = append(pt.Track, COLMAPTrackElement{ImageID: im.ID, Point2DIdx: uint32(len(im.Points2D) - 1)})
		u, w, _ := projectPoint(v.Camera.Extrinsics, v.Camera.origIntrinsics(), X)
		sumErr += math.Hypot(u-x, w-y)
	}
	pt.Error = sumErr / float64(len(obs))
	m.Points = append(m.Points, pt)
}

// WriteCOLMAPTracks writes the model of NewCOLMAPModelWithTracks into dir (see WriteCOLMAP).
func WriteCOLMAPTracks(dir string, pc *PointCloud, views []View, text bool, opt TrackOptions) error {
	m, err := NewCOLMAPModelWithTracks(pc, views, opt)
	if err != nil {
		return fmt.Errorf("write COLMAP model %s: %w", dir, err)
	}
	return m.write(dir, text, sources(views))
}
