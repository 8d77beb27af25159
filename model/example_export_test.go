package model_test

import (
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/model"
)

// PointCloud turns one result into a coloured point cloud in its camera's world frame.
func ExampleResult_PointCloud() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	res, err := m.Depth(ctx, photo(64, 48), model.RunOptions{ProcessRes: 56, ProcessedSize: true})
	if err != nil {
		panic(err)
	}
	pc, err := res.PointCloud(export.DefaultOptions())
	if err != nil {
		panic(err)
	}
	// The official selection keeps the pixels at or above a confidence percentile.
	fmt.Println("some pixels kept:", pc.Len() > 0 && pc.Len() < res.Width*res.Height)
	// Output:
	// some pixels kept: true
}

// Views converts the results of a scene for the writers of package export: here a GLB with the cameras
// and a COLMAP model.
func ExampleViews() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	res, err := m.MultiView(ctx, []image.Image{photo(64, 48), photo(64, 48)}, model.RunOptions{ProcessRes: 56, ProcessedSize: true})
	if err != nil {
		panic(err)
	}
	views, err := model.Views(res, []string{"a.jpg", "b.jpg"})
	if err != nil {
		panic(err)
	}
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "da3-example")
	defer os.RemoveAll(dir)
	if err := export.WriteGLB(filepath.Join(dir, "scene.glb"), pc, views, export.DefaultGLBOptions()); err != nil {
		panic(err)
	}
	colmap, err := export.NewPointCloud(views, export.COLMAPOptions())
	if err != nil {
		panic(err)
	}
	if err := export.WriteCOLMAP(dir, colmap, views, false); err != nil {
		panic(err)
	}
	sparse, err := export.ReadCOLMAP(dir)
	if err != nil {
		panic(err)
	}
	fmt.Println("COLMAP images:", sparse.Images[0].Name, sparse.Images[1].Name)
	// Output:
	// COLMAP images: a.jpg b.jpg
}
