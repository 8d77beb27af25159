package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
)

// givenCameras are the known cameras of the input images (-cameras), in
// input order.
type givenCameras struct {
	extrinsics [][3][4]float64
	intrinsics []model.Intrinsics
	// lenses are the COLMAP cameras' models where they have distortion that package lens implements
	// (nil entries otherwise); distorted marks every camera with distortion.
	lenses    []*lens.Camera
	distorted []bool
}

// loadCameras reads the cameras of the images (names: the input paths, imgs:
// the decoded images) from file: a JSON document in the format `da3-go pose`
// writes, or a COLMAP sparse model directory (binary or text). Views are
// matched to the inputs by image name (exact, else base name); the file must
// hold one camera per input, and each camera's image size must be the
// input's. Distorted COLMAP cameras are reported in lenses and distorted; their intrinsics are the
// pinhole part.
func loadCameras(file string, names []string, imgs []image.Image) (*givenCameras, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("-cameras: %w", err)
	}
	type posed struct {
		name          string
		ext           [3][4]float64
		k             [3][3]float64
		width, height int
		lens          *lens.Camera
		distorted     bool
	}
	var views []posed
	if fi.IsDir() {
		cm, err := export.ReadCOLMAP(file)
		if err != nil {
			return nil, fmt.Errorf("-cameras %s: %w", file, err)
		}
		ps, err := cm.Poses(names)
		if err != nil {
			return nil, fmt.Errorf("-cameras %s: %w", file, err)
		}
		for _, p := range ps {
			views = append(views, posed{p.Name, p.Extrinsics, p.Intrinsics, p.Width, p.Height, p.Lens, p.Distorted})
		}
	} else {
		b, err := safeio.ReadFile(file, safeio.MaxJSONBytes)
		if err != nil {
			return nil, fmt.Errorf("-cameras: %w", err)
		}
		var doc PoseOutput
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("-cameras %s: not a pose JSON document (as `da3-go pose` writes) or a COLMAP model directory: %w", file, err)
		}
		if len(doc.Views) != len(names) {
			return nil, fmt.Errorf("-cameras %s: %d views for %d input images", file, len(doc.Views), len(names))
		}
		byName, byBase := map[string][]int{}, map[string][]int{}
		for i, v := range doc.Views {
			byName[v.Image] = append(byName[v.Image], i)
			byBase[filepath.Base(v.Image)] = append(byBase[filepath.Base(v.Image)], i)
		}
		used := map[int]string{}
		for _, n := range names {
			idx := byName[n]
			if len(idx) == 0 {
				idx = byBase[filepath.Base(n)]
			}
			switch {
			case len(idx) == 0:
				return nil, fmt.Errorf("-cameras %s: no view for input %s", file, n)
			case len(idx) > 1:
				return nil, fmt.Errorf("-cameras %s: %d views for input %s", file, len(idx), n)
			}
			if prev, dup := used[idx[0]]; dup {
				return nil, fmt.Errorf("-cameras %s: inputs %s and %s match the same view %s", file, prev, n, doc.Views[idx[0]].Image)
			}
			used[idx[0]] = n
			v := doc.Views[idx[0]]
			views = append(views, posed{name: v.Image, ext: v.Extrinsics, k: v.IntrinsicsOrig, width: v.Width, height: v.Height})
		}
	}
	g := &givenCameras{}
	for i, v := range views {
		b := imgs[i].Bounds()
		if v.width != b.Dx() || v.height != b.Dy() {
			return nil, fmt.Errorf("-cameras %s: the camera of %s is for a %dx%d image, but the image is %dx%d", file, names[i], v.width, v.height, b.Dx(), b.Dy())
		}
		g.extrinsics = append(g.extrinsics, v.ext)
		g.intrinsics = append(g.intrinsics, model.Intrinsics{Fx: v.k[0][0], Fy: v.k[1][1], Cx: v.k[0][2], Cy: v.k[1][2]})
		g.lenses = append(g.lenses, v.lens)
		g.distorted = append(g.distorted, v.distorted)
	}
	return g, nil
}

// apply sets the cameras on opt (nil: none given).
func (g *givenCameras) apply(opt *model.RunOptions) {
	if g != nil {
		opt.Extrinsics, opt.ViewIntrinsics = g.extrinsics, g.intrinsics
	}
}

// writeGaussians writes the Gaussians of a scene's results (input order) as
// one gs_ply file, atomically.
func writeGaussians(path string, res []model.Result) error {
	var parts []*gs.Gaussians
	for i := range res {
		if res[i].Gaussians == nil {
			return fmt.Errorf("gs_ply: view %d has no Gaussians", i)
		}
		parts = append(parts, res[i].Gaussians)
	}
	var buf bytes.Buffer
	if err := gs.WritePLY(&buf, gs.Concat(parts...)); err != nil {
		return err
	}
	return imgio.WriteFileAtomic(path, buf.Bytes())
}
