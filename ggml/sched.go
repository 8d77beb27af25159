package ggml

/*
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "da3_ggml.h"

// The scheduler's eval callback (ggml_backend_sched_set_eval_callback),
// asked about each node of a split before the split runs (ask) and told
// when the nodes up to one it asked for are done. It asks for the node at
// which it finds the stop flag set, so the scheduler computes up to that
// node and stops the split when told; a later split computes its first
// node only. every > 0 also asks for every every-th node: the scheduler
// then computes a split in pieces (synchronising the backend after each)
// and the flag is read between them.
//
// With profile set it also asks for every node that computes something
// (views, reshapes and permutations run with the node after them), so the
// scheduler computes them one at a time, and records each one's op, custom
// kernel and time from the end of the node before (or of da3_prof_begin)
// to its end, in up to cap records.
typedef struct {
    int64_t ns;      // the node's time
    const char * op; // ggml_op_desc: a static string
    void * fn;       // a custom op's kernel, else NULL
    int64_t ne[4];   // the node's shape
    int64_t src[4];  // its first source's shape (0 without one)
} da3_node_time;

typedef struct {
    int flag;     // set to stop
    int stopped;  // the callback stopped a split
    int every;    // ask for every every-th node too (0: split boundaries only)
    int seen;     // nodes asked about
    int after;    // set flag once seen reaches it (0: never)
    int profile;  // time every node
    int n, cap;   // records made, room for
    da3_node_time * rec;
    int64_t last; // when the last node ended, ns
} da3_sched_stop;

static int64_t da3_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int da3_is_view(const struct ggml_tensor * t) {
    switch (t->op) {
    case GGML_OP_NONE: case GGML_OP_VIEW: case GGML_OP_RESHAPE: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        return 1;
    default:
        return 0;
    }
}

static bool da3_sched_eval(struct ggml_tensor * t, bool ask, void * data) {
    da3_sched_stop * s = (da3_sched_stop *) data;
    if (ask) {
        s->seen++;
        if (s->after > 0 && s->seen >= s->after) __atomic_store_n(&s->flag, 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->flag, __ATOMIC_RELAXED)) return true;
        if (s->profile && !da3_is_view(t)) return true;
        return s->every > 0 && s->seen % s->every == 0;
    }
    if (__atomic_load_n(&s->flag, __ATOMIC_RELAXED)) {
        s->stopped = 1;
        return false;
    }
    if (s->profile && s->n < s->cap) {
        const int64_t now = da3_now_ns();
        da3_node_time * r = &s->rec[s->n++];
        r->ns = now - s->last;
        r->op = ggml_op_desc(t);
        r->fn = NULL;
        if (t->op == GGML_OP_CUSTOM) {
            memcpy(&r->fn, t->op_params, sizeof r->fn); // ggml_custom_op_params' first word: the kernel
        }
        for (int i = 0; i < 4; i++) {
            r->ne[i] = t->ne[i];
            r->src[i] = t->src[0] != NULL ? t->src[0]->ne[i] : 0;
        }
        s->last = now;
    }
    return true;
}

static void da3_prof_begin(da3_sched_stop * s) {
    s->n = 0;
    s->last = da3_now_ns();
}

static void da3_sched_enable_stop(ggml_backend_sched_t sched, da3_sched_stop * s) {
    ggml_backend_sched_set_eval_callback(sched, da3_sched_eval, s);
}
static void da3_sched_set_stop(da3_sched_stop * s, int v) { __atomic_store_n(&s->flag, v, __ATOMIC_RELAXED); }
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Scheduler splits graphs over several backends (ggml_backend_sched_t): each
// node runs on the first backend (in priority order) that supports it and holds
// its weights; unsupported ops fall back to later backends, the last of which
// must be the CPU. It allocates compute buffers and copies data between
// backends.
type Scheduler struct {
	s         C.ggml_backend_sched_t
	backends  []*Backend
	cb        []C.ggml_backend_t
	graphSize int
	// stop is the state of the eval callback that stops a graph between
	// splits (C memory, nil until EnableAbort).
	stop *C.da3_sched_stop
	// allocated is the context whose graph the scheduler has assigned and
	// allocated (ggml's is_alloc), nil after Reset. ggml aborts when a graph is
	// allocated twice and silently recomputes the old graph when another one
	// is computed, so the binding resets in between.
	allocated *Context
}

// maxSchedBackends is GGML_SCHED_MAX_BACKENDS.
const maxSchedBackends = 16

// NewScheduler creates a scheduler over backends (highest priority first, CPU
// last) for graphs of up to graphSize nodes and leaves together (2048 when
// graphSize < 1); larger graphs are refused with an error.
func NewScheduler(backends []*Backend, graphSize int) (*Scheduler, error) {
	if len(backends) == 0 {
		return nil, errors.New("ggml: scheduler: no backends")
	}
	if len(backends) > maxSchedBackends {
		return nil, fmt.Errorf("ggml: scheduler: %d backends, at most %d", len(backends), maxSchedBackends)
	}
	cb := (*[1 << 10]C.ggml_backend_t)(C.malloc(C.size_t(len(backends)) * C.size_t(unsafe.Sizeof(C.ggml_backend_t(nil)))))
	for i, b := range backends {
		if b == nil || b.b == nil {
			C.free(unsafe.Pointer(cb))
			return nil, fmt.Errorf("ggml: scheduler: backend %d: %w", i, ErrClosed)
		}
		cb[i] = b.b
	}
	if backends[len(backends)-1].Device().Type() != DeviceCPU {
		C.free(unsafe.Pointer(cb))
		return nil, errors.New("ggml: scheduler: the last backend must be the CPU")
	}
	if graphSize < 1 {
		graphSize = 2048
	}
	// ggml_backend_sched_new does not check its allocations (a failed one
	// aborts later), so they are tried first.
	if need := SchedulerBytes(graphSize, len(backends)); !CanAllocate(need) {
		C.free(unsafe.Pointer(cb))
		return nil, fmt.Errorf("ggml: scheduler: %.0f MiB of scheduler tables: %w", float64(need)/(1<<20), ErrOutOfMemory)
	}
	s := C.ggml_backend_sched_new(&cb[0], nil, C.int(len(backends)), C.size_t(graphSize), false, true)
	if s == nil {
		C.free(unsafe.Pointer(cb))
		return nil, errors.New("ggml: ggml_backend_sched_new failed")
	}
	return &Scheduler{s: s, backends: append([]*Backend(nil), backends...), cb: cb[:len(backends):len(backends)], graphSize: graphSize}, nil
}

// SchedulerBytes is the host memory ggml_backend_sched_new allocates for a
// graph size and backend count (mirroring ggml-backend.cpp: the split
// context, the node and leaf backend ids, the hash set), mostly address
// space: only the parts a graph uses are touched.
func SchedulerBytes(graphSize, backends int) uint64 {
	const maxSplitInputs = 30 // GGML_SCHED_MAX_SPLIT_INPUTS
	g := uint64(graphSize)
	ctx := g*maxSplitInputs*2*uint64(C.sizeof_struct_ggml_tensor) + uint64(C.ggml_graph_overhead_custom(C.size_t(graphSize), false))
	ids := 4 * (g + g*maxSplitInputs*2) * 4
	hash := 2 * g * (8 + 4 + 8*uint64(backends)) // next prime ≥ g, at most 2g
	return ctx + ids + hash
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
		return errors.New("ggml: scheduler: the context has no graph (expand one first)")
	}
	// ggml asserts that the graph's nodes and leaves fit the hash set sized
	// from graphSize.
	if nodes, leaves := graphCounts(g.gf); nodes+leaves > s.graphSize {
		return fmt.Errorf("ggml: scheduler: graph of %d nodes and %d leaves exceeds the scheduler's graph size %d", nodes, leaves, s.graphSize)
	}
	return nil
}

// graphCounts counts the nodes of gf and its leaves (the distinct sources
// that no op computes, such as inputs and weights).
func graphCounts(gf *C.struct_ggml_cgraph) (nodes, leaves int) {
	nodes = int(C.ggml_graph_n_nodes(gf))
	seen := map[*C.struct_ggml_tensor]bool{}
	for i := 0; i < nodes; i++ {
		node := C.ggml_graph_node(gf, C.int(i))
		for j := 0; j < C.GGML_MAX_SRC; j++ {
			if src := node.src[j]; src != nil && src.op == C.GGML_OP_NONE && !seen[src] {
				seen[src] = true
			}
		}
	}
	return nodes, len(seen)
}

// reset releases the last graph's assignments if there are any.
func (s *Scheduler) reset() {
	if s.allocated != nil {
		C.ggml_backend_sched_reset(s.s)
		s.allocated = nil
	}
}

// Reserve sizes the compute buffers for g's graph (ggml_backend_sched_reserve);
// later graphs no larger than it reuse them.
func (s *Scheduler) Reserve(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	s.reset()
	if !C.ggml_backend_sched_reserve(s.s, g.gf) {
		return fmt.Errorf("ggml: reserving compute buffers: %w", ErrOutOfMemory)
	}
	return nil
}

// ReserveSize returns the compute buffer size each backend (in scheduler
// order) would need for g's graph (ggml_backend_sched_reserve_size), without
// allocating them. It releases the last graph's assignments.
func (s *Scheduler) ReserveSize(g *Context) ([]uint64, error) {
	if err := s.ok(g); err != nil {
		return nil, err
	}
	s.reset()
	s.allocated = nil
	sizes := make([]C.size_t, len(s.backends))
	C.ggml_backend_sched_reserve_size(s.s, g.gf, &sizes[0])
	out := make([]uint64, len(sizes))
	for i, v := range sizes {
		out[i] = uint64(v)
	}
	return out, nil
}

// GraphSize is the number of nodes and leaves of g's graph (0 before Expand).
func (g *Context) GraphSize() int {
	if g == nil || g.gf == nil {
		return 0
	}
	n, l := graphCounts(g.gf)
	return n + l
}

// CPUWorkSize is the work buffer ggml's CPU backend needs to compute g's
// graph on threads threads (ggml_graph_plan's work_size: the right operands
// of matrix products converted to the weights' dot type, and other ops'
// temporaries), which it allocates besides the compute buffers. Nothing is
// allocated or computed; 0 before Expand.
func (g *Context) CPUWorkSize(threads int) uint64 {
	if g == nil || g.gf == nil || g.Closed() {
		return 0
	}
	plan := C.ggml_graph_plan(g.gf, C.int(max(threads, 1)), nil)
	return uint64(plan.work_size)
}

// Alloc assigns backends to g's nodes and allocates them
// (ggml_backend_sched_alloc_graph); inputs can then be set. The previous
// graph's assignments are released first (its tensors lose their data).
func (s *Scheduler) Alloc(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	s.reset()
	if !C.ggml_backend_sched_alloc_graph(s.s, g.gf) {
		C.ggml_backend_sched_reset(s.s)
		return fmt.Errorf("ggml: allocating the graph: %w", ErrOutOfMemory)
	}
	s.allocated = g
	g.sched = s
	return nil
}

// EnableAbort installs an eval callback (ggml_backend_sched_set_eval_callback)
// through which Abort stops a graph between the scheduler's splits: the
// split running when Abort is called finishes (backends that check their
// own abort flag, like the CPU's, stop it sooner), each later split
// computes at most its first node, and Compute returns a StatusError with
// StatusAborted. every > 0 also has the scheduler run each split in pieces
// of every nodes, synchronising the backend after each, so that Abort
// stops a long split between pieces too (at that cost; 0 costs nothing
// while no Abort is pending). Idempotent (the last every holds).
func (s *Scheduler) EnableAbort(every int) error {
	if s == nil || s.s == nil {
		return ErrClosed
	}
	st, err := s.stopState()
	if err != nil {
		return err
	}
	st.every = C.int(max(every, 0))
	return nil
}

// stopState returns the eval callback's state, installing the callback
// the first time.
func (s *Scheduler) stopState() (*C.da3_sched_stop, error) {
	if s.stop == nil {
		s.stop = (*C.da3_sched_stop)(C.calloc(1, C.size_t(unsafe.Sizeof(C.da3_sched_stop{}))))
		if s.stop == nil {
			return nil, fmt.Errorf("ggml: scheduler abort state: %w", ErrOutOfMemory)
		}
		C.da3_sched_enable_stop(s.s, s.stop)
	}
	return s.stop, nil
}

// NodeTime is the time of one node of a profiled Compute (ProfileNodes):
// from the end of the node before to its end, so that the data copies
// between backends and any views before it count too.
type NodeTime struct {
	Op     string         // ggml_op_desc: "MUL_MAT", "ADD", "CUSTOM", a unary op's name …
	Kernel unsafe.Pointer // a CUSTOM node's kernel (its ggml_custom_op_t), else nil
	Shape  [4]int         // the node's ne
	Src    [4]int         // its first source's ne (zeros without one)
	Time   time.Duration
}

// ProfileNodes makes later Computes time every node (NodeTimes), up to the
// scheduler's graph size. The scheduler then computes the nodes one at a
// time, waiting for the backend after each, which costs some speed (tens
// of microseconds a node on the CPU): for profiling, not for timing.
func (s *Scheduler) ProfileNodes(on bool) error {
	if s == nil || s.s == nil {
		return ErrClosed
	}
	st, err := s.stopState()
	if err != nil {
		return err
	}
	if on && st.rec == nil {
		st.rec = (*C.da3_node_time)(C.calloc(C.size_t(s.graphSize), C.size_t(unsafe.Sizeof(C.da3_node_time{}))))
		if st.rec == nil {
			return fmt.Errorf("ggml: scheduler profile records: %w", ErrOutOfMemory)
		}
		st.cap = C.int(s.graphSize)
	}
	st.n = 0
	st.profile = 0
	if on {
		st.profile = 1
	}
	return nil
}

// NodeTimes returns the node times of the last Compute since ProfileNodes
// (nil when not profiling).
func (s *Scheduler) NodeTimes() []NodeTime {
	if s == nil || s.stop == nil || s.stop.profile == 0 {
		return nil
	}
	recs := unsafe.Slice(s.stop.rec, int(s.stop.n))
	out := make([]NodeTime, len(recs))
	for i, r := range recs {
		out[i] = NodeTime{Op: C.GoString(r.op), Kernel: r.fn, Time: time.Duration(r.ns)}
		for j := range 4 {
			out[i].Shape[j], out[i].Src[j] = int(r.ne[j]), int(r.src[j])
		}
	}
	return out
}

// Abort asks the graph the scheduler is computing (or the next one) to stop
// at its next split boundary (see EnableAbort); ClearAbort resets it. Safe
// to call from any goroutine while Compute runs; nothing without
// EnableAbort.
func (s *Scheduler) Abort() {
	if s != nil && s.stop != nil {
		C.da3_sched_set_stop(s.stop, 1)
	}
}

// ClearAbort resets the flag Abort set. Call it only while no graph
// computes.
func (s *Scheduler) ClearAbort() {
	if s != nil && s.stop != nil {
		C.da3_sched_set_stop(s.stop, 0)
		s.stop.after = 0
	}
}

// abortAfter makes the eval callback of the next Compute set the stop flag
// when it has been asked about n nodes: a cancel arriving at a known point
// of a graph, for the tests (cgo cannot be used in test files).
func (s *Scheduler) abortAfter(n int) {
	if s != nil && s.stop != nil {
		s.stop.after = C.int(n)
	}
}

// Compute runs g's graph (ggml_backend_sched_graph_compute), allocating it
// first if Alloc was not called for it (inputs set before that allocation
// are lost: call Alloc, set the inputs, then Compute). A graph can be
// computed again, with its inputs set again first: ggml's allocator lets
// later nodes reuse an input's memory once the nodes that read it are done.
func (s *Scheduler) Compute(g *Context) error {
	if err := s.ok(g); err != nil {
		return err
	}
	if s.allocated != g {
		s.reset()
	}
	s.allocated = g
	g.sched = s
	if s.stop != nil {
		s.stop.stopped, s.stop.seen = 0, 0
		if s.stop.profile != 0 {
			C.da3_prof_begin(s.stop)
		}
	}
	if st := C.ggml_backend_sched_graph_compute(s.s, g.gf); st != C.GGML_STATUS_SUCCESS {
		if st == C.GGML_STATUS_ALLOC_FAILED {
			s.allocated = nil
		}
		return &StatusError{Op: "sched compute", Status: int(st)}
	}
	if s.stop != nil && s.stop.stopped != 0 {
		// The eval callback stopped it: ggml reports success, the outputs
		// are incomplete.
		return &StatusError{Op: "sched compute", Status: StatusAborted}
	}
	return nil
}

// Reset frees the assignments of the last graph so a new one can be allocated
// (ggml_backend_sched_reset).
func (s *Scheduler) Reset() {
	if s != nil && s.s != nil {
		C.ggml_backend_sched_reset(s.s)
		s.allocated = nil
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
	if s.stop != nil {
		C.free(unsafe.Pointer(s.stop.rec))
		C.free(unsafe.Pointer(s.stop))
	}
	s.s, s.cb, s.allocated, s.stop = nil, nil, nil, nil
	return nil
}
