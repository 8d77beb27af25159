package ggml_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// shapePanic runs fn and returns the *ggml.ShapeError it panicked with, or
// nil (and a test failure) when it did not panic with one.
func shapePanic(t *testing.T, fn func()) (se *ggml.ShapeError) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Errorf("no panic")
			return
		}
		var ok bool
		if se, ok = r.(*ggml.ShapeError); !ok {
			t.Errorf("panic with %T (%v), want *ggml.ShapeError", r, r)
		}
	}()
	fn()
	return nil
}

// TestShapeErrors checks that each op whose operands violate a ggml
// precondition panics with a *ShapeError naming the op before ggml is
// called: a failed GGML_ASSERT would abort this test binary, and no node is
// added to the context.
func TestShapeErrors(t *testing.T) {
	f32 := func(g *ggml.Context, shape ...int) *ggml.Tensor { return g.NewTensor(ggml.TypeF32, shape...) }
	typed := func(g *ggml.Context, typ ggml.Type, shape ...int) *ggml.Tensor { return g.NewTensor(typ, shape...) }
	i32 := func(g *ggml.Context, shape ...int) *ggml.Tensor { return g.NewTensor(ggml.TypeI32, shape...) }
	cases := []struct {
		name string
		op   string // ShapeError.Op
		fn   func(g *ggml.Context)
	}{
		{"NewTensor 5 dims", "new_tensor", func(g *ggml.Context) { f32(g, 1, 2, 3, 4, 5) }},
		{"NewTensor no dims", "new_tensor", func(g *ggml.Context) { f32(g) }},
		{"NewTensor negative", "new_tensor", func(g *ggml.Context) { f32(g, 3, -1) }},
		{"NewTensor block size", "new_tensor", func(g *ggml.Context) { typed(g, ggml.TypeQ8_0, 33, 2) }},
		{"NewTensor invalid type", "new_tensor", func(g *ggml.Context) { typed(g, ggml.Type(4), 8) }},
		{"MulMat inner dims", "mul_mat", func(g *ggml.Context) { f32(g, 4, 3).MulMat(g, f32(g, 5, 3)) }},
		{"MulMat batch", "mul_mat", func(g *ggml.Context) { f32(g, 4, 3, 2).MulMat(g, f32(g, 4, 3, 3)) }},
		{"MulMat transposed weight", "mul_mat", func(g *ggml.Context) { w := f32(g, 3, 4); w.Transpose(g).MulMat(g, f32(g, 3, 2)) }},
		{"MulMat permuted weight rows", "mul_mat", func(g *ggml.Context) { f32(g, 4, 3, 2).Permute(g, 2, 0, 1).MulMat(g, f32(g, 3, 5)) }},
		{"MulMat transposed input", "mul_mat", func(g *ggml.Context) { f32(g, 4, 3).MulMat(g, f32(g, 5, 4).Transpose(g)) }},
		{"MulMat f16 input of q8_0", "mul_mat", func(g *ggml.Context) {
			typed(g, ggml.TypeQ8_0, 32, 3).MulMat(g, typed(g, ggml.TypeF16, 32, 2))
		}},
		{"Add not broadcastable", "add", func(g *ggml.Context) { f32(g, 4, 3).Add(g, f32(g, 3, 3)) }},
		{"Add bigger second operand", "add", func(g *ggml.Context) { f32(g, 4, 1).Add(g, f32(g, 4, 3)) }},
		{"Add transposed first", "add", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).Add(g, f32(g, 3, 4)) }},
		{"Mul broadcast non-contiguous", "mul", func(g *ggml.Context) { f32(g, 3, 4).Mul(g, f32(g, 2, 3).Transpose(g)) }},
		{"Sub types", "sub", func(g *ggml.Context) { f32(g, 4).Sub(g, typed(g, ggml.TypeF16, 4)) }},
		{"Div i32", "div", func(g *ggml.Context) { i32(g, 4).Div(g, i32(g, 4)) }},
		{"Add nil", "add", func(g *ggml.Context) { f32(g, 4).Add(g, nil) }},
		{"Scale non-contiguous", "scale", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).Scale(g, 2) }},
		{"Reshape count", "reshape", func(g *ggml.Context) { f32(g, 4, 3).Reshape(g, 5, 2) }},
		{"Reshape two -1", "reshape", func(g *ggml.Context) { f32(g, 4, 3).Reshape(g, -1, -1) }},
		{"Reshape -1 remainder", "reshape", func(g *ggml.Context) { f32(g, 4, 3).Reshape(g, 5, -1) }},
		{"Reshape non-contiguous", "reshape", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).Reshape(g, 12) }},
		{"Reshape 5 dims", "reshape", func(g *ggml.Context) { f32(g, 4, 3).Reshape(g, 1, 1, 1, 3, 4) }},
		{"View past end", "view", func(g *ggml.Context) { f32(g, 4, 3).View(g, 4, []int{12}, nil) }},
		{"View strides past end", "view", func(g *ggml.Context) { x := f32(g, 4, 3); x.View(g, 0, []int{4, 2}, []int{3 * x.Stride(1)}) }},
		{"View negative offset", "view", func(g *ggml.Context) { f32(g, 4, 3).View(g, -4, []int{2}, nil) }},
		{"View stride count", "view", func(g *ggml.Context) { f32(g, 4, 3).View(g, 0, []int{2, 2}, []int{16, 32}) }},
		{"Permute repeated axis", "permute", func(g *ggml.Context) { f32(g, 4, 3).Permute(g, 1, 1, 2, 3) }},
		{"Permute axis out of range", "permute", func(g *ggml.Context) { f32(g, 4, 3).Permute(g, 0, 4) }},
		{"Concat mismatch", "concat", func(g *ggml.Context) { f32(g, 4, 3).Concat(g, f32(g, 4, 2), 0) }},
		{"Concat types", "concat", func(g *ggml.Context) { f32(g, 4, 3).Concat(g, typed(g, ggml.TypeF16, 4, 3), 1) }},
		{"Concat dim", "concat", func(g *ggml.Context) { f32(g, 4, 3).Concat(g, f32(g, 4, 3), 4) }},
		{"Repeat not a multiple", "repeat", func(g *ggml.Context) { f32(g, 3).Repeat(g, f32(g, 4)) }},
		{"Cpy count", "cpy", func(g *ggml.Context) { f32(g, 4, 3).Cpy(g, f32(g, 11)) }},
		{"Cpy to iq2_xxs", "cpy", func(g *ggml.Context) { f32(g, 256).Cpy(g, typed(g, ggml.TypeIQ2XXS, 256)) }},
		{"Cast q8_0 to f16", "cast", func(g *ggml.Context) { typed(g, ggml.TypeQ8_0, 32).Cast(g, ggml.TypeF16) }},
		{"Cast block size", "cast", func(g *ggml.Context) { f32(g, 33).Cast(g, ggml.TypeQ8_0) }},
		{"GetRows index type", "get_rows", func(g *ggml.Context) { f32(g, 4, 5).GetRows(g, f32(g, 2)) }},
		{"GetRows index shape", "get_rows", func(g *ggml.Context) { f32(g, 4, 5, 2).GetRows(g, i32(g, 2, 3)) }},
		{"SoftMaxExt mask width", "soft_max_ext", func(g *ggml.Context) { f32(g, 8, 4).SoftMaxExt(g, f32(g, 7, 4), 1, 0) }},
		{"SoftMaxExt mask rows", "soft_max_ext", func(g *ggml.Context) { f32(g, 8, 4).SoftMaxExt(g, f32(g, 8, 3), 1, 0) }},
		{"SoftMaxExt ALiBi without mask", "soft_max_ext", func(g *ggml.Context) { f32(g, 8, 4).SoftMaxExt(g, nil, 1, 8) }},
		{"GELU permuted", "gelu", func(g *ggml.Context) { f32(g, 4, 3, 2).Permute(g, 0, 2, 1).GELU(g) }},
		{"Sqrt transposed", "sqrt", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).Sqrt(g) }},
		{"Norm transposed", "norm", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).Norm(g, 1e-5) }},
		{"Norm negative eps", "norm", func(g *ggml.Context) { f32(g, 4, 3).Norm(g, -1) }},
		{"RMSNorm f16", "rms_norm", func(g *ggml.Context) { typed(g, ggml.TypeF16, 4).RMSNorm(g, 1e-5) }},
		{"SumRows transposed", "sum_rows", func(g *ggml.Context) { f32(g, 4, 3).Transpose(g).SumRows(g) }},
		{"PadExt negative", "pad_ext", func(g *ggml.Context) { f32(g, 4, 3).PadExt(g, [8]int{0, -1}) }},
		{"Conv2D channels", "conv_2d", func(g *ggml.Context) { f32(g, 3, 3, 4, 8).Conv2D(g, f32(g, 9, 9, 3), ggml.Conv2DParams{}) }},
		{"Conv2D input too small", "conv_2d", func(g *ggml.Context) { f32(g, 3, 3, 2, 4).Conv2D(g, f32(g, 2, 5, 2), ggml.Conv2DParams{}) }},
		{"Conv2D negative pad", "conv_2d", func(g *ggml.Context) { f32(g, 3, 3, 2, 4).Conv2D(g, f32(g, 5, 5, 2), ggml.Conv2DParams{Pad: -1}) }},
		{"Conv2D strided data", "conv_2d", func(g *ggml.Context) {
			f32(g, 3, 3, 2, 4).Conv2D(g, f32(g, 5, 5, 2).Permute(g, 1, 0, 2), ggml.Conv2DParams{})
		}},
		{"Conv2DDirect f16 data", "conv_2d_direct", func(g *ggml.Context) {
			f32(g, 3, 3, 2, 4).Conv2DDirect(g, typed(g, ggml.TypeF16, 5, 5, 2), ggml.Conv2DParams{})
		}},
		{"Im2Col f16 from f32 kernel", "im2col", func(g *ggml.Context) {
			f32(g, 3, 3, 2, 4).Im2Col(g, f32(g, 5, 5, 2), ggml.Conv2DParams{}, ggml.TypeF16)
		}},
		{"ConvTranspose2D f32 kernel", "conv_transpose_2d_p0", func(g *ggml.Context) { f32(g, 2, 2, 3, 4).ConvTranspose2D(g, f32(g, 5, 5, 4), 2) }},
		{"ConvTranspose2D channels", "conv_transpose_2d_p0", func(g *ggml.Context) {
			typed(g, ggml.TypeF16, 2, 2, 3, 4).ConvTranspose2D(g, f32(g, 5, 5, 3), 2)
		}},
		{"ConvTranspose2D stride", "conv_transpose_2d_p0", func(g *ggml.Context) {
			typed(g, ggml.TypeF16, 2, 2, 3, 4).ConvTranspose2D(g, f32(g, 5, 5, 4), 0)
		}},
		{"Pool2D too small", "pool_2d", func(g *ggml.Context) { f32(g, 2, 2, 3).Pool2D(g, ggml.PoolMax, 3, 1, 0) }},
		{"Pool2D non-contiguous", "pool_2d", func(g *ggml.Context) { f32(g, 4, 4, 3).Permute(g, 0, 2, 1).Pool2D(g, ggml.PoolAvg, 2, 2, 0) }},
		{"Interpolate size", "interpolate", func(g *ggml.Context) { f32(g, 4, 4, 3).Interpolate(g, 0, 8, ggml.ScaleBilinear) }},
		{"Interpolate mode", "interpolate", func(g *ggml.Context) { f32(g, 4, 4, 3).Interpolate(g, 8, 8, ggml.ScaleMode(7)) }},
		{"Interpolate antialias nearest", "interpolate", func(g *ggml.Context) {
			f32(g, 4, 4, 3).Interpolate(g, 2, 2, ggml.ScaleNearest|ggml.ScaleAntialias)
		}},
		{"RoPEExt positions", "rope_ext", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEExt(g, i32(g, 4), ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100})
		}},
		{"RoPEExt odd dims", "rope_ext", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEExt(g, i32(g, 5), ggml.RoPEParams{Dims: 7, Mode: ggml.RoPENeoX, Base: 100})
		}},
		{"RoPEExt vision mode", "rope_ext", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEExt(g, i32(g, 5), ggml.RoPEParams{Mode: ggml.RoPEVision, Base: 100})
		}},
		{"RoPEExt f32 positions", "rope_ext", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEExt(g, f32(g, 5), ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100})
		}},
		{"RoPEMulti vision dims", "rope_multi", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEMulti(g, i32(g, 20), [4]int{8, 8}, ggml.RoPEParams{Dims: 32, Mode: ggml.RoPEVision, Base: 100})
		}},
		{"RoPEMulti sections", "rope_multi", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEMulti(g, i32(g, 20), [4]int{30, 8}, ggml.RoPEParams{Dims: 16, Mode: ggml.RoPEVision, Base: 100})
		}},
		{"RoPEMulti no section", "rope_multi", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEMulti(g, i32(g, 20), [4]int{}, ggml.RoPEParams{Dims: 16, Mode: ggml.RoPEVision, Base: 100})
		}},
		{"RoPEMulti positions", "rope_multi", func(g *ggml.Context) {
			f32(g, 32, 2, 5).RoPEMulti(g, i32(g, 5), [4]int{8, 8}, ggml.RoPEParams{Dims: 16, Mode: ggml.RoPEVision, Base: 100})
		}},
		{"FlashAttnExt head dims", "flash_attn_ext", func(g *ggml.Context) {
			f32(g, 64, 8, 4).FlashAttnExt(g, f32(g, 32, 8, 4), f32(g, 32, 8, 4), nil, 1)
		}},
		{"FlashAttnExt heads", "flash_attn_ext", func(g *ggml.Context) {
			f32(g, 64, 8, 4).FlashAttnExt(g, f32(g, 64, 8, 3), f32(g, 64, 8, 3), nil, 1)
		}},
		{"FlashAttnExt f32 mask", "flash_attn_ext", func(g *ggml.Context) {
			f32(g, 64, 8, 4).FlashAttnExt(g, f32(g, 64, 6, 4), f32(g, 64, 6, 4), f32(g, 6, 8), 1)
		}},
		{"FlashAttnExt mask broadcast", "flash_attn_ext", func(g *ggml.Context) {
			f32(g, 64, 8, 4).FlashAttnExt(g, f32(g, 64, 6, 4), f32(g, 64, 6, 4), typed(g, ggml.TypeF16, 6, 8, 3), 1)
		}},
		{"FlashAttnExt mixed k v", "flash_attn_ext", func(g *ggml.Context) {
			f32(g, 64, 8, 4).FlashAttnExt(g, typed(g, ggml.TypeF16, 64, 6, 4), f32(g, 64, 6, 4), nil, 1)
		}},
		{"Custom too many args", "custom", func(g *ggml.Context) {
			args := make([]*ggml.Tensor, 10)
			for i := range args {
				args[i] = f32(g, 1)
			}
			g.Custom(unsafe.Pointer(&args[0]), ggml.TypeF32, []int{1}, args, 0) // never called: the check comes first
		}},
		{"Custom nil kernel", "custom", func(g *ggml.Context) { g.Custom(nil, ggml.TypeF32, []int{1}, nil, 0) }},
		{"node budget", "add", func(g *ggml.Context) {
			x := f32(g, 4)
			for range 100 {
				x = x.Add(g, x)
			}
		}},
		{"RowSize", "row_size", func(g *ggml.Context) { ggml.TypeQ4K.RowSize(100) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ggml.NewContext(32)
			require.NoError(t, err)
			defer g.Close()
			se := shapePanic(t, func() { tc.fn(g) })
			require.NotNil(t, se)
			assert.Equal(t, tc.op, se.Op)
			assert.Contains(t, se.Error(), "ggml "+tc.op+": ")
			assert.Equal(t, 0, g.Nodes(), "no graph was built")
		})
	}
}

