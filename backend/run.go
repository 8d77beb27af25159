package backend

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Builder collects a graph's host inputs and outputs while model code builds
// it. It implements nn.Builder.
type Builder struct {
	G       *ggml.Context
	inputs  []hostInput
	byName  map[string]*ggml.Tensor
	outputs map[string]*ggml.Tensor
	taps    func(name string) bool
	measure bool // Measure: inputs carry no data
}

type hostInput struct {
	t   *ggml.Tensor
	f32 []float32
	i32 []int32
}

// Input adds an F32 input tensor whose data is copied in before compute.
// Inputs are shared by name: a second call with the same name returns the
// first tensor (the data must be the same).
func (b *Builder) Input(name string, data []float32, shape ...int) *ggml.Tensor {
	return b.input(name, hostInput{f32: data}, ggml.TypeF32, len(data), shape)
}

// InputI32 adds an I32 input tensor, shared by name as Input's.
func (b *Builder) InputI32(name string, data []int32, shape ...int) *ggml.Tensor {
	return b.input(name, hostInput{i32: data}, ggml.TypeI32, len(data), shape)
}

// input adds the input in of type typ holding n values, or returns the input
// of that name.
func (b *Builder) input(name string, in hostInput, typ ggml.Type, n int, shape []int) *ggml.Tensor {
	if t, ok := b.byName[name]; ok {
		return t
	}
	t := b.G.Input(b.G.NewTensor(typ, shape...)).SetName(name)
	if t.Elements() != n && !(b.measure && n == 0) {
		panic(&ggml.ShapeError{Op: "input " + name, Shapes: [][]int{shape}, Msg: fmt.Sprintf("shape holds %d values, data has %d", t.Elements(), n)})
	}
	in.t = t
	b.inputs = append(b.inputs, in)
	b.byName[name] = t
	return t
}

// Output marks t as a result named name; Run returns its data.
func (b *Builder) Output(name string, t *ggml.Tensor) *ggml.Tensor {
	b.G.Output(t)
	b.G.Expand(t)
	b.outputs[name] = t
	return t
}

// Tap is Output for intermediate tensors, active only for the names the run's
// Taps option selects.
func (b *Builder) Tap(name string, t *ggml.Tensor) *ggml.Tensor {
	if b.taps != nil && b.taps(name) {
		return b.Output(name, t.Cont(b.G))
	}
	return t
}

// Tapping reports whether Tap(name, ...) adds an output (nn.Builder).
func (b *Builder) Tapping(name string) bool { return b.taps != nil && b.taps(name) }

// CheckPrefix starts the names of the outputs Check adds.
const CheckPrefix = "check."

// Check adds sums of t's values as the output CheckPrefix+name: a cheap
// probe that is NaN or Inf when any value of t is (with the CPU kernels,
// the sums of 16 runs of t, on all threads; else one sum).
func (b *Builder) Check(name string, t *ggml.Tensor) {
	if kernels.PolicyOf(b.G).Strips && kernels.SumPartsFits(t) {
		b.Output(CheckPrefix+name, kernels.SumParts(b.G, t, 16))
		return
	}
	b.Output(CheckPrefix+name, t.Sum(b.G))
}

// Tensor is a result read back from the device.
type Tensor struct {
	Data  []float32
	Shape []int // ggml order
}

// RunOptions configure one Run.
type RunOptions struct {
	// MaxNodes is the graph's node budget (default 8192).
	MaxNodes int
	// Taps selects the intermediate tensors (Builder.Tap names) to return.
	Taps func(name string) bool
	// Progress, when set, is called from another goroutine about ten times
	// a second while the graph computes, with the nodes computed so far and
	// the graph's computing nodes, and once with done == total at the end.
	// The count is node by node on the CPU; on other devices, whose
	// backends do not count, it moves at the end only.
	Progress func(done, total int)
}

