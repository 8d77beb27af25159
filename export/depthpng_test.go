package export

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encodePNG16(t *testing.T, m DepthMap, opts PNG16Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, EncodeDepthPNG16(&buf, m, opts))
	return buf.Bytes()
}

func TestDepthPNG16MetricRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := DepthMap{Width: 64, Height: 48, Depth: make([]float32, 64*48), Unit: UnitMetres}
	for i := range m.Depth {
		m.Depth[i] = 0.05 + 65*rng.Float32()
	}
	special := map[int]float32{0: float32(math.NaN()), 1: 0, 2: -3, 3: 80, 4: float32(math.Inf(1)), 5: 0.0002}
	for i, v := range special {
		m.Depth[i] = v
	}
	path := filepath.Join(t.TempDir(), "d_16.png")
	require.NoError(t, WriteDepthPNG16(path, m, PNG16Options{Invert: true}))
	got, err := ReadDepthPNG16(path)
	require.NoError(t, err)
	assert.Equal(t, UnitMetres, got.Unit)
	require.Equal(t, [2]int{64, 48}, [2]int{got.Width, got.Height})
	for i, v := range m.Depth {
		switch i {
		case 0, 1, 2:
			assert.True(t, math.IsNaN(float64(got.Depth[i])), "no value (%v) reads as NaN, got %v", v, got.Depth[i])
		case 3, 4:
			assert.InDelta(t, 65.535, got.Depth[i], 1e-5, "beyond 65.535 m: clamped")
		case 5:
			assert.InDelta(t, 0.001, got.Depth[i], 1e-7, "below 1 mm: 1 mm, not 'no value'")
		default:
			require.InDelta(t, v, got.Depth[i], 0.0005+1e-6, "pixel %d within half a millimetre", i)
		}
	}
	// Tools that know nothing of the chunks read millimetres, as in NYU's and KITTI's tooling.
	img, err := png.Decode(bytes.NewReader(encodePNG16(t, m, PNG16Options{})))
	require.NoError(t, err)
	g := img.(*image.Gray16)
	assert.Equal(t, uint16(math.Round(float64(m.Depth[10])*1000)), g.Gray16At(10, 0).Y)
	assert.Equal(t, uint16(0), g.Gray16At(0, 0).Y, "NaN: 0")
}

// TestDepthPNG16MetricStep: in KITTI's steps of 1/256 m an outdoor map (to 250 m) reads back within half
// a step, beyond 255.996 m clamps to it, and tools that know nothing of the chunks read pixel / 256; a
// step that is not a positive number of metres is refused.
func TestDepthPNG16MetricStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := DepthMap{Width: 32, Height: 24, Depth: make([]float32, 32*24), Unit: UnitMetres}
	for i := range m.Depth {
		m.Depth[i] = 1 + 249*rng.Float32()
	}
	m.Depth[0] = 300
	opts := PNG16Options{MetricStep: MetricStepKITTI}
	assert.InDelta(t, 255.996, opts.MetricRange(), 1e-3)
	assert.InDelta(t, 65.535, PNG16Options{}.MetricRange(), 1e-9)
	data := encodePNG16(t, m, opts)
	got, err := DecodeDepthPNG16(bytes.NewReader(data))
	require.NoError(t, err)
	assert.InDelta(t, opts.MetricRange(), got.Depth[0], 1e-4, "beyond the range: clamped")
	for i := 1; i < len(m.Depth); i++ {
		require.InDelta(t, m.Depth[i], got.Depth[i], MetricStepKITTI/2+1e-5, "pixel %d within half a step", i)
	}
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, uint16(math.Round(float64(m.Depth[7])*256)), img.(*image.Gray16).Gray16At(7, 0).Y)
	for _, bad := range []float64{-0.001, math.NaN(), math.Inf(1)} {
		assert.ErrorContains(t, EncodeDepthPNG16(&bytes.Buffer{}, m, PNG16Options{MetricStep: bad}), "positive number of metres")
	}
}

