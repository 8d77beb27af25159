package export

import (
	"archive/zip"
	"fmt"
	"io"

	"github.com/da3-go/da3-go/internal/imgio"
)

// WriteNPZ writes the views as the official npz export (depth_anything_3.utils.export.npz.export_to_npz,
// numpy.savez_compressed), or its mini_npz variant when mini is set. Arrays, all views stacked (N views
// of H×W), in this order:
//
//	image       uint8   (N, H, W, 3)  npz only; needs every view's RGB
//	depth       float32 (N, H, W)     numpy.round(depth, 6), mini: numpy.round(depth, 8)
//	conf        float32 (N, H, W)     numpy.round(conf, 2); only when the views have confidence
//	extrinsics  float32 (N, 3, 4)     world-to-camera; only when the views have cameras
//	intrinsics  float32 (N, 3, 3)     for the maps' pixel grid
//
// Every view must have the same size, and conf and cameras must be present in all views or in none.
func WriteNPZ(path string, views []View, mini bool) error {
	arrays, err := npzArrays(views, mini)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return imgio.WriteAtomic(path, func(w io.Writer) error { return encodeNPZ(w, arrays) })
}

// EncodeNPZ writes the archive of WriteNPZ to w.
func EncodeNPZ(w io.Writer, views []View, mini bool) error {
	arrays, err := npzArrays(views, mini)
	if err != nil {
		return err
	}
	return encodeNPZ(w, arrays)
}

func encodeNPZ(w io.Writer, arrays []npzArray) error {
	z := zip.NewWriter(w)
	for _, a := range arrays {
		f, err := z.CreateHeader(&zip.FileHeader{Name: a.name + ".npy", Method: zip.Deflate})
		if err != nil {
			return err
		}
		if err := imgio.EncodeNPY(f, a.data, a.shape...); err != nil {
			return err
		}
	}
	return z.Close()
}

type npzArray struct {
	name  string
	data  any
	shape []int
}

func npzArrays(views []View, mini bool) ([]npzArray, error) {
	if err := checkViews(views, false); err != nil {
		return nil, err
	}
	n, w, h := len(views), views[0].Width, views[0].Height
	hasConf, hasCam, hasRGB := views[0].Conf != nil, views[0].Camera != nil, views[0].RGB != nil
	for i, v := range views {
		if v.Width != w || v.Height != h {
			return nil, fmt.Errorf("view %d is %dx%d, view 0 %dx%d: NPZ stacks views of one size", i, v.Width, v.Height, w, h)
		}
		if (v.Conf != nil) != hasConf || (v.Camera != nil) != hasCam {
			return nil, fmt.Errorf("view %d: confidence and cameras must be present in every view or in none", i)
		}
		if !mini && v.RGB == nil {
			return nil, fmt.Errorf("view %d: the npz export needs the image (RGB)", i)
		}
	}
	var out []npzArray
	if !mini && hasRGB {
		img := make([]uint8, 0, n*w*h*3)
		for _, v := range views {
			img = append(img, v.RGB...)
		}
		out = append(out, npzArray{"image", img, []int{n, h, w, 3}})
	}
	decimals := 6
	if mini {
		decimals = 8
	}
	rounded := func(get func(v *View) []float32, d int) []float32 {
		s := make([]float32, 0, n*w*h)
		for i := range views {
			for _, x := range get(&views[i]) {
				s = append(s, round32(x, d))
			}
		}
		return s
	}
	out = append(out, npzArray{"depth", rounded(func(v *View) []float32 { return v.Depth }, decimals), []int{n, h, w}})
	if hasConf {
		out = append(out, npzArray{"conf", rounded(func(v *View) []float32 { return v.Conf }, 2), []int{n, h, w}})
	}
	if hasCam {
		ext := make([]float32, 0, 12*n)
		ixt := make([]float32, 0, 9*n)
		for _, v := range views {
			for _, row := range v.Camera.Extrinsics {
				for _, x := range row {
					ext = append(ext, float32(x))
				}
			}
			for _, row := range v.Camera.Intrinsics {
				for _, x := range row {
					ixt = append(ixt, float32(x))
				}
			}
		}
		out = append(out, npzArray{"extrinsics", ext, []int{n, 3, 4}}, npzArray{"intrinsics", ixt, []int{n, 3, 3}})
	}
	return out, nil
}
