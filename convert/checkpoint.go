package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
)

// DType is the element type of a checkpoint tensor.
type DType uint8

// Checkpoint element types. Every type converts to float32; the integer and
// bool types exist because PyTorch state dicts may carry them (for example
// BatchNorm's num_batches_tracked), so they can be listed and reported rather
// than rejected at open time.
const (
	DTypeF32 DType = iota + 1
	DTypeF16
	DTypeBF16
	DTypeF64
	DTypeI64
	DTypeI32
	DTypeI16
	DTypeI8
	DTypeU8
	DTypeBool
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	DTypeF32:  {"F32", 4},
	DTypeF16:  {"F16", 2},
	DTypeBF16: {"BF16", 2},
	DTypeF64:  {"F64", 8},
	DTypeI64:  {"I64", 8},
	DTypeI32:  {"I32", 4},
	DTypeI16:  {"I16", 2},
	DTypeI8:   {"I8", 1},
	DTypeU8:   {"U8", 1},
	DTypeBool: {"BOOL", 1},
}

func (d DType) valid() bool { return d > 0 && int(d) < len(dtypeInfo) }

// String returns the safetensors name of the type ("F32", "BF16").
func (d DType) String() string {
	if !d.valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// Size returns the bytes per element (0 for an invalid type).
func (d DType) Size() int {
	if !d.valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// maxDims bounds the rank of checkpoint tensors. GGUF allows 4; readers accept
// a little more so that such tensors are reported by name instead of failing
// the whole open.
const maxDims = 8

// Tensor is one named tensor of a checkpoint. Its data is read lazily by
// Float32s, so listing a checkpoint costs no tensor I/O.
type Tensor struct {
	Name  string
	Shape []int64 // PyTorch order, outermost first
	DType DType

	st      *storage
	offset  int64   // in elements of the storage
	strides []int64 // in elements; nil means contiguous (C order)
}

// NumElements returns the product of Shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n, _ := numElements(t.Shape)
	return n
}

// Float32s reads the tensor and converts it to float32 in C (row-major)
// order. Non-contiguous PyTorch views are materialised.
func (t *Tensor) Float32s() ([]float32, error) {
	out, err := t.float32s()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return out, nil
}

func (t *Tensor) float32s() ([]float32, error) {
	n, err := numElements(t.Shape)
	if err != nil {
		return nil, err
	}
	es := int64(t.DType.Size())
	if es == 0 {
		return nil, fmt.Errorf("invalid dtype %v", t.DType)
	}
	// A view never has more elements than its storage unless its strides
	// overlap (expanded tensors), which state dicts do not contain; the bound
	// keeps a hostile file from requesting a huge allocation.
	if n > t.st.elems(es) {
		return nil, fmt.Errorf("shape %v has %d elements but its storage only %d", t.Shape, n, t.st.elems(es))
	}
	if n == 0 {
		return []float32{}, nil
	}
	lo, hi, contiguous := t.span()
	if lo < 0 || hi >= t.st.elems(es) {
		return nil, fmt.Errorf("view [offset %d, strides %v, shape %v] reaches outside its storage of %d elements",
			t.offset, t.strides, t.Shape, t.st.elems(es))
	}
	raw := make([]byte, (hi-lo+1)*es)
	if err := t.st.readAt(raw, lo*es); err != nil {
		return nil, err
	}
	if contiguous {
		return decode(raw, t.DType, n), nil
	}
	// Gather a strided view: walk the index space in C order.
	out := make([]float32, n)
	idx := make([]int64, len(t.Shape))
	for i := range out {
		var p int64
		for d, k := range idx {
			p += k * t.strides[d]
		}
		p += t.offset - lo
		out[i] = decode1(raw[p*es:], t.DType)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < t.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out, nil
}

// span returns the first and last storage element the view touches and
// whether the view is a contiguous C-order run. Shape must be non-empty in
// elements and strides non-negative (checked at open).
func (t *Tensor) span() (lo, hi int64, contiguous bool) {
	if t.strides == nil {
		n, _ := numElements(t.Shape)
		return t.offset, t.offset + n - 1, true
	}
	hi = t.offset
	for d, s := range t.strides {
		hi += (t.Shape[d] - 1) * s
	}
	return t.offset, hi, isContiguous(t.Shape, t.strides)
}

// isContiguous reports whether strides describe a C-order layout of shape
// (dimensions of size 1 may have any stride, as in PyTorch).
func isContiguous(shape, strides []int64) bool {
	want := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] != 1 && strides[d] != want {
			return false
		}
		want *= shape[d]
	}
	return true
}

