package tests

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

func grayImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(3 * x), uint8(5 * y), 90, 255})
		}
	}
	return img
}

// Options a model file cannot honour, and given cameras that do not fit the
// images, are refused with an error naming the problem (and the fix).
func TestPoseOptionErrors(t *testing.T) {
	ctx := context.Background()
	plain := loadModel(t, convertFixture(t, fixture(t, "da3-tiny"), convert.Options{}))
	mono := loadModel(t, convertFixture(t, fixture(t, "da3-tiny-mono"), convert.Options{}))
	img := grayImage(61, 45)
	opt := model.RunOptions{ProcessRes: 56}
	id := [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}
	k := model.Intrinsics{Fx: 50, Fy: 50, Cx: 30, Cy: 22}

	o := opt
	o.RayPose = true
	_, err := plain.MultiView(ctx, []model.Image{img}, o)
	require.ErrorIs(t, err, model.ErrNoRayHead)
	assert.Contains(t, err.Error(), "converted with the auxiliary ray head")
	assert.Contains(t, err.Error(), "model model.gguf (depthanything3)", "names the file")
	assert.NotContains(t, err.Error(), "Options")
	_, err = mono.MultiView(ctx, []model.Image{img}, o)
	require.ErrorIs(t, err, model.ErrNoRayHead)

	ps := plain.Config().ViT.PatchSize
	o = opt
	o.ProcessRes = ps - 1
	_, err = plain.Depth(ctx, img, o)
	require.ErrorIs(t, err, model.ErrInvalidInput)
	assert.Contains(t, err.Error(), fmt.Sprintf("processing resolution %d is smaller than the model's %d-pixel patch", ps-1, ps))

	o = opt
	o.Gaussians = true
	_, err = plain.MultiView(ctx, []model.Image{img}, o)
	require.ErrorIs(t, err, model.ErrNoGaussianHead)
	assert.Contains(t, err.Error(), "GIANT")

	o = opt
	o.Extrinsics, o.ViewIntrinsics = [][3][4]float64{id}, []model.Intrinsics{k}
	_, err = mono.MultiView(ctx, []model.Image{img}, o)
	require.ErrorIs(t, err, model.ErrNoCameraEncoder)
	assert.Contains(t, err.Error(), "re-convert")

	for _, tc := range []struct {
		name string
		ext  [][3][4]float64
		k    []model.Intrinsics
		want string
	}{
		{"count", [][3][4]float64{id, id}, []model.Intrinsics{k, k}, "2 extrinsics and 2 intrinsics for 1 images"},
		{"missing intrinsics", [][3][4]float64{id}, nil, "1 extrinsics and 0 intrinsics"},
		{"not a rotation", [][3][4]float64{{{2, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}}, []model.Intrinsics{k}, "not orthonormal"},
		{"reflection", [][3][4]float64{{{-1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}}, []model.Intrinsics{k}, "reflection"},
		{"focal", [][3][4]float64{id}, []model.Intrinsics{{Fx: 0, Fy: 50, Cx: 1, Cy: 1}}, "positive focal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opt
			o.Extrinsics, o.ViewIntrinsics = tc.ext, tc.k
			_, err := plain.MultiView(ctx, []model.Image{img}, o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
