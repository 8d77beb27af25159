// Package optest is the harness of the op tests of ggml and ggml/kernels:
// build a small graph in a Context, allocate every tensor of it in one CPU
// buffer, copy the inputs in, compute on a CPU backend with all cores, and
// compare each output with a naive float64 reference computed in Go from
// the same inputs. Shapes are in ggml order (ne0 fastest).
package optest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
)

// ND is a dense float64 tensor in ggml order (Ne[0] fastest), the currency
// of the references.
type ND struct {
	Ne [4]int
	V  []float64
}

func shape4(shape []int) [4]int {
	ne := [4]int{1, 1, 1, 1}
	copy(ne[:], shape)
	return ne
}

// NewND is a zero tensor of the given shape (1 to 4 dims).
func NewND(shape ...int) *ND {
	ne := shape4(shape)
	return &ND{Ne: ne, V: make([]float64, ne[0]*ne[1]*ne[2]*ne[3])}
}

// NDFrom is data as a tensor of the given shape.
func NDFrom(data []float32, shape ...int) *ND {
	a := NewND(shape...)
	if len(data) != len(a.V) {
		panic(fmt.Sprintf("NDFrom: %d values for shape %v", len(data), shape))
	}
	for i, x := range data {
		a.V[i] = float64(x)
	}
	return a
}

func (a *ND) idx(i0, i1, i2, i3 int) int {
	return ((i3*a.Ne[2]+i2)*a.Ne[1]+i1)*a.Ne[0] + i0
}

// At is the element at (i0, i1, i2, i3).
func (a *ND) At(i0, i1, i2, i3 int) float64 { return a.V[a.idx(i0, i1, i2, i3)] }

// Set sets the element at (i0, i1, i2, i3).
func (a *ND) Set(x float64, i0, i1, i2, i3 int) { a.V[a.idx(i0, i1, i2, i3)] = x }

// Each calls fn for every index in memory order.
func (a *ND) Each(fn func(i0, i1, i2, i3 int)) {
	for i3 := 0; i3 < a.Ne[3]; i3++ {
		for i2 := 0; i2 < a.Ne[2]; i2++ {
			for i1 := 0; i1 < a.Ne[1]; i1++ {
				for i0 := 0; i0 < a.Ne[0]; i0++ {
					fn(i0, i1, i2, i3)
				}
			}
		}
	}
}

// Map is the element-wise image of a under f.
func (a *ND) Map(f func(float64) float64) *ND {
	r := &ND{Ne: a.Ne, V: make([]float64, len(a.V))}
	for i, x := range a.V {
		r.V[i] = f(x)
	}
	return r
}

// F32 is a's values as float32.
func (a *ND) F32() []float32 {
	out := make([]float32, len(a.V))
	for i, x := range a.V {
		out[i] = float32(x)
	}
	return out
}

// Permute mirrors ggml_permute: axis i of a becomes axis axes[i] of the result.
func (a *ND) Permute(axes ...int) *ND {
	ax := [4]int{0, 1, 2, 3}
	copy(ax[:], axes)
	var ne [4]int
	for i := 0; i < 4; i++ {
		ne[ax[i]] = a.Ne[i]
	}
	r := NewND(ne[:]...)
	a.Each(func(i0, i1, i2, i3 int) {
		src := [4]int{i0, i1, i2, i3}
		var d [4]int
		for i := 0; i < 4; i++ {
			d[ax[i]] = src[i]
		}
		r.Set(a.At(i0, i1, i2, i3), d[0], d[1], d[2], d[3])
	})
	return r
}

// RNG is a deterministic generator per test.
func RNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// Randn returns n standard normal values scaled by s.
func Randn(rng *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * s)
	}
	return v
}

