package tests

import (
	"context"
	"encoding/json"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// End to end from image files, mostly JPEGs, at sizes whose two axes scale differently once rounded
// to multiples of 14 (624×464, 1000×333, 333×1000, 1920×1080, a 15-pixel-wide strip), the NYU JPEG and a
// KITTI frame of the shared data, and a JPEG with Exif orientation 6: every DA3 process_res_method and
// DA2, against the official pipelines run on the same files (tests/oracle/anysize_oracle.py). The
// committed fixture uses the tiny models at processing resolution 70; full-size cases come from
// $DA3_ORACLE_OUT/anysize*.

type anysizeMeta struct {
	Images map[string]string `json:"images"`
	DA3    struct {
		Model      string `json:"model"`
		ProcessRes int    `json:"process_res"`
		Cases      []struct {
			Image       string `json:"image"`
			Method      string `json:"method"`
			ProcessedHW [2]int `json:"processed_hw"`
			RGB         string `json:"rgb"`
			IPPSpread   struct {
				Values      int `json:"values"`
				Depth, Conf float64
			} `json:"ipp_spread"`
		} `json:"cases"`
	} `json:"da3"`
	DA2 struct {
		Model     string `json:"model"`
		InputSize int    `json:"input_size"`
		Cases     []struct {
			Image       string `json:"image"`
			ProcessedHW [2]int `json:"processed_hw"`
		} `json:"cases"`
	} `json:"da2"`
}

func anysizeDirs(t *testing.T) []string {
	dirs := []string{fixture(t, "anysize")}
	if root := os.Getenv("DA3_ORACLE_OUT"); root != "" {
		ents, err := os.ReadDir(root)
		require.NoError(t, err)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "anysize") {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	return dirs
}

// anysizeImage resolves an image reference of meta.json: a path in the fixture, "shared:" a file of the
// shared test data, "repo:" a file of this repository. It skips the test when shared data is absent.
func anysizeImage(t *testing.T, dir, ref string) string {
	t.Helper()
	switch {
	case strings.HasPrefix(ref, "shared:"):
		p := filepath.Join(testutil.SharedData(t), strings.TrimPrefix(ref, "shared:"))
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not in the shared data", p)
		}
		return p
	case strings.HasPrefix(ref, "repo:"):
		return filepath.Join("..", strings.TrimPrefix(ref, "repo:"))
	}
	return filepath.Join(dir, ref)
}

func TestEndToEndAnySize(t *testing.T) {
	for _, dir := range anysizeDirs(t) {
		var meta anysizeMeta
		b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &meta))
		t.Run(filepath.Base(dir)+"/da3", func(t *testing.T) { anysizeDA3(t, dir, &meta) })
		t.Run(filepath.Base(dir)+"/da2", func(t *testing.T) { anysizeDA2(t, dir, &meta) })
	}
}

func anysizeDA3(t *testing.T, dir string, meta *anysizeMeta) {
	m := loadModel(t, convertFixture(t, filepath.Join(dir, meta.DA3.Model), convert.Options{}))
	require.Equal(t, model.DA3, m.Config().Arch)
	ref := refTensors(t, filepath.Join(dir, "da3.safetensors"))
	require.NotEmpty(t, meta.DA3.Cases)
	for _, c := range meta.DA3.Cases {
		t.Run(c.Image+"/"+c.Method, func(t *testing.T) {
			// Depth Anything 3 reads files with PIL: the Exif orientation is not applied.
			img, err := imgio.Decode(anysizeImage(t, dir, meta.Images[c.Image]))
			require.NoError(t, err)
			method, err := model.ParseResizeMethod(c.Method)
			require.NoError(t, err)
			res, err := m.Depth(context.Background(), img, model.RunOptions{ProcessRes: meta.DA3.ProcessRes, Method: method, ProcessedSize: true})
			require.NoError(t, err)
			require.Equal(t, c.ProcessedHW, [2]int{res.ProcessedHeight, res.ProcessedWidth}, "processed size")

			// The processed 8-bit image against the official one: bit for bit, except values whose exact
			// result is a .5 tie or lies within float32 rounding of one, which OpenCV's IPP cubic path
			// decides by the operation order of the code it picks for the CPU (internal/imgproc's tests
			// check that every disagreement is such a value; imgproc.ResizeCubicU8IPP decides about 7e-6
			// of all values differently from IPP's AVX-512 code).
			want := readRGB(t, filepath.Join(dir, c.RGB))
			require.Len(t, res.RGB, len(want))
			diff, maxd := 0, 0
			for i := range want {
				if d := int(res.RGB[i]) - int(want[i]); d != 0 {
					diff++
					maxd = max(maxd, d, -d)
				}
			}
			t.Logf("processed %dx%d: %d of %d values differ from the official, max %d (the official's own IPP variants: %d)",
				res.ProcessedWidth, res.ProcessedHeight, diff, len(want), maxd, c.IPPSpread.Values)
			assert.LessOrEqual(t, maxd, 1, "processed image")
			assert.LessOrEqual(t, float64(diff), 1e-4*float64(len(want)), "processed image")

			p := c.Image + "/" + c.Method + "/"
			if diff > 0 {
				// A one-level change of a single input value moves a random-weight network's outputs by
				// up to a few 1e-4 of their maximum, and so does the official pipeline itself from one CPU
				// to another (the oracle runs each IPP variant): from the file, the outputs must be as
				// close to the reference as the reference is to itself across CPUs; the network is gated
				// as usual on the official processed image.
				tol := ippTolerance(meta)
				t.Logf("from the file (tolerance: the reference's own spread across IPP variants, %.3g):", tol)
				gate(t, "depth (file)", ref[p+"depth"].Data, res.Depth, 0.99999, tol)
				gate(t, "conf (file)", ref[p+"conf"].Data, res.Conf, 0.99999, tol)
				rs, err := m.Forward(context.Background(), model.Pixels{Data: normalise(want, m.Config()), Width: res.ProcessedWidth, Height: res.ProcessedHeight, Views: 1}, model.RunOptions{})
				require.NoError(t, err)
				res = &rs[0]
			}
			gate(t, "depth", ref[p+"depth"].Data, res.Depth, 0.99999, 1e-4)
			gate(t, "conf", ref[p+"conf"].Data, res.Conf, 0.99999, 1e-4)
			compareCameras(t, ref[p+"extrinsics"].Data, ref[p+"intrinsics"].Data, []model.Result{*res})
		})
	}
}

