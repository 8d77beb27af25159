package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Format limits.
const (
	// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
	// GGUF itself allows more; ggml does not.
	MaxDims = 4
	// MaxTensorNameLen is the longest tensor name ggml accepts
	// (GGML_MAX_NAME - 1 bytes).
	MaxTensorNameLen = 63
	// MaxKeyLen is the longest metadata key the GGUF specification allows.
	MaxKeyLen = 1<<16 - 1
	// MaxArrayDepth bounds the nesting of arrays of arrays.
	MaxArrayDepth = 8
	// DefaultAlignment is the data alignment used when general.alignment is
	// absent.
	DefaultAlignment = 32
	// AlignmentKey is the metadata key that overrides the data alignment.
	AlignmentKey = "general.alignment"
)

const ggufMagic = "GGUF"

var (
	// ErrNotGGUF is returned by Open for a file that does not start with the
	// GGUF magic.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrUnsupportedVersion is returned by Open for GGUF versions other
	// than 2 and 3.
	ErrUnsupportedVersion = errors.New("unsupported GGUF version")

	errTruncated = errors.New("file truncated")
)

// header is everything before the data section.
type header struct {
	version    uint32
	kv         *KV
	tensors    []TensorInfo
	alignment  uint64
	dataOffset uint64 // absolute offset of the data section
}

// decoder reads little-endian fields from an in-memory file.
type decoder struct {
	b   []byte
	off uint64
}

func (d *decoder) remaining() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) need(n uint64, what string) error {
	if n > d.remaining() {
		return fmt.Errorf("%s at offset %d needs %d bytes, %d left: %w", what, d.off, n, d.remaining(), errTruncated)
	}
	return nil
}

func (d *decoder) take(n uint64, what string) ([]byte, error) {
	if err := d.need(n, what); err != nil {
		return nil, err
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	p, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	p, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

// str reads a GGUF string (u64 length + bytes) of at most maxLen bytes.
func (d *decoder) str(what string, maxLen uint64) (string, error) {
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > maxLen {
		return "", fmt.Errorf("%s at offset %d: length %d exceeds the limit %d", what, d.off-8, n, maxLen)
	}
	p, err := d.take(n, what)
	if err != nil {
		return "", err
	}
	return string(p), nil
}

// count reads an element count and checks that count elements of at least
// minSize bytes each fit in the rest of the file.
func (d *decoder) count(what string, minSize uint64) (uint64, error) {
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if hi, lo := bits.Mul64(n, minSize); hi != 0 || lo > d.remaining() {
		return 0, fmt.Errorf("%s %d at offset %d: needs at least %d bytes each, only %d bytes left: %w",
			what, n, d.off-8, minSize, d.remaining(), errTruncated)
	}
	return n, nil
}

// initCap bounds preallocation from untrusted counts; slices grow as data
// is actually parsed.
func initCap(n uint64) int { return int(min(n, 1024)) }

// parseHeader validates and decodes everything in b up to the data section
// and checks every tensor's placement against len(b).
func parseHeader(b []byte) (*header, error) {
	if len(b) < len(ggufMagic) || string(b[:4]) != ggufMagic {
		n := min(len(b), 4)
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrNotGGUF, b[:n], ggufMagic)
	}
	d := &decoder{b: b, off: 4}
	h := &header{}
	var err error
	if h.version, err = d.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case h.version == 2 || h.version == 3:
	case h.version != 0 && h.version&0xFFFF == 0:
		return nil, fmt.Errorf("%w: %d (0x%08x; a big-endian file?), want 2 or 3", ErrUnsupportedVersion, h.version, h.version)
	default:
		return nil, fmt.Errorf("%w: %d, want 2 or 3", ErrUnsupportedVersion, h.version)
	}
	// Smallest tensor descriptor: name length (8), n_dims (4), type (4),
	// offset (8); smallest key/value: key length (8), type (4), a byte.
	nTensors, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata count", 8+4+1)
	if err != nil {
		return nil, err
	}
	if hi, lo := bits.Mul64(nTensors, 8+4+4+8); hi != 0 || lo > d.remaining() {
		return nil, fmt.Errorf("tensor count %d needs at least %d bytes each, only %d bytes left: %w",
			nTensors, 24, d.remaining(), errTruncated)
	}

	h.kv = &KV{entries: make([]KeyValue, 0, initCap(nKV)), index: make(map[string]int, initCap(nKV))}
	for i := range nKV {
		key, err := d.str(fmt.Sprintf("metadata key %d", i), MaxKeyLen)
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, fmt.Errorf("metadata key %d: empty key", i)
		}
		if _, dup := h.kv.index[key]; dup {
			return nil, fmt.Errorf("duplicate metadata key %q", key)
		}
		vt, err := d.u32(fmt.Sprintf("key %q: value type", key))
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(vt), 0)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if err := h.kv.add(key, v); err != nil {
			return nil, err
		}
	}

	h.alignment = DefaultAlignment
	if v, ok := h.kv.Get(AlignmentKey); ok {
		// ggml's reader asserts a uint32 here; accept nothing wider.
		a, isU32 := v.v.(uint32)
		if !isU32 {
			return nil, typeErr(AlignmentKey, "uint32", v)
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("key %q: alignment %d is not a power of 2", AlignmentKey, a)
		}
		h.alignment = uint64(a)
	}

	h.tensors = make([]TensorInfo, 0, initCap(nTensors))
	names := make(map[string]struct{}, initCap(nTensors))
	for i := range nTensors {
		ti, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := names[ti.Name]; dup {
			return nil, fmt.Errorf("duplicate tensor name %q", ti.Name)
		}
		names[ti.Name] = struct{}{}
		if ti.Offset%h.alignment != 0 {
			return nil, fmt.Errorf("tensor %q: data offset %d is not a multiple of the alignment %d", ti.Name, ti.Offset, h.alignment)
		}
		h.tensors = append(h.tensors, ti)
	}

	h.dataOffset = alignUp(d.off, h.alignment)
	if err := h.placeTensors(uint64(len(b))); err != nil {
		return nil, err
	}
	return h, nil
}

