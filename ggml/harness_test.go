package ggml_test

// The op tests build a small graph in a Context, allocate every tensor of it
// in one CPU buffer, copy the inputs in, compute on a CPU backend with all
// cores, and compare each output with a naive float64 reference computed in
// Go from the same inputs. Shapes are in ggml order (ne0 fastest).

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

// nd is a dense float64 tensor in ggml order (ne[0] fastest), the currency of
// the references.
type nd struct {
	ne [4]int
	v  []float64
}

func shape4(shape []int) [4]int {
	ne := [4]int{1, 1, 1, 1}
	copy(ne[:], shape)
	return ne
}

func newND(shape ...int) *nd {
	ne := shape4(shape)
	return &nd{ne: ne, v: make([]float64, ne[0]*ne[1]*ne[2]*ne[3])}
}

func ndFrom(data []float32, shape ...int) *nd {
	a := newND(shape...)
	if len(data) != len(a.v) {
		panic(fmt.Sprintf("ndFrom: %d values for shape %v", len(data), shape))
	}
	for i, x := range data {
		a.v[i] = float64(x)
	}
	return a
}

func (a *nd) idx(i0, i1, i2, i3 int) int {
	return ((i3*a.ne[2]+i2)*a.ne[1]+i1)*a.ne[0] + i0
}

func (a *nd) at(i0, i1, i2, i3 int) float64     { return a.v[a.idx(i0, i1, i2, i3)] }
func (a *nd) set(x float64, i0, i1, i2, i3 int) { a.v[a.idx(i0, i1, i2, i3)] = x }

// each calls fn for every index in memory order.
func (a *nd) each(fn func(i0, i1, i2, i3 int)) {
	for i3 := 0; i3 < a.ne[3]; i3++ {
		for i2 := 0; i2 < a.ne[2]; i2++ {
			for i1 := 0; i1 < a.ne[1]; i1++ {
				for i0 := 0; i0 < a.ne[0]; i0++ {
					fn(i0, i1, i2, i3)
				}
			}
		}
	}
}

// mapv is the element-wise image of a under f.
func (a *nd) mapv(f func(float64) float64) *nd {
	r := &nd{ne: a.ne, v: make([]float64, len(a.v))}
	for i, x := range a.v {
		r.v[i] = f(x)
	}
	return r
}

func (a *nd) f32() []float32 {
	out := make([]float32, len(a.v))
	for i, x := range a.v {
		out[i] = float32(x)
	}
	return out
}

// permute mirrors ggml_permute: axis i of a becomes axis axes[i] of the result.
func (a *nd) permute(axes ...int) *nd {
	ax := [4]int{0, 1, 2, 3}
	copy(ax[:], axes)
	var ne [4]int
	for i := 0; i < 4; i++ {
		ne[ax[i]] = a.ne[i]
	}
	r := newND(ne[:]...)
	a.each(func(i0, i1, i2, i3 int) {
		src := [4]int{i0, i1, i2, i3}
		var d [4]int
		for i := 0; i < 4; i++ {
			d[ax[i]] = src[i]
		}
		r.set(a.at(i0, i1, i2, i3), d[0], d[1], d[2], d[3])
	})
	return r
}

// newRNG is a deterministic generator per test.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// randn returns n standard normal values scaled by s.
func randn(rng *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * s)
	}
	return v
}

// uniform returns n values uniform in [lo, hi).
func uniform(rng *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

func prod(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// roundF16 rounds x to the nearest IEEE half (ties to even), as ggml's f32→f16
// conversion does; values beyond the half range become ±Inf.
func roundF16(x float64) float64 {
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

// harness builds one graph and computes it on the CPU.
type harness struct {
	t     testing.TB
	g     *ggml.Context
	feeds []func() error
}

func newHarness(t testing.TB, maxNodes int) *harness {
	t.Helper()
	g, err := ggml.NewContext(maxNodes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	return &harness{t: t, g: g}
}

// input creates an input tensor of type typ holding data (converted or
// quantized to typ).
func (h *harness) input(typ ggml.Type, data []float32, shape ...int) *ggml.Tensor {
	h.t.Helper()
	require.Equal(h.t, prod(shape), len(data), "input data for shape %v", shape)
	x := h.g.Input(h.g.NewTensor(typ, shape...))
	h.feeds = append(h.feeds, func() error { return x.SetFloat32s(data) })
	return x
}

// rand creates an F32 input of standard normal values and returns it with its
// reference copy.
func (h *harness) rand(rng *rand.Rand, shape ...int) (*ggml.Tensor, *nd) {
	data := randn(rng, prod(shape), 1)
	return h.input(ggml.TypeF32, data, shape...), ndFrom(data, shape...)
}

// inputI32 creates an I32 input.
func (h *harness) inputI32(data []int32, shape ...int) *ggml.Tensor {
	h.t.Helper()
	require.Equal(h.t, prod(shape), len(data))
	x := h.g.Input(h.g.NewTensor(ggml.TypeI32, shape...))
	h.feeds = append(h.feeds, func() error { return x.SetInt32s(data) })
	return x
}

// newCPUBackend opens a CPU backend using every core, closed at cleanup.
func newCPUBackend(t testing.TB) *ggml.Backend {
	t.Helper()
	be, err := ggml.CPUDevice().NewBackend()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, be.Close()) })
	ok, err := be.SetThreads(runtime.NumCPU())
	require.NoError(t, err)
	require.True(t, ok, "the CPU backend sets its thread count")
	return be
}

// compute marks outs as outputs, allocates the graph on the CPU buffer type,
// feeds the inputs, computes and returns the outputs as float32.
func (h *harness) compute(outs ...*ggml.Tensor) [][]float32 {
	h.t.Helper()
	for _, o := range outs {
		h.g.Output(o)
	}
	h.g.Expand(outs...)
	buf, err := h.g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(h.t, err)
	defer buf.Close()
	for _, f := range h.feeds {
		require.NoError(h.t, f())
	}
	require.NoError(h.t, newCPUBackend(h.t).Compute(h.g))
	res := make([][]float32, len(outs))
	for i, o := range outs {
		require.True(h.t, o.IsContiguous(), "output %d must be contiguous (Cont it)", i)
		res[i], err = o.Float32s()
		require.NoError(h.t, err)
	}
	return res
}

// opCase is one op test: build creates the inputs and the node and returns
// it with the reference result.
type opCase struct {
	name       string
	build      func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd)
	atol, rtol float64
}

func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 64)
			got, want := tc.build(h, newRNG(uint64(i+1)))
			require.Equal(t, want.ne, dims4(got), "shape")
			out := h.compute(got)[0]
			testutil.AllClose(t, want.f32(), out, tc.atol, tc.rtol)
		})
	}
}

// dims4 is the tensor's shape as [ne0, ne1, ne2, ne3].
func dims4(x *ggml.Tensor) [4]int { return [4]int{x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)} }
