package ggml

// #include <stdlib.h>
// #include "da3_ggml.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Context is a ggml_context arena (always no_alloc: it holds tensor metadata,
// never tensor data) plus the forward graph built in it. Tensors created in it
// are valid until Close. A Context is not safe for concurrent use.
type Context struct {
	c          *C.struct_ggml_context
	mem        unsafe.Pointer // the arena, allocated here: ggml_init asserts when its own malloc fails
	gf         *C.struct_ggml_cgraph
	maxTensors int
	graphSize  int
	tensors    int
	sched      *Scheduler // the scheduler that last allocated the graph, if any
	values     map[any]any
	abort      *C.int // the abort flag custom nodes carry (SetAbort), C memory, or nil
}

// NewContext creates an arena for up to maxNodes tensors and a graph with room
// for them (and for as many leaves again plus weights from other contexts).
// Memory is sized with ggml_tensor_overhead and ggml_graph_overhead_custom.
func NewContext(maxNodes int) (*Context, error) {
	if maxNodes <= 0 {
		return nil, fmt.Errorf("ggml: graph context of %d nodes: the node budget must be positive", maxNodes)
	}
	graphSize := 2*maxNodes + 8192
	size := C.size_t(maxNodes)*C.ggml_tensor_overhead() + C.ggml_graph_overhead_custom(C.size_t(graphSize), false) + 1024
	// ggml_init aborts when it cannot allocate the arena, so the arena is
	// allocated (and its failure reported) here.
	mem := C.malloc(size)
	if mem == nil {
		return nil, fmt.Errorf("ggml: graph context of %d nodes (%.1f MiB): %w", maxNodes, float64(size)/(1<<20), ErrOutOfMemory)
	}
	c := C.ggml_init(C.struct_ggml_init_params{mem_size: size, mem_buffer: mem, no_alloc: true})
	if c == nil {
		C.free(mem)
		return nil, fmt.Errorf("ggml: graph context of %d nodes: %w", maxNodes, ErrOutOfMemory)
	}
	return &Context{c: c, mem: mem, maxTensors: maxNodes, graphSize: graphSize}, nil
}

// CanAllocate reports whether n bytes of host memory can be allocated now
// (a malloc freed at once: with an address-space limit the answer is exact;
// overcommitted memory may still fail later when touched). It guards the C
// allocations that ggml aborts on instead of reporting.
func CanAllocate(n uint64) bool {
	if n == 0 {
		return true
	}
	p := C.malloc(C.size_t(n))
	if p == nil {
		return false
	}
	C.free(p)
	return true
}

// Close frees the arena. It is idempotent and nil-safe; tensors of the
// context must not be used afterwards.
func (g *Context) Close() error {
	if g == nil || g.c == nil {
		return nil
	}
	C.ggml_free(g.c)
	C.free(g.mem)
	g.c, g.gf, g.mem = nil, nil, nil
	return nil
}

// SetValue stores v under key for the code that builds g's graph, as
// context.WithValue does for a request: for example the kernel policy the
// runtime chose for the graph (see ggml/kernels). Keys should be values of
// an unexported type of the package that defines them.
func (g *Context) SetValue(key, v any) {
	g.live("set_value")
	if g.values == nil {
		g.values = map[any]any{}
	}
	g.values[key] = v
}

// Value returns the value stored under key by SetValue, or nil.
func (g *Context) Value(key any) any {
	if g == nil {
		return nil
	}
	return g.values[key]
}

// Closed reports whether Close was called.
func (g *Context) Closed() bool { return g == nil || g.c == nil }

func (g *Context) live(op string) {
	if g == nil || g.c == nil {
		panic(&ShapeError{Op: op, Msg: "the context is closed", Err: ErrClosed})
	}
}

// reserve accounts for n new tensors, panicking before the arena would overflow
// (ggml would abort).
func (g *Context) reserve(op string, n int) {
	g.live(op)
	if g.tensors+n > g.maxTensors {
		panic(&ShapeError{Op: op, Msg: fmt.Sprintf("context node budget of %d exceeded: create the Context with a larger maxNodes", g.maxTensors), Err: ErrNodeBudget})
	}
	g.tensors += n
}

// Tensors is the number of tensors created in g so far.
func (g *Context) Tensors() int {
	if g == nil {
		return 0
	}
	return g.tensors
}

// MaxNodes is the node budget g was created with.
func (g *Context) MaxNodes() int {
	if g == nil {
		return 0
	}
	return g.maxTensors
}

