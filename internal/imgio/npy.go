package imgio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/safeio"
)

// ReadNPY reads a little-endian float32, C-order .npy file (as numpy.save
// writes one) and returns its values and shape.
func ReadNPY(path string) ([]float32, []int, error) {
	f, st, err := safeio.Open(path) // a regular file: its size bounds what is read
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	data, shape, err := DecodeNPY(bufio.NewReader(f), st.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, shape, nil
}

// DecodeNPY reads a little-endian float32, C-order .npy array from r; size
// is the size of the whole file, or −1 when unknown (then the data is read
// as the shape says, without checking that it ends there).
func DecodeNPY(r io.Reader, size int64) ([]float32, []int, error) {
	h, err := readNPYHeader(r)
	if err != nil {
		return nil, nil, err
	}
	if h.descr != "<f4" {
		return nil, nil, fmt.Errorf("dtype is not little-endian float32 (header %q)", h.text)
	}
	if h.n > 1<<31 {
		return nil, nil, fmt.Errorf("array of shape %v is too large", h.shape)
	}
	if size >= 0 && int64(h.n)*4 != size-h.start {
		return nil, nil, fmt.Errorf("shape %v needs %d bytes of data, the file has %d", h.shape, int64(h.n)*4, size-h.start)
	}
	data, err := readNPYData(r, h, nil)
	if err != nil {
		return nil, nil, err
	}
	return data.([]float32), h.shape, nil
}

// DecodeNPYReuse reads a .npy array of the types EncodeNPY writes ('<f4', '<f8', '|u1', C order) and
// returns its data ([]float32, []float64 or []uint8) and shape, decoded into reuse (a slice of the
// array's type) when it is large enough, for readers of many arrays of one size. Arrays of more than
// maxElems values are refused before anything is allocated.
func DecodeNPYReuse(r io.Reader, maxElems int, reuse any) (data any, shape []int, err error) {
	h, err := readNPYHeader(r)
	if err != nil {
		return nil, nil, err
	}
	if h.n > maxElems {
		return nil, nil, fmt.Errorf("array of shape %v is too large (at most %d values)", h.shape, maxElems)
	}
	if data, err = readNPYData(r, h, reuse); err != nil {
		return nil, nil, err
	}
	return data, h.shape, nil
}

// npyHeader is a parsed .npy header.
type npyHeader struct {
	descr, text string
	shape       []int
	n           int   // values (math.MaxInt when the shape overflows)
	start       int64 // offset of the data
}

// readNPYHeader reads the magic, version and header dict {'descr': …, 'fortran_order': …, 'shape': (…), }
// that numpy writes.
func readNPYHeader(r io.Reader) (npyHeader, error) {
	var h npyHeader
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil || string(pre[:6]) != "\x93NUMPY" {
		return h, errors.New("not a .npy file")
	}
	var hlen int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
		h.start = 10 + int64(hlen)
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
		h.start = 12 + int64(hlen)
	default:
		return h, fmt.Errorf(".npy version %d not supported", pre[6])
	}
	if hlen > 1<<16 {
		return h, fmt.Errorf(".npy header of %d bytes is too long", hlen)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return h, errors.New("truncated .npy header")
	}
	text := strings.TrimSpace(string(hb))
	h.text = text
	bad := func(what string) (npyHeader, error) {
		return h, fmt.Errorf("malformed .npy header (%s): %.80q", what, text)
	}
	if !strings.HasPrefix(text, "{") || !strings.HasSuffix(text, "}") {
		return bad("not a dict")
	}
	field := func(key string) (string, bool) {
		_, rest, ok := strings.Cut(text, "'"+key+"':")
		return strings.TrimSpace(rest), ok
	}
	rest, ok := field("descr")
	if !ok || !strings.HasPrefix(rest, "'") {
		return bad("descr")
	}
	if h.descr, _, ok = strings.Cut(rest[1:], "'"); !ok {
		return bad("descr")
	}
	switch rest, _ = field("fortran_order"); {
	case strings.HasPrefix(rest, "False"):
	case strings.HasPrefix(rest, "True"):
		return h, errors.New("fortran-order arrays are not supported")
	default:
		return bad("fortran_order")
	}
	rest, ok = field("shape")
	if !ok || !strings.HasPrefix(rest, "(") {
		return bad("shape")
	}
	tuple, _, ok := strings.Cut(rest[1:], ")")
	if !ok {
		return bad("shape")
	}
	h.n = 1
	for _, p := range strings.Split(tuple, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := strconv.Atoi(strings.TrimSuffix(p, "L"))
		if err != nil || d < 0 {
			return bad("shape")
		}
		h.shape = append(h.shape, d)
		if d > 0 && h.n > math.MaxInt/d {
			h.n = math.MaxInt
		} else if h.n != math.MaxInt {
			h.n *= d
		}
	}
	if len(h.shape) > 8 {
		return bad("more than 8 dimensions")
	}
	return h, nil
}

// readNPYData reads the h.n values of the array after its header, into reuse when it is a slice of the
// array's type with room enough, a chunk at a time (no second copy of the array as bytes).
func readNPYData(r io.Reader, h npyHeader, reuse any) (any, error) {
	size := map[string]int{"<f4": 4, "<f8": 8, "|u1": 1, "<u1": 1}[h.descr]
	if size == 0 {
		return nil, fmt.Errorf("unsupported .npy dtype %q (float32, float64 or uint8)", h.descr)
	}
	n := h.n
	short := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf(".npy data of shape %v: %w", h.shape, err)
	}
	if size == 1 {
		raw, ok := reuse.([]uint8)
		if !ok || raw == nil || cap(raw) < n {
			raw = make([]byte, n)
		}
		raw = raw[:n]
		if _, err := io.ReadFull(r, raw); err != nil {
			return nil, short(err)
		}
		return raw, nil
	}
	var f32 []float32
	var f64 []float64
	if size == 4 {
		if f32, _ = reuse.([]float32); f32 == nil || cap(f32) < n {
			f32 = make([]float32, n)
		}
		f32 = f32[:n]
	} else {
		if f64, _ = reuse.([]float64); f64 == nil || cap(f64) < n {
			f64 = make([]float64, n)
		}
		f64 = f64[:n]
	}
	buf := make([]byte, size*min(n, 1<<14))
	for i := 0; i < n; {
		k := min(n-i, len(buf)/size)
		if _, err := io.ReadFull(r, buf[:k*size]); err != nil {
			return nil, short(err)
		}
		for j := range k {
			if size == 4 {
				f32[i+j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
			} else {
				f64[i+j] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*j:]))
			}
		}
		i += k
	}
	if size == 4 {
		return f32, nil
	}
	return f64, nil
}
