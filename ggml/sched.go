package ggml

/*
#include <stdlib.h>
#include "ggml.h"
#include "ggml-backend.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Scheduler splits graphs over several backends (ggml_backend_sched_t): each
// node runs on the first backend (in priority order) that supports it and holds
// its weights; unsupported ops fall back to later backends, the last of which
// must be the CPU. It allocates compute buffers and copies data between
// backends.
type Scheduler struct {
	s        C.ggml_backend_sched_t
	backends []*Backend
	cb       []C.ggml_backend_t
}

// NewScheduler creates a scheduler over backends (highest priority first, CPU
// last) for graphs of up to graphSize nodes.
func NewScheduler(backends []*Backend, graphSize int) (*Scheduler, error) {
	if len(backends) == 0 {
		return nil, errors.New("ggml: NewScheduler: no backends")
	}
	cb := (*[1 << 10]C.ggml_backend_t)(C.malloc(C.size_t(len(backends)) * C.size_t(unsafe.Sizeof(C.ggml_backend_t(nil)))))
	for i, b := range backends {
		if b == nil || b.b == nil {
			C.free(unsafe.Pointer(cb))
			return nil, fmt.Errorf("ggml: NewScheduler: backend %d: %w", i, ErrClosed)
		}
		cb[i] = b.b
	}
	if backends[len(backends)-1].Device().Type() != DeviceCPU {
		C.free(unsafe.Pointer(cb))
		return nil, errors.New("ggml: NewScheduler: the last backend must be the CPU")
	}
	if graphSize < 1 {
		graphSize = 2048
	}
	s := C.ggml_backend_sched_new(&cb[0], nil, C.int(len(backends)), C.size_t(graphSize), false, true)
	if s == nil {
		C.free(unsafe.Pointer(cb))
		return nil, errors.New("ggml: ggml_backend_sched_new failed")
	}
	return &Scheduler{s: s, backends: append([]*Backend(nil), backends...), cb: cb[:len(backends):len(backends)]}, nil
}

func (s *Scheduler) ok(g *Context) error {
	if s == nil || s.s == nil {
		return ErrClosed
	}
	for i, b := range s.backends {
		if b.b == nil {
			return fmt.Errorf("ggml: scheduler: backend %d (%s) is closed: %w", i, b.dev.Name(), ErrClosed)
		}
	}
	if g.Closed() {
		return fmt.Errorf("ggml: scheduler: %w context", ErrClosed)
	}
	if g.gf == nil {
		return errors.New("ggml: scheduler: context has no graph (call Expand)")
	}
	return nil
}

// Reserve sizes the compute buffers for g's graph (ggml_backend_sched_reserve);
// later graphs no larger than it reuse them.
func (s *Scheduler) Reserve(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	if !C.ggml_backend_sched_reserve(s.s, g.gf) {
		return fmt.Errorf("ggml: reserving compute buffers: %w", ErrOutOfMemory)
	}
	return nil
}

// Alloc assigns backends to g's nodes and allocates them
// (ggml_backend_sched_alloc_graph); inputs can then be set.
func (s *Scheduler) Alloc(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	if !C.ggml_backend_sched_alloc_graph(s.s, g.gf) {
		return fmt.Errorf("ggml: allocating the graph: %w", ErrOutOfMemory)
	}
	g.sched = s
	return nil
}

// Compute runs g's graph (ggml_backend_sched_graph_compute), allocating it
// first if Alloc was not called.
func (s *Scheduler) Compute(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	g.sched = s
	if st := C.ggml_backend_sched_graph_compute(s.s, g.gf); st != C.GGML_STATUS_SUCCESS {
		return &StatusError{Op: "sched compute", Status: int(st)}
	}
	return nil
}

// Reset frees the assignments of the last graph so a new one can be allocated
// (ggml_backend_sched_reset).
func (s *Scheduler) Reset() {
	if s != nil && s.s != nil {
		C.ggml_backend_sched_reset(s.s)
	}
}

// BackendOf is the backend node t was assigned to (nil if none).
func (s *Scheduler) BackendOf(t *Tensor) *Backend {
	if s == nil || s.s == nil || t == nil || t.p == nil || t.closed() {
		return nil
	}
	b := C.ggml_backend_sched_get_tensor_backend(s.s, t.p)
	for _, x := range s.backends {
		if x.b == b {
			return x
		}
	}
	return nil
}

// BufferSize is the compute buffer size reserved on backend b.
func (s *Scheduler) BufferSize(b *Backend) uint64 {
	if s == nil || s.s == nil || b == nil || b.b == nil {
		return 0
	}
	return uint64(C.ggml_backend_sched_get_buffer_size(s.s, b.b))
}

// Splits is the number of backend splits of the last graph.
func (s *Scheduler) Splits() int {
	if s == nil || s.s == nil {
		return 0
	}
	return int(C.ggml_backend_sched_get_n_splits(s.s))
}

// Backends are the scheduler's backends in priority order.
func (s *Scheduler) Backends() []*Backend { return s.backends }

// Close frees the scheduler (not its backends). Idempotent and nil-safe.
func (s *Scheduler) Close() error {
	if s == nil || s.s == nil {
		return nil
	}
	C.ggml_backend_sched_free(s.s)
	C.free(unsafe.Pointer(&s.cb[0]))
	s.s, s.cb = nil, nil
	return nil
}
