package export

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/lens"
)

// lensPlane is the plane n·X = 2.5 of the lens tests, in the camera frame.
var lensPlaneN = [3]float64{0.2 / math.Sqrt(1.05), -0.1 / math.Sqrt(1.05), 1 / math.Sqrt(1.05)}

const lensPlaneD = 2.5

// planeDepth is the plane's z-depth along each pixel centre's ray of c (NaN where it has none).
func planeDepth(c *lens.Camera) []float32 {
	d := make([]float32, c.Width*c.Height)
	for j := range c.Height {
		for i := range c.Width {
			r, ok := c.Unproject(float64(i)+0.5, float64(j)+0.5)
			den := r[0]*lensPlaneN[0] + r[1]*lensPlaneN[1] + r[2]*lensPlaneN[2]
			if !ok || den <= 0 || r[2] <= 0 {
				d[j*c.Width+i] = float32(math.NaN())
				continue
			}
			d[j*c.Width+i] = float32(lensPlaneD / den * r[2])
		}
	}
	return d
}

func fisheyeLens(t *testing.T) *lens.Camera {
	t.Helper()
	c, err := lens.New(lens.OpenCVFisheye, 96, 64, []float64{45, 46, 48.2, 31.7, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	return c
}

// TestPointCloudLens: with a Lens the points follow its rays, so the true depth of a plane seen through
// a fisheye gives points on the plane; the pinhole part alone would not.
func TestPointCloudLens(t *testing.T) {
	c := fisheyeLens(t)
	cam := &Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: c.K(), Lens: c}
	v := View{Name: "f.png", Width: c.Width, Height: c.Height, Depth: planeDepth(c), Camera: cam}
	dist := func(pc *PointCloud) (worst float64) {
		for k := range pc.Len() {
			p := pc.Points[3*k : 3*k+3]
			worst = max(worst, math.Abs(float64(p[0])*lensPlaneN[0]+float64(p[1])*lensPlaneN[1]+float64(p[2])*lensPlaneN[2]-lensPlaneD))
		}
		return worst
	}
	pc, err := NewPointCloud([]View{v}, Options{})
	require.NoError(t, err)
	assert.Equal(t, c.Width*c.Height, pc.Len())
	assert.Less(t, dist(pc), 1e-5)
	pinhole := *cam
	pinhole.Lens = nil
	v.Camera = &pinhole
	pc0, err := NewPointCloud([]View{v}, Options{})
	require.NoError(t, err)
	assert.Greater(t, dist(pc0), 0.1)

	// The COLMAP export writes the lens, and reads back as written.
	v.Camera = cam
	m, err := NewCOLMAPModel(pc, []View{v})
	require.NoError(t, err)
	require.Len(t, m.Cameras, 1)
	assert.Equal(t, OpenCVFisheye, m.Cameras[0].Model)
	assert.Equal(t, c.Params, m.Cameras[0].Params)
	dir := t.TempDir()
	require.NoError(t, m.Write(dir, true))
	back, err := ReadCOLMAP(dir)
	require.NoError(t, err)
	assert.Equal(t, c.Params, back.Cameras[0].Params)
	ps, err := back.Poses([]string{"f.png"})
	require.NoError(t, err)
	require.NotNil(t, ps[0].Lens)
	assert.Equal(t, lens.OpenCVFisheye, ps[0].Lens.Model)
	assert.True(t, ps[0].Distorted)

	// A lens for another image size is refused.
	bad := *cam
	bad.Lens = c.WithSize(10, 10)
	v.Camera = &bad
	_, err = NewPointCloud([]View{v}, Options{})
	assert.ErrorContains(t, err, "lens is for a 10x10 image")
}

// TestDistortView: a view of the plane computed in the undistorted pinhole frame, at half the size,
// mapped back: its points lie on the plane, its maps are in the fisheye frame, its camera carries the lens.
func TestDistortView(t *testing.T) {
	c := fisheyeLens(t)
	p, err := lens.PinholeFor(c, lens.PinholeOptions{})
	require.NoError(t, err)
	u, err := lens.NewUndistorter(c, p)
	require.NoError(t, err)
	ph := p.Rescaled(48, 32)
	depth := planeDepth(ph)
	conf := make([]float32, len(depth))
	for k := range conf {
		conf[k] = 2
	}
	k := ph.K()
	v := View{Name: "f.png", Width: 48, Height: 32, Depth: depth, Conf: conf, RGB: make([]uint8, 3*48*32),
		Camera: &Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: k, IntrinsicsOriginal: p.K()}}
	out, err := DistortView(v, u)
	require.NoError(t, err)
	assert.Equal(t, 48, out.Width)
	assert.Equal(t, c.Width, out.OrigWidth)
	require.NotNil(t, out.Camera.Lens)
	assert.Equal(t, c, out.Camera.Lens)
	truth := planeDepth(c.Rescaled(48, 32))
	nan, worst := 0, 0.0
	for i, d := range out.Depth {
		if math.IsNaN(float64(d)) {
			nan++
			assert.True(t, math.IsNaN(float64(out.Conf[i])))
			continue
		}
		worst = max(worst, math.Abs(float64(d-truth[i]))/float64(truth[i]))
		assert.Equal(t, float32(2), out.Conf[i])
	}
	t.Logf("%d of %d pixels outside the pinhole view; depth max rel err %.2g", nan, len(out.Depth), worst)
	assert.Less(t, worst, 1e-2) // bilinear on a coarse 48×32 map of a steep plane
	assert.Greater(t, nan, 0, "the fisheye rim is outside a frame-filling pinhole view")
	pc, err := NewPointCloud([]View{out}, Options{})
	require.NoError(t, err)
	assert.Equal(t, len(out.Depth)-nan, pc.Len())
	for q := range pc.Len() {
		pt := pc.Points[3*q : 3*q+3]
		assert.InDelta(t, lensPlaneD, float64(pt[0])*lensPlaneN[0]+float64(pt[1])*lensPlaneN[1]+float64(pt[2])*lensPlaneN[2], 1e-2*lensPlaneD)
	}
}

