package export

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/da3-go/da3-go/internal/atomicfile"
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
	if err := checkNPZ(ViewSlice(views), mini); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error { return encodeNPZ(w, ViewSlice(views), mini) }, sources(views)...)
}

// EncodeNPZ writes the archive of WriteNPZ to w.
func EncodeNPZ(w io.Writer, views []View, mini bool) error {
	if err := checkNPZ(ViewSlice(views), mini); err != nil {
		return err
	}
	return encodeNPZ(w, ViewSlice(views), mini)
}

// WriteNPZFrom writes the archive of WriteNPZ from views read one at a time (a streamed reconstruction on
// disk): memory holds one view, the source is read once per array.
func WriteNPZFrom(path string, src ViewSource, mini bool) error {
	return imgio.WriteAtomic(path, func(w io.Writer) error {
		if err := checkNPZ(src, mini); err != nil {
			return err
		}
		return encodeNPZ(w, src, mini)
	})
}

// checkNPZ validates the views for the archive: one size, confidence and cameras in all or none, the
// image unless mini.
func checkNPZ(src ViewSource, mini bool) error {
	if src.Len() == 0 {
		return errors.New("no views")
	}
	var w, h int
	var hasConf, hasCam bool
	for i := range src.Len() {
		v, err := src.View(i)
		if err != nil {
			return fmt.Errorf("view %d: %w", i, err)
		}
		if err := v.check(i, false, true); err != nil {
			return err
		}
		if i == 0 {
			w, h, hasConf, hasCam = v.Width, v.Height, v.Conf != nil, v.Camera != nil
		}
		if v.Width != w || v.Height != h {
			return fmt.Errorf("view %d is %dx%d, view 0 %dx%d: NPZ stacks views of one size", i, v.Width, v.Height, w, h)
		}
		if (v.Conf != nil) != hasConf || (v.Camera != nil) != hasCam {
			return fmt.Errorf("view %d: confidence and cameras must be present in every view or in none", i)
		}
		if !mini && v.RGB == nil {
			return fmt.Errorf("view %d: the npz export needs the image (RGB)", i)
		}
	}
	return nil
}

// encodeNPZ writes the arrays of views checkNPZ accepted, one pass over the views per array.
func encodeNPZ(w io.Writer, src ViewSource, mini bool) error {
	v0, err := src.View(0)
	if err != nil {
		return err
	}
	n, wd, ht := src.Len(), v0.Width, v0.Height
	z := zip.NewWriter(w)
	array := func(name string, zero any, shape []int, data func(v *View) any) error {
		f, err := z.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Deflate})
		if err != nil {
			return err
		}
		if err := imgio.EncodeNPYHeader(f, zero, shape...); err != nil {
			return err
		}
		for i := range n {
			v, err := src.View(i)
			if err != nil {
				return fmt.Errorf("view %d: %w", i, err)
			}
			if err := imgio.EncodeNPYData(f, data(&v)); err != nil {
				return err
			}
		}
		return nil
	}
	decimals := 6
	if mini {
		decimals = 8
	}
	var scratch []float32 // written out before the next view is rounded
	rounded := func(m []float32, d int) []float32 {
		scratch = slices.Grow(scratch[:0], len(m))[:len(m)]
		for i, x := range m {
			scratch[i] = round32(x, d)
		}
		return scratch
	}
	type spec struct {
		name  string
		zero  any
		shape []int
		data  func(v *View) any
	}
	var specs []spec
	if !mini {
		specs = append(specs, spec{"image", []uint8(nil), []int{n, ht, wd, 3}, func(v *View) any { return v.RGB }})
	}
	specs = append(specs, spec{"depth", []float32(nil), []int{n, ht, wd}, func(v *View) any { return rounded(v.Depth, decimals) }})
	if v0.Conf != nil {
		specs = append(specs, spec{"conf", []float32(nil), []int{n, ht, wd}, func(v *View) any { return rounded(v.Conf, 2) }})
	}
	if v0.Camera != nil {
		flat := func(rows ...[]float64) []float32 {
			var out []float32
			for _, r := range rows {
				for _, x := range r {
					out = append(out, float32(x))
				}
			}
			return out
		}
		specs = append(specs,
			spec{"extrinsics", []float32(nil), []int{n, 3, 4}, func(v *View) any {
				e := &v.Camera.Extrinsics
				return flat(e[0][:], e[1][:], e[2][:])
			}},
			spec{"intrinsics", []float32(nil), []int{n, 3, 3}, func(v *View) any {
				k := &v.Camera.Intrinsics
				return flat(k[0][:], k[1][:], k[2][:])
			}})
	}
	for _, a := range specs {
		if err := array(a.name, a.zero, a.shape, a.data); err != nil {
			return err
		}
	}
	return z.Close()
}
