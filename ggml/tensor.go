package ggml

// #include <stdlib.h>
// #include <string.h>
// #include "da3_ggml.h"
// static void da3_set_name(struct ggml_tensor * t, const char * s) { ggml_set_name(t, s); }
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Tensor is a non-owning handle to a ggml_tensor. It is valid until its
// context closes; never free it individually. Using a tensor whose context is
// closed panics with a *ShapeError (metadata and ops) or returns ErrClosed
// (data transfer) instead of touching freed memory.
type Tensor struct {
	p   *C.struct_ggml_tensor
	ctx *Context // the owning context; nil when unknown (Src)
}

// closed reports whether the tensor's owning context is known to be closed.
func (t *Tensor) closed() bool { return t.ctx != nil && t.ctx.c == nil }

// live panics unless t is a usable handle.
func (t *Tensor) live(op string) {
	if t == nil || t.p == nil {
		panic(&ShapeError{Op: op, Msg: "nil tensor"})
	}
	if t.closed() {
		panic(&ShapeError{Op: op, Msg: "the tensor's context is closed", Err: ErrClosed})
	}
}

// ioErr is the error of a data transfer on an unusable handle, or nil.
func (t *Tensor) ioErr() error {
	if t == nil || t.p == nil {
		return errors.New("ggml: nil tensor")
	}
	if t.closed() {
		return fmt.Errorf("ggml: tensor of a closed context: %w", ErrClosed)
	}
	if s := t.ctx; s != nil && s.sched != nil && s.sched.s == nil {
		return fmt.Errorf("ggml: tensor allocated by a closed scheduler: %w", ErrClosed)
	}
	return nil
}

func (t *Tensor) ne(i int) int64 { return int64(t.p.ne[i]) }
func (t *Tensor) nb(i int) int64 { return int64(t.p.nb[i]) }

func (t *Tensor) ne4() []int {
	return []int{int(t.p.ne[0]), int(t.p.ne[1]), int(t.p.ne[2]), int(t.p.ne[3])}
}

func (t *Tensor) isEmpty() bool { return t.ne(0) == 0 || t.ne(1) == 0 || t.ne(2) == 0 || t.ne(3) == 0 }

// Dim is ne[i], the size of dimension i in ggml order (0 = fastest).
func (t *Tensor) Dim(i int) int {
	t.live("dim")
	if i < 0 || i > 3 {
		panic(&ShapeError{Op: "dim", Msg: fmt.Sprintf("dimension %d out of range [0,4)", i)})
	}
	return int(t.ne(i))
}

// NDims is ggml_n_dims: the number of dimensions up to the last one > 1 (at least 1).
func (t *Tensor) NDims() int {
	t.live("n_dims")
	return int(C.ggml_n_dims(t.p))
}

// Shape is ne[0:NDims()].
func (t *Tensor) Shape() []int { return t.ne4()[:t.NDims()] }

// Stride is nb[i], the byte stride of dimension i.
func (t *Tensor) Stride(i int) int {
	t.live("stride")
	if i < 0 || i > 3 {
		panic(&ShapeError{Op: "stride", Msg: fmt.Sprintf("dimension %d out of range [0,4)", i)})
	}
	return int(t.nb(i))
}

// Elements is ggml_nelements.
func (t *Tensor) Elements() int {
	t.live("nelements")
	return int(C.ggml_nelements(t.p))
}

// Bytes is ggml_nbytes, the size of the tensor's data.
func (t *Tensor) Bytes() int {
	t.live("nbytes")
	return int(C.ggml_nbytes(t.p))
}

// Type is the tensor's element type.
func (t *Tensor) Type() Type {
	t.live("type")
	return Type(t.p._type)
}

// Name is the tensor's name.
func (t *Tensor) Name() string {
	t.live("get_name")
	return C.GoString(&t.p.name[0])
}

// SetName sets the tensor's name (truncated to ggml's 63 bytes) and returns t
// for chaining.
func (t *Tensor) SetName(name string) *Tensor {
	t.live("set_name")
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	C.da3_set_name(t.p, cs)
	return t
}

// IsContiguous is ggml_is_contiguous.
func (t *Tensor) IsContiguous() bool {
	t.live("is_contiguous")
	return bool(C.ggml_is_contiguous(t.p))
}

// IsTransposed is ggml_is_transposed.
func (t *Tensor) IsTransposed() bool {
	t.live("is_transposed")
	return bool(C.ggml_is_transposed(t.p))
}

// HasData reports whether the tensor is allocated in a backend buffer.
func (t *Tensor) HasData() bool {
	t.live("has_data")
	return t.p.buffer != nil || (t.p.view_src != nil && t.p.view_src.buffer != nil)
}

// buffer is the backend buffer holding the tensor's data: its own, or its
// view source's; nil when it has none.
func (t *Tensor) buffer() C.ggml_backend_buffer_t {
	if t.p.buffer != nil {
		return t.p.buffer
	}
	if t.p.view_src != nil {
		return t.p.view_src.buffer
	}
	return nil
}

// BufferName is the name of the backend buffer holding the tensor's data
// (ggml_backend_buffer_name: its buffer type, such as "CPU" or "Vulkan0"),
// or "" when it has none.
func (t *Tensor) BufferName() string {
	t.live("buffer_name")
	b := t.buffer()
	if b == nil {
		return ""
	}
	return C.GoString(C.ggml_backend_buffer_name(b))
}

