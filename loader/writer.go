package loader

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// WriterTensor is one tensor to write. Data must write exactly
// Type.ByteSize(Shape) bytes.
type WriterTensor struct {
	Name  string
	Type  Type
	Shape []uint64 // ggml ne order
	Data  io.WriterTo
}

// BytesTensor is tensor data already in memory.
type BytesTensor []byte

// WriteTo writes the bytes.
func (b BytesTensor) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// Float32Bytes encodes x as little-endian f32 tensor data.
func Float32Bytes(x []float32) BytesTensor {
	b := make([]byte, 4*len(x))
	for i, f := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

const writeVersion = 3

// Write writes a GGUF v3 file: the metadata in order, then the tensor
// descriptors and data in order, each tensor's data aligned to alignment
// (0 means the kv's general.alignment if present, else 32).
//
// When alignment is not 32 and kv has no general.alignment, one is appended
// as a uint32; a general.alignment in kv that disagrees with alignment is an
// error. Write validates keys (non-empty, unique), values, tensor names
// (non-empty, unique, at most MaxTensorNameLen bytes), types and shapes
// before writing anything, and fails if a tensor's Data writes more or fewer
// bytes than its shape requires.
func Write(w io.Writer, kv []KeyValue, tensors []WriterTensor, alignment uint64) error {
	kv, alignment, err := resolveAlignment(kv, alignment)
	if err != nil {
		return err
	}
	if _, err := NewKV(kv); err != nil {
		return err
	}
	for _, e := range kv {
		if len(e.Key) > MaxKeyLen {
			return fmt.Errorf("metadata key of %d bytes exceeds %d", len(e.Key), MaxKeyLen)
		}
		if err := checkValue(e.Value, 0); err != nil {
			return fmt.Errorf("key %q: %w", e.Key, err)
		}
	}
	sizes, offsets, err := layout(tensors, alignment)
	if err != nil {
		return err
	}

	e := &encoder{w: bufio.NewWriterSize(w, 1<<20)}
	e.bytes([]byte(ggufMagic))
	e.u32(writeVersion)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kv)))
	for _, kv := range kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offsets[i])
	}
	e.pad(alignment)
	if e.err != nil {
		return fmt.Errorf("write header: %w", e.err)
	}
	for i, t := range tensors {
		cw := &limitWriter{w: e.w, limit: sizes[i]}
		_, err := t.Data.WriteTo(cw)
		if err == nil && cw.n != sizes[i] {
			err = fmt.Errorf("data wrote %d bytes, want %d", cw.n, sizes[i])
		}
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		e.off += cw.n
		e.pad(alignment)
		if e.err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, e.err)
		}
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// WriteFile writes a GGUF file to a temporary file next to path
// (path + ".tmp-*"), syncs it and renames it over path, so that path never
// holds a partial file. The temporary file is removed on failure.
func WriteFile(path string, kv []KeyValue, tensors []WriterTensor, alignment uint64) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if err := Write(tmp, kv, tensors, alignment); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync() // persist the rename where the platform supports it
		_ = dir.Close()
	}
	return nil
}

// resolveAlignment applies the alignment rules of Write.
func resolveAlignment(kv []KeyValue, alignment uint64) ([]KeyValue, uint64, error) {
	var fromKV uint64
	found := false
	for _, e := range kv {
		if e.Key != AlignmentKey {
			continue
		}
		u, ok := e.Value.v.(uint32)
		if !ok || e.Value.typ != ValueUint32 {
			return nil, 0, &KVTypeError{Key: AlignmentKey, Want: "uint32", Got: e.Value.goTypeName()}
		}
		fromKV, found = uint64(u), true
		break
	}
	switch {
	case found && alignment != 0 && alignment != fromKV:
		return nil, 0, fmt.Errorf("alignment %d disagrees with %s = %d", alignment, AlignmentKey, fromKV)
	case found:
		alignment = fromKV
	case alignment == 0:
		alignment = DefaultAlignment
	}
	if alignment == 0 || alignment&(alignment-1) != 0 || alignment > math.MaxUint32 {
		return nil, 0, fmt.Errorf("alignment %d is not a power of 2 that fits in uint32", alignment)
	}
	if !found && alignment != DefaultAlignment {
		kv = append(kv[:len(kv):len(kv)], KeyValue{Key: AlignmentKey, Value: ValueOf[uint32](uint32(alignment))})
	}
	return kv, alignment, nil
}

