package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// TestExportCheckCases writes the inputs and da3-go's exports of several scenes for
// tests/exportcheck/check.py, which reads them back with the tools users use (pycolmap, trimesh,
// pygltflib, the Khronos glTF validator, plyfile, numpy) and compares them with the official exporters'
// files made from the same arrays. It runs only when DA3_EXPORTCHECK_OUT names the output directory
// (tests/exportcheck/run.sh sets it).
func TestExportCheckCases(t *testing.T) {
	out := os.Getenv("DA3_EXPORTCHECK_OUT")
	if out == "" {
		t.Skip("DA3_EXPORTCHECK_OUT not set (tests/exportcheck/run.sh runs this)")
	}
	cases := map[string][]export.View{
		"synthetic": syntheticViews(3, false),
		"sky":       syntheticViews(2, true),
		// The tiny DA3 fixture (random weights) on four views of one size, and on the fixture's four
		// views of different sizes, which the model centre-crops to the smallest.
		"tiny_model":         tinyModelViews(t, false),
		"tiny_model_cropped": tinyModelViews(t, true),
	}
	if v, ok := nyuView(t); ok {
		cases["nyu_gt"] = []export.View{v}
	}
	for name, views := range cases {
		dir := filepath.Join(out, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "go", "exports", "npz"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "go", "exports", "mini_npz"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "go", "colmap_bin"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "go", "colmap_txt"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "go", "depth_vis"), 0o755))
		writeExportInputs(t, dir, views)

		pc, err := export.NewPointCloud(views, export.DefaultOptions())
		require.NoError(t, err)
		// Every point (no subsampling), so that the official file has the same points in the same order.
		require.NoError(t, export.WriteGLB(filepath.Join(dir, "go", "scene.glb"), pc, views, export.GLBOptions{ShowCameras: true, CameraSize: 0.03}))
		require.NoError(t, export.WritePLY(filepath.Join(dir, "go", "scene.ply"), pc))
		cpc, err := export.NewPointCloud(views, export.COLMAPOptions())
		require.NoError(t, err)
		require.NoError(t, export.WriteCOLMAP(filepath.Join(dir, "go", "colmap_bin"), cpc, views, false))
		require.NoError(t, export.WriteCOLMAP(filepath.Join(dir, "go", "colmap_txt"), cpc, views, true))
		require.NoError(t, export.WriteNPZ(filepath.Join(dir, "go", "exports", "npz", "results.npz"), views, false))
		require.NoError(t, export.WriteNPZ(filepath.Join(dir, "go", "exports", "mini_npz", "results.npz"), views, true))
		for i := range views {
			for _, ext := range []string{".jpg", ".png"} {
				require.NoError(t, export.WriteDepthVis(filepath.Join(dir, "go", "depth_vis", fmt.Sprintf("%04d%s", i, ext)), &views[i]))
			}
		}
		meta := map[string]any{"glb_threshold": pc.Threshold, "colmap_threshold": cpc.Threshold, "glb_points": pc.Len(), "colmap_points": cpc.Len()}
		writeJSON(t, filepath.Join(dir, "go", "meta.json"), meta)
	}
}

// tinyModelViews runs the tiny DA3 fixture at the processed size on four views: the fixture's images of
// different sizes (cropped), or view0 and three shifted copies of it (one size, resized only).
func tinyModelViews(t *testing.T, cropped bool) []export.View {
	dir := fixture(t, "da3-tiny")
	m := loadModel(t, convertFixture(t, dir, convert.Options{}))
	var imgs []image.Image
	var names []string
	for i := range 4 {
		p := filepath.Join(dir, "four", "images", fmt.Sprintf("view%d.png", i))
		if !cropped {
			p = filepath.Join(dir, "four", "images", "view0.png")
		}
		img, err := imgio.Decode(p)
		require.NoError(t, err)
		if !cropped {
			img = shifted(img, 3*i)
		}
		imgs, names = append(imgs, img), append(names, fmt.Sprintf("view%d.png", i))
	}
	res, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 56, ProcessedSize: true})
	require.NoError(t, err)
	anyCropped := false
	for _, r := range res {
		anyCropped = anyCropped || r.Cropped
	}
	require.Equal(t, cropped, anyCropped)
	views, err := model.Views(res, names)
	require.NoError(t, err)
	return views
}

// shifted returns img moved left by dx pixels (wrapping around).
func shifted(img image.Image, dx int) image.Image {
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := range b.Dy() {
		for x := range b.Dx() {
			out.Set(x, y, img.At(b.Min.X+(x+dx)%b.Dx(), b.Min.Y+y))
		}
	}
	return out
}

