package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io"
	"math"
	"strconv"

	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/safeio"
)

// UnitMetres is the unit of metric depth (model.Metres). A DepthMap in metres is stored in
// steps of PNG16Options.MetricStep (millimetres by default); any other unit is stored min–max normalised
// with its mapping.
const UnitMetres = "metres"

// The tEXt keywords of a depth PNG16: value = offset + scale · pixel.
const (
	textUnit   = "depth:unit"
	textScale  = "depth:scale"
	textOffset = "depth:offset"
)

// maxPNG16 bounds the bytes of a depth PNG read back.
const maxPNG16 = 1 << 30

// MetricStepMM and MetricStepKITTI are metric PNG16 steps (PNG16Options.MetricStep): a millimetre (the
// default, as NYU Depth V2's PNGs: up to 65.535 m) and KITTI's 1/256 m (up to 255.996 m).
const (
	MetricStepMM    = 0.001
	MetricStepKITTI = 1.0 / 256
)

// DepthMap is a map of w×h values, row-major, top row first, with the unit of its values: "metres"
// (UnitMetres), or a relative unit ("relative", "disparity", "focal-normalised", as model.DepthUnit
// names them), or "" for maps with no unit (confidence).
type DepthMap struct {
	Width, Height int
	Depth         []float32
	Unit          string
}

// PNG16Options configure EncodeDepthPNG16. The zero value stores relative maps with low values dark.
type PNG16Options struct {
	// Invert stores a relative map's largest value as 0 and its smallest as 65535 (for depth: near is
	// bright). Metric maps are never inverted.
	Invert bool
	// Compression is the zlib effort (default png.DefaultCompression).
	Compression png.CompressionLevel
	// MetricStep is the metres a pixel step of a metric map stands for (0: MetricStepMM): the map holds
	// depths up to 65535 steps.
	MetricStep float64
}

// metricStep is o's metric step, or an error naming a bad one.
func (o PNG16Options) metricStep() (float64, error) {
	switch {
	case o.MetricStep == 0:
		return MetricStepMM, nil
	case !(o.MetricStep > 0) || math.IsInf(o.MetricStep, 0):
		return 0, fmt.Errorf("metric PNG16 step %g: must be a positive number of metres", o.MetricStep)
	}
	return o.MetricStep, nil
}

// MetricRange is the largest depth a metric PNG16 with these options holds (larger ones are stored as
// it).
func (o PNG16Options) MetricRange() float64 {
	s, err := o.metricStep()
	if err != nil {
		return 0
	}
	return 65535 * s
}

// EncodeDepthPNG16 writes m as a 16-bit grey PNG that keeps its values, with the mapping from pixel to
// value in tEXt chunks: "depth:unit" (m.Unit, absent when empty), "depth:scale" and "depth:offset"
// (decimal), value = offset + scale · pixel. DecodeDepthPNG16 reads it back.
//
//   - Metres: the pixel is the depth in steps of opts.MetricStep, rounded (scale the step, offset 0): by
//     default millimetres, as NYU Depth V2's and most depth datasets' 16-bit PNGs store it (read as
//     pixel / 1000 by tools that know nothing of the chunks), or KITTI's 1/256 m (MetricStepKITTI). 0
//     means no value (NaN, ±Inf, depth ≤ 0); depths above 65535 steps (65.535 m in millimetres) are
//     stored as 65535, positive depths below one step as 1. Error at most half a step within that range.
//   - Any other unit: the map has no absolute scale, so it is normalised between its finite minimum and
//     maximum: pixel = round(65535 · (v − min) / (max − min)), or 65535 minus that with opts.Invert;
//     scale and offset undo it (scale = (max − min) / 65535, offset = min; inverted: −scale and max), to
//     within half a step, (max − min) / 131070. Non-finite values are stored as pixel 0 (which also
//     reads as the minimum, or the maximum when inverted); a constant map is all 0 (65535 inverted).
func EncodeDepthPNG16(w io.Writer, m DepthMap, opts PNG16Options) error {
	if err := imgproc.CheckSize(m.Width, m.Height); err != nil {
		return err
	}
	if len(m.Depth) != m.Width*m.Height {
		return fmt.Errorf("%dx%d map needs %d values, got %d", m.Width, m.Height, m.Width*m.Height, len(m.Depth))
	}
	img := image.NewGray16(image.Rect(0, 0, m.Width, m.Height))
	var scale, offset float64
	if m.Unit == UnitMetres {
		step, err := opts.metricStep()
		if err != nil {
			return err
		}
		scale = step
		for i, v := range m.Depth {
			binary.BigEndian.PutUint16(img.Pix[2*i:], metricPixel(v, step))
		}
	} else {
		scale, offset = normalise(m.Depth, img.Pix, opts.Invert)
	}
	var text []byte
	if m.Unit != "" {
		text = appendText(text, textUnit, m.Unit)
	}
	text = appendText(text, textScale, strconv.FormatFloat(scale, 'g', -1, 64))
	text = appendText(text, textOffset, strconv.FormatFloat(offset, 'g', -1, 64))
	enc := png.Encoder{CompressionLevel: opts.Compression}
	return enc.Encode(&afterIHDR{w: w, chunks: text}, img)
}

