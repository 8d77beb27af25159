package export_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

// box is an axis-aligned box; inside: the room seen from within (the far side of the ray's exit).
type box struct {
	lo, hi [3]float64
	inside bool
}

// hit returns the ray's distance to the box's surface (+Inf when it misses).
func (b box) hit(o, d [3]float64) float64 {
	tn, tf := math.Inf(-1), math.Inf(1)
	for a := range 3 {
		t1, t2 := (b.lo[a]-o[a])/d[a], (b.hi[a]-o[a])/d[a]
		tn, tf = math.Max(tn, math.Min(t1, t2)), math.Min(tf, math.Max(t1, t2))
	}
	switch {
	case tn > tf:
		return math.Inf(1)
	case b.inside:
		return tf
	case tn > 0:
		return tn
	}
	return math.Inf(1)
}

// tracksScene is a room (6×3×6) with a box in its middle, seen by n cameras on a circle of radius 1.6
// around the box, looking at it: maps of w×h with an original image of twice that size. Depth is ray
// cast in float64; the colour is a checker of the world position (so colours tell surfaces apart).
type tracksScene struct {
	boxes []box
	views []export.View
}

func newTracksScene(n, w, h int) *tracksScene {
	s := &tracksScene{boxes: []box{{lo: [3]float64{-3, -1.5, -3}, hi: [3]float64{3, 1.5, 3}, inside: true},
		{lo: [3]float64{-0.3, -0.3, -0.3}, hi: [3]float64{0.3, 0.3, 0.3}}}}
	k := [3][3]float64{{0.8 * float64(w), 0, float64(w-1) / 2}, {0, 0.8 * float64(w), float64(h-1) / 2}, {0, 0, 1}}
	ko := [3][3]float64{{2 * k[0][0], 0, 2 * k[0][2]}, {0, 2 * k[1][1], 2 * k[1][2]}, {0, 0, 1}}
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n) * 0.2 // an arc of 72°
		c := [3]float64{1.6 * math.Sin(a), -0.2, -1.6 * math.Cos(a)}
		e := lookAt(c, [3]float64{0, 0, 0})
		v := export.View{Name: fmt.Sprintf("v%02d.png", i), Width: w, Height: h, Depth: make([]float32, w*h),
			RGB: make([]uint8, 3*w*h), OrigWidth: 2 * w, OrigHeight: 2 * h,
			Camera: &export.Camera{Extrinsics: e, Intrinsics: k, IntrinsicsOriginal: ko}}
		for y := range h {
			for x := range w {
				d, p := s.cast(e, k, float64(x), float64(y))
				v.Depth[y*w+x] = float32(d)
				c := checker(p)
				copy(v.RGB[3*(y*w+x):], c[:])
			}
		}
		s.views = append(s.views, v)
	}
	return s
}

// lookAt is the world-to-camera extrinsics of a camera at c looking at target (OpenCV axes, y down).
func lookAt(c, target [3]float64) [3][4]float64 {
	z := unit(sub(target, c))
	x := unit(cross([3]float64{0, 1, 0}, z))
	y := cross(z, x)
	var e [3][4]float64
	for r, ax := range [3][3]float64{x, y, z} {
		e[r] = [4]float64{ax[0], ax[1], ax[2], -(ax[0]*c[0] + ax[1]*c[1] + ax[2]*c[2])}
	}
	return e
}

// cast returns the depth (along the optical axis) and world point seen at pixel (x, y).
func (s *tracksScene) cast(e [3][4]float64, k [3][3]float64, x, y float64) (float64, [3]float64) {
	dc := [3]float64{(x - k[0][2]) / k[0][0], (y - k[1][2]) / k[1][1], 1}
	var o, d [3]float64
	for a := range 3 { // camera centre and world direction: R^T (dc) and −R^T t
		for r := range 3 {
			d[a] += e[r][a] * dc[r]
			o[a] -= e[r][a] * e[r][3]
		}
	}
	t := math.Inf(1)
	for _, b := range s.boxes {
		t = math.Min(t, b.hit(o, d))
	}
	return t, [3]float64{o[0] + t*d[0], o[1] + t*d[1], o[2] + t*d[2]}
}

// onSurface is the distance of p to the nearest box face.
func (s *tracksScene) onSurface(p [3]float64) float64 {
	best := math.Inf(1)
	for _, b := range s.boxes {
		for a := range 3 {
			for _, f := range []float64{b.lo[a], b.hi[a]} {
				inFace := true
				for c := range 3 {
					if c != a && (p[c] < b.lo[c]-1e-3 || p[c] > b.hi[c]+1e-3) {
						inFace = false
					}
				}
				if inFace {
					best = math.Min(best, math.Abs(p[a]-f))
				}
			}
		}
	}
	return best
}