// TestPosesLens: Poses gives the lens of a distorted camera; a distortion-free OPENCV camera is a pinhole
// one; a model package lens does not implement (FOV) stays Distorted without a lens.
func TestPosesLens(t *testing.T) {
	m := &COLMAPModel{
		Cameras: []COLMAPCamera{
			{ID: 1, Model: OpenCV, Width: 64, Height: 48, Params: []float64{50, 50, 32, 24, -0.2, 0.05, 0, 0}},
			{ID: 2, Model: OpenCV, Width: 64, Height: 48, Params: []float64{50, 50, 32, 24, 0, 0, 0, 0}},
			{ID: 3, Model: FOV, Width: 64, Height: 48, Params: []float64{50, 50, 32, 24, 0.9}},
		},
		Images: []COLMAPImage{{ID: 1, Q: [4]float64{1, 0, 0, 0}, CameraID: 1, Name: "a.png"},
			{ID: 2, Q: [4]float64{1, 0, 0, 0}, CameraID: 2, Name: "b.png"}, {ID: 3, Q: [4]float64{1, 0, 0, 0}, CameraID: 3, Name: "c.png"}},
	}
	ps, err := m.Poses([]string{"a.png", "b.png", "c.png"})
	require.NoError(t, err)
	require.NotNil(t, ps[0].Lens)
	assert.Equal(t, lens.OpenCV, ps[0].Lens.Model)
	assert.True(t, ps[0].Distorted)
	assert.Nil(t, ps[1].Lens)
	assert.False(t, ps[1].Distorted)
	assert.Nil(t, ps[2].Lens)
	assert.True(t, ps[2].Distorted)
}
