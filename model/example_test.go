package model_test

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

// tinyModel converts the committed tiny DA3 test checkpoint (random weights)
// to a GGUF; with a real model you would pass its path or a published name.
func tinyModel() string {
	dst := filepath.Join(os.TempDir(), "da3-go-example-tiny.gguf")
	if err := convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", dst, convert.Options{}); err != nil {
		panic(err)
	}
	return dst
}

func photo(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(4 * x), uint8(3 * y), 128, 255})
		}
	}
	return img
}

// Depth estimates depth, confidence and the camera of one image.
func ExampleModel_Depth() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	res, err := m.Depth(ctx, photo(64, 48), model.RunOptions{ProcessRes: 56})
	if err != nil {
		panic(err)
	}
	fmt.Println("depth map:", res.Width, "x", res.Height, "(processed", res.ProcessedWidth, "x", res.ProcessedHeight, ")")
	fmt.Println("confidence values:", len(res.Conf))
	fmt.Printf("principal point: (%.0f, %.0f)\n", res.Camera.Intrinsics[0][2], res.Camera.Intrinsics[1][2])
	// Output:
	// depth map: 64 x 48 (processed 56 x 42 )
	// confidence values: 3072
	// principal point: (28, 21)
}

// DepthAndPose is Depth for models that must have a camera head; V2 and
// mono models return model.ErrNoCamera.
func ExampleModel_DepthAndPose() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	res, err := m.DepthAndPose(ctx, photo(64, 48), model.RunOptions{ProcessRes: 56})
	if err != nil {
		panic(err)
	}
	k := res.Camera.IntrinsicsOriginal
	fmt.Printf("principal point in the original image: (%.0f, %.0f)\n", k[0][2], k[1][2])
	// Output:
	// principal point in the original image: (32, 24)
}

// MultiView runs several images as views of one scene: the cameras share one
// world frame, and views of different sizes are centre-cropped to the smallest.
func ExampleModel_MultiView() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	views := []image.Image{photo(64, 48), photo(60, 45), photo(64, 48)}
	res, err := m.MultiView(ctx, views, model.RunOptions{ProcessRes: 56})
	if err != nil {
		panic(err)
	}
	for i, r := range res {
		fmt.Printf("view %d: %dx%d depth, camera %v\n", i, r.Width, r.Height, r.Camera != nil)
	}
	// Output:
	// view 0: 64x48 depth, camera true
	// view 1: 60x45 depth, camera true
	// view 2: 64x48 depth, camera true
}
