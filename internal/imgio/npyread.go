package imgio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// DecodeNPY reads a NumPy .npy array of the types EncodeNPY writes ('<f4', '<f8', '|u1', C order) and
// returns its data ([]float32, []float64 or []uint8) and shape. Arrays of more than maxElems values are
// refused before anything is allocated, as are malformed headers and short data: the input is untrusted.
func DecodeNPY(r io.Reader, maxElems int) (data any, shape []int, err error) {
	return DecodeNPYReuse(r, maxElems, nil)
}

// DecodeNPYReuse is DecodeNPY that decodes into reuse (a slice of the array's type with enough capacity)
// instead of allocating, for readers of many arrays of one size.
func DecodeNPYReuse(r io.Reader, maxElems int, reuse any) (data any, shape []int, err error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, nil, fmt.Errorf("npy: %w", noEOF(err))
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return nil, nil, errors.New("npy: not a .npy file (bad magic)")
	}
	var hlen int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, nil, fmt.Errorf("npy: %w", noEOF(err))
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, nil, fmt.Errorf("npy: %w", noEOF(err))
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, nil, fmt.Errorf("npy: unsupported format version %d.%d", pre[6], pre[7])
	}
	if hlen > 1<<16 {
		return nil, nil, fmt.Errorf("npy: header of %d bytes", hlen)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, nil, fmt.Errorf("npy: header: %w", noEOF(err))
	}
	descr, fortran, shape, err := parseNPYHeader(string(hb))
	if err != nil {
		return nil, nil, err
	}
	if fortran {
		return nil, nil, errors.New("npy: Fortran-ordered arrays are not supported")
	}
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > maxElems/d) {
			return nil, nil, fmt.Errorf("npy: shape %v exceeds %d values", shape, maxElems)
		}
		n *= d
	}
	if n > maxElems {
		return nil, nil, fmt.Errorf("npy: shape %v exceeds %d values", shape, maxElems)
	}
	size := map[string]int{"<f4": 4, "<f8": 8, "|u1": 1, "<u1": 1}[descr]
	if size == 0 {
		return nil, nil, fmt.Errorf("npy: unsupported dtype %q (float32, float64 or uint8)", descr)
	}
	if size == 1 {
		raw, ok := reuse.([]uint8)
		if !ok || raw == nil || cap(raw) < n {
			raw = make([]byte, n)
		}
		raw = raw[:n]
		if _, err := io.ReadFull(r, raw); err != nil {
			return nil, nil, fmt.Errorf("npy: data of shape %v: %w", shape, noEOF(err))
		}
		return raw, shape, nil
	}
	// Converted a chunk at a time: no second copy of the array as bytes.
	buf := make([]byte, size*min(n, 1<<14))
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
	for i := 0; i < n; {
		k := min(n-i, len(buf)/size)
		if _, err := io.ReadFull(r, buf[:k*size]); err != nil {
			return nil, nil, fmt.Errorf("npy: data of shape %v: %w", shape, noEOF(err))
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
		return f32, shape, nil
	}
	return f64, shape, nil
}

// noEOF turns a bare EOF into ErrUnexpectedEOF: a .npy file never ends where a read starts.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseNPYHeader reads the header dict {'descr': …, 'fortran_order': …, 'shape': (…), } that numpy writes.
func parseNPYHeader(h string) (descr string, fortran bool, shape []int, err error) {
	bad := func(what string) (string, bool, []int, error) {
		return "", false, nil, fmt.Errorf("npy: malformed header (%s): %.80q", what, h)
	}
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(h, "}") {
		return bad("not a dict")
	}
	field := func(key string) (string, bool) {
		_, rest, ok := strings.Cut(h, "'"+key+"':")
		return strings.TrimSpace(rest), ok
	}
	rest, ok := field("descr")
	if !ok || !strings.HasPrefix(rest, "'") {
		return bad("descr")
	}
	descr, _, ok = strings.Cut(rest[1:], "'")
	if !ok {
		return bad("descr")
	}
	rest, ok = field("fortran_order")
	switch {
	case ok && strings.HasPrefix(rest, "False"):
	case ok && strings.HasPrefix(rest, "True"):
		fortran = true
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
	for _, p := range strings.Split(tuple, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		d, err := strconv.Atoi(strings.TrimSuffix(p, "L"))
		if err != nil || d < 0 {
			return bad("shape")
		}
		shape = append(shape, d)
	}
	if len(shape) > 8 {
		return bad("more than 8 dimensions")
	}
	return descr, fortran, shape, nil
}
