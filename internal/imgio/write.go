package imgio

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
)

// WritePFM writes a single-channel little-endian PFM as the C++ engine does: header "Pf\n<W> <H>\n-1.0\n", then
// the rows bottom row first, raw values, no normalisation.
func WritePFM(path string, data []float32, w, h int) error {
	if err := checkMap(data, w, h); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, func(out io.Writer) error {
		if _, err := fmt.Fprintf(out, "Pf\n%d %d\n-1.0\n", w, h); err != nil {
			return err
		}
		row := make([]byte, 4*w)
		for y := h - 1; y >= 0; y-- {
			for x, v := range data[y*w : (y+1)*w] {
				binary.LittleEndian.PutUint32(row[4*x:], math.Float32bits(v))
			}
			if _, err := out.Write(row); err != nil {
				return err
			}
		}
		return nil
	})
}

// WriteNPY writes data as a NumPy .npy file (format 1.0, dtype '<f4', C order) with the given shape; the
// product of shape must equal len(data) (an empty shape is a scalar).
func WriteNPY(path string, data []float32, shape ...int) error {
	if err := checkNPYShape(len(data), shape); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, func(out io.Writer) error { return EncodeNPY(out, data, shape...) })
}

// checkNPYShape checks that shape is valid and, unless n < 0, holds n values.
func checkNPYShape(n int, shape []int) error {
	want := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && want > math.MaxInt/d) {
			return fmt.Errorf("invalid shape %v", shape)
		}
		want *= d
	}
	if n >= 0 && want != n {
		return fmt.Errorf("shape %v needs %d values, got %d", shape, want, n)
	}
	return nil
}

// EncodeNPY writes data in the NumPy .npy format 1.0 (C order, little-endian) with the given shape, as
// numpy.save does: the header dict is padded with spaces and a newline so the data starts at a multiple of
// 64 bytes. data is a []float32 ('<f4'), []float64 ('<f8') or []uint8 ('|u1'); the product of shape must
// equal its length (an empty shape is a scalar).
func EncodeNPY(w io.Writer, data any, shape ...int) error {
	n, _, err := npyType(data)
	if err != nil {
		return err
	}
	if err := checkNPYShape(n, shape); err != nil {
		return err
	}
	if err := EncodeNPYHeader(w, data, shape...); err != nil {
		return err
	}
	return EncodeNPYData(w, data)
}

// npyType returns the length and numpy descr of data.
func npyType(data any) (n int, descr string, err error) {
	switch d := data.(type) {
	case []float32:
		return len(d), "<f4", nil
	case []float64:
		return len(d), "<f8", nil
	case []uint8:
		return len(d), "|u1", nil
	}
	return 0, "", fmt.Errorf("npy: unsupported data type %T", data)
}

