package convert

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/da3-go/da3-go/internal/safeio"
)

// maxSafetensorsHeader bounds the JSON header, as the reference safetensors
// implementation does (100 MB).
const maxSafetensorsHeader = 100 << 20

var safetensorsDTypes = map[string]DType{
	"F32": DTypeF32, "F16": DTypeF16, "BF16": DTypeBF16, "F64": DTypeF64,
	"I64": DTypeI64, "I32": DTypeI32, "I16": DTypeI16, "I8": DTypeI8,
	"U8": DTypeU8, "BOOL": DTypeBool,
}

// OpenSafetensors opens a .safetensors file: an 8-byte little-endian header
// length, a JSON header mapping tensor names to dtype, shape and byte offsets,
// then the raw little-endian data. Every header field is validated against
// the file before use: the header length is bounded, offsets lie inside the
// data section, and each tensor's byte span equals its element count times
// its element size. Tensors are listed in data order.
func OpenSafetensors(path string) (*Checkpoint, error) {
	f, fi, err := safeio.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open safetensors: %w", err)
	}
	c := newCheckpoint()
	c.closers = append(c.closers, f)
	if err := readSafetensors(c, f, fi.Size()); err != nil {
		c.Close()
		return nil, fmt.Errorf("open safetensors %s: %w", path, err)
	}
	return c, nil
}

type safetensorsEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// readSafetensors adds the tensors of one safetensors file to c.
func readSafetensors(c *Checkpoint, ra io.ReaderAt, size int64) error {
	var hdr [8]byte
	if size < 8 {
		return fmt.Errorf("file of %d bytes is too short for a safetensors header", size)
	}
	if _, err := ra.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > maxSafetensorsHeader {
		return fmt.Errorf("header length %d exceeds the %d-byte limit (not a safetensors file?)", n, maxSafetensorsHeader)
	}
	if n > uint64(size-8) {
		return fmt.Errorf("header length %d exceeds the %d bytes after it (truncated file?)", n, size-8)
	}
	js := make([]byte, n)
	if _, err := ra.ReadAt(js, 8); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	entries, order, err := parseSafetensorsHeader(js)
	if err != nil {
		return err
	}
	dataStart := 8 + int64(n)
	dataLen := size - dataStart
	type placed struct {
		name string
		e    safetensorsEntry
	}
	var ts []placed
	for _, name := range order {
		e := entries[name]
		dt, ok := safetensorsDTypes[e.DType]
		if !ok {
			return fmt.Errorf("tensor %q: unsupported dtype %q", name, e.DType)
		}
		if len(e.Shape) > maxDims {
			return fmt.Errorf("tensor %q: %d dimensions (at most %d)", name, len(e.Shape), maxDims)
		}
		if len(e.Offsets) != 2 {
			return fmt.Errorf("tensor %q: data_offsets has %d values, want 2", name, len(e.Offsets))
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		if begin < 0 || end < begin || end > dataLen {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] outside the %d-byte data section", name, begin, end, dataLen)
		}
		elems, err := numElements(e.Shape)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if elems > math.MaxInt64/int64(dt.Size()) || elems*int64(dt.Size()) != end-begin {
			return fmt.Errorf("tensor %q: shape %v of %s needs %d elements but data_offsets span %d bytes",
				name, e.Shape, e.DType, elems, end-begin)
		}
		ts = append(ts, placed{name, e})
	}
	slices.SortStableFunc(ts, func(a, b placed) int { return int(sign(a.e.Offsets[0] - b.e.Offsets[0])) })
	for i := 1; i < len(ts); i++ { // each byte belongs to one tensor at most
		prev, cur := ts[i-1], ts[i]
		if cur.e.Offsets[0] < prev.e.Offsets[1] {
			return fmt.Errorf("tensors %q [%d, %d] and %q [%d, %d] overlap in the data section",
				prev.name, prev.e.Offsets[0], prev.e.Offsets[1], cur.name, cur.e.Offsets[0], cur.e.Offsets[1])
		}
	}
	for _, p := range ts {
		t := &Tensor{
			Name:  p.name,
			Shape: p.e.Shape,
			DType: safetensorsDTypes[p.e.DType],
			st:    &storage{ra: ra, base: dataStart + p.e.Offsets[0], size: p.e.Offsets[1] - p.e.Offsets[0]},
		}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		if err := c.add(t); err != nil {
			return err
		}
	}
	return nil
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// parseSafetensorsHeader decodes the JSON header, rejecting duplicate names,
// and returns the entries with the names in header order ("__metadata__" is
// skipped).
func parseSafetensorsHeader(js []byte) (map[string]safetensorsEntry, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("header is not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("header is not a JSON object")
	}
	entries := map[string]safetensorsEntry{}
	var order []string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, errors.New("header: object key is not a string")
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("header: duplicate entry %q", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var meta map[string]any
			if err := dec.Decode(&meta); err != nil {
				return nil, nil, fmt.Errorf("header: __metadata__: %w", err)
			}
			continue
		}
		var e safetensorsEntry
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("header: tensor %q: %w", name, err)
		}
		entries[name] = e
		order = append(order, name)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	if rest := js[dec.InputOffset():]; len(bytes.TrimSpace(rest)) != 0 {
		return nil, nil, fmt.Errorf("header: %d bytes of trailing data after the JSON object", len(rest))
	}
	return entries, order, nil
}
