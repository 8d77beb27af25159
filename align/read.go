package align

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/safeio"
)

// maxFile bounds the bytes of a measurement file read.
const maxFile = 1 << 30

// maxPixels bounds a dense measurement map.
const maxPixels = 1 << 28

// ReadFile reads metric depth measurements, by the file's extension:
//
//   - .npy: a float32 or float64 array of shape (H, W) (or (1, H, W),
//     (H, W, 1)) in metres, 0 or NaN where there is no measurement;
//   - .png: a 16-bit grey PNG in millimetres (ReadOptions.PNGScale: in
//     other steps, KITTI's 1/256 m), 0 where there is none (a depth PNG16
//     that da3-go wrote in metres reads as its chunks say; one holding
//     relative depth is refused);
//   - .pfm: a single-channel PFM in metres (rows bottom first, as written
//     by da3-go and the C++ engine);
//   - .csv, .txt or anything else: text points, one "x y depth" a line
//     (separated by spaces, tabs or commas; pixel coordinates of the input
//     image, depth in metres); blank lines, lines starting with # and a
//     first line that is not numbers (a header) are skipped.
//
// Dense maps come back with their size; points with Width and Height 0,
// which the caller sets to the input image's size before Fit.
func ReadFile(path string) (Samples, error) { return ReadFileWith(path, ReadOptions{}) }

// ReadOptions tune ReadFileWith.
type ReadOptions struct {
	// PNGScale is the pixel value of one metre in a plain 16-bit PNG (one without da3-go's depth chunks,
	// which say their own): 1000, the default (millimetres, as NYU Depth V2's and most depth sensors'
	// PNGs), or 256 (KITTI's depth PNGs).
	PNGScale float64
}

// ReadFileWith is ReadFile with options.
func ReadFileWith(path string, o ReadOptions) (Samples, error) {
	if o.PNGScale == 0 {
		o.PNGScale = 1000
	}
	if !(o.PNGScale > 0) || math.IsInf(o.PNGScale, 0) {
		return Samples{}, fmt.Errorf("read metric depth %s: PNG scale %g: want a positive number of values per metre", path, o.PNGScale)
	}
	s, err := readFile(path, o)
	if err != nil {
		return Samples{}, fmt.Errorf("read metric depth %s: %w", path, err)
	}
	return s, nil
}

func readFile(path string, o ReadOptions) (Samples, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		return readNPY(path)
	case ".png":
		return readPNG(path, o.PNGScale)
	case ".pfm":
		return readPFM(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return Samples{}, err
	}
	defer f.Close()
	return ReadPoints(io.LimitReader(f, maxFile))
}

// ReadPoints reads text points "x y depth", as ReadFile does for text files.
func ReadPoints(r io.Reader) (Samples, error) {
	var s Samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == ';' })
		var v [3]float64
		ok := len(fields) == 3
		for i := 0; ok && i < 3; i++ {
			var err error
			v[i], err = strconv.ParseFloat(fields[i], 64)
			ok = err == nil
		}
		if !ok {
			if len(s.Points) == 0 && line == 1 {
				continue // a header
			}
			return Samples{}, fmt.Errorf("line %d: want \"x y depth\" (three numbers), got %q", line, text)
		}
		if math.IsNaN(v[0]) || math.IsNaN(v[1]) || math.IsInf(v[0], 0) || math.IsInf(v[1], 0) {
			return Samples{}, fmt.Errorf("line %d: pixel coordinates %q are not finite", line, text)
		}
		s.Points = append(s.Points, Sample{X: v[0], Y: v[1], Depth: v[2]})
	}
	if err := sc.Err(); err != nil {
		return Samples{}, err
	}
	if len(s.Points) == 0 {
		return Samples{}, errors.New("no points (want one \"x y depth\" a line)")
	}
	return s, nil
}

// dense checks a map's size and wraps it.
func dense(w, h int, d []float32) (Samples, error) {
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxPixels {
		return Samples{}, fmt.Errorf("map of %dx%d pixels", w, h)
	}
	return Samples{Width: w, Height: h, Dense: d}, nil
}

