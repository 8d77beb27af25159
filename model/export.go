package model

import (
	"fmt"

	"github.com/da3-go/da3-go/export"
)

// View returns the result as plain data for the writers of package export. name is the image's name
// (COLMAP image name). Maps at the processed size (RunOptions.ProcessedSize, or cropped views) keep the
// processed image's colours and intrinsics, as the official exporters use them; maps resized to the
// original size use the original-image intrinsics and take each pixel's colour from the nearest pixel of
// the processed image. Models without a camera head give a view without camera (NPZ and depth
// visualisation only).
func (r *Result) View(name string) (export.View, error) {
	w, h := r.Width, r.Height
	if len(r.Depth) != w*h || w <= 0 || h <= 0 {
		return export.View{}, fmt.Errorf("result %s: %dx%d maps with %d depth values", name, w, h, len(r.Depth))
	}
	v := export.View{Name: name, Width: w, Height: h, Depth: r.Depth, Conf: r.Conf, Sky: r.Sky,
		OrigWidth: r.OrigWidth, OrigHeight: r.OrigHeight}
	pw, ph := r.ProcessedWidth, r.ProcessedHeight
	processed := w == pw && h == ph
	if len(r.RGB) == 3*pw*ph && pw > 0 && ph > 0 {
		if processed {
			v.RGB = r.RGB
		} else {
			v.RGB = nearestRGB(r.RGB, pw, ph, w, h)
		}
	}
	if c := r.Camera; c != nil {
		v.Camera = &export.Camera{Extrinsics: c.Extrinsics, Intrinsics: c.Intrinsics, IntrinsicsOriginal: c.IntrinsicsOriginal}
		if !processed {
			v.Camera.Intrinsics = c.IntrinsicsOriginal
		}
	}
	return v, nil
}

// nearestRGB samples an HWC image of sw×sh at dw×dh, each destination pixel taking the source pixel under
// its centre.
func nearestRGB(src []uint8, sw, sh, dw, dh int) []uint8 {
	out := make([]uint8, 3*dw*dh)
	for y := range dh {
		sy := min((2*y+1)*sh/(2*dh), sh-1)
		for x := range dw {
			sx := min((2*x+1)*sw/(2*dw), sw-1)
			copy(out[3*(y*dw+x):], src[3*(sy*sw+sx):3*(sy*sw+sx)+3])
		}
	}
	return out
}

// PointCloud back-projects the result's depth into its camera's world frame (see export.NewPointCloud);
// opt is usually export.DefaultOptions(). Scenes of several views use Views and export.NewPointCloud.
func (r *Result) PointCloud(opt export.Options) (*export.PointCloud, error) {
	v, err := r.View("view")
	if err != nil {
		return nil, err
	}
	return export.NewPointCloud([]export.View{v}, opt)
}

// Views converts the results of one scene (MultiView) for package export. names are the images' names;
// nil names them view_0000, view_0001, ….
func Views(results []Result, names []string) ([]export.View, error) {
	if names != nil && len(names) != len(results) {
		return nil, fmt.Errorf("%d names for %d results", len(names), len(results))
	}
	views := make([]export.View, len(results))
	for i := range results {
		name := fmt.Sprintf("view_%04d", i)
		if names != nil {
			name = names[i]
		}
		var err error
		if views[i], err = results[i].View(name); err != nil {
			return nil, err
		}
	}
	return views, nil
}
