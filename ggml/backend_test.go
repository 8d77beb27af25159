package ggml_test

import (
	"bytes"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/internal/testutil"
)

func TestDevices(t *testing.T) {
	devs := ggml.Devices()
	require.NotEmpty(t, devs)
	var cpus int
	for _, d := range devs {
		assert.NotEmpty(t, d.Name())
		assert.NotEmpty(t, d.Description())
		assert.NotEmpty(t, d.Backend())
		assert.NotEmpty(t, d.Type().String())
		free, total := d.Memory()
		assert.LessOrEqual(t, free, total, d.Name())
		if d.Type() == ggml.DeviceCPU {
			cpus++
			assert.Equal(t, "CPU", d.Name())
			assert.Equal(t, "CPU", d.Backend())
			assert.Greater(t, total, uint64(0), "the CPU reports the host memory")
		}
	}
	assert.Equal(t, 1, cpus, "exactly one CPU device")

	cpu := ggml.CPUDevice()
	assert.Equal(t, ggml.DeviceCPU, cpu.Type())
	bt := cpu.BufferType()
	assert.Equal(t, "CPU", bt.Name())
	assert.True(t, bt.IsHost())
	_, ok := cpu.HostBufferType()
	assert.False(t, ok, "the CPU has no separate pinned host buffer type")
	assert.Equal(t, "none", ggml.BufferType{}.Name())
	assert.False(t, ggml.BufferType{}.IsHost())

	for _, dt := range []ggml.DeviceType{ggml.DeviceCPU, ggml.DeviceGPU, ggml.DeviceIGPU, ggml.DeviceAccel} {
		assert.NotContains(t, dt.String(), "DeviceType(")
	}
	assert.Equal(t, "DeviceType(99)", ggml.DeviceType(99).String())
}

func TestDeviceByName(t *testing.T) {
	for _, name := range []string{"CPU", "cpu", "Cpu"} {
		d, err := ggml.DeviceByName(name)
		require.NoError(t, err, name)
		assert.Equal(t, ggml.DeviceCPU, d.Type())
	}
	_, err := ggml.DeviceByName("CUDA7")
	require.ErrorIs(t, err, ggml.ErrNoDevice)
	assert.Contains(t, err.Error(), `"CUDA7"`)
	assert.Contains(t, err.Error(), "have CPU", "the error lists the devices")
}

func TestSupportsOp(t *testing.T) {
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	x := g.NewTensor(ggml.TypeF32, 8)
	assert.True(t, ggml.CPUDevice().SupportsOp(x.Add(g, x)))
}

func TestLoadBackends(t *testing.T) {
	devs, err := ggml.LoadBackends(filepath.Join(t.TempDir(), "missing"))
	require.NoError(t, err, "a missing directory is not an error")
	assert.Empty(t, devs)
	dir := t.TempDir()
	devs, err = ggml.LoadBackends(dir)
	require.NoError(t, err)
	assert.Empty(t, devs, "an empty directory adds no device")
	devs, err = ggml.LoadBackends(dir)
	require.NoError(t, err, "loading a directory again is a no-op")
	assert.Empty(t, devs)
	assert.NotEmpty(t, ggml.Devices())

	// A library that does not exist is an error, and ggml's complaint
	// reaches the logger of SetLogger; by default it is discarded (slog's
	// default logger sees nothing either).
	var dflt, logs bytes.Buffer
	oldDefault := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&dflt, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(oldDefault)
	assert.Equal(t, slog.DiscardHandler, ggml.Logger().Handler(), "silent by default")
	require.Error(t, ggml.LoadBackend(filepath.Join(dir, "libggml-nope.so")))
	assert.Empty(t, dflt.String(), "ggml's log does not go to slog's default")

	old := ggml.SetLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	err = ggml.LoadBackend(filepath.Join(dir, "libggml-nope2.so"))
	ggml.SetLogger(old)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libggml-nope2.so")
	assert.Contains(t, logs.String(), "src=ggml", "ggml's log is forwarded to SetLogger's logger")
	assert.Contains(t, logs.String(), "libggml-nope2.so")
	assert.Empty(t, dflt.String())
	ggml.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	ggml.SetLogger(nil)
	assert.Equal(t, slog.DiscardHandler, ggml.Logger().Handler(), "nil restores the discarding logger")
}

func TestVersion(t *testing.T) {
	assert.NotEmpty(t, ggml.HeaderVersion())
	assert.NoError(t, ggml.CheckVersion())
	if l := ggml.LinkedVersion(); l != "" {
		assert.Equal(t, l, ggml.HeaderVersion())
	}
	assert.Equal(t, ggml.HasAVX2(), slices.Contains(ggml.CPUFeatures(), "AVX2"))
}