func TestDepthPNG16RelativeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := DepthMap{Width: 40, Height: 30, Depth: make([]float32, 40*30), Unit: "relative"}
	for i := range m.Depth {
		m.Depth[i] = 0.3 + 7*rng.Float32()
	}
	lo, hi := m.Depth[0], m.Depth[0]
	for _, v := range m.Depth {
		lo, hi = min(lo, v), max(hi, v)
	}
	step := float64(hi-lo) / 65535
	for _, invert := range []bool{false, true} {
		data := encodePNG16(t, m, PNG16Options{Invert: invert})
		got, err := DecodeDepthPNG16(bytes.NewReader(data))
		require.NoError(t, err)
		assert.Equal(t, "relative", got.Unit)
		for i, v := range m.Depth {
			require.InDelta(t, v, got.Depth[i], step/2+1e-6, "invert %v, pixel %d within half a step", invert, i)
		}
		img, err := png.Decode(bytes.NewReader(data))
		require.NoError(t, err)
		g := img.(*image.Gray16)
		iMin, iMax := 0, 0
		for i, v := range m.Depth {
			if v == lo {
				iMin = i
			}
			if v == hi {
				iMax = i
			}
		}
		px := func(i int) uint16 { return g.Gray16At(i%40, i/40).Y }
		if invert {
			assert.Equal(t, [2]uint16{65535, 0}, [2]uint16{px(iMin), px(iMax)}, "inverted: the nearest is brightest")
		} else {
			assert.Equal(t, [2]uint16{0, 65535}, [2]uint16{px(iMin), px(iMax)})
		}
	}
}

// The pixels of a relative map are those da3-go always wrote (min–max, non-finite 0).
func TestDepthPNG16RelativePixels(t *testing.T) {
	data := encodePNG16(t, DepthMap{Width: 2, Height: 2, Depth: []float32{-1, 0, 1, float32(math.NaN())}}, PNG16Options{})
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	g := img.(*image.Gray16)
	got := []uint16{g.Gray16At(0, 0).Y, g.Gray16At(1, 0).Y, g.Gray16At(0, 1).Y, g.Gray16At(1, 1).Y}
	assert.Equal(t, []uint16{0, 32768, 65535, 0}, got, "NaN maps to 0")
	back, err := DecodeDepthPNG16(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Empty(t, back.Unit, "no unit chunk for a map without a unit")
	assert.InDelta(t, 1/65535.0, back.Depth[1], 1e-6)
}

func TestDepthPNG16TextChunks(t *testing.T) {
	data := encodePNG16(t, DepthMap{Width: 3, Height: 1, Depth: []float32{1, 2, 4}, Unit: "disparity"}, PNG16Options{Invert: true})
	// Right after the 33 bytes of signature and IHDR, before the image data.
	idat := bytes.Index(data, []byte("IDAT"))
	for _, want := range []string{"tEXtdepth:unit\x00disparity", "tEXtdepth:scale\x00-4.5777065690089265e-05", "tEXtdepth:offset\x004"} {
		k := bytes.Index(data, []byte(want))
		assert.True(t, k > 33 && k < idat, "%q between IHDR and IDAT (at %d, IDAT at %d)", want, k, idat)
	}
	text, err := pngText(data)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"depth:unit": "disparity", "depth:scale": "-4.5777065690089265e-05", "depth:offset": "4"}, text)

	m := encodePNG16(t, DepthMap{Width: 1, Height: 1, Depth: []float32{2}, Unit: UnitMetres}, PNG16Options{})
	assert.Contains(t, string(m), "tEXtdepth:unit\x00metres")
	assert.Contains(t, string(m), "tEXtdepth:scale\x000.001")
}

func TestDepthPNG16Refused(t *testing.T) {
	var plain bytes.Buffer
	require.NoError(t, png.Encode(&plain, image.NewGray16(image.Rect(0, 0, 2, 2))))
	_, err := DecodeDepthPNG16(&plain)
	assert.ErrorIs(t, err, ErrNoDepthMapping, "a 16-bit PNG of another tool")

	var rgb bytes.Buffer
	require.NoError(t, png.Encode(&rgb, image.NewRGBA(image.Rect(0, 0, 2, 2))))
	_, err = DecodeDepthPNG16(&rgb)
	assert.ErrorContains(t, err, "want 16-bit grey")

	data := encodePNG16(t, DepthMap{Width: 2, Height: 1, Depth: []float32{1, 2}, Unit: UnitMetres}, PNG16Options{})
	k := bytes.Index(data, []byte("depth:unit"))
	data[k+12] ^= 1 // corrupt a chunk: its checksum fails
	_, err = DecodeDepthPNG16(bytes.NewReader(data))
	assert.Error(t, err)

	assert.Error(t, EncodeDepthPNG16(&bytes.Buffer{}, DepthMap{Width: 2, Height: 2, Depth: []float32{1}}, PNG16Options{}))
	assert.Error(t, EncodeDepthPNG16(&bytes.Buffer{}, DepthMap{Width: 0, Height: 2}, PNG16Options{}))
}