// WriteDepthPNG16 writes EncodeDepthPNG16's PNG to path atomically (a temporary file renamed into
// place).
func WriteDepthPNG16(path string, m DepthMap, opts PNG16Options) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return EncodeDepthPNG16(w, m, opts) }); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// metricPixel is a metric depth's pixel in steps of step metres (see EncodeDepthPNG16).
func metricPixel(v float32, step float64) uint16 {
	f := float64(v)
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= 65535*step:
		return math.MaxUint16
	}
	// f·(1/step): 1/MetricStepMM is exactly 1000, so millimetres round as f·1000
	return uint16(min(65535, max(1, math.Round(f*(1/step)))))
}

// normalise fills pix (big-endian uint16) with data min–max normalised and returns the mapping back.
func normalise(data []float32, pix []uint8, invert bool) (scale, offset float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range data {
		if f := float64(v); !math.IsInf(f, 0) && !math.IsNaN(f) {
			lo, hi = min(lo, f), max(hi, f)
		}
	}
	if lo > hi { // no finite value
		return 0, 0
	}
	for i, v := range data {
		f := float64(v)
		t := 0.0
		if hi > lo && !math.IsInf(f, 0) && !math.IsNaN(f) {
			t = (f - lo) / (hi - lo)
		}
		p := math.Round(65535 * t)
		if invert && !math.IsInf(f, 0) && !math.IsNaN(f) {
			p = 65535 - p
		}
		binary.BigEndian.PutUint16(pix[2*i:], uint16(max(0, min(65535, p))))
	}
	if invert {
		return -(hi - lo) / 65535, hi
	}
	return (hi - lo) / 65535, lo
}