// Run builds a graph with build, allocates it through the scheduler, feeds
// its inputs, computes it and returns its outputs by name. Shape errors
// raised while building are returned as errors. Calls are serialised.
func (rt *Runtime) Run(ctx context.Context, opts RunOptions, build func(b *Builder) error) (out map[string]Tensor, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil, ErrClosed
	}
	maxNodes := opts.MaxNodes
	if maxNodes <= 0 {
		maxNodes = 8192
	}
	g, err := ggml.NewContext(maxNodes)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	kernels.SetPolicy(g, rt.kernels)
	kernels.SetPacked(g, rt.packed)
	if rt.wino != nil && rt.kernels.Winograd {
		kernels.SetWinogradCache(g, rt.wino)
		defer func() { // before g closes; the transforms its nodes stored count only if the run succeeded
			if e := kernels.GraphDone(g, err == nil); e != nil && err == nil {
				err = e
			}
		}()
	}
	g.SetAbort(rt.cpu) // the custom kernels poll it: a cancel stops a long node too
	b := &Builder{G: g, byName: map[string]*ggml.Tensor{}, outputs: map[string]*ggml.Tensor{}, taps: opts.Taps}
	if err := buildSafely(b, build); err != nil {
		return nil, err
	}
	if len(b.outputs) == 0 {
		return nil, errors.New("graph has no outputs")
	}
	if err := rt.ensureSched(g.GraphSize()); err != nil {
		return nil, err
	}
	rt.sched.Reset()
	if err := rt.sched.Alloc(g); err != nil {
		return nil, rt.allocError(err)
	}
	rt.recordStats(g)
	for _, in := range b.inputs {
		var err error
		if in.f32 != nil {
			err = in.t.SetFloat32s(in.f32)
		} else {
			err = in.t.SetInt32s(in.i32)
		}
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", in.t.Name(), err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	faults := kernels.Faults()
	if err := rt.compute(ctx, g, opts.Progress); err != nil {
		return nil, err
	}
	if err := kernels.FaultsSince(faults); err != nil {
		return nil, fmt.Errorf("compute: %w", err)
	}
	if rt.profiling {
		rt.gatherOps()
	}
	out = make(map[string]Tensor, len(b.outputs))
	for name, t := range b.outputs {
		if !t.IsContiguous() {
			return nil, fmt.Errorf("output %q is not contiguous", name)
		}
		data, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		out[name] = Tensor{Data: data, Shape: t.Shape()}
	}
	return out, nil
}

// compute runs g and stops it when ctx is cancelled: a watcher sets the
// backends' abort flags, which ggml's CPU backend checks after every node
// and the custom kernels between blocks of rows or tiles (so a single long
// node stops too), and the scheduler's, which its eval callback checks
// between splits (devices without an abort callback stop there: the split
// running finishes, each later one computes at most one node); the error
// is then ctx's.
func (rt *Runtime) compute(ctx context.Context, g *ggml.Context, progress func(done, total int)) (err error) {
	if progress != nil {
		finish := rt.report(g.ComputeNodes(), progress)
		defer func() { finish(err == nil) }()
	}
	if ctx.Done() == nil {
		return rt.sched.Compute(g)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			rt.sched.Abort()
			if !rt.schedAbortOnly {
				for _, b := range rt.backends() {
					b.Abort()
				}
			}
		case <-stop:
		}
	}()
	err = rt.sched.Compute(g)
	close(stop)
	<-done
	rt.sched.ClearAbort()
	for _, b := range rt.backends() {
		b.ClearAbort()
	}
	var se *ggml.StatusError
	if err != nil && errors.As(err, &se) && se.Status == ggml.StatusAborted && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// report calls progress with the CPU backend's node count every 100 ms
// until the returned stop is called, which returns once no call is in
// flight, after a last call with done == total when the graph completed.
func (rt *Runtime) report(total int, progress func(done, total int)) (finish func(completed bool)) {
	rt.cpu.ResetNodes()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				progress(min(int(rt.cpu.NodesDone()), total), total)
			}
		}
	}()
	return func(completed bool) {
		close(quit)
		<-done
		if completed {
			progress(total, total)
		}
	}
}

// Measurement is the memory a graph needs, from the scheduler's planning.
type Measurement struct {
	// Compute is the compute buffer size per backend name.
	Compute map[string]uint64
	// Device is the compute buffer on the chosen device when it is not the
	// CPU (0 on the CPU); Host is the CPU's.
	Device, Host uint64
	// Work is the work buffer ggml's CPU backend allocates besides the
	// compute buffers to run the graph's CPU nodes (ggml_graph_plan: the
	// right operands of matrix products converted to the weights' dot
	// type, transposed-convolution copies, softmax rows), kept between
	// runs like them; 0 off the CPU (the device's CPU fallbacks are small).
	Work uint64
	// Nodes is the graph's size in nodes and leaves.
	Nodes int
}

