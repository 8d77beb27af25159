package imgio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var npyShapeRE = regexp.MustCompile(`'shape':\s*\(([0-9,\s]*)\)`)

// ReadNPY reads a little-endian float32, C-order .npy file (as numpy.save
// writes one) and returns its values and shape.
func ReadNPY(path string) ([]float32, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
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
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil || string(pre[:6]) != "\x93NUMPY" {
		return nil, nil, errors.New("not a .npy file")
	}
	var hlen int
	var start int64 // offset of the data
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, nil, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
		start = 10 + int64(hlen)
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, nil, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
		start = 12 + int64(hlen)
	default:
		return nil, nil, fmt.Errorf(".npy version %d not supported", pre[6])
	}
	if hlen > 1<<16 {
		return nil, nil, fmt.Errorf(".npy header of %d bytes is too long", hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil, errors.New("truncated .npy header")
	}
	h := string(hdr)
	if !strings.Contains(h, "'descr': '<f4'") {
		return nil, nil, fmt.Errorf("dtype is not little-endian float32 (header %q)", strings.TrimSpace(h))
	}
	if !strings.Contains(h, "'fortran_order': False") {
		return nil, nil, errors.New("fortran-order arrays are not supported")
	}
	mt := npyShapeRE.FindStringSubmatch(h)
	if mt == nil {
		return nil, nil, fmt.Errorf("no shape in header %q", strings.TrimSpace(h))
	}
	var shape []int
	n := int64(1)
	for _, p := range strings.Split(mt[1], ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := strconv.Atoi(p)
		if err != nil || d < 1 || d > 1<<20 {
			return nil, nil, fmt.Errorf("bad dimension %q in shape", p)
		}
		shape = append(shape, d)
		n *= int64(d)
		if n > 1<<31 {
			return nil, nil, errors.New("array too large")
		}
	}
	if len(shape) == 0 {
		return nil, nil, errors.New("scalar arrays are not supported")
	}
	if size >= 0 && n*4 != size-start {
		return nil, nil, fmt.Errorf("shape %v needs %d bytes of data, the file has %d", shape, n*4, size-start)
	}
	buf := make([]byte, n*4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return out, shape, nil
}