// appendText appends a PNG tEXt chunk (keyword, NUL, Latin-1 text) to b.
func appendText(b []byte, keyword, text string) []byte {
	data := append(append([]byte(keyword), 0), text...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(append(b, "tEXt"...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// headerLen is the PNG signature and IHDR chunk: 8 + 4 + 4 + 13 + 4 bytes.
const headerLen = 33

// afterIHDR passes a PNG through and inserts chunks right after its IHDR chunk.
type afterIHDR struct {
	w      io.Writer
	n      int
	chunks []byte
}

func (a *afterIHDR) Write(p []byte) (int, error) {
	if a.n >= headerLen {
		return a.w.Write(p)
	}
	k := min(len(p), headerLen-a.n)
	if _, err := a.w.Write(p[:k]); err != nil {
		return 0, err
	}
	a.n += k
	if a.n < headerLen {
		return len(p), nil
	}
	if _, err := a.w.Write(a.chunks); err != nil {
		return k, err
	}
	n, err := a.w.Write(p[k:])
	return k + n, err
}

// ErrNoDepthMapping is wrapped by DecodeDepthPNG16's error for a 16-bit grey PNG without the
// depth:scale and depth:offset chunks (not written by EncodeDepthPNG16, or by a da3-go before them).
var ErrNoDepthMapping = errors.New("no depth:scale/depth:offset text chunks")

// DecodeDepthPNG16 reads a PNG that EncodeDepthPNG16 wrote: the values (offset + scale · pixel; NaN for
// the pixels 0 of a metric map, which mean no value) and the unit.
func DecodeDepthPNG16(r io.Reader) (DepthMap, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPNG16+1))
	if err != nil {
		return DepthMap{}, fmt.Errorf("read depth PNG: %w", err)
	}
	if len(data) > maxPNG16 {
		return DepthMap{}, fmt.Errorf("depth PNG larger than %d bytes", maxPNG16)
	}
	text, err := pngText(data)
	if err != nil {
		return DepthMap{}, err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return DepthMap{}, fmt.Errorf("depth PNG: %w", err)
	}
	if err := imgproc.CheckSize(cfg.Width, cfg.Height); err != nil {
		return DepthMap{}, fmt.Errorf("depth PNG: %w", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return DepthMap{}, fmt.Errorf("depth PNG: %w", err)
	}
	g, ok := img.(*image.Gray16)
	if !ok {
		return DepthMap{}, fmt.Errorf("depth PNG: %T, want 16-bit grey", img)
	}
	scaleText, ok1 := text[textScale]
	offsetText, ok2 := text[textOffset]
	if !ok1 || !ok2 {
		return DepthMap{}, fmt.Errorf("depth PNG: %w", ErrNoDepthMapping)
	}
	scale, err := strconv.ParseFloat(scaleText, 64)
	if err != nil {
		return DepthMap{}, fmt.Errorf("depth PNG: %s: %w", textScale, err)
	}
	offset, err := strconv.ParseFloat(offsetText, 64)
	if err != nil {
		return DepthMap{}, fmt.Errorf("depth PNG: %s: %w", textOffset, err)
	}
	m := DepthMap{Width: cfg.Width, Height: cfg.Height, Depth: make([]float32, cfg.Width*cfg.Height), Unit: text[textUnit]}
	for y := range m.Height {
		row := g.Pix[y*g.Stride:]
		for x := range m.Width {
			p := binary.BigEndian.Uint16(row[2*x:])
			v := float32(offset + scale*float64(p))
			if p == 0 && m.Unit == UnitMetres {
				v = float32(math.NaN())
			}
			m.Depth[y*m.Width+x] = v
		}
	}
	return m, nil
}

// ReadDepthPNG16 reads the file at path with DecodeDepthPNG16.
func ReadDepthPNG16(path string) (DepthMap, error) {
	data, err := safeio.ReadFile(path, maxPNG16)
	if err != nil {
		return DepthMap{}, err
	}
	m, err := DecodeDepthPNG16(bytes.NewReader(data))
	if err != nil {
		return DepthMap{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// pngText returns the tEXt chunks before a PNG's first IDAT, keyword to text. Chunk checksums are
// left to png.Decode.
func pngText(data []byte) (map[string]string, error) {
	const sig = "\x89PNG\r\n\x1a\n"
	if !bytes.HasPrefix(data, []byte(sig)) {
		return nil, errors.New("depth PNG: not a PNG file")
	}
	text := map[string]string{}
	for p := len(sig); p+8 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[p:]))
		typ := string(data[p+4 : p+8])
		if typ == "IDAT" || n > int64(len(data)-p-12) {
			break // the image data, or a truncated chunk png.Decode reports
		}
		if typ == "tEXt" {
			body := data[p+8 : p+8+int(n)]
			if k := bytes.IndexByte(body, 0); k > 0 {
				text[string(body[:k])] = string(body[k+1:])
			}
		}
		p += 12 + int(n)
	}
	return text, nil
}
