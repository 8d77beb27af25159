package nested_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model/nested"
)

// scene is 12 non-sky pixels and 2 sky pixels, worked by hand:
//   - depth d = 1..12, confidence 1.0, 1.1, …, 2.1: median 1.55, so pixels
//     6..11 are confident enough;
//   - focal 150 (metric depth × 0.5): metric 4d gives 2d, except pixel 11
//     whose metric depth 0.0075 is under 0.01, and the unconfident pixels
//     0..5 whose metric 100d would spoil the fit;
//   - so the fit is pixels 6..10 and scale = Σ 2d·d / Σ d² = 2;
//   - sky pixels: depth 2·quantile(1..12, 0.99) = 2·11.89 = 23.78, confidence 1.
func scene() (depth, conf, metric, sky []float32) {
	for i := 0; i < 12; i++ {
		d := float32(i + 1)
		depth = append(depth, d)
		conf = append(conf, 1+0.1*float32(i))
		switch {
		case i < 6:
			metric = append(metric, 100*d)
		case i == 11:
			metric = append(metric, 0.015)
		default:
			metric = append(metric, 4*d)
		}
		sky = append(sky, 0.29)
	}
	for i := 0; i < 2; i++ {
		depth, conf, metric, sky = append(depth, 50), append(conf, 9), append(metric, 1000), append(sky, 0.3)
	}
	return
}

func TestAlignWorkedExample(t *testing.T) {
	depth, conf, metric, sky := scene()
	v := []nested.View{{Depth: depth, Conf: conf, MetricDepth: metric, Sky: sky, Focal: 150}}
	a, err := nested.Align(v)
	require.NoError(t, err)
	assert.Equal(t, 12, a.NonSky)
	assert.Equal(t, 5, a.Pixels)
	assert.InDelta(t, 1.55, a.MedianConf, 1e-6)
	assert.InDelta(t, 2, a.Scale, 1e-6)
	assert.InDelta(t, 23.78, a.SkyDepth, 1e-5)
	for i := 0; i < 12; i++ {
		assert.InDelta(t, 2*float32(i+1), depth[i], 1e-5, "pixel %d", i)
		assert.InDelta(t, 1+0.1*float32(i), conf[i], 1e-7, "non-sky confidence unchanged")
	}
	for i := 12; i < 14; i++ {
		assert.Equal(t, a.SkyDepth, depth[i], "sky depth")
		assert.Equal(t, float32(1), conf[i], "sky confidence")
	}
	assert.Equal(t, float32(28), metric[6], "metric depth not modified")
}

// The statistics are joint over the views: one scene split into two views
// gives the same scale and maps as one view.
func TestAlignIsJointOverViews(t *testing.T) {
	depth, conf, metric, sky := scene()
	one := []nested.View{{Depth: depth, Conf: conf, MetricDepth: metric, Sky: sky, Focal: 150}}
	want, err := nested.Align(one)
	require.NoError(t, err)

	depth, conf, metric, sky = scene()
	// The second view's camera has twice the focal length: half its metric
	// values give the same metric depth.
	half := make([]float32, 7)
	for i, m := range metric[7:] {
		half[i] = m / 2
	}
	two := []nested.View{
		{Depth: depth[:7], Conf: conf[:7], MetricDepth: metric[:7], Sky: sky[:7], Focal: 150},
		{Depth: depth[7:], Conf: conf[7:], MetricDepth: half, Sky: sky[7:], Focal: 300},
	}
	got, err := nested.Align(two)
	require.NoError(t, err)
	assert.Equal(t, want.Pixels, got.Pixels)
	assert.Equal(t, want.NonSky, got.NonSky)
	assert.InDelta(t, want.Scale, got.Scale, 1e-6)
	assert.Equal(t, want.SkyDepth, got.SkyDepth)
	assert.InDeltaSlice(t, one[0].Depth, append(append([]float32(nil), depth[:7]...), depth[7:]...), 1e-5)
}

func TestAlignCapsSkyDepth(t *testing.T) {
	depth, conf, metric, sky := scene()
	for i := 6; i < 11; i++ {
		metric[i] *= 1000 // scale 2000: the sky would be 23 780 m away
	}
	a, err := nested.Align([]nested.View{{Depth: depth, Conf: conf, MetricDepth: metric, Sky: sky, Focal: 150}})
	require.NoError(t, err)
	assert.InDelta(t, 2000, a.Scale, 1e-2)
	assert.Equal(t, float32(nested.MaxSkyDepth), a.SkyDepth)
	assert.Equal(t, float32(200), depth[13])
}

func TestAlignErrors(t *testing.T) {
	view := func(edit func(d, c, m, s []float32)) []nested.View {
		d, c, m, s := scene()
		edit(d, c, m, s)
		return []nested.View{{Depth: d, Conf: c, MetricDepth: m, Sky: s, Focal: 150}}
	}
	for _, tc := range []struct {
		name  string
		views []nested.View
		want  error
		text  string
	}{
		{"all sky", view(func(_, _, _, s []float32) {
			for i := range s {
				s[i] = 1
			}
		}), nested.ErrNoScale, "only 0 non-sky pixels"},
		{"10 non-sky pixels", view(func(_, _, _, s []float32) { s[0], s[1] = 1, 1 }), nested.ErrNoScale, "only 10 non-sky"},
		{"no depth", view(func(d, _, _, _ []float32) {
			for i := range d {
				d[i] = 0
			}
		}), nested.ErrNoScale, "no confident non-sky pixel"},
		{"sizes", []nested.View{{Depth: make([]float32, 4), Conf: make([]float32, 3), MetricDepth: make([]float32, 4), Sky: make([]float32, 4), Focal: 1}}, nil, "sizes"},
		{"focal", view(func(_, _, _, _ []float32) {}), nil, "focal"},
		{"no views", nil, nil, "no views"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "focal" {
				tc.views[0].Focal = 0
			}
			_, err := nested.Align(tc.views)
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.ErrorContains(t, err, tc.text)
		})
	}
}
