package export_test

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

func TestPointCloudBackProjects(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	require.Equal(t, 2*8*6, pc.Len())
	for j := range pc.Len() {
		v := &views[pc.View[j]]
		px := int(pc.Pixel[j])
		p := [3]float64{float64(pc.Points[3*j]), float64(pc.Points[3*j+1]), float64(pc.Points[3*j+2])}
		u, w, d := project(v, p)
		assert.InDelta(t, float64(px%v.Width), u, 1e-5, "point %d column", j)
		assert.InDelta(t, float64(px/v.Width), w, 1e-5, "point %d row", j)
		assert.InDelta(t, float64(v.Depth[px]), d, 1e-5, "point %d depth", j)
		assert.Equal(t, v.RGB[3*px:3*px+3], pc.Colors[3*j:3*j+3])
		assert.Equal(t, v.Conf[px], pc.Conf[j])
	}
	// Order: view, row, column.
	assert.True(t, slices.IsSorted(pc.View))
	assert.Equal(t, int32(0), pc.Pixel[0])
	assert.Equal(t, int32(1), pc.Pixel[1])
}

// TestConfidenceThreshold checks the official rule thr = min(max(1.05, P40), P90) with a percentile
// computed here from the sorted confidences.
func TestConfidenceThreshold(t *testing.T) {
	views := scene()
	var all []float32
	for _, v := range views {
		all = append(all, v.Conf...)
	}
	slices.Sort(all)
	pct := func(q float64) float32 { // numpy linear percentile; 95 values, so index = q·0.95 exactly enough
		idx := q / 100 * float64(len(all)-1)
		lo := int(idx)
		return all[lo] + (all[min(lo+1, len(all)-1)]-all[lo])*float32(idx-float64(lo))
	}
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	want := min(max(float32(1.05), pct(40)), pct(90))
	assert.InDelta(t, want, pc.Threshold, 1e-6)
	n := 0
	for _, c := range all {
		if c >= pc.Threshold {
			n++
		}
	}
	assert.Equal(t, n, pc.Len())
	assert.Less(t, pc.Len(), len(all))
	for _, c := range pc.Conf {
		assert.GreaterOrEqual(t, c, pc.Threshold)
	}

	// The floor wins when the percentiles are lower.
	opt := export.DefaultOptions()
	opt.ConfThreshold = 1.2
	pc, err = export.NewPointCloud(views, opt)
	require.NoError(t, err)
	assert.Equal(t, float32(1.2), pc.Threshold)
	// COLMAP: the bare 40th percentile.
	pc, err = export.NewPointCloud(views, export.COLMAPOptions())
	require.NoError(t, err)
	assert.InDelta(t, pct(40), pc.Threshold, 1e-6)
}

func TestPointCloudDropsInvalidSkyAndBackground(t *testing.T) {
	views := scene()
	views[0].Depth[0] = 0
	views[0].Depth[1] = float32(math.NaN())
	views[0].Depth[2] = -1
	views[0].Depth[3] = float32(math.Inf(1))
	views[1].Sky = make([]float32, 48)
	views[1].Sky[5], views[1].Sky[6] = 0.3, 2 // sky from 0.3 on
	views[1].Sky[7] = 0.29
	pc, err := export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	assert.Equal(t, 96-4-2, pc.Len())
	for j := range pc.Len() {
		assert.False(t, pc.View[j] == 0 && pc.Pixel[j] < 4, "invalid depth kept")
		assert.False(t, pc.View[j] == 1 && (pc.Pixel[j] == 5 || pc.Pixel[j] == 6), "sky kept")
	}
	opt := keepAll()
	opt.KeepSky = true
	pc, err = export.NewPointCloud(views, opt)
	require.NoError(t, err)
	assert.Equal(t, 96-4, pc.Len())

	// Without confidence, background filters drop pixels directly.
	views = scene()
	for i := range views {
		views[i].Conf = nil
	}
	copy(views[0].RGB[0:3], []uint8{3, 15, 0})      // near black
	copy(views[0].RGB[3:6], []uint8{240, 250, 255}) // near white
	copy(views[0].RGB[6:9], []uint8{3, 16, 0})      // not black
	opt = keepAll()
	opt.FilterBlackBG, opt.FilterWhiteBG = true, true
	pc, err = export.NewPointCloud(views, opt)
	require.NoError(t, err)
	assert.Equal(t, 94, pc.Len())
	assert.Nil(t, pc.Conf)
	assert.True(t, math.IsNaN(float64(pc.Threshold)))
}

func TestSubsample(t *testing.T) {
	pc, err := export.NewPointCloud(scene(), keepAll())
	require.NoError(t, err)
	a := pc.Subsample(10, 1)
	b := pc.Subsample(10, 1)
	c := pc.Subsample(10, 2)
	require.Equal(t, 10, a.Len())
	assert.Equal(t, a, b, "same seed, same points")
	assert.NotEqual(t, a.Pixel, c.Pixel, "another seed, other points")
	// A subset, in the original order.
	prev := -1
	for j := range a.Len() {
		found := -1
		for i := range pc.Len() {
			if pc.View[i] == a.View[j] && pc.Pixel[i] == a.Pixel[j] {
				found = i
			}
		}
		require.GreaterOrEqual(t, found, 0)
		assert.Greater(t, found, prev)
		prev = found
		assert.Equal(t, pc.Points[3*found:3*found+3], a.Points[3*j:3*j+3])
		assert.Equal(t, pc.Conf[found], a.Conf[j])
	}
	assert.Same(t, pc, pc.Subsample(0, 1))
	assert.Same(t, pc, pc.Subsample(1000, 1))
}

func TestPointCloudErrors(t *testing.T) {
	cases := []struct {
		name   string
		modify func(v []export.View)
		want   string
	}{
		{"no camera", func(v []export.View) { v[1].Camera = nil }, "no camera"},
		{"short depth", func(v []export.View) { v[0].Depth = v[0].Depth[:10] }, "needs 48 depth values, got 10"},
		{"short conf", func(v []export.View) { v[0].Conf = v[0].Conf[:10] }, "confidence values"},
		{"short rgb", func(v []export.View) { v[1].RGB = v[1].RGB[:5] }, "RGB values"},
		{"zero size", func(v []export.View) { v[0].Width = 0 }, "invalid map size"},
		{"singular K", func(v []export.View) {
			c := *v[0].Camera
			c.Intrinsics[0][0] = 0
			c.Intrinsics[0][2] = 0
			v[0].Camera = &c
		}, "not invertible"},
		{"nan pose", func(v []export.View) {
			c := *v[0].Camera
			c.Extrinsics[0][3] = math.NaN()
			v[0].Camera = &c
		}, "not finite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := scene()
			tc.modify(v)
			_, err := export.NewPointCloud(v, export.DefaultOptions())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := export.NewPointCloud(nil, export.DefaultOptions())
	assert.ErrorContains(t, err, "no views")
	opt := export.DefaultOptions()
	opt.ConfPercentile = 101
	_, err = export.NewPointCloud(scene(), opt)
	assert.ErrorContains(t, err, "out of range")
}