func TestShapeErrorNoNodeCreated(t *testing.T) {
	g, err := ggml.NewContext(8)
	require.NoError(t, err)
	defer g.Close()
	a, b := g.NewTensor(ggml.TypeF32, 4, 3), g.NewTensor(ggml.TypeF32, 5, 3)
	n := g.Tensors()
	se := shapePanic(t, func() { a.MulMat(g, b) })
	require.NotNil(t, se)
	assert.Equal(t, [][]int{{4, 3, 1, 1}, {5, 3, 1, 1}}, se.Shapes)
	assert.Equal(t, n, g.Tensors(), "the failed op created no tensor")
	// The context is still usable.
	c := a.MulMat(g, g.NewTensor(ggml.TypeF32, 4, 2))
	assert.Equal(t, []int{3, 2}, c.Shape())
}

func TestNodeBudget(t *testing.T) {
	g, err := ggml.NewContext(5)
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, 5, g.MaxNodes())
	x := g.NewTensor(ggml.TypeF32, 4)
	for range 4 {
		x = x.Scale(g, 2)
	}
	assert.Equal(t, 5, g.Tensors())
	se := shapePanic(t, func() { x.Scale(g, 2) })
	require.NotNil(t, se)
	assert.Contains(t, se.Msg, "node budget of 5 exceeded")

	_, err = ggml.NewContext(0)
	assert.Error(t, err)
}