// Uniform returns n values uniform in [lo, hi).
func Uniform(rng *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

// Prod is the number of elements of shape.
func Prod(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// RoundF16 rounds x to the nearest IEEE half (ties to even), as ggml's
// f32→f16 conversion does; values beyond the half range become ±Inf.
func RoundF16(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	_, e := math.Frexp(x) // |x| = f·2^e, f in [0.5, 1)
	e--                   // |x| in [2^e, 2^(e+1))
	if e < -14 {
		e = -14 // subnormal halves share the 2^-24 spacing
	}
	q := math.Ldexp(1, e-10)
	r := math.RoundToEven(x/q) * q
	if math.Abs(r) > 65504 {
		return math.Inf(int(math.Copysign(1, r)))
	}
	return r
}

// Harness builds one graph in G and computes it on the CPU.
type Harness struct {
	T     testing.TB
	G     *ggml.Context
	feeds []func() error
}

// NewHarness creates a context for maxNodes tensors, closed at cleanup.
func NewHarness(t testing.TB, maxNodes int) *Harness {
	t.Helper()
	g, err := ggml.NewContext(maxNodes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	return &Harness{T: t, G: g}
}

// Input creates an input tensor of type typ holding data (converted or
// quantized to typ).
func (h *Harness) Input(typ ggml.Type, data []float32, shape ...int) *ggml.Tensor {
	h.T.Helper()
	require.Equal(h.T, Prod(shape), len(data), "input data for shape %v", shape)
	x := h.G.Input(h.G.NewTensor(typ, shape...))
	h.feeds = append(h.feeds, func() error { return x.SetFloat32s(data) })
	return x
}

// Rand creates an F32 input of standard normal values and returns it with
// its reference copy.
func (h *Harness) Rand(rng *rand.Rand, shape ...int) (*ggml.Tensor, *ND) {
	data := Randn(rng, Prod(shape), 1)
	return h.Input(ggml.TypeF32, data, shape...), NDFrom(data, shape...)
}

// InputI32 creates an I32 input.
func (h *Harness) InputI32(data []int32, shape ...int) *ggml.Tensor {
	h.T.Helper()
	require.Equal(h.T, Prod(shape), len(data))
	x := h.G.Input(h.G.NewTensor(ggml.TypeI32, shape...))
	h.feeds = append(h.feeds, func() error { return x.SetInt32s(data) })
	return x
}

// Feed copies the inputs' data into their (allocated) tensors.
func (h *Harness) Feed() error {
	for _, f := range h.feeds {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// NewCPUBackend opens a CPU backend with threads threads (0: every core),
// closed at cleanup.
func NewCPUBackend(t testing.TB, threads int) *ggml.Backend {
	t.Helper()
	be, err := ggml.CPUDevice().NewBackend()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, be.Close()) })
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	ok, err := be.SetThreads(threads)
	require.NoError(t, err)
	require.True(t, ok, "the CPU backend sets its thread count")
	return be
}

// Alloc marks outs as outputs, allocates the graph in one CPU buffer (closed
// at cleanup) and feeds the inputs.
func (h *Harness) Alloc(outs ...*ggml.Tensor) {
	h.T.Helper()
	for _, o := range outs {
		h.G.Output(o)
	}
	h.G.Expand(outs...)
	buf, err := h.G.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(h.T, err)
	h.T.Cleanup(func() { buf.Close() })
	require.NoError(h.T, h.Feed())
}

// Compute allocates the graph with outs as outputs, computes it on a CPU
// backend with every core and returns the outputs as float32.
func (h *Harness) Compute(outs ...*ggml.Tensor) [][]float32 {
	h.T.Helper()
	h.Alloc(outs...)
	require.NoError(h.T, NewCPUBackend(h.T, 0).Compute(h.G))
	res := make([][]float32, len(outs))
	for i, o := range outs {
		require.True(h.T, o.IsContiguous(), "output %d must be contiguous (Cont it)", i)
		var err error
		res[i], err = o.Float32s()
		require.NoError(h.T, err)
	}
	return res
}

// Case is one op test: Build creates the inputs and the node and returns it
// with the reference result.
type Case struct {
	Name       string
	Build      func(h *Harness, rng *rand.Rand) (*ggml.Tensor, *ND)
	Atol, Rtol float64
}

// RunCases runs each case as a subtest (seeded by its index).
func RunCases(t *testing.T, cases []Case) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			h := NewHarness(t, 64)
			got, want := tc.Build(h, RNG(uint64(i+1)))
			require.Equal(t, want.Ne, Dims4(got), "shape")
			out := h.Compute(got)[0]
			testutil.AllClose(t, want.F32(), out, tc.Atol, tc.Rtol)
		})
	}
}

// Dims4 is the tensor's shape as [ne0, ne1, ne2, ne3].
func Dims4(x *ggml.Tensor) [4]int { return [4]int{x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)} }

// Bench allocates the graph with out as its output on the CPU, feeds the
// inputs, and times Compute on every core, reporting GFLOP/s for flops
// floating-point operations per run.
func (h *Harness) Bench(b *testing.B, out *ggml.Tensor, flops float64) {
	b.Helper()
	h.Alloc(out)
	be := NewCPUBackend(b, 0)
	require.NoError(b, be.Compute(h.G)) // warm up: thread pool, work buffers
	cpu0 := cpuSeconds()
	b.ResetTimer()
	for b.Loop() {
		if err := be.Compute(h.G); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(runtime.NumCPU()), "threads")
	// CPU time of the process per run: on a machine shared with other work,
	// it moves much less than the wall time (run with taskset -c 0 for one
	// thread: then it is the kernel's time).
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}