func readNPY(path string) (Samples, error) {
	f, st, err := safeio.Open(path)
	if err != nil {
		return Samples{}, err
	}
	defer f.Close()
	data, shape, err := imgio.DecodeNPYReuse(bufio.NewReader(f), int(min(st.Size(), maxPixels)), nil)
	if err != nil {
		return Samples{}, err
	}
	var dims []int
	for _, d := range shape {
		if d != 1 {
			dims = append(dims, d)
		}
	}
	if len(dims) != 2 || len(shape) > 3 {
		return Samples{}, fmt.Errorf("array of shape %v: want (H, W)", shape)
	}
	h, w := dims[0], dims[1]
	switch x := data.(type) {
	case []float32:
		return dense(w, h, x)
	case []float64:
		d := make([]float32, len(x))
		for i, v := range x {
			d[i] = float32(v)
		}
		return dense(w, h, d)
	}
	return Samples{}, fmt.Errorf("array of %T: want float32 or float64 metres", data)
}

func readPNG(path string, scale float64) (Samples, error) {
	m, err := export.ReadDepthPNG16(path)
	switch {
	case err == nil && m.Unit != export.UnitMetres:
		return Samples{}, fmt.Errorf("the depth PNG holds %q depth, not metres", m.Unit)
	case err == nil:
		return dense(m.Width, m.Height, m.Depth)
	case !errors.Is(err, export.ErrNoDepthMapping):
		return Samples{}, err
	}
	// A plain 16-bit PNG: scale values a metre (millimetres, as depth sensors write them, by default).
	b, err := safeio.ReadFile(path, maxFile)
	if err != nil {
		return Samples{}, err
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return Samples{}, err
	}
	g, ok := img.(*image.Gray16)
	if !ok {
		return Samples{}, fmt.Errorf("%T PNG: want a 16-bit grey PNG in millimetres", img)
	}
	w, h := g.Rect.Dx(), g.Rect.Dy()
	d := make([]float32, w*h)
	for y := range h {
		for x := range w {
			d[y*w+x] = float32(g.Gray16At(g.Rect.Min.X+x, g.Rect.Min.Y+y).Y) / float32(scale)
		}
	}
	return dense(w, h, d)
}

func readPFM(path string) (Samples, error) {
	b, err := safeio.ReadFile(path, maxFile)
	if err != nil {
		return Samples{}, err
	}
	r := bufio.NewReader(bytes.NewReader(b))
	var tok [4]string
	for i := range tok { // "Pf", width, height, scale: whitespace-separated
		if tok[i], err = pfmToken(r); err != nil {
			return Samples{}, fmt.Errorf("PFM header: %w", err)
		}
	}
	if tok[0] != "Pf" {
		return Samples{}, fmt.Errorf("PFM kind %q: want a single-channel \"Pf\" file", tok[0])
	}
	w, err1 := strconv.Atoi(tok[1])
	h, err2 := strconv.Atoi(tok[2])
	scale, err3 := strconv.ParseFloat(tok[3], 64)
	if err1 != nil || err2 != nil || err3 != nil || scale == 0 {
		return Samples{}, fmt.Errorf("PFM header %q", strings.Join(tok[:], " "))
	}
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxPixels {
		return Samples{}, fmt.Errorf("PFM of %dx%d pixels", w, h)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if scale > 0 {
		order = binary.BigEndian
	}
	raw := make([]byte, 4*w*h)
	if _, err := io.ReadFull(r, raw); err != nil {
		return Samples{}, fmt.Errorf("PFM data of %dx%d: %w", w, h, err)
	}
	d := make([]float32, w*h)
	for y := range h { // rows bottom first
		row := raw[4*w*(h-1-y):]
		for x := range w {
			d[y*w+x] = math.Float32frombits(order.Uint32(row[4*x:]))
		}
	}
	return dense(w, h, d)
}

// pfmToken reads one whitespace-delimited header token and the single
// whitespace character after it.
func pfmToken(r *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		c, err := r.ReadByte()
		if err != nil {
			return "", io.ErrUnexpectedEOF
		}
		space := c == ' ' || c == '\n' || c == '\r' || c == '\t'
		switch {
		case space && sb.Len() == 0:
			continue
		case space:
			return sb.String(), nil
		case sb.Len() > 32:
			return "", errors.New("token too long")
		}
		sb.WriteByte(c)
	}
}