// layout validates the tensors and returns their sizes and relative offsets.
func layout(tensors []WriterTensor, alignment uint64) (sizes, offsets []uint64, err error) {
	sizes = make([]uint64, len(tensors))
	offsets = make([]uint64, len(tensors))
	seen := make(map[string]struct{}, len(tensors))
	var off uint64
	for i, t := range tensors {
		if err := checkTensorName(t.Name); err != nil {
			return nil, nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		if _, dup := seen[t.Name]; dup {
			return nil, nil, fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = struct{}{}
		if len(t.Shape) > MaxDims {
			return nil, nil, fmt.Errorf("tensor %q: %d dimensions, ggml allows at most %d", t.Name, len(t.Shape), MaxDims)
		}
		elems := uint64(1)
		for _, d := range t.Shape {
			if d > math.MaxInt64 || (d != 0 && elems > math.MaxInt64/d) {
				return nil, nil, fmt.Errorf("tensor %q: shape %v: element count overflows int64", t.Name, t.Shape)
			}
			elems *= d
		}
		size, err := t.Type.ByteSize(t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if t.Data == nil {
			return nil, nil, fmt.Errorf("tensor %q: no data", t.Name)
		}
		padded := alignUp(size, alignment)
		if padded < size || off > math.MaxInt64-padded {
			return nil, nil, fmt.Errorf("tensor %q: data section overflows", t.Name)
		}
		sizes[i], offsets[i] = size, off
		off += padded
	}
	return sizes, offsets, nil
}

// checkValue verifies that v is well formed (constructed, consistent
// element types, bounded nesting).
func checkValue(v Value, depth int) error {
	if !v.set || !v.typ.Known() {
		return errors.New("invalid (zero) value")
	}
	if v.typ != ValueArray {
		return nil
	}
	if depth >= MaxArrayDepth {
		return fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
	}
	inner, ok := v.v.([]Value)
	if !ok {
		return nil
	}
	if v.elem != ValueArray {
		return fmt.Errorf("array of %s holds nested arrays", v.elem)
	}
	for i, x := range inner {
		if x.Type() != ValueArray {
			return fmt.Errorf("element %d: array of arrays holds a %s", i, x.Type())
		}
		if err := checkValue(x, depth+1); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// encoder writes little-endian fields with a sticky error and tracks the
// offset for padding.
type encoder struct {
	w   *bufio.Writer
	off uint64
	err error
	buf [8]byte
}

func (e *encoder) bytes(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.off += uint64(n)
	e.err = err
}

func (e *encoder) u8(x uint8) { e.bytes([]byte{x}) }

func (e *encoder) u16(x uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], x)
	e.bytes(e.buf[:2])
}

func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], x)
	e.bytes(e.buf[:4])
}

func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], x)
	e.bytes(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err != nil {
		return
	}
	n, err := e.w.WriteString(s)
	e.off += uint64(n)
	e.err = err
}

func (e *encoder) pad(alignment uint64) {
	for n := alignUp(e.off, alignment) - e.off; n > 0 && e.err == nil; n-- {
		e.u8(0)
	}
}

// scalar writes one non-array value.
func (e *encoder) scalar(x any) {
	switch x := x.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case Value: // element of an array of arrays: (type, count, values), no tag
		e.value(x)
	}
}

// value writes v's payload (the type id is written by the caller).
func (e *encoder) value(v Value) {
	if v.typ != ValueArray {
		e.scalar(v.v)
		return
	}
	n := arrayLen(v.v)
	e.u32(uint32(v.elem))
	e.u64(uint64(n))
	for i := range n {
		e.scalar(arrayIndex(v.v, i))
	}
}

// limitWriter counts bytes and refuses to write past limit.
type limitWriter struct {
	w     io.Writer
	n     uint64
	limit uint64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > l.limit-l.n {
		return 0, fmt.Errorf("data writes more than the %d bytes its shape requires", l.limit)
	}
	n, err := l.w.Write(p)
	l.n += uint64(n)
	return n, err
}
