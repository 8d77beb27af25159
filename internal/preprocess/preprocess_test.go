package preprocess_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/preprocess"
)

// synth must match synth() in testdata/preprocess_gen.py.
func synth(w, h int, seed uint64) *image.NRGBA {
	mix := func(z uint64) uint64 {
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	s := uint64(w + h)
	for y := range uint64(h) {
		for x := range uint64(w) {
			for c := range uint64(3) {
				quad := (x*x*(c+1) + y*y*(3-c) + x*y*(2*c+1)) * 64 / (s * s)
				ramp := (x*(7+c) + y*(11-c)) * 32 / s
				idx := (y*uint64(w)+x)*3 + c
				noise := mix(seed*0x9E3779B97F4A7C15+idx*0xD1B54A32D192ED03) >> 61
				img.Pix[int(y)*img.Stride+int(x)*4+int(c)] = uint8((quad + ramp + noise) & 255)
			}
			img.Pix[int(y)*img.Stride+int(x)*4+3] = 255
		}
	}
	return img
}

func hash16(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

type da3Case struct {
	Res        int             `json:"res"`
	Method     string          `json:"method"`
	Sizes      [][2]int        `json:"sizes"`
	Seeds      []uint64        `json:"seeds"`
	Out        [2]int          `json:"out"`
	HashOpenCV string          `json:"hash_opencv"`
	HashIPP    string          `json:"hash_ipp"`
	K          [][3][3]float64 `json:"K"`
	Off, N     int
}

type da2Case struct {
	Size  int       `json:"size"`
	W     int       `json:"w"`
	H     int       `json:"h"`
	Seed  uint64    `json:"seed"`
	Out   [2]int    `json:"out"`
	Hash  string    `json:"hash"`
	First []float32 `json:"first"`
}

func loadPreprocessData(t *testing.T) ([]da3Case, []da2Case, []int8) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "preprocess.json"))
	require.NoError(t, err)
	var d struct {
		DA3 []da3Case `json:"da3"`
		DA2 []da2Case `json:"da2"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	gz, err := os.ReadFile(filepath.Join("testdata", "preprocess_ipp.bin.gz"))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	diffs := make([]int8, len(raw))
	for i, v := range raw {
		diffs[i] = int8(v)
	}
	return d.DA3, d.DA2, diffs
}

// options parses a process_res_method name such as "upper_bound_resize".
func options(t *testing.T, method string) preprocess.Options {
	t.Helper()
	o := preprocess.Options{Patch: 14}
	switch method {
	case "upper_bound_resize":
	case "lower_bound_resize":
		o.Shortest = true
	case "upper_bound_crop":
		o.Crop = true
	case "lower_bound_crop":
		o.Shortest, o.Crop = true, true
	default:
		t.Fatalf("unknown method %q", method)
	}
	return o
}

func runDA3(t *testing.T, c da3Case, cubic preprocess.CubicImpl) []*preprocess.View {
	t.Helper()
	var views []*preprocess.View
	for i, sz := range c.Sizes {
		o := options(t, c.Method)
		o.ProcessRes, o.Mean, o.Std, o.Cubic = c.Res, preprocess.ImageNetMean, preprocess.ImageNetStd, cubic
		p, err := preprocess.DA3(synth(sz[0], sz[1], c.Seeds[i]), o)
		require.NoError(t, err)
		views = append(views, p)
	}
	if len(views) > 1 {
		preprocess.CropToSmallest(views)
	}
	return views
}

func TestPreprocessDA3MatchesInputProcessor(t *testing.T) {
	cases, _, diffs := loadPreprocessData(t)
	require.NotEmpty(t, cases)
	ippChecked, ippValues, ippWrong := 0, 0, 0
	for _, c := range cases {
		name := c.Method + "/" + jsonString(c.Sizes)
		views := runDA3(t, c, preprocess.CubicOpenCV)
		var all []float32
		var rgbCHW []uint8
		for i, v := range views {
			require.Equal(t, c.Out, [2]int{v.Width, v.Height}, name)
			require.Len(t, v.Pixels, 3*v.Width*v.Height)
			require.Len(t, v.RGB, 3*v.Width*v.Height)
			all = append(all, v.Pixels...)
			n := v.Width * v.Height
			for ch := range 3 {
				for j := range n {
					rgbCHW = append(rgbCHW, v.RGB[3*j+ch])
				}
			}
			// Intrinsics as the reference transforms them (its output is float32).
			k := c.K[i]
			sw, sh := float64(c.Sizes[i][0]), float64(c.Sizes[i][1])
			assert.InEpsilon(t, k[0][0], 1000*v.ScaleX, 1e-6, "%s fx", name)
			assert.InEpsilon(t, k[1][1], 900*v.ScaleY, 1e-6, "%s fy", name)
			assert.InDelta(t, k[0][2], sw/2*v.ScaleX-float64(v.CropX), 1e-6*max(1, math.Abs(k[0][2])), "%s cx", name)
			assert.InDelta(t, k[1][2], sh/2*v.ScaleY-float64(v.CropY), 1e-6*max(1, math.Abs(k[1][2])), "%s cy", name)
			assert.Equal(t, c.Sizes[i], [2]int{v.OrigWidth, v.OrigHeight})
		}
		assert.Equal(t, c.HashOpenCV, hash16(all), "%s: tensor vs InputProcessor with cv2 IPP disabled", name)

		ipp := runDA3(t, c, preprocess.CubicIPP)
		var allIPP []float32
		var rgbIPP []uint8
		for _, v := range ipp {
			allIPP = append(allIPP, v.Pixels...)
			for ch := range 3 {
				for j := range v.Width * v.Height {
					rgbIPP = append(rgbIPP, v.RGB[3*j+ch])
				}
			}
		}
		if c.HashIPP == c.HashOpenCV {
			assert.Equal(t, c.HashIPP, hash16(allIPP), "%s: IPP and OpenCV agree here, so must we", name)
		}
		if c.N > 0 {
			d := diffs[c.Off : c.Off+c.N]
			require.Len(t, d, len(rgbCHW))
			for i := range d {
				want := int(rgbCHW[i]) + int(d[i])
				if got := int(rgbIPP[i]); got != want {
					ippWrong++
					assert.InDelta(t, want, got, 1, "%s value %d", name, i)
				}
			}
			ippChecked++
			ippValues += len(d)
		}
	}
	assert.Greater(t, ippChecked, 3)
	assert.LessOrEqual(t, float64(ippWrong)/float64(ippValues), 3e-5)
	t.Logf("DA3 preprocessing: %d cases; IPP model on %d cases: %d of %d uint8 values off by one", len(cases), ippChecked, ippWrong, ippValues)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestPreprocessDA2MatchesReference(t *testing.T) {
	_, cases, _ := loadPreprocessData(t)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		p, err := preprocess.DA2(synth(c.W, c.H, c.Seed), c.Size, 14, preprocess.ImageNetMean, preprocess.ImageNetStd)
		require.NoError(t, err)
		require.Equal(t, c.Out, [2]int{p.Width, p.Height})
		assert.Equal(t, c.First, p.Pixels[:4])
		assert.Equal(t, c.Hash, hash16(p.Pixels), "DA2 %dx%d -> %v", c.W, c.H, c.Out)
		assert.InEpsilon(t, float64(c.Out[0])/float64(c.W), p.ScaleX, 1e-12)
		assert.Len(t, p.RGB, 3*p.Width*p.Height)
	}
}

func TestPreprocessDefaults(t *testing.T) {
	img := synth(640, 427, 3)
	a, err := preprocess.DA3(img, preprocess.Options{Patch: 14})
	require.NoError(t, err)
	b, err := preprocess.DA3(img, preprocess.Options{ProcessRes: 504, Patch: 14,
		Mean: preprocess.ImageNetMean, Std: preprocess.ImageNetStd})
	require.NoError(t, err)
	assert.Equal(t, a.Pixels, b.Pixels)
	assert.Equal(t, [2]int{504, 336}, [2]int{a.Width, a.Height})
	d2, err := preprocess.DA2(img, 0, 14, [3]float32{}, [3]float32{})
	require.NoError(t, err)
	assert.Equal(t, [2]int{770, 518}, [2]int{d2.Width, d2.Height})
}

// hugeImage reports enormous bounds without holding pixels: the size check must fire before conversion.
type hugeImage struct{ w, h int }

func (h hugeImage) ColorModel() color.Model { return color.RGBAModel }
func (h hugeImage) Bounds() image.Rectangle { return image.Rect(0, 0, h.w, h.h) }
func (h hugeImage) At(int, int) color.Color { panic("pixels must not be read") }

func TestPreprocessRejectsAbsurdInput(t *testing.T) {
	ok := preprocess.Options{Patch: 14}
	tests := []struct {
		name string
		run  func() error
	}{
		{"nil image", func() error { _, err := preprocess.DA3(nil, ok); return err }},
		{"empty image", func() error { _, err := preprocess.DA3(image.NewRGBA(image.Rect(0, 0, 0, 5)), ok); return err }},
		{"side too long", func() error { _, err := preprocess.DA3(hugeImage{20000, 10}, ok); return err }},
		{"too many pixels", func() error { _, err := preprocess.DA3(hugeImage{16000, 16000}, ok); return err }},
		{"lower bound explodes", func() error {
			_, err := preprocess.DA3(synth(2000, 10, 1), preprocess.Options{Patch: 14, Shortest: true})
			return err
		}},
		{"crop of a sliver", func() error {
			_, err := preprocess.DA3(synth(2000, 10, 1), preprocess.Options{Patch: 14, Crop: true})
			return err
		}},
		{"no patch size", func() error {
			_, err := preprocess.DA3(synth(8, 8, 1), preprocess.Options{})
			return err
		}},
		{"negative res", func() error {
			_, err := preprocess.DA3(synth(8, 8, 1), preprocess.Options{Patch: 14, ProcessRes: -1})
			return err
		}},
		{"zero std", func() error {
			_, err := preprocess.DA3(synth(8, 8, 1), preprocess.Options{Patch: 14, Mean: preprocess.ImageNetMean})
			return err
		}},
		{"DA2 nil", func() error {
			_, err := preprocess.DA2(nil, 518, 14, preprocess.ImageNetMean, preprocess.ImageNetStd)
			return err
		}},
		{"DA2 tall sliver explodes", func() error {
			_, err := preprocess.DA2(synth(13, 1000, 1), 518, 14, preprocess.ImageNetMean, preprocess.ImageNetStd)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Error(t, tc.run())
		})
	}
}

func TestCropToSmallest(t *testing.T) {
	a, err := preprocess.DA3(synth(640, 427, 1), preprocess.Options{Patch: 14}) // 504x336
	require.NoError(t, err)
	b, err := preprocess.DA3(synth(333, 500, 2), preprocess.Options{Patch: 14}) // 336x504
	require.NoError(t, err)
	origA := *a
	preprocess.CropToSmallest([]*preprocess.View{a, b})
	assert.Equal(t, [4]int{336, 336, 336, 336}, [4]int{a.Width, a.Height, b.Width, b.Height})
	assert.Equal(t, [4]int{84, 0, 0, 84}, [4]int{a.CropX, a.CropY, b.CropX, b.CropY})
	// top-left of the crop of a = pixel (84, 0) of the uncropped view, every channel
	for c := range 3 {
		assert.Equal(t, origA.Pixels[c*504*336+84], a.Pixels[c*336*336], "channel %d", c)
	}
	assert.Equal(t, origA.RGB[84*3:84*3+3], a.RGB[:3])
	assert.Len(t, a.Pixels, 3*336*336)
	assert.Len(t, a.RGB, 3*336*336)
}

// TestSizesMatchPreprocessing: the sizes computed without pixels (memory
// planning) are those DA3 and DA2 produce.
func TestSizesMatchPreprocessing(t *testing.T) {
	for _, wh := range [][2]int{{640, 427}, {427, 640}, {100, 100}, {33, 200}, {1000, 14}, {503, 505}, {17, 15}} {
		img := synth(wh[0], wh[1], 1)
		for _, res := range []int{140, 504, 518} {
			for _, short := range []bool{false, true} {
				for _, crop := range []bool{false, true} {
					o := preprocess.Options{ProcessRes: res, Patch: 14, Shortest: short, Crop: crop}
					v, err := preprocess.DA3(img, o)
					w, h := preprocess.SizeDA3(wh[0], wh[1], o)
					if err != nil {
						continue
					}
					assert.Equal(t, [2]int{v.Width, v.Height}, [2]int{w, h}, "%v res %d shortest %v crop %v", wh, res, short, crop)
				}
			}
			v, err := preprocess.DA2(img, res, 14, [3]float32{}, [3]float32{})
			if err != nil {
				continue // too large
			}
			w, h := preprocess.SizeDA2(wh[0], wh[1], res, 14)
			assert.Equal(t, [2]int{v.Width, v.Height}, [2]int{w, h}, "DA2 %v res %d", wh, res)
		}
	}
}