func TestContextClose(t *testing.T) {
	g, err := ggml.NewContext(8)
	require.NoError(t, err)
	x := g.NewTensor(ggml.TypeF32, 4)
	y := x.Scale(g, 2)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "Close twice")
	assert.True(t, g.Closed())
	require.NoError(t, (*ggml.Context)(nil).Close(), "nil-safe")

	// Ops and graph building panic with a ShapeError wrapping ErrClosed.
	for name, fn := range map[string]func(){
		"NewTensor":    func() { g.NewTensor(ggml.TypeF32, 4) },
		"op":           func() { x.Add(g, x) },
		"unary":        func() { y.GELU(g) },
		"Expand":       func() { g.Expand(y) },
		"Input":        func() { g.Input(x) },
		"Output":       func() { g.Output(y) },
		"Dim":          func() { x.Dim(0) },
		"Shape":        func() { x.Shape() },
		"Name":         func() { _ = x.Name() },
		"TensorByName": func() { g.TensorByName("x") },
		"Node":         func() { g.Node(0) },
	} {
		t.Run(name, func(t *testing.T) {
			se := shapePanic(t, fn)
			require.NotNil(t, se)
			assert.ErrorIs(t, se, ggml.ErrClosed)
		})
	}
	// Data transfer and compute return errors.
	assert.ErrorIs(t, x.SetFloat32s([]float32{1, 2, 3, 4}), ggml.ErrClosed)
	_, err = y.Float32s()
	assert.ErrorIs(t, err, ggml.ErrClosed)
	_, err = g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	assert.ErrorIs(t, err, ggml.ErrClosed)
	assert.ErrorIs(t, optest.NewCPUBackend(t, 0).Compute(g), ggml.ErrClosed)
	assert.Equal(t, "<invalid tensor>", x.String())
	assert.Equal(t, 0, g.Nodes())
}