// InHostBuffer reports whether the tensor's data is in a buffer in host
// memory (ggml_backend_buffer_is_host); false when it has no buffer.
func (t *Tensor) InHostBuffer() bool {
	t.live("buffer_is_host")
	b := t.buffer()
	return b != nil && bool(C.ggml_backend_buffer_is_host(b))
}

// Op is the name of the op that produced the tensor ("NONE" for leaves).
func (t *Tensor) Op() string {
	t.live("op_desc")
	return C.GoString(C.ggml_op_desc(t.p))
}

// Src returns the i-th source of the node, or nil.
func (t *Tensor) Src(i int) *Tensor {
	t.live("src")
	if i < 0 || i >= C.GGML_MAX_SRC || t.p.src[i] == nil {
		return nil
	}
	return &Tensor{p: t.p.src[i]}
}

// String describes the tensor: name, type and shape.
func (t *Tensor) String() string {
	if t == nil || t.p == nil || t.closed() {
		return "<invalid tensor>"
	}
	return fmt.Sprintf("%s %s %v", t.Name(), t.Type(), t.Shape())
}

var errNoBuffer = errors.New("tensor has no backend buffer: allocate its context on a buffer type or through a scheduler first")

func (t *Tensor) checkIO(n int) error {
	if err := t.ioErr(); err != nil {
		return err
	}
	if !t.HasData() {
		return fmt.Errorf("ggml: tensor %q: %w", t.Name(), errNoBuffer)
	}
	if !t.IsContiguous() {
		return fmt.Errorf("ggml: tensor %q is not contiguous: make a contiguous copy first", t.Name())
	}
	if n != t.Bytes() {
		return fmt.Errorf("ggml: tensor %q %v holds %d bytes, got %d", t.Name(), t.Shape(), t.Bytes(), n)
	}
	return nil
}

// SetBytes copies raw data (in the tensor's type) into the tensor through its
// backend (ggml_backend_tensor_set). len(data) must equal Bytes().
func (t *Tensor) SetBytes(data []byte) error {
	if err := t.checkIO(len(data)); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	C.ggml_backend_tensor_set(t.p, unsafe.Pointer(&data[0]), 0, C.size_t(len(data)))
	return nil
}

// ReadBytes copies the tensor's raw data out (ggml_backend_tensor_get).
func (t *Tensor) ReadBytes() ([]byte, error) {
	if err := t.ioErr(); err != nil {
		return nil, err
	}
	out := make([]byte, t.Bytes())
	if err := t.checkIO(len(out)); err != nil {
		return nil, err
	}
	if len(out) > 0 {
		C.ggml_backend_tensor_get(t.p, unsafe.Pointer(&out[0]), 0, C.size_t(len(out)))
	}
	return out, nil
}

// SetFloat32s copies v into an F32 tensor, or converts it to F16/BF16 or
// quantizes it for tensors of those types. len(v) must equal Elements().
func (t *Tensor) SetFloat32s(v []float32) error {
	if err := t.ioErr(); err != nil {
		return err
	}
	if len(v) != t.Elements() {
		return fmt.Errorf("ggml: tensor %q %v has %d elements, got %d", t.Name(), t.Shape(), t.Elements(), len(v))
	}
	if t.Type() == TypeF32 {
		if err := t.checkIO(4 * len(v)); err != nil {
			return err
		}
		if len(v) > 0 {
			C.ggml_backend_tensor_set(t.p, unsafe.Pointer(&v[0]), 0, C.size_t(4*len(v)))
		}
		return nil
	}
	if len(v) == 0 {
		return nil
	}
	data, err := QuantizeChunk(t.Type(), v, len(v)/t.Dim(0), t.Dim(0), nil)
	if err != nil {
		return fmt.Errorf("ggml: tensor %q: %w", t.Name(), err)
	}
	return t.SetBytes(data)
}

// Float32s copies the tensor's data out as float32, converting or
// dequantizing non-F32 types.
func (t *Tensor) Float32s() ([]float32, error) {
	if err := t.ioErr(); err != nil {
		return nil, err
	}
	if t.Type() == TypeF32 {
		out := make([]float32, t.Elements())
		if err := t.checkIO(4 * len(out)); err != nil {
			return nil, err
		}
		if len(out) > 0 {
			C.ggml_backend_tensor_get(t.p, unsafe.Pointer(&out[0]), 0, C.size_t(4*len(out)))
		}
		return out, nil
	}
	raw, err := t.ReadBytes()
	if err != nil {
		return nil, err
	}
	return ToFloat32(t.Type(), raw, t.Elements())
}

// SetInt32s copies v into an I32 tensor.
func (t *Tensor) SetInt32s(v []int32) error {
	if err := t.ioErr(); err != nil {
		return err
	}
	if t.Type() != TypeI32 {
		return fmt.Errorf("ggml: tensor %q is %s, not i32", t.Name(), t.Type())
	}
	if err := t.checkIO(4 * len(v)); err != nil {
		return err
	}
	if len(v) > 0 {
		C.ggml_backend_tensor_set(t.p, unsafe.Pointer(&v[0]), 0, C.size_t(4*len(v)))
	}
	return nil
}