// ippTolerance is the gate, relative to the maximum, for outputs computed from a file whose processed image
// differs from the official one in IPP ties: the largest change of the official depth or confidence, over
// the cases of the fixture, when the official pipeline runs with another of IPP's CPU variants (measured by
// anysize_oracle.py), and never less than the usual 1e-4.
func ippTolerance(meta *anysizeMeta) float64 {
	tol := 1e-4
	for _, c := range meta.DA3.Cases {
		tol = max(tol, c.IPPSpread.Depth, c.IPPSpread.Conf)
	}
	return tol
}

// normalise is ToTensor + Normalize of an interleaved 8-bit RGB image into CHW float32.
func normalise(rgb []uint8, cfg model.Config) []float32 {
	n := len(rgb) / 3
	out := make([]float32, len(rgb))
	for c := range 3 {
		for i := range n {
			out[c*n+i] = (float32(rgb[3*i+c])/255 - cfg.Mean[c]) / cfg.Std[c]
		}
	}
	return out
}

func anysizeDA2(t *testing.T, dir string, meta *anysizeMeta) {
	mdir := filepath.Join(dir, meta.DA2.Model)
	mm := readMeta(t, filepath.Join(mdir, "meta.json"))
	m := loadModel(t, convertFixture(t, filepath.Join(mdir, "model.pth"), convert.Options{Heads: int(mm["heads"].(float64)), OutLayers: metaInts(mm, "out_layers")}))
	require.Equal(t, model.DA2, m.Config().Arch)
	ref := refTensors(t, filepath.Join(dir, "da2.safetensors"))
	require.NotEmpty(t, meta.DA2.Cases)
	for _, c := range meta.DA2.Cases {
		t.Run(c.Image, func(t *testing.T) {
			// Depth Anything V2 reads files with cv2.imread: the Exif orientation is applied.
			img, o, err := imgio.DecodeWithOrientation(anysizeImage(t, dir, meta.Images[c.Image]))
			require.NoError(t, err)
			img = imgio.Orient(img, o)
			res, err := m.Depth(context.Background(), img, model.RunOptions{ProcessRes: meta.DA2.InputSize, ProcessedSize: true})
			require.NoError(t, err)
			require.Equal(t, c.ProcessedHW, [2]int{res.ProcessedHeight, res.ProcessedWidth}, "processed size")
			gate(t, "depth", ref[c.Image+"/depth"].Data, res.Depth, 0.99999, 1e-4)
		})
	}
}

// readRGB reads a PNG as interleaved 8-bit RGB.
func readRGB(t *testing.T, path string) []uint8 {
	t.Helper()
	img, err := imgio.Decode(path)
	require.NoError(t, err)
	rgba, ok := img.(*image.RGBA)
	if !ok {
		n := image.NewRGBA(img.Bounds())
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
				n.Set(x, y, img.At(x, y))
			}
		}
		rgba = n
	}
	b := rgba.Bounds()
	out := make([]uint8, 0, 3*b.Dx()*b.Dy())
	for i := 0; i < len(rgba.Pix); i += 4 {
		out = append(out, rgba.Pix[i], rgba.Pix[i+1], rgba.Pix[i+2])
	}
	return out
}