func TestBackendClose(t *testing.T) {
	be, err := ggml.CPUDevice().NewBackend()
	require.NoError(t, err)
	assert.Equal(t, "CPU", be.Name())
	require.NoError(t, be.Close())
	require.NoError(t, be.Close(), "Close twice")
	require.NoError(t, (*ggml.Backend)(nil).Close())
	assert.Equal(t, "closed", be.Name())
	_, err = be.SetThreads(2)
	assert.ErrorIs(t, err, ggml.ErrClosed)

	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	g.Expand(g.NewTensor(ggml.TypeF32, 4).Scale(g, 2))
	assert.ErrorIs(t, be.Compute(g), ggml.ErrClosed)
	_, err = ggml.NewScheduler([]*ggml.Backend{be}, 16)
	assert.ErrorIs(t, err, ggml.ErrClosed)
}

func TestBufferClose(t *testing.T) {
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	x := g.Input(g.NewTensor(ggml.TypeF32, 4))
	y := g.Output(x.Scale(g, 2))
	g.Expand(y)
	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(t, err)
	assert.Greater(t, buf.Size(), uint64(0))
	assert.Equal(t, "CPU", buf.Name())
	require.True(t, x.HasData())
	require.NoError(t, buf.Close())
	require.NoError(t, buf.Close(), "Close twice")
	require.NoError(t, (*ggml.Buffer)(nil).Close())
	assert.Equal(t, uint64(0), buf.Size())

	// The tensors lost their data: transfers and compute fail cleanly.
	assert.False(t, x.HasData())
	assert.Error(t, x.SetFloat32s([]float32{1, 2, 3, 4}))
	_, err = y.Float32s()
	assert.Error(t, err)
	assert.Error(t, optest.NewCPUBackend(t, 0).Compute(g))

	// They can be allocated again.
	buf, err = g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, x.SetFloat32s([]float32{1, 2, 3, 4}))
	require.NoError(t, optest.NewCPUBackend(t, 0).Compute(g))
	out, err := y.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6, 8}, out)
}