// numElements returns the product of shape, failing on a negative dimension
// or overflow.
func numElements(shape []int64) (int64, error) {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v: element count overflows", shape)
		}
		n = lo
	}
	return int64(n), nil
}

// decode converts n little-endian elements of type d to float32.
func decode(raw []byte, d DType, n int64) []float32 {
	out := make([]float32, n)
	le := binary.LittleEndian
	switch d {
	case DTypeF32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case DTypeF16:
		for i := range out {
			out[i] = f16ToF32(le.Uint16(raw[2*i:]))
		}
	case DTypeBF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(le.Uint16(raw[2*i:])) << 16)
		}
	default:
		es := d.Size()
		for i := range out {
			out[i] = decode1(raw[i*es:], d)
		}
	}
	return out
}

// decode1 converts the first element of raw.
func decode1(raw []byte, d DType) float32 {
	le := binary.LittleEndian
	switch d {
	case DTypeF32:
		return math.Float32frombits(le.Uint32(raw))
	case DTypeF16:
		return f16ToF32(le.Uint16(raw))
	case DTypeBF16:
		return math.Float32frombits(uint32(le.Uint16(raw)) << 16)
	case DTypeF64:
		return float32(math.Float64frombits(le.Uint64(raw)))
	case DTypeI64:
		return float32(int64(le.Uint64(raw)))
	case DTypeI32:
		return float32(int32(le.Uint32(raw)))
	case DTypeI16:
		return float32(int16(le.Uint16(raw)))
	case DTypeI8:
		return float32(int8(raw[0]))
	default: // DTypeU8, DTypeBool
		return float32(raw[0])
	}
}

// storage is a run of bytes inside a file (or produced on demand, for a
// compressed zip entry).
type storage struct {
	ra   io.ReaderAt
	base int64 // byte offset of the storage in ra
	size int64 // bytes
	// open, when set, yields the storage bytes (ra is then unused).
	open func() ([]byte, error)
}

func (s *storage) elems(es int64) int64 { return s.size / es }

func (s *storage) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > s.size {
		return fmt.Errorf("read of %d bytes at %d is outside the %d-byte storage", len(p), off, s.size)
	}
	if s.open != nil {
		b, err := s.open()
		if err != nil {
			return err
		}
		if int64(len(b)) != s.size {
			return fmt.Errorf("storage holds %d bytes, %d declared", len(b), s.size)
		}
		copy(p, b[off:])
		return nil
	}
	n, err := s.ra.ReadAt(p, s.base+off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at %d: %w", len(p), s.base+off, err)
}

// Checkpoint is an opened model checkpoint: named tensors in file order.
// Close releases the underlying files.
type Checkpoint struct {
	names   []string
	tensors map[string]*Tensor
	closers []io.Closer
	// Config is the parsed config.json found next to a safetensors
	// checkpoint (nil when there is none).
	Config map[string]any
}

func newCheckpoint() *Checkpoint {
	return &Checkpoint{tensors: map[string]*Tensor{}}
}

func (c *Checkpoint) add(t *Tensor) error {
	if _, dup := c.tensors[t.Name]; dup {
		return fmt.Errorf("duplicate tensor name %q", t.Name)
	}
	c.tensors[t.Name] = t
	c.names = append(c.names, t.Name)
	return nil
}

// Names returns the tensor names in file order.
func (c *Checkpoint) Names() []string { return slices.Clone(c.names) }

// Len returns the number of tensors.
func (c *Checkpoint) Len() int { return len(c.names) }

// Tensor returns the tensor called name.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Close releases the files behind the checkpoint. It is idempotent.
func (c *Checkpoint) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i].Close())
	}
	c.closers = nil
	return errors.Join(errs...)
}

// f16ToF32 converts IEEE binary16 bits to float32 (exact).
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // ±0
		return math.Float32frombits(sign)
	default: // subnormal: normalise
		e := uint32(113)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
}

// f32ToF16 converts a float32 to IEEE binary16 bits with round-to-nearest-
// even, as numpy's astype(float16) and ggml's GGML_FP32_TO_FP16 do. Values
// beyond the f16 range become ±inf; NaN stays NaN.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // f16 subnormal (or zero)
		if e < -10 {
			return sign
		}
		full := mant | 0x800000
		shift := uint32(14 - e)
		r := full >> shift
		rem := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++ // may carry into the smallest normal, which is correct
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // a carry into the exponent is correct; 0x7c00 is +inf
	}
	return sign | uint16(r)
}