// EncodeNPYHeader writes the header of an array of data's element type and the given shape; the caller
// then writes the product of shape values with EncodeNPYData, in as many calls as it likes (an array too
// large to hold, written piece by piece).
func EncodeNPYHeader(w io.Writer, data any, shape ...int) error {
	_, descr, err := npyType(data)
	if err != nil {
		return err
	}
	if err := checkNPYShape(-1, shape); err != nil {
		return err
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	header := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + ", }"
	// magic(6) + version(2) + header length(2) + header, padded with spaces and '\n' to a multiple of 64.
	pad := 64 - (10+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	header += strings.Repeat(" ", pad) + "\n"
	pre := []byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0}
	binary.LittleEndian.PutUint16(pre[8:], uint16(len(header)))
	if _, err := w.Write(pre); err != nil {
		return err
	}
	_, err = io.WriteString(w, header)
	return err
}

// EncodeNPYData writes array values ([]float32, []float64 or []uint8) little-endian, as they follow an
// EncodeNPYHeader.
func EncodeNPYData(w io.Writer, data any) error {
	n, _, err := npyType(data)
	if err != nil {
		return err
	}
	if u8, ok := data.([]uint8); ok {
		_, err := w.Write(u8)
		return err
	}
	var put func(b []byte, i int)
	size := 4
	switch d := data.(type) {
	case []float32:
		put = func(b []byte, i int) { binary.LittleEndian.PutUint32(b, math.Float32bits(d[i])) }
	case []float64:
		put = func(b []byte, i int) { binary.LittleEndian.PutUint64(b, math.Float64bits(d[i])) }
		size = 8
	}
	const chunk = 4096
	buf := make([]byte, size*min(n, chunk))
	for i := 0; i < n; i += chunk {
		k := min(n-i, chunk)
		for j := range k {
			put(buf[size*j:], i+j)
		}
		if _, err := w.Write(buf[:size*k]); err != nil {
			return err
		}
	}
	return nil
}

// Normalize maps data to [0, 1] by min-max over the finite values: t = (v − min)/(max − min), t = 0 when
// max = min, and t = 1 − t when invert is set (depth: near = bright). Non-finite values map to 0 (before
// inversion too: they stay black).
func Normalize(data []float32, invert bool) []float64 {
	n := newNormalizer(data, invert)
	out := make([]float64, len(data))
	for i, v := range data {
		out[i] = n.at(v)
	}
	return out
}

// normalizer is Normalize one value at a time, so that the writers hold no copy of a map (8 bytes a
// pixel) besides the image they encode.
type normalizer struct {
	lo, hi float64
	invert bool
}

func newNormalizer(data []float32, invert bool) normalizer {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range data {
		f := float64(v)
		if !math.IsInf(f, 0) && !math.IsNaN(f) {
			lo, hi = min(lo, f), max(hi, f)
		}
	}
	return normalizer{lo: lo, hi: hi, invert: invert}
}

// at is v's Normalize value.
func (n normalizer) at(v float32) float64 {
	f := float64(v)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	t := 0.0
	if n.hi > n.lo {
		t = (f - n.lo) / (n.hi - n.lo)
	}
	if n.invert {
		t = 1 - t
	}
	return t
}

func quantize(t float64, maxv int) int {
	return max(0, min(maxv, int(float64(maxv)*t+0.5)))
}

// WritePNGGray writes an 8-bit grey PNG as the C++ engine does: pixel = clamp(int(255·t + 0.5)) with t from
// Normalize(data, invert).
func WritePNGGray(path string, data []float32, w, h int, invert bool) error {
	if err := checkMap(data, w, h); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	img := image.NewGray(image.Rect(0, 0, w, h))
	n := newNormalizer(data, invert)
	for i, v := range data {
		img.Pix[i] = uint8(quantize(n.at(v), 255))
	}
	return writePNG(path, img)
}

// WritePNGColor writes an 8-bit RGB PNG of Colorize(data, w, h, cmap, invert).
func WritePNGColor(path string, data []float32, w, h int, cmap Colormap, invert bool) error {
	if err := checkMap(data, w, h); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	img, err := Colorize(data, w, h, cmap, invert)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writePNG(path, img)
}

func writePNG(path string, img image.Image) error {
	return writeAtomic(path, func(out io.Writer) error { return png.Encode(out, img) })
}

// Colormap selects the palette of Colorize.
type Colormap int

const (
	Turbo Colormap = iota // Google Turbo: low = dark blue, high = dark red
	Gray                  // grey ramp: low = black, high = white
)

// String returns the colormap's flag name.
func (c Colormap) String() string {
	switch c {
	case Turbo:
		return "turbo"
	case Gray:
		return "gray"
	}
	return fmt.Sprintf("Colormap(%d)", int(c))
}

// ParseColormap parses "turbo", "gray" or "grey".
func ParseColormap(s string) (Colormap, error) {
	switch strings.ToLower(s) {
	case "turbo":
		return Turbo, nil
	case "gray", "grey":
		return Gray, nil
	}
	return 0, fmt.Errorf("unknown colormap %q (want turbo or gray)", s)
}

// Colorize maps data through cmap: index = clamp(int(255·t + 0.5)) with t from Normalize(data, invert), so
// high values (or, inverted, low values) are warm/bright. Pixels are opaque.
func Colorize(data []float32, w, h int, cmap Colormap, invert bool) (*image.RGBA, error) {
	if err := checkMap(data, w, h); err != nil {
		return nil, err
	}
	if cmap != Turbo && cmap != Gray {
		return nil, fmt.Errorf("invalid colormap %d", int(cmap))
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	n := newNormalizer(data, invert)
	for i, v := range data {
		k := quantize(n.at(v), 255)
		c := color.RGBA{uint8(k), uint8(k), uint8(k), 255}
		if cmap == Turbo {
			c = color.RGBA{turboLUT[k][0], turboLUT[k][1], turboLUT[k][2], 255}
		}
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = c.R, c.G, c.B, c.A
	}
	return img, nil
}
