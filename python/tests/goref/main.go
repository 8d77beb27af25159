// Command goref writes what the Go library computes on the tiny DA3 fixture,
// for the Python package's tests to compare with bit for bit:
//
//	go run ./python/tests/goref -o DIR
//
// DIR receives da3-tiny.gguf (the fixture converted) and .npy files, all at
// process_res 56 on one CPU thread:
//
//   - depth_{depth,conf}.npy, depth_{extrinsics,intrinsics}.npy: Depth of
//     two/images/view0.png;
//   - batch{0,1,2}_depth.npy: Independent of that image, its negative
//     (255-v) and its left-right mirror;
//   - scene{0,1}_{depth,conf,extrinsics}.npy: MultiView of two/images
//     view0.png and view1.png;
//   - fisheye.png, a textured plane rendered through the OPENCV_FISHEYE lens
//     fisheyeParams (64×48), and the lens package's path on it: undistorted
//     to the pinhole view (balance 0), Depth on the view
//     (fisheye_pinhole_{depth,conf}.npy), the maps mapped back to the
//     fisheye's pixels (fisheye_{depth,conf}.npy, NaN beyond the view).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

func main() {
	out := flag.String("o", "", "output directory")
	fixtures := flag.String("fixtures", "tests/fixtures/da3-tiny", "the tiny DA3 fixture")
	flag.Parse()
	if err := run(*out, *fixtures); err != nil {
		fmt.Fprintln(os.Stderr, "goref:", err)
		os.Exit(1)
	}
}

func run(out, fixtures string) error {
	if out == "" {
		return fmt.Errorf("-o is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	gguf := filepath.Join(out, "da3-tiny.gguf")
	if err := convert.Convert(ctx, fixtures, gguf, convert.Options{}); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := writePublished(filepath.Join(out, "published.json"), "da3-small"); err != nil {
		return err
	}
	m, err := model.Load(ctx, gguf, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	if err != nil {
		return err
	}
	defer m.Close()
	var imgs []image.Image
	for _, name := range []string{"view0.png", "view1.png"} {
		img, err := imgio.Decode(filepath.Join(fixtures, "two/images", name))
		if err != nil {
			return err
		}
		imgs = append(imgs, img)
	}
	opt := model.RunOptions{ProcessRes: 56}
	one, err := m.Depth(ctx, imgs[0], opt)
	if err != nil {
		return err
	}
	if err := save(out, "depth", one); err != nil {
		return err
	}
	batch, err := m.Independent(ctx, variants(imgs[0]), opt)
	if err != nil {
		return err
	}
	for i := range batch {
		if err := save(out, fmt.Sprintf("batch%d", i), &batch[i]); err != nil {
			return err
		}
	}
	scene, err := m.MultiView(ctx, imgs, opt)
	if err != nil {
		return err
	}
	for i := range scene {
		if err := save(out, fmt.Sprintf("scene%d", i), &scene[i]); err != nil {
			return err
		}
	}
	return fisheyeRef(ctx, m, out, opt)
}

// fisheyeParams is the fisheye lens of fisheye.png, COLMAP's order (the
// Python tests pass the same).
var fisheyeParams = []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003}

// fisheyeRef writes fisheye.png and the lens package's path on it.
func fisheyeRef(ctx context.Context, m *model.Model, out string, opt model.RunOptions) error {
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, fisheyeParams)
	if err != nil {
		return err
	}
	img := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			r, ok := c.Unproject(float64(x)+0.5, float64(y)+0.5)
			if !ok {
				return fmt.Errorf("fisheye pixel (%d, %d) has no ray", x, y)
			}
			s := 2 / r[2]
			v := 0.5 + 0.5*math.Sin(3*r[0]*s)*math.Cos(2*r[1]*s)
			img.SetNRGBA(x, y, color.NRGBA{uint8(40 + 200*v), uint8(200 - 150*v), uint8(100 + 50*v), 255})
		}
	}
	if err := imgio.WriteAtomic(filepath.Join(out, "fisheye.png"), func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
		return err
	}
	pin, err := lens.PinholeFor(c, lens.PinholeOptions{})
	if err != nil {
		return err
	}
	u, err := lens.NewUndistorter(c, pin)
	if err != nil {
		return err
	}
	view, err := u.Image(img)
	if err != nil {
		return err
	}
	r, err := m.Depth(ctx, view, opt)
	if err != nil {
		return err
	}
	if err := save(out, "fisheye_pinhole", r); err != nil {
		return err
	}
	back := u.Backward(r.Width, r.Height, r.Width, r.Height)
	nan := float32(math.NaN())
	if r.Depth, err = back.Floats(r.Depth, nan); err != nil {
		return err
	}
	if r.Conf, err = back.Floats(r.Conf, nan); err != nil {
		return err
	}
	r.Camera = nil
	return save(out, "fisheye", r)
}

// variants returns img, its negative and its left-right mirror as 8-bit RGB
// images (the Python tests build the same with numpy).
func variants(img image.Image) []image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	base, neg, mirror := image.NewRGBA(image.Rect(0, 0, w, h)), image.NewRGBA(image.Rect(0, 0, w, h)), image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			px := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			i, j := base.PixOffset(x, y), base.PixOffset(w-1-x, y)
			for c := range 3 {
				base.Pix[i+c], neg.Pix[i+c], mirror.Pix[j+c] = px[c], 255-px[c], px[c]
			}
			base.Pix[i+3], neg.Pix[i+3], mirror.Pix[j+3] = 255, 255, 255
		}
	}
	return []image.Image{base, neg, mirror}
}

// save writes a result's depth, confidence and camera as name_*.npy.
func save(dir, name string, r *model.Result) error {
	write := func(what string, data any, shape ...int) error {
		f, err := os.Create(filepath.Join(dir, name+"_"+what+".npy"))
		if err != nil {
			return err
		}
		if err := imgio.EncodeNPY(f, data, shape...); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write("depth", r.Depth, r.Height, r.Width); err != nil {
		return err
	}
	if r.Conf != nil {
		if err := write("conf", r.Conf, r.Height, r.Width); err != nil {
			return err
		}
	}
	if c := r.Camera; c != nil {
		var ext, ixt []float64
		for _, row := range c.Extrinsics {
			ext = append(ext, row[:]...)
		}
		for _, row := range c.IntrinsicsOriginal {
			ixt = append(ixt, row[:]...)
		}
		if err := write("extrinsics", ext, 3, 4); err != nil {
			return err
		}
		return write("intrinsics", ixt, 3, 3)
	}
	return nil
}

// writePublished records the published model name's file and SHA-256, for
// the test that loads a name from the cache.
func writePublished(path, name string) error {
	m, ok := fetch.Lookup(name)
	if !ok {
		return fmt.Errorf("no published model %s", name)
	}
	b, err := json.Marshal(map[string]string{"name": m.Name, "file": m.File, "sha256": m.SHA256})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
