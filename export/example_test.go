package export_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/export"
)

// wall is one 4×3 view of a wall 2 m in front of a camera at the world origin.
func wall() export.View {
	v := export.View{Name: "wall.jpg", Width: 4, Height: 3, Depth: make([]float32, 12), RGB: make([]uint8, 36),
		Camera: &export.Camera{
			Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
			Intrinsics: [3][3]float64{{2, 0, 2}, {0, 2, 1.5}, {0, 0, 1}},
		}}
	for i := range v.Depth {
		v.Depth[i] = 2
		v.RGB[3*i] = 200 // red
	}
	return v
}

// NewPointCloud back-projects depth maps into one world frame; the writers save the cloud.
func ExampleNewPointCloud() {
	pc, err := export.NewPointCloud([]export.View{wall()}, export.DefaultOptions())
	if err != nil {
		panic(err)
	}
	fmt.Println("points:", pc.Len())
	fmt.Printf("top-left pixel: (%.1f, %.1f, %.1f) m, colour %v\n", pc.Points[0], pc.Points[1], pc.Points[2], pc.Colors[:3])

	dir, _ := os.MkdirTemp("", "export-example")
	defer os.RemoveAll(dir)
	if err := export.WritePLY(filepath.Join(dir, "scene.ply"), pc); err != nil {
		panic(err)
	}
	views := []export.View{wall()}
	if err := export.WriteGLB(filepath.Join(dir, "scene.glb"), pc, views, export.DefaultGLBOptions()); err != nil {
		panic(err)
	}
	// Output:
	// points: 12
	// top-left pixel: (-2.0, -1.5, 2.0) m, colour [200 0 0]
}

// WriteCOLMAP writes a sparse model that COLMAP, pycolmap and ReadCOLMAP read.
func ExampleWriteCOLMAP() {
	views := []export.View{wall()}
	views[0].OrigWidth, views[0].OrigHeight = 8, 6
	views[0].Camera.IntrinsicsOriginal = [3][3]float64{{4, 0, 4}, {0, 4, 3}, {0, 0, 1}}
	pc, err := export.NewPointCloud(views, export.COLMAPOptions())
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "export-example")
	defer os.RemoveAll(dir)
	if err := export.WriteCOLMAP(dir, pc, views, false); err != nil {
		panic(err)
	}
	m, err := export.ReadCOLMAP(dir)
	if err != nil {
		panic(err)
	}
	c := m.Cameras[0]
	fmt.Println(c.Model, c.Width, c.Height, c.Params)
	fmt.Println(m.Images[0].Name, "observes", len(m.Images[0].Points2D), "points; 3D points:", len(m.Points))
	// Output:
	// PINHOLE 8 6 [4 4 4 3]
	// wall.jpg observes 12 points; 3D points: 12
}
