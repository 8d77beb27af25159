package kernels

// #include "custom.h"
import "C"

import (
	"errors"
	"unsafe"

	"github.com/da3-go/da3-go/ggml"
)

// hostMemory is memory of the kernels' own (64-byte aligned, outside Go's
// heap: the register tiles load their panels aligned) wrapped as a CPU
// buffer, with the context of the tensors placed in it: the weights packed
// at load (PackedSet) and the stored Winograd transforms (WinogradCache).
type hostMemory struct {
	mem  unsafe.Pointer
	size int // bytes
	buf  *ggml.Buffer
	ctx  *ggml.Context // made by the owner, for the tensors it places in buf
}

// newHostMemory allocates size bytes and wraps them as a CPU buffer.
func newHostMemory(size int) (*hostMemory, error) {
	mem := C.da3_aligned_alloc(64, C.size_t(size))
	if mem == nil {
		return nil, ggml.ErrOutOfMemory
	}
	buf, err := ggml.NewCPUBufferFromMemory(mem, size)
	if err != nil {
		C.da3_aligned_free(mem)
		return nil, err
	}
	return &hostMemory{mem: mem, size: size, buf: buf}, nil
}

// close closes the buffer and the context and frees the memory. Idempotent.
func (h *hostMemory) close() error {
	if h == nil {
		return nil
	}
	var err error
	if h.buf != nil {
		err = h.buf.Close()
	}
	if h.ctx != nil {
		err = errors.Join(err, h.ctx.Close())
	}
	if h.mem != nil {
		C.da3_aligned_free(h.mem)
	}
	h.buf, h.ctx, h.mem = nil, nil, nil
	return err
}
