package tests

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// DA3METRIC-LARGE's output is focal-normalised: metres = focal · output /
// 300 with focal = (fx+fy)/2 in pixels of the processed image (the official
// README's FAQ). The tiny mono fixture stands in for it (same architecture;
// a model is metric by its name).
func TestMetricLargeUnits(t *testing.T) {
	ctx := context.Background()
	dir := fixture(t, "da3-tiny-mono")
	m := loadModel(t, convertFixture(t, dir, convert.Options{Name: "da3-tiny-metric"}))
	require.True(t, m.Config().Metric)
	ref := refTensors(t, dir+"/one/ref.safetensors")
	in := ref["input"]
	h, w := in.Shape[3], in.Shape[4]
	scaled := func(s float64) []float32 {
		out := make([]float32, len(ref["depth"].Data))
		for i, d := range ref["depth"].Data {
			out[i] = d * float32(s)
		}
		return out
	}

	res, err := m.Forward(ctx, model.Pixels{Data: in.Data, Width: w, Height: h, Views: 1}, model.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, model.FocalNormalised, res[0].Unit, "no focal: not metres")
	gate(t, "focal-normalised depth", ref["depth"].Data, res[0].Depth, 0.99999, 1e-4)

	// Forward's input is the processed image: the intrinsics are in its pixels.
	res, err = m.Forward(ctx, model.Pixels{Data: in.Data, Width: w, Height: h, Views: 1}, model.RunOptions{Intrinsics: &model.Intrinsics{Fx: 100, Fy: 120, Cx: 28, Cy: 35}})
	require.NoError(t, err)
	assert.Equal(t, model.Metres, res[0].Unit)
	gate(t, "metres (processed focal 110)", scaled(110.0/300), res[0].Depth, 0.99999, 1e-4)

	// From the image file: the focal is given in pixels of the original
	// 45×61 image and scales with the resize to 56×70.
	img, err := imgio.Decode(dir + "/one/images/view0.png")
	require.NoError(t, err)
	b := img.Bounds()
	k := &model.Intrinsics{Fx: 50, Fy: 60, Cx: 22, Cy: 30}
	focal := (k.Fx*float64(w)/float64(b.Dx()) + k.Fy*float64(h)/float64(b.Dy())) / 2
	r, err := m.Depth(ctx, img, model.RunOptions{ProcessRes: max(w, h), ProcessedSize: true, Intrinsics: k})
	require.NoError(t, err)
	assert.Equal(t, model.Metres, r.Unit)
	gate(t, "metres (from image)", scaled(focal/300), r.Depth, 0.99999, 1e-4)
	r, err = m.Depth(ctx, img, model.RunOptions{ProcessRes: max(w, h), Intrinsics: k})
	require.NoError(t, err)
	assert.Equal(t, model.Metres, r.Unit)
	assert.Equal(t, []int{b.Dx(), b.Dy()}, []int{r.Width, r.Height}, "resized to the image")

	for _, bad := range []model.Intrinsics{{Fx: 0, Fy: 60}, {Fx: -1, Fy: 60}, {Fx: 50, Fy: 60, Cx: nan()}} {
		_, err := m.Depth(ctx, img, model.RunOptions{Intrinsics: &bad})
		assert.ErrorContains(t, err, "intrinsics", "%+v", bad)
	}
}

// Intrinsics are refused by models that do not use them, and the mono
// (relative) model reports relative depth.
func TestIntrinsicsRefusedByOtherModels(t *testing.T) {
	ctx := context.Background()
	k := &model.Intrinsics{Fx: 50, Fy: 50}
	mono := loadModel(t, convertFixture(t, fixture(t, "da3-tiny-mono"), convert.Options{}))
	img, err := imgio.Decode(fixture(t, "da3-tiny-mono") + "/one/images/view0.png")
	require.NoError(t, err)
	r, err := mono.Depth(ctx, img, model.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, model.Relative, r.Unit)
	_, err = mono.Depth(ctx, img, model.RunOptions{Intrinsics: k})
	assert.ErrorContains(t, err, "does not use camera intrinsics")
	anyView := loadModel(t, convertFixture(t, fixture(t, "da3-tiny"), convert.Options{}))
	_, err = anyView.Depth(ctx, img, model.RunOptions{Intrinsics: k})
	assert.ErrorContains(t, err, "does not use camera intrinsics")
}

func nan() float64 { return math.NaN() }