// linearModel is y = GELU(W·x + b) with the weights in their own context and
// buffer, as backend.Weights holds them; graph builds it in a new context.
type linearModel struct {
	w, b    *ggml.Tensor
	wd, bd  []float32
	in, out int
}

func newLinearModel(t *testing.T, in, out int) *linearModel {
	t.Helper()
	wctx, err := ggml.NewContext(2)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, wctx.Close()) })
	rng := optest.RNG(11)
	m := &linearModel{in: in, out: out, wd: optest.Randn(rng, in*out, 1), bd: optest.Randn(rng, out, 1)}
	m.w = wctx.NewTensor(ggml.TypeF32, in, out).SetName("w")
	m.b = wctx.NewTensor(ggml.TypeF32, out).SetName("b")
	buf, err := wctx.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageWeights)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, buf.Close()) })
	require.NoError(t, m.w.SetFloat32s(m.wd))
	require.NoError(t, m.b.SetFloat32s(m.bd))
	return m
}

func (m *linearModel) graph(t *testing.T, tokens int) (g *ggml.Context, x, y *ggml.Tensor) {
	t.Helper()
	g, err := ggml.NewContext(16)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	x = g.Input(g.NewTensor(ggml.TypeF32, m.in, tokens)).SetName("x")
	y = g.Output(m.w.MulMat(g, x).Add(g, m.b).GELUErf(g).SetName("y"))
	g.Expand(y)
	return g, x, y
}

func (m *linearModel) ref(x []float32, tokens int) *optest.ND {
	r := optest.MulMatRef(optest.NDFrom(m.wd, m.in, m.out), optest.NDFrom(x, m.in, tokens))
	r.Each(func(i0, i1, _, _ int) {
		v := r.At(i0, i1, 0, 0) + float64(m.bd[i0])
		r.Set(geluErf(v), i0, i1, 0, 0)
	})
	return r
}

// A tensor names the buffer that holds its data (a view, its source's).
func TestTensorBuffer(t *testing.T) {
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	x := g.NewTensor(ggml.TypeF32, 4, 2)
	assert.Equal(t, "", x.BufferName(), "not allocated")
	assert.False(t, x.InHostBuffer())
	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageWeights)
	require.NoError(t, err)
	defer buf.Close()
	assert.Equal(t, "CPU", x.BufferName())
	assert.True(t, x.InHostBuffer())
	v := x.View(g, 0, []int{4}, nil)
	assert.Equal(t, "CPU", v.BufferName(), "a view is in its source's buffer")
	assert.True(t, v.InHostBuffer())
}

func TestScheduler(t *testing.T) {
	m := newLinearModel(t, 24, 10)
	cpu := optest.NewCPUBackend(t, 0)
	s, err := ggml.NewScheduler([]*ggml.Backend{cpu}, 64)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []*ggml.Backend{cpu}, s.Backends())

	g, x, y := m.graph(t, 5)
	require.NoError(t, s.Reserve(g))
	assert.Greater(t, s.BufferSize(cpu), uint64(0), "Reserve sized the compute buffer")

	rng := optest.RNG(12)
	for run := 0; run < 2; run++ {
		// The same graph twice with different inputs: allocated once, then
		// recomputed.
		if run == 0 {
			require.NoError(t, s.Alloc(g))
		}
		xd := optest.Randn(rng, 24*5, 1)
		require.NoError(t, x.SetFloat32s(xd))
		require.NoError(t, s.Compute(g))
		got, err := y.Float32s()
		require.NoError(t, err)
		testutil.AllClose(t, m.ref(xd, 5).F32(), got, 1e-5, 1e-5, "run %d", run)
	}
	assert.Same(t, cpu, s.BackendOf(y))
	assert.GreaterOrEqual(t, s.Splits(), 1)
	assert.Nil(t, s.BackendOf(nil))

	// Alloc twice in a row (ggml would abort) and a second graph of another
	// shape in a new context: the scheduler resets in between.
	require.NoError(t, s.Alloc(g))
	g2, x2, y2 := m.graph(t, 3)
	xd := optest.Randn(rng, 24*3, 1)
	require.NoError(t, s.Alloc(g2))
	require.NoError(t, x2.SetFloat32s(xd))
	require.NoError(t, s.Compute(g2))
	got, err := y2.Float32s()
	require.NoError(t, err)
	testutil.AllClose(t, m.ref(xd, 3).F32(), got, 1e-5, 1e-5)

	// Computing the first graph again reallocates it (its inputs must be
	// set again after Alloc); without the binding's reset ggml would
	// recompute the second graph.
	require.NoError(t, s.Alloc(g))
	xd = optest.Randn(rng, 24*5, 1)
	require.NoError(t, x.SetFloat32s(xd))
	require.NoError(t, s.Compute(g))
	got, err = y.Float32s()
	require.NoError(t, err)
	testutil.AllClose(t, m.ref(xd, 5).F32(), got, 1e-5, 1e-5)

	s.Reset()
	require.NoError(t, s.Compute(g2), "Compute allocates a graph that was not allocated")
}

