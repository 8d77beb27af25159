package export_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

// countingSource is a ViewSource that counts its reads and hands out copies (as a source on disk does).
type countingSource struct {
	views []export.View
	reads int
	fail  int // view index whose read fails (-1: none)
}

func (s *countingSource) Len() int { return len(s.views) }

func (s *countingSource) View(i int) (export.View, error) {
	s.reads++
	if i == s.fail {
		return export.View{}, errors.New("disk on fire")
	}
	v := s.views[i]
	v.Depth, v.Conf, v.Sky, v.RGB = slices.Clone(v.Depth), slices.Clone(v.Conf), slices.Clone(v.Sky), slices.Clone(v.RGB)
	return v, nil
}

// bigScene returns n views of the test scene with random confidences (with ties, NaN and sky), so that
// the percentiles are not trivial.
func bigScene(n int, seed uint64) []export.View {
	r := rand.New(rand.NewPCG(seed, 1))
	base := scene()
	var views []export.View
	for i := range n {
		v := base[i%2]
		v.Name = v.Name + string(rune('a'+i))
		v.Depth, v.Conf, v.RGB = slices.Clone(v.Depth), slices.Clone(v.Conf), slices.Clone(v.RGB)
		v.Sky = make([]float32, len(v.Depth))
		for p := range v.Conf {
			v.Conf[p] = 1 + float32(r.IntN(50))/10 // many ties
			if r.IntN(40) == 0 {
				v.Conf[p] = float32(math.NaN())
			}
			if r.IntN(10) == 0 {
				v.Sky[p] = 1
			}
			v.Depth[p] *= 0.5 + r.Float32()
		}
		views = append(views, v)
	}
	return views
}

// TestPointCloudFromMatchesInMemory: the streaming cloud without a cap is the in-memory cloud, threshold
// and all, for the official GLB and COLMAP selections, with sky and background filters.
func TestPointCloudFromMatchesInMemory(t *testing.T) {
	for _, n := range []int{1, 2, 7} {
		views := bigScene(n, uint64(n))
		for _, opt := range []export.Options{export.DefaultOptions(), export.COLMAPOptions(), keepAll()} {
			for _, bg := range []bool{false, true} {
				opt.FilterBlackBG, opt.FilterWhiteBG = bg, bg
				want, err := export.NewPointCloud(views, opt)
				require.NoError(t, err)
				src := &countingSource{views: views, fail: -1}
				got, err := export.NewPointCloudFrom(src, opt, 0, 0)
				require.NoError(t, err)
				assert.Equal(t, math.Float32bits(want.Threshold), math.Float32bits(got.Threshold), "threshold, %d views", n)
				assert.Equal(t, want, got)
				assert.LessOrEqual(t, src.reads, 3*n, "three passes at most")
			}
		}
	}
	// A failing read is an error naming the view.
	_, err := export.NewPointCloudFrom(&countingSource{views: scene(), fail: 1}, export.DefaultOptions(), 0, 0)
	assert.ErrorContains(t, err, "view 1: disk on fire")
	_, err = export.NewPointCloudFrom(&countingSource{fail: -1}, export.DefaultOptions(), 0, 0)
	assert.ErrorContains(t, err, "no views")
}

