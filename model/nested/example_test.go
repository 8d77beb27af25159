package nested_test

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

// MultiView gives depth in metres and cameras with metric translations for
// several views of one scene. The committed tiny nested checkpoint (random
// weights) stands in for DA3NESTED-GIANT-LARGE; with the published files
// load "da3-nested-anyview.gguf" and "da3-nested-metric.gguf".
func ExampleModel_MultiView() {
	ctx := context.Background()
	dst := filepath.Join(os.TempDir(), "da3-go-example-nested.gguf")
	if err := convert.Convert(ctx, "../../tests/fixtures/da3-tiny-nested", dst, convert.Options{}); err != nil {
		panic(err)
	}
	halves := convert.OutputPaths(convert.FamilyDA3Nested, dst) // dst-anyview.gguf, dst-metric.gguf
	m, err := nested.Load(ctx, halves[0], halves[1], model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	var views []model.Image
	for i := 0; i < 3; i++ {
		f, err := os.Open(fmt.Sprintf("../../tests/fixtures/da3-tiny-nested/three/images/view%d.png", i))
		if err != nil {
			panic(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			panic(err)
		}
		views = append(views, img)
	}
	out, err := m.MultiView(ctx, views, model.RunOptions{ProcessRes: 42})
	if err != nil {
		panic(err)
	}
	r := out.Views[0]
	fmt.Println("views:", len(out.Views), "depth unit:", r.Unit, "map:", r.Width, "x", r.Height)
	fmt.Printf("scale %.4f from %d of %d non-sky pixels; sky at %.3f m\n", out.Scale, out.Pixels, out.NonSky, out.SkyDepth)
	// Output:
	// views: 3 depth unit: metres map: 50 x 33
	// scale 0.1070 from 1210 of 2419 non-sky pixels; sky at 0.198 m
}