func checker(p [3]float64) [3]uint8 {
	n := int(math.Floor(p[0]*5)) + int(math.Floor(p[1]*5)) + int(math.Floor(p[2]*5))
	if n&1 == 0 {
		return [3]uint8{200, 180, 60}
	}
	return [3]uint8{40, 70, 160}
}

func sub(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
func unit(a [3]float64) [3]float64 {
	n := math.Sqrt(a[0]*a[0] + a[1]*a[1] + a[2]*a[2])
	return [3]float64{a[0] / n, a[1] / n, a[2] / n}
}

// checkTracks asserts the model's bookkeeping: every track element names a 2D point of its image that
// names the point back, no 2D point is shared, images observe a point at most once.
func checkTracks(t *testing.T, m *export.COLMAPModel) {
	t.Helper()
	used := map[[2]uint32]bool{}
	for _, p := range m.Points {
		imgs := map[uint32]bool{}
		for _, tr := range p.Track {
			require.False(t, imgs[tr.ImageID], "point %d seen twice by image %d", p.ID, tr.ImageID)
			imgs[tr.ImageID] = true
			key := [2]uint32{tr.ImageID, tr.Point2DIdx}
			require.False(t, used[key], "2D point shared")
			used[key] = true
			require.Equal(t, int64(p.ID), m.Images[tr.ImageID-1].Points2D[tr.Point2DIdx].Point3DID)
		}
	}
	n := 0
	for _, im := range m.Images {
		n += len(im.Points2D)
	}
	assert.Equal(t, len(used), n, "every 2D point belongs to a track")
}

// TestCOLMAPTracksGroundTruth: on exact depth of a known scene, most points are observed by several
// images, lie on the true surface, reproject within a pixel, and no image observes a point hidden from it
// (the box occludes the wall behind it).
func TestCOLMAPTracksGroundTruth(t *testing.T) {
	s := newTracksScene(6, 64, 48)
	pc, err := export.NewPointCloud(s.views, keepAll())
	require.NoError(t, err)
	m, err := export.NewCOLMAPModelWithTracks(pc, s.views, export.TrackOptions{})
	require.NoError(t, err)
	checkTracks(t, m)
	require.Greater(t, len(m.Points), 300)
	lengths, maxErr, sumErr, hidden := 0, 0.0, 0.0, 0
	for _, p := range m.Points {
		require.GreaterOrEqual(t, len(p.Track), 2)
		lengths += len(p.Track)
		assert.Less(t, s.onSurface(p.XYZ), 0.02, "point %v off the surface", p.XYZ)
		maxErr, sumErr = math.Max(maxErr, p.Error), sumErr+p.Error
		for _, tr := range p.Track {
			v := &s.views[tr.ImageID-1]
			// The image sees this point: nothing nearer along its ray (at the exact projection, which
			// for points at a silhouette may fall just inside the occluder).
			u, w, z := projectOrig(v, p.XYZ)
			if d, _ := s.cast(v.Camera.Extrinsics, v.Camera.Intrinsics, u/2, w/2); d < 0.97*z {
				hidden++
			}
		}
	}
	meanLen, meanErr := float64(lengths)/float64(len(m.Points)), sumErr/float64(len(m.Points))
	t.Logf("%d points, mean track length %.2f, reprojection error mean %.3f max %.3f px, %d of %d observations hidden",
		len(m.Points), meanLen, meanErr, maxErr, hidden, lengths)
	assert.Less(t, float64(hidden), 0.01*float64(lengths), "observations of hidden points: silhouette pixels only")
	assert.Greater(t, meanLen, 2.5, "six overlapping views: points are seen by several")
	assert.Less(t, meanErr, 0.6, "exact depth: within rounding to the nearest pixel (1 px of the original image)")
	assert.Less(t, maxErr, 2.0)
}

// projectOrig maps a world point into the view's original image.
func projectOrig(v *export.View, p [3]float64) (u, w, z float64) {
	e, k := v.Camera.Extrinsics, v.Camera.IntrinsicsOriginal
	var c [3]float64
	for i := range 3 {
		c[i] = e[i][0]*p[0] + e[i][1]*p[1] + e[i][2]*p[2] + e[i][3]
	}
	return k[0][0]*c[0]/c[2] + k[0][2], k[1][1]*c[1]/c[2] + k[1][2], c[2]
}

// TestCOLMAPTracksRejectDisagreement: a view whose depth disagrees with the point's (noise far above
// the tolerance) observes nothing; colour disagreement likewise; and single-view points are left out.
func TestCOLMAPTracksRejectDisagreement(t *testing.T) {
	s := newTracksScene(3, 48, 36)
	rng := rand.New(rand.NewPCG(1, 2))
	bad := s.views[2]
	bad.Depth = append([]float32(nil), bad.Depth...)
	for i := range bad.Depth {
		bad.Depth[i] *= float32(1 + 0.1 + 0.1*rng.Float64()) // 10–20 % too far
	}
	views := []export.View{s.views[0], s.views[1], bad}
	pc, err := export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	m, err := export.NewCOLMAPModelWithTracks(pc, views, export.TrackOptions{})
	require.NoError(t, err)
	checkTracks(t, m)
	require.NotEmpty(t, m.Points)
	for _, p := range m.Points {
		for _, tr := range p.Track {
			assert.NotEqual(t, uint32(3), tr.ImageID, "the view with wrong depth observes no point")
		}
	}
	// Colours: view 1 all grey, more than 40 levels from both checker colours.
	inv := s.views[1]
	inv.RGB = append([]uint8(nil), inv.RGB...)
	for i := range inv.RGB {
		inv.RGB[i] = 128
	}
	views = []export.View{s.views[0], inv}
	pc, err = export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	m, err = export.NewCOLMAPModelWithTracks(pc, views, export.TrackOptions{})
	require.NoError(t, err)
	assert.Empty(t, m.Points, "two views that agree nowhere in colour share no point")
	m, err = export.NewCOLMAPModelWithTracks(pc, views, export.TrackOptions{ColorTolerance: -1})
	require.NoError(t, err)
	assert.NotEmpty(t, m.Points, "without the colour check the depth alone matches them")
}

// TestCOLMAPTracksRoundTrip: the model with tracks writes and reads back equal, text and binary.
func TestCOLMAPTracksRoundTrip(t *testing.T) {
	s := newTracksScene(4, 32, 24)
	pc, err := export.NewPointCloud(s.views, keepAll())
	require.NoError(t, err)
	want, err := export.NewCOLMAPModelWithTracks(pc, s.views, export.TrackOptions{Stride: 2})
	require.NoError(t, err)
	require.NotEmpty(t, want.Points)
	for _, text := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, export.WriteCOLMAPTracks(dir, pc, s.views, text, export.TrackOptions{Stride: 2}))
		got, err := export.ReadCOLMAP(dir)
		require.NoError(t, err)
		assert.Equal(t, want, got, "text=%v", text)
	}
}