// syntheticViews makes n views (37×29 maps of 74×58 images) of a wavy surface seen from cameras turned
// about y and x, with random confidence; with sky, the top 6 rows are sky as the nested model leaves
// them (confidence 1, depth capped far away).
func syntheticViews(n int, sky bool) []export.View {
	const w, h = 37, 29
	r := rand.New(rand.NewPCG(7, uint64(n)))
	views := make([]export.View, n)
	for vi := range views {
		ay, ax := 0.15*float64(vi), -0.05*float64(vi)
		cy, sy, cx, sx := math.Cos(ay), math.Sin(ay), math.Cos(ax), math.Sin(ax)
		// R = Rx(ax)·Ry(ay)
		rot := [3][3]float64{{cy, 0, sy}, {sx * sy, cx, -sx * cy}, {-cx * sy, sx, cx * cy}}
		t := [3]float64{-0.4 * float64(vi), 0.05 * float64(vi), 0.1}
		var e [3][4]float64
		for i := range 3 {
			copy(e[i][:3], rot[i][:])
			e[i][3] = t[i]
		}
		k := [3][3]float64{{31.5, 0, 18.5}, {0, 30.25, 14.5}, {0, 0, 1}}
		ko := [3][3]float64{{63, 0, 37}, {0, 60.5, 29}, {0, 0, 1}}
		v := export.View{Name: fmt.Sprintf("frame_%02d.png", vi), Width: w, Height: h, Depth: make([]float32, w*h),
			Conf: make([]float32, w*h), RGB: make([]uint8, 3*w*h), OrigWidth: 2 * w, OrigHeight: 2 * h,
			Camera: &export.Camera{Extrinsics: e, Intrinsics: k, IntrinsicsOriginal: ko}}
		if sky {
			v.Sky = make([]float32, w*h)
		}
		for y := range h {
			for x := range w {
				i := y*w + x
				v.Depth[i] = float32(2 + 0.3*math.Sin(0.3*float64(x)+float64(vi)) + 0.02*float64(y) + 0.05*r.Float64())
				v.Conf[i] = float32(1 + 2*r.Float64())
				v.RGB[3*i], v.RGB[3*i+1], v.RGB[3*i+2] = uint8(7*x), uint8(8*y), uint8(r.IntN(256))
				if sky && y < 6 {
					v.Sky[i], v.Conf[i], v.Depth[i] = 1, 1, 200
				}
			}
		}
		views[vi] = v
	}
	return views
}

// nyuView is the NYU photo with its ground-truth depth and intrinsics (from the shared data directory,
// DA3_DATA_DIR or /work/shared/data); missing GT pixels have depth 0. GT has no confidence: 2 everywhere.
func nyuView(t *testing.T) (export.View, bool) {
	dataDir := os.Getenv("DA3_DATA_DIR")
	if dataDir == "" {
		dataDir = "/work/shared/data"
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "manifest.json"))
	if err != nil {
		t.Logf("no NYU case: %v", err)
		return export.View{}, false
	}
	var man struct {
		Samples []struct {
			Set, RGB, Depth string
			DepthScale      float64 `json:"depth_scale"`
			Intrinsics      [4]float64
		}
	}
	require.NoError(t, json.Unmarshal(b, &man))
	s := man.Samples[0]
	require.Equal(t, "nyu", s.Set)
	img, err := imgio.Decode(filepath.Join(dataDir, s.RGB))
	require.NoError(t, err)
	gt, err := imgio.Decode(filepath.Join(dataDir, s.Depth))
	require.NoError(t, err)
	bd := img.Bounds()
	w, h := bd.Dx(), bd.Dy()
	require.Equal(t, bd.Size(), gt.Bounds().Size())
	f := s.Intrinsics
	k := [3][3]float64{{f[0], 0, f[2]}, {0, f[1], f[3]}, {0, 0, 1}}
	v := export.View{Name: filepath.Base(s.RGB), Width: w, Height: h, Depth: make([]float32, w*h), Conf: make([]float32, w*h),
		RGB: make([]uint8, 3*w*h), Camera: &export.Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: k}}
	g16, ok := gt.(*image.Gray16)
	require.True(t, ok, "GT depth is a 16-bit grey PNG")
	for y := range h {
		for x := range w {
			i := y*w + x
			v.Depth[i] = float32(float64(g16.Gray16At(bd.Min.X+x, bd.Min.Y+y).Y) / s.DepthScale)
			v.Conf[i] = 2
			r, g, b, _ := img.At(bd.Min.X+x, bd.Min.Y+y).RGBA()
			v.RGB[3*i], v.RGB[3*i+1], v.RGB[3*i+2] = uint8(r>>8), uint8(g>>8), uint8(b>>8)
		}
	}
	return v, true
}

// writeExportInputs saves the views' arrays as .npy files (and names.json) for the Python side.
func writeExportInputs(t *testing.T, dir string, views []export.View) {
	n, w, h := len(views), views[0].Width, views[0].Height
	var depth, conf, sky []float32
	var rgb []uint8
	var ext, k, ko, orig []float64
	var names []string
	for _, v := range views {
		require.Equal(t, w, v.Width)
		require.Equal(t, h, v.Height)
		depth, conf, rgb = append(depth, v.Depth...), append(conf, v.Conf...), append(rgb, v.RGB...)
		sky = append(sky, v.Sky...)
		for i := range 3 {
			ext = append(ext, v.Camera.Extrinsics[i][:]...)
			k = append(k, v.Camera.Intrinsics[i][:]...)
			kor := v.Camera.IntrinsicsOriginal
			if kor == ([3][3]float64{}) {
				kor = v.Camera.Intrinsics
			}
			ko = append(ko, kor[i][:]...)
		}
		ow, oh := v.OrigWidth, v.OrigHeight
		if ow == 0 {
			ow, oh = v.Width, v.Height
		}
		orig = append(orig, float64(ow), float64(oh))
		names = append(names, v.Name)
	}
	save := func(name string, data any, shape ...int) {
		require.NoError(t, imgio.WriteAtomic(filepath.Join(dir, name+".npy"), func(wr io.Writer) error { return imgio.EncodeNPY(wr, data, shape...) }))
	}
	save("depth", depth, n, h, w)
	save("conf", conf, n, h, w)
	if len(sky) > 0 {
		save("sky", sky, n, h, w)
	}
	save("rgb", rgb, n, h, w, 3)
	save("extrinsics", ext, n, 3, 4)
	save("intrinsics", k, n, 3, 3)
	save("intrinsics_original", ko, n, 3, 3)
	save("orig_wh", orig, n, 2)
	writeJSON(t, filepath.Join(dir, "names.json"), names)
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", " ")
	require.NoError(t, err)
	require.NoError(t, imgio.WriteFileAtomic(path, b))
}
