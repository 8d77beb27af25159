package model_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
)

// tinyFixture converts a committed tiny test checkpoint (random weights).
func tinyFixture(name string, opts convert.Options) string {
	dst := filepath.Join(os.TempDir(), "da3-go-example-"+name+".gguf")
	if err := convert.Convert(context.Background(), "../tests/fixtures/"+name, dst, opts); err != nil {
		panic(err)
	}
	return dst
}

// RayPose takes the cameras from the auxiliary ray head (the official
// use_ray_pose); the file must keep the head (convert -with-aux). RaySeed
// plays torch.manual_seed's part: the same seed gives the same poses.
func ExampleRunOptions_rayPose() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyFixture("da3-tiny-pose", convert.Options{WithAux: true}), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	views := []image.Image{photo(64, 48), photo(60, 45)}
	a, err := m.MultiView(ctx, views, model.RunOptions{ProcessRes: 56, RayPose: true, RaySeed: 7})
	if err != nil {
		panic(err)
	}
	b, err := m.MultiView(ctx, views, model.RunOptions{ProcessRes: 56, RayPose: true, RaySeed: 7})
	if err != nil {
		panic(err)
	}
	fmt.Println("cameras:", len(a), "reproducible:", a[1].Camera.Extrinsics == b[1].Camera.Extrinsics)
	// Output:
	// cameras: 2 reproducible: true
}

// Extrinsics and ViewIntrinsics condition the model on known cameras (a
// robot's, COLMAP's): the results are in their frame and scale.
func ExampleRunOptions_extrinsics() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyFixture("da3-tiny-pose", convert.Options{}), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	views := []image.Image{photo(64, 48), photo(64, 48), photo(64, 48)}
	opt := model.RunOptions{ProcessRes: 56}
	for i := range views {
		// Cameras 2 m apart along x, looking along +z; 60 px focal length.
		opt.Extrinsics = append(opt.Extrinsics, [3][4]float64{{1, 0, 0, -2 * float64(i)}, {0, 1, 0, 0}, {0, 0, 1, 0}})
		opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: 60, Fy: 60, Cx: 32, Cy: 24})
	}
	res, err := m.MultiView(ctx, views, opt)
	if err != nil {
		panic(err)
	}
	fmt.Println("camera 2 is the given one:", res[2].Camera.Extrinsics == opt.Extrinsics[2])
	fmt.Println("depth rescaled to the given scale:", res[0].AlignScale > 0)
	// Output:
	// camera 2 is the given one: true
	// depth rescaled to the given scale: true
}

// Gaussians predicts DA3-GIANT's 3D Gaussians, one per processed pixel;
// gs.WritePLY writes them as the official gs_ply file.
func ExampleRunOptions_gaussians() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyFixture("da3-tiny-gs", convert.Options{}), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	res, err := m.Depth(ctx, photo(64, 48), model.RunOptions{ProcessRes: 56, Gaussians: true})
	if err != nil {
		panic(err)
	}
	g := res.Gaussians
	fmt.Println("Gaussians:", len(g.Opacities), "=", g.Width, "x", g.Height)
	var ply bytes.Buffer
	if err := gs.WritePLY(&ply, g); err != nil {
		panic(err)
	}
	header := ply.String()[:strings.Index(ply.String(), "end_header")]
	fmt.Println(strings.Count(header, "property float"), "properties per Gaussian")
	// Output:
	// Gaussians: 2352 = 56 x 42
	// 17 properties per Gaussian
}
