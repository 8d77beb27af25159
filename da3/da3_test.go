package da3_test

import (
	"context"
	"image"
	"image/color"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/model"
)

func photo(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(4 * x), uint8(3 * y), 128, 255})
		}
	}
	return img
}

// specs converts the tiny fixtures of each kind of model.
func specs(t *testing.T) map[string]da3.Spec {
	t.Helper()
	dir, fx := t.TempDir(), filepath.Join("..", "tests", "fixtures")
	conv := func(src, name string, o convert.Options) string {
		dst := filepath.Join(dir, name+".gguf")
		require.NoError(t, convert.Convert(context.Background(), filepath.Join(fx, src), dst, o), src)
		return dst
	}
	nested := conv("da3-tiny-nested", "nested", convert.Options{})
	fam, err := convert.Inspect(filepath.Join(fx, "da3-tiny-nested"))
	require.NoError(t, err)
	pair := convert.OutputPaths(fam, nested)
	require.Len(t, pair, 2)
	return map[string]da3.Spec{
		"da3":    {Path: conv("da3-tiny", "da3", convert.Options{})},
		"metric": {Path: conv("da3-tiny-mono", "metric", convert.Options{Name: "da3-tiny-metric"})},
		"da2":    {Path: conv(filepath.Join("da2-tiny", "model.pth"), "da2", convert.Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}})},
		"nested": {Path: pair[0], MetricPath: pair[1]},
	}
}

// TestOpenAnswersCapabilities: Open opens every kind of model, one file or
// the nested pair, and each answers what it can do; the unit of its depth
// is the one its results carry.
func TestOpenAnswersCapabilities(t *testing.T) {
	want := map[string]model.Capabilities{
		"da3":    {Unit: model.Relative, MultiView: true, Camera: true, Confidence: true},
		"metric": {Unit: model.FocalNormalised, NeedsIntrinsics: true, Sky: true},
		"da2":    {Unit: model.Disparity, ExifRotate: true},
		"nested": {Unit: model.Metres, MultiView: true, Camera: true, Confidence: true, Sky: true, Nested: true},
	}
	for name, spec := range specs(t) {
		t.Run(name, func(t *testing.T) {
			r, err := da3.Open(context.Background(), spec, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
			require.NoError(t, err)
			defer r.Close()
			caps := r.Capabilities()
			// The fixtures carry no ray head, camera encoder or Gaussians
			// unless converted so; compare the rest.
			caps.RayPose, caps.GivenCameras, caps.Gaussians = false, false, false
			assert.Equal(t, want[name], caps)

			opt := model.RunOptions{ProcessRes: 56}
			if caps.NeedsIntrinsics {
				opt.Intrinsics = &model.Intrinsics{Fx: 50, Fy: 50, Cx: 32, Cy: 24}
			}
			res, err := r.Independent(context.Background(), []model.Image{photo(64, 48), photo(64, 48)}, opt)
			require.NoError(t, err)
			require.Len(t, res, 2)
			for _, x := range res {
				assert.Equal(t, caps.UnitWith(opt.Intrinsics != nil), x.Unit)
				assert.Equal(t, caps.Confidence, x.Conf != nil, "confidence")
				assert.Equal(t, caps.Sky, x.Sky != nil, "sky")
				assert.Equal(t, caps.Camera, x.Camera != nil, "camera")
			}
			e, err := r.EstimateMemory(opt, 2, 64, 48)
			require.NoError(t, err)
			assert.Positive(t, e.Weights)
			assert.Positive(t, r.WeightBytes())
			assert.Equal(t, "CPU", r.Device())
		})
	}
}

// TestOpenFails: a missing file is an error and no Runner (not a nil
// model inside a non-nil interface).
func TestOpenFails(t *testing.T) {
	for _, spec := range []da3.Spec{{}, {Path: "no-such.gguf"}, {Path: "no-such.gguf", MetricPath: "no-such-metric.gguf"}} {
		r, err := da3.Open(context.Background(), spec, model.Options{Options: backend.Options{Device: "cpu"}})
		assert.Error(t, err)
		assert.Nil(t, r)
	}
}