func (g *Context) wrap(op string, p *C.struct_ggml_tensor) *Tensor {
	if p == nil {
		panic(&ShapeError{Op: op, Msg: "ggml returned no tensor"})
	}
	return &Tensor{p: p, ctx: g}
}

// NewTensor creates a tensor of type t with shape ne (ggml order, 1 to 4 dims)
// (ggml_new_tensor). It has no data until allocated in a backend buffer.
func (g *Context) NewTensor(t Type, shape ...int) *Tensor {
	ne := normShape("new_tensor", shape)
	if !t.Valid() {
		panic(&ShapeError{Op: "new_tensor", Msg: fmt.Sprintf("invalid type %d", t)})
	}
	if int(ne[0])%t.BlockSize() != 0 {
		panic(&ShapeError{Op: "new_tensor", Shapes: [][]int{shape}, Msg: fmt.Sprintf("ne0=%d is not a multiple of the %s block size %d", ne[0], t, t.BlockSize())})
	}
	g.reserve("new_tensor", 1)
	p := C.ggml_new_tensor(g.c, C.enum_ggml_type(t), C.int(len(shape)), (*C.int64_t)(unsafe.Pointer(&ne[0])))
	return g.wrap("new_tensor", p)
}

// Input marks t as a graph input (ggml_set_input) and returns it.
func (g *Context) Input(t *Tensor) *Tensor {
	g.live("set_input")
	notNil("set_input", t)
	C.ggml_set_input(t.p)
	return t
}

// Output marks t as a graph output (ggml_set_output): its memory is not reused
// by later nodes, so it can be read after compute. It returns t.
func (g *Context) Output(t *Tensor) *Tensor {
	g.live("set_output")
	notNil("set_output", t)
	C.ggml_set_output(t.p)
	return t
}

func (g *Context) graph() *C.struct_ggml_cgraph {
	g.live("graph")
	if g.gf == nil {
		g.gf = C.ggml_new_graph_custom(g.c, C.size_t(g.graphSize), false)
		if g.gf == nil {
			panic(&ShapeError{Op: "graph", Msg: "no room for the graph in the context"})
		}
	}
	return g.gf
}

// Expand adds ts and everything they depend on to g's forward graph
// (ggml_build_forward_expand). Results to be read back should also be marked
// with Output.
func (g *Context) Expand(ts ...*Tensor) {
	gf := g.graph()
	for _, t := range ts {
		notNil("build_forward_expand", t)
		C.ggml_build_forward_expand(gf, t.p)
	}
}

// Nodes is the number of nodes in g's graph.
func (g *Context) Nodes() int {
	if g == nil || g.gf == nil {
		return 0
	}
	return int(C.ggml_graph_n_nodes(g.gf))
}

// ComputeNodes is the number of nodes in g's graph that compute something
// (not a view, reshape, permute or transpose, which ggml's CPU backend
// skips): what Backend.NodesDone counts when the whole graph runs on the CPU.
func (g *Context) ComputeNodes() int {
	n := 0
	for i := range g.Nodes() {
		switch C.ggml_graph_node(g.gf, C.int(i)).op {
		case C.GGML_OP_NONE, C.GGML_OP_RESHAPE, C.GGML_OP_TRANSPOSE, C.GGML_OP_VIEW, C.GGML_OP_PERMUTE:
		default:
			n++
		}
	}
	return n
}

// Node returns the i-th graph node (0 <= i < Nodes()).
func (g *Context) Node(i int) *Tensor {
	g.live("graph_node")
	if g.gf == nil || i < 0 || i >= g.Nodes() {
		panic(&ShapeError{Op: "graph_node", Msg: fmt.Sprintf("node %d out of range [0,%d)", i, g.Nodes())})
	}
	return &Tensor{p: C.ggml_graph_node(g.gf, C.int(i)), ctx: g}
}

// TensorByName finds a tensor of the context by name (ggml_get_tensor), or nil.
func (g *Context) TensorByName(name string) *Tensor {
	g.live("get_tensor")
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.ggml_get_tensor(g.c, cs)
	if p == nil {
		return nil
	}
	return &Tensor{p: p, ctx: g}
}

// EachTensor calls fn for every tensor of the context, in creation order.
func (g *Context) EachTensor(fn func(t *Tensor)) {
	g.live("get_first_tensor")
	for p := C.ggml_get_first_tensor(g.c); p != nil; p = C.ggml_get_next_tensor(g.c, p) {
		fn(&Tensor{p: p, ctx: g})
	}
}