// alignUp rounds off up to a multiple of the power of two a, saturating at
// the largest aligned uint64 (always past any real file end).
func alignUp(off, a uint64) uint64 {
	if off > math.MaxUint64-(a-1) {
		return math.MaxUint64 &^ (a - 1)
	}
	return (off + a - 1) &^ (a - 1)
}

// placeTensors turns relative offsets into absolute ones and checks that
// every tensor lies inside the file and that no two overlap.
func (h *header) placeTensors(fileSize uint64) error {
	for i := range h.tensors {
		ti := &h.tensors[i]
		start, carry := bits.Add64(h.dataOffset, ti.Offset, 0)
		end, carry2 := bits.Add64(start, ti.Size, 0)
		if carry != 0 || carry2 != 0 || end > fileSize {
			return fmt.Errorf("tensor %q: data [%d, +%d) at data offset %d lies past the end of the file (%d bytes): %w",
				ti.Name, ti.Offset, ti.Size, h.dataOffset, fileSize, errTruncated)
		}
		ti.Offset = start
	}
	order := make([]int, len(h.tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := &h.tensors[a], &h.tensors[b]
		if ta.Offset != tb.Offset {
			return cmpU64(ta.Offset, tb.Offset)
		}
		return cmpU64(ta.Size, tb.Size)
	})
	var maxEnd uint64
	var last *TensorInfo // the non-empty tensor that ends at maxEnd
	for _, i := range order {
		cur := &h.tensors[i]
		if cur.Size == 0 {
			continue
		}
		if last != nil && cur.Offset < maxEnd {
			return fmt.Errorf("tensor %q: data [%d, %d) overlaps tensor %q [%d, %d)",
				cur.Name, cur.Offset, cur.Offset+cur.Size, last.Name, last.Offset, last.Offset+last.Size)
		}
		maxEnd, last = cur.Offset+cur.Size, cur
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d *decoder) tensorInfo(i uint64) (TensorInfo, error) {
	name, err := d.str(fmt.Sprintf("tensor %d name", i), MaxKeyLen)
	if err != nil {
		return TensorInfo{}, err
	}
	if err := checkTensorName(name); err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %d: %w", i, err)
	}
	ctx := func(err error) error { return fmt.Errorf("tensor %q: %w", name, err) }
	nDims, err := d.u32("number of dimensions")
	if err != nil {
		return TensorInfo{}, ctx(err)
	}
	if nDims > MaxDims {
		return TensorInfo{}, ctx(fmt.Errorf("%d dimensions, ggml allows at most %d", nDims, MaxDims))
	}
	shape := make([]uint64, nDims)
	elems := uint64(1)
	for j := range shape {
		ne, err := d.u64("dimension")
		if err != nil {
			return TensorInfo{}, ctx(err)
		}
		if ne > math.MaxInt64 {
			return TensorInfo{}, ctx(fmt.Errorf("dimension %d has %d elements, more than int64 holds", j, ne))
		}
		shape[j] = ne
		hi, lo := bits.Mul64(elems, ne)
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, ctx(fmt.Errorf("shape %v: element count overflows int64", shape[:j+1]))
		}
		elems = lo
	}
	typ, err := d.u32("tensor type")
	if err != nil {
		return TensorInfo{}, ctx(err)
	}
	t := Type(typ)
	if !t.Known() {
		return TensorInfo{}, ctx(fmt.Errorf("unknown tensor type %d", typ))
	}
	size, err := t.ByteSize(shape)
	if err != nil {
		return TensorInfo{}, ctx(err)
	}
	off, err := d.u64("data offset")
	if err != nil {
		return TensorInfo{}, ctx(err)
	}
	return TensorInfo{Name: name, Type: t, Shape: shape, Offset: off, Size: size}, nil
}

func checkTensorName(name string) error {
	if name == "" {
		return errors.New("empty tensor name")
	}
	if len(name) > MaxTensorNameLen {
		return fmt.Errorf("tensor name %q is %d bytes, ggml allows at most %d", name, len(name), MaxTensorNameLen)
	}
	return nil
}