// TestCOLMAPTracksForBundleAdjustment: the scene as a model would give it, depth with 0.5 % noise and
// cameras off by up to 0.6° and 1.5 cm, still yields tracks; their reprojection error is what a bundle
// adjuster reduces. With DA3_COLMAP_BA_DIR set, the model is written there (binary) for
// scripts/colmap_ba.py, which runs pycolmap's bundle adjustment on it (make colmap-ba).
func TestCOLMAPTracksForBundleAdjustment(t *testing.T) {
	s := newTracksScene(6, 96, 72)
	rng := rand.New(rand.NewPCG(3, 4))
	views := make([]export.View, len(s.views))
	for i, v := range s.views {
		v.Depth = append([]float32(nil), v.Depth...)
		for p := range v.Depth {
			v.Depth[p] *= float32(1 + 0.005*rng.NormFloat64())
		}
		if i > 0 {
			cam := *v.Camera
			cam.Extrinsics = perturb(cam.Extrinsics, 0.6*math.Pi/180, 0.015, rng)
			v.Camera = &cam
		}
		views[i] = v
	}
	pc, err := export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	m, err := export.NewCOLMAPModelWithTracks(pc, views, export.TrackOptions{DepthTolerance: 0.04})
	require.NoError(t, err)
	checkTracks(t, m)
	require.Greater(t, len(m.Points), 500)
	sum, n := 0.0, 0
	for _, p := range m.Points {
		sum += p.Error * float64(len(p.Track))
		n += len(p.Track)
	}
	t.Logf("%d points, %d observations, mean reprojection error %.3f px", len(m.Points), n, sum/float64(n))
	assert.Greater(t, sum/float64(n), 0.3, "perturbed cameras: the tracks disagree")
	if dir := os.Getenv("DA3_COLMAP_BA_DIR"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, m.Write(dir, false))
	}
}

// perturb rotates e by a random rotation of angle ang about a random axis and moves it by up to dt.
func perturb(e [3][4]float64, ang, dt float64, rng *rand.Rand) [3][4]float64 {
	a := unit([3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()})
	c, s := math.Cos(ang), math.Sin(ang)
	var r [3][3]float64 // Rodrigues
	for i := range 3 {
		for j := range 3 {
			r[i][j] = (1 - c) * a[i] * a[j]
			if i == j {
				r[i][j] += c
			}
		}
	}
	r[0][1] -= s * a[2]
	r[0][2] += s * a[1]
	r[1][0] += s * a[2]
	r[1][2] -= s * a[0]
	r[2][0] -= s * a[1]
	r[2][1] += s * a[0]
	var out [3][4]float64
	for i := range 3 {
		for j := range 4 {
			for k := range 3 {
				out[i][j] += r[i][k] * e[k][j]
			}
		}
		out[i][3] += dt * (2*rng.Float64() - 1)
	}
	return out
}