// Measure builds a graph as Run does (inputs may be given nil data) and
// plans it through the scheduler (ggml_backend_sched_reserve_size) without
// allocating or computing anything. Run's scheduler keeps the buffers of
// the largest graph it ran, so a later Run of a graph no larger than those
// measured needs nothing more.
func (rt *Runtime) Measure(opts RunOptions, build func(b *Builder) error) (Measurement, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return Measurement{}, ErrClosed
	}
	maxNodes := opts.MaxNodes
	if maxNodes <= 0 {
		maxNodes = 8192
	}
	g, err := ggml.NewContext(maxNodes)
	if err != nil {
		return Measurement{}, err
	}
	defer g.Close()
	kernels.SetPolicy(g, rt.kernels)
	kernels.SetPacked(g, rt.packed)
	b := &Builder{G: g, byName: map[string]*ggml.Tensor{}, outputs: map[string]*ggml.Tensor{}, taps: opts.Taps, measure: true}
	if err := buildSafely(b, build); err != nil {
		return Measurement{}, err
	}
	if len(b.outputs) == 0 {
		return Measurement{}, errors.New("graph has no outputs")
	}
	// A scheduler of its own: planning a graph replaces the running
	// scheduler's plan and frees its buffers without making it reallocate.
	n := g.GraphSize()
	sched, err := ggml.NewScheduler(rt.backends(), n+n/4+256)
	if err != nil {
		return Measurement{}, err
	}
	defer sched.Close()
	sizes, err := sched.ReserveSize(g)
	if err != nil {
		return Measurement{}, err
	}
	m := Measurement{Compute: map[string]uint64{}, Nodes: n}
	if rt.IsCPU() {
		m.Work = g.CPUWorkSize(rt.Threads())
	}
	for i, be := range sched.Backends() {
		m.Compute[be.Name()] += sizes[i]
		if be == rt.cpu {
			m.Host += sizes[i]
		} else {
			m.Device += sizes[i]
		}
	}
	return m, nil
}

// ComputeBytes is the size of the compute buffers held now (kept from the
// largest graph run so far): host (CPU) and device.
func (rt *Runtime) ComputeBytes() (host, device uint64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sched == nil {
		return 0, 0
	}
	for _, be := range rt.backends() {
		if be == rt.cpu {
			host += rt.sched.BufferSize(be)
		} else {
			device += rt.sched.BufferSize(be)
		}
	}
	return host, device
}

func buildSafely(b *Builder, build func(b *Builder) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*ggml.ShapeError); ok {
				err = fmt.Errorf("building graph: %w", se)
				return
			}
			panic(r)
		}
	}()
	return build(b)
}

// ensureSched makes sure the scheduler takes graphs of n nodes and leaves.
// Its tables take about 20 KiB of address space per node, so it is sized by
// the graphs actually run (a quarter more, to absorb small variations).
func (rt *Runtime) ensureSched(n int) error {
	if rt.sched != nil && rt.schedSize() >= n {
		return nil
	}
	size := n + n/4 + 256
	if rt.sched != nil {
		rt.sched.Close()
		rt.sched = nil
	}
	s, err := ggml.NewScheduler(rt.backends(), size)
	if err != nil {
		return err
	}
	if err := s.EnableAbort(rt.abortEvery); err != nil {
		s.Close()
		return err
	}
	if err := s.ProfileNodes(rt.profiling); err != nil {
		s.Close()
		return err
	}
	rt.sched = s
	rt.schedNodes = size
	return nil
}

func (rt *Runtime) schedSize() int { return rt.schedNodes }

func (rt *Runtime) allocError(err error) error {
	free, total := rt.dev.Memory()
	return fmt.Errorf("%w (device %s: %.0f MiB free of %.0f MiB): lower the processing resolution, run fewer views per head chunk, or use a smaller or quantized model",
		err, rt.dev.Name(), float64(free)/(1<<20), float64(total)/(1<<20))
}

func (rt *Runtime) recordStats(g *ggml.Context) {
	st := Stats{Nodes: g.Nodes(), Splits: rt.sched.Splits(), ComputeBuffers: map[string]uint64{}, Ops: map[string]int{}}
	for _, be := range rt.backends() {
		st.ComputeBuffers[be.Name()] = rt.sched.BufferSize(be)
	}
	for i := 0; i < g.Nodes(); i++ {
		if op := g.Node(i).Op(); !isView(op) {
			st.Ops[op]++
		}
	}
	if rt.primary != rt.cpu {
		st.Fallbacks = map[string]int{}
		for i := 0; i < g.Nodes(); i++ {
			n := g.Node(i)
			if be := rt.sched.BackendOf(n); be == rt.cpu && !isView(n.Op()) {
				st.Fallbacks[n.Op()]++
			}
		}
		if len(st.Fallbacks) > 0 && !sameKeys(st.Fallbacks, rt.stats.Fallbacks) {
			ops := make([]string, 0, len(st.Fallbacks))
			for op, n := range st.Fallbacks {
				ops = append(ops, fmt.Sprintf("%s×%d", op, n))
			}
			sort.Strings(ops)
			rt.log.Warn("ops fell back to the CPU", "device", rt.dev.Name(), "ops", ops)
		}
	}
	rt.stats = st
}

func isView(op string) bool {
	switch op {
	case "NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE":
		return true
	}
	return false
}

func sameKeys(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