func geluErf(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }

func TestSchedulerViewOutput(t *testing.T) {
	// Clamp's result is a view of a copy; as an output through the graph
	// allocator it must survive the later nodes.
	cpu := optest.NewCPUBackend(t, 0)
	s, err := ggml.NewScheduler([]*ggml.Backend{cpu}, 64)
	require.NoError(t, err)
	defer s.Close()
	g, err := ggml.NewContext(16)
	require.NoError(t, err)
	defer g.Close()
	x := g.Input(g.NewTensor(ggml.TypeF32, 64))
	c := g.Output(x.Scale(g, 3).Clamp(g, -1, 1))
	z := g.Output(x.Scale(g, 5).Sqr(g).Scale(g, 0.5).Sqr(g))
	g.Expand(c, z)
	require.NoError(t, s.Alloc(g))
	xd := optest.Randn(optest.RNG(13), 64, 1)
	require.NoError(t, x.SetFloat32s(xd))
	require.NoError(t, s.Compute(g))
	got, err := c.Float32s()
	require.NoError(t, err)
	want := optest.NDFrom(xd, 64).Map(func(v float64) float64 { return min(max(3*v, -1), 1) })
	testutil.AllClose(t, want.F32(), got, 1e-6, 1e-6)
}

func TestSchedulerErrors(t *testing.T) {
	_, err := ggml.NewScheduler(nil, 16)
	assert.Error(t, err)
	cpu := optest.NewCPUBackend(t, 0)
	many := make([]*ggml.Backend, 17)
	for i := range many {
		many[i] = cpu
	}
	_, err = ggml.NewScheduler(many, 16)
	assert.ErrorContains(t, err, "at most 16")

	s, err := ggml.NewScheduler([]*ggml.Backend{cpu}, 8)
	require.NoError(t, err)
	defer s.Close()
	g, err := ggml.NewContext(16)
	require.NoError(t, err)
	defer g.Close()
	assert.ErrorContains(t, s.Reserve(g), "no graph")

	// A graph larger than the scheduler's size is refused (ggml would abort).
	x := g.Input(g.NewTensor(ggml.TypeF32, 4))
	for range 10 {
		x = x.Scale(g, 2)
	}
	g.Expand(x)
	assert.ErrorContains(t, s.Reserve(g), "exceeds the scheduler's graph size 8")
	assert.ErrorContains(t, s.Alloc(g), "exceeds")
	assert.ErrorContains(t, s.Compute(g), "exceeds")
}

func TestSchedulerClose(t *testing.T) {
	m := newLinearModel(t, 8, 4)
	cpu := optest.NewCPUBackend(t, 0)
	s, err := ggml.NewScheduler([]*ggml.Backend{cpu}, 64)
	require.NoError(t, err)
	g, x, y := m.graph(t, 2)
	require.NoError(t, s.Alloc(g))
	require.NoError(t, x.SetFloat32s(make([]float32, 16)))
	require.NoError(t, s.Compute(g))

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice")
	require.NoError(t, (*ggml.Scheduler)(nil).Close())
	assert.ErrorIs(t, s.Reserve(g), ggml.ErrClosed)
	assert.ErrorIs(t, s.Alloc(g), ggml.ErrClosed)
	assert.ErrorIs(t, s.Compute(g), ggml.ErrClosed)
	assert.Nil(t, s.BackendOf(y))
	assert.Zero(t, s.BufferSize(cpu))
	assert.Zero(t, s.Splits())
	s.Reset()
	// The tensors it allocated are gone with it.
	_, err = y.Float32s()
	assert.ErrorIs(t, err, ggml.ErrClosed)
	assert.ErrorIs(t, x.SetFloat32s(make([]float32, 16)), ggml.ErrClosed)
	// The weights, in their own buffer, are not.
	w, err := m.w.Float32s()
	require.NoError(t, err)
	assert.Equal(t, m.wd, w)

	// A scheduler whose backend was closed refuses to run.
	be, err := ggml.CPUDevice().NewBackend()
	require.NoError(t, err)
	s2, err := ggml.NewScheduler([]*ggml.Backend{be}, 64)
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, be.Close())
	g2, _, _ := m.graph(t, 2)
	assert.ErrorIs(t, s2.Compute(g2), ggml.ErrClosed)
	assert.ErrorIs(t, s2.Reserve(g2), ggml.ErrClosed)
}

func TestCPUFeaturesNamed(t *testing.T) {
	for _, f := range ggml.CPUFeatures() {
		assert.Equal(t, strings.ToUpper(f), f)
	}
}