func TestBufferCloseAfterContext(t *testing.T) {
	// Closing the buffer after its context must not touch the freed arena.
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	g.NewTensor(ggml.TypeF32, 16)
	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageWeights)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, buf.Close())
}

func TestComputeUnallocated(t *testing.T) {
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	be := optest.NewCPUBackend(t, 0)
	assert.Error(t, be.Compute(g), "no graph yet")
	x := g.NewTensor(ggml.TypeF32, 4)
	g.Expand(x.Scale(g, 2))
	err = be.Compute(g)
	require.Error(t, err, "tensors without data must not reach the CPU kernels")
	assert.Contains(t, err.Error(), "no backend buffer")
}

func TestDataTransferErrors(t *testing.T) {
	g, err := ggml.NewContext(8)
	require.NoError(t, err)
	defer g.Close()
	x := g.NewTensor(ggml.TypeF32, 4, 2)
	idx := g.NewTensor(ggml.TypeI32, 3)
	v := x.Transpose(g)
	assert.Error(t, x.SetFloat32s(make([]float32, 8)), "not allocated")
	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	require.NoError(t, err)
	defer buf.Close()
	assert.Error(t, x.SetFloat32s(make([]float32, 7)), "wrong length")
	assert.Error(t, x.SetBytes(make([]byte, 31)), "wrong byte length")
	assert.Error(t, x.SetInt32s(make([]int32, 8)), "not i32")
	assert.Error(t, idx.SetInt32s(make([]int32, 4)), "wrong length")
	_, err = v.Float32s()
	assert.Error(t, err, "not contiguous")
	var nilT *ggml.Tensor
	assert.Error(t, nilT.SetFloat32s(nil))
	_, err = nilT.Float32s()
	assert.Error(t, err)

	require.NoError(t, x.SetFloat32s([]float32{1, 2, 3, 4, 5, 6, 7, 8}))
	raw, err := x.ReadBytes()
	require.NoError(t, err)
	assert.Len(t, raw, 32)
	require.NoError(t, x.SetBytes(raw))
}

func TestStatusError(t *testing.T) {
	e := &ggml.StatusError{Op: "compute", Status: -1}
	assert.Contains(t, e.Error(), "compute")
	var target *ggml.StatusError
	assert.True(t, errors.As(error(e), &target))
}