// TestPointCloudFromSamples: with a cap the cloud is a seeded subset of the full cloud in its order, and
// over many seeds every point is kept about equally often (uniform sampling without replacement).
func TestPointCloudFromSamples(t *testing.T) {
	views := bigScene(3, 9)
	opt := export.COLMAPOptions()
	full, err := export.NewPointCloud(views, opt)
	require.NoError(t, err)
	N := full.Len()
	const k = 40
	index := map[[2]int32]int{}
	for i := range N {
		index[[2]int32{full.View[i], full.Pixel[i]}] = i
	}
	counts := make([]int, N)
	const seeds = 500
	for seed := range uint64(seeds) {
		pc, err := export.NewPointCloudFrom(export.ViewSlice(views), opt, k, seed)
		require.NoError(t, err)
		require.Equal(t, k, pc.Len())
		prev := -1
		for j := range k {
			i, ok := index[[2]int32{pc.View[j], pc.Pixel[j]}]
			require.True(t, ok, "a point of the full cloud")
			require.Greater(t, i, prev, "in order, no repeats")
			prev = i
			if seed == 0 {
				assert.Equal(t, full.Points[3*i:3*i+3], pc.Points[3*j:3*j+3])
				assert.Equal(t, full.Colors[3*i:3*i+3], pc.Colors[3*j:3*j+3])
				assert.Equal(t, full.Conf[i], pc.Conf[j])
			}
			counts[i]++
		}
	}
	again, err := export.NewPointCloudFrom(export.ViewSlice(views), opt, k, 5)
	require.NoError(t, err)
	other, err := export.NewPointCloudFrom(export.ViewSlice(views), opt, k, 6)
	require.NoError(t, err)
	five, err := export.NewPointCloudFrom(export.ViewSlice(views), opt, k, 5)
	require.NoError(t, err)
	assert.Equal(t, five, again, "seeded")
	assert.NotEqual(t, five.Pixel, other.Pixel)
	// Each point is kept with probability k/N: binomial(seeds, k/N); chi-square over the points.
	p := float64(k) / float64(N)
	var chi2 float64
	for _, c := range counts {
		e := seeds * p
		chi2 += (float64(c) - e) * (float64(c) - e) / (e * (1 - p))
	}
	// N−1 degrees of freedom: mean N−1, standard deviation √(2(N−1)); allow 5 standard deviations.
	df := float64(N - 1)
	t.Logf("%d points, chi-square %.0f for %g degrees of freedom", N, chi2, df)
	assert.Less(t, chi2, df+5*math.Sqrt(2*df))
	assert.Greater(t, chi2, df-5*math.Sqrt(2*df))
}

// TestWriteNPZFrom: the streamed archive is byte for byte the in-memory one.
func TestWriteNPZFrom(t *testing.T) {
	views := bigScene(5, 3)
	dir := t.TempDir()
	for _, mini := range []bool{false, true} {
		var want bytes.Buffer
		require.NoError(t, export.EncodeNPZ(&want, views, mini))
		path := filepath.Join(dir, "r.npz")
		src := &countingSource{views: views, fail: -1}
		require.NoError(t, export.WriteNPZFrom(path, src, mini))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, want.Bytes(), got)
	}
	bad := bigScene(3, 4)
	bad[2].Width, bad[2].Height = 6, 8
	path := filepath.Join(dir, "bad.npz")
	assert.ErrorContains(t, export.WriteNPZFrom(path, export.ViewSlice(bad), false), "one size")
	assert.NoFileExists(t, path)
	assert.ErrorContains(t, export.WriteNPZFrom(path, &countingSource{views: views, fail: 3}, false), "disk on fire")
	assert.NoFileExists(t, path)
}

// TestCameraOnlyViews: GLB and COLMAP take views without maps, given their cloud.
func TestCameraOnlyViews(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	cams := slices.Clone(views)
	for i := range cams {
		cams[i].Depth, cams[i].Conf, cams[i].RGB = nil, nil, nil
	}
	var a, b bytes.Buffer
	require.NoError(t, export.EncodeGLB(&a, pc, views, export.DefaultGLBOptions()))
	require.NoError(t, export.EncodeGLB(&b, pc, cams, export.DefaultGLBOptions()))
	assert.Equal(t, a.Bytes(), b.Bytes())
	m1, err := export.NewCOLMAPModel(pc, views)
	require.NoError(t, err)
	m2, err := export.NewCOLMAPModel(pc, cams)
	require.NoError(t, err)
	assert.Equal(t, m1, m2)
	// Maps that are there are still checked.
	cams[0].Conf = []float32{1}
	_, err = export.NewCOLMAPModel(pc, cams)
	assert.ErrorContains(t, err, "confidence values")
	// The point cloud itself needs the maps.
	_, err = export.NewPointCloud(cams[1:], export.DefaultOptions())
	assert.ErrorContains(t, err, "depth values")
}