// value decodes a value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	if !t.Known() {
		return Value{}, fmt.Errorf("unknown value type %d", uint32(t))
	}
	switch t {
	case ValueString:
		s, err := d.str("string", math.MaxUint64)
		if err != nil {
			return Value{}, err
		}
		return ValueOf[string](s), nil
	case ValueArray:
		return d.array(depth)
	}
	p, err := d.take(uint64(valueTypeSizes[t]), t.String()+" value")
	if err != nil {
		return Value{}, err
	}
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return ValueOf[uint8](p[0]), nil
	case ValueInt8:
		return ValueOf[int8](int8(p[0])), nil
	case ValueUint16:
		return ValueOf[uint16](le.Uint16(p)), nil
	case ValueInt16:
		return ValueOf[int16](int16(le.Uint16(p))), nil
	case ValueUint32:
		return ValueOf[uint32](le.Uint32(p)), nil
	case ValueInt32:
		return ValueOf[int32](int32(le.Uint32(p))), nil
	case ValueFloat32:
		return ValueOf[float32](math.Float32frombits(le.Uint32(p))), nil
	case ValueBool:
		if p[0] > 1 {
			return Value{}, fmt.Errorf("bool value %d at offset %d is neither 0 nor 1", p[0], d.off-1)
		}
		return ValueOf[bool](p[0] == 1), nil
	case ValueUint64:
		return ValueOf[uint64](le.Uint64(p)), nil
	case ValueInt64:
		return ValueOf[int64](int64(le.Uint64(p))), nil
	default: // ValueFloat64
		return ValueOf[float64](math.Float64frombits(le.Uint64(p))), nil
	}
}

func (d *decoder) array(depth int) (Value, error) {
	if depth >= MaxArrayDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.Known() {
		return Value{}, fmt.Errorf("array of unknown value type %d", et)
	}
	switch elem {
	case ValueString, ValueArray:
		minSize := uint64(8) // string length
		if elem == ValueArray {
			minSize = 4 + 8 // element type + count
		}
		n, err := d.count("array length", minSize)
		if err != nil {
			return Value{}, err
		}
		if elem == ValueString {
			out := make([]string, 0, initCap(n))
			for range n {
				s, err := d.str("string", math.MaxUint64)
				if err != nil {
					return Value{}, fmt.Errorf("element %d: %w", len(out), err)
				}
				out = append(out, s)
			}
			return ArrayOf[string](out), nil
		}
		out := make([]Value, 0, initCap(n))
		for range n {
			v, err := d.array(depth + 1)
			if err != nil {
				return Value{}, fmt.Errorf("element %d: %w", len(out), err)
			}
			out = append(out, v)
		}
		return ArrayValue(out), nil
	}
	size := uint64(valueTypeSizes[elem])
	n, err := d.count("array length", size)
	if err != nil {
		return Value{}, err
	}
	p, _ := d.take(n*size, "array") // count checked n*size fits
	le := binary.LittleEndian
	switch elem {
	case ValueUint8:
		return ArrayOf[uint8](slices.Clone(p)), nil
	case ValueInt8:
		return ArrayOf[int8](decodeArray(p, 1, func(q []byte) int8 { return int8(q[0]) })), nil
	case ValueUint16:
		return ArrayOf[uint16](decodeArray(p, 2, le.Uint16)), nil
	case ValueInt16:
		return ArrayOf[int16](decodeArray(p, 2, func(q []byte) int16 { return int16(le.Uint16(q)) })), nil
	case ValueUint32:
		return ArrayOf[uint32](decodeArray(p, 4, le.Uint32)), nil
	case ValueInt32:
		return ArrayOf[int32](decodeArray(p, 4, func(q []byte) int32 { return int32(le.Uint32(q)) })), nil
	case ValueFloat32:
		return ArrayOf[float32](decodeArray(p, 4, func(q []byte) float32 { return math.Float32frombits(le.Uint32(q)) })), nil
	case ValueBool:
		for i, c := range p {
			if c > 1 {
				return Value{}, fmt.Errorf("element %d: bool value %d is neither 0 nor 1", i, c)
			}
		}
		return ArrayOf[bool](decodeArray(p, 1, func(q []byte) bool { return q[0] == 1 })), nil
	case ValueUint64:
		return ArrayOf[uint64](decodeArray(p, 8, le.Uint64)), nil
	case ValueInt64:
		return ArrayOf[int64](decodeArray(p, 8, func(q []byte) int64 { return int64(le.Uint64(q)) })), nil
	default: // ValueFloat64
		return ArrayOf[float64](decodeArray(p, 8, func(q []byte) float64 { return math.Float64frombits(le.Uint64(q)) })), nil
	}
}

func decodeArray[T any](p []byte, size int, f func([]byte) T) []T {
	out := make([]T, len(p)/size)
	for i := range out {
		out[i] = f(p[i*size : i*size+size])
	}
	return out
}
