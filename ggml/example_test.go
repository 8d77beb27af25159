package ggml_test

import (
	"fmt"

	"github.com/da3-go/da3-go/ggml"
)

// A graph is built in a Context, its tensors are allocated on a device's
// buffer type, inputs are copied in, and the graph runs on a backend.
func ExampleTensor_MulMat() {
	g, err := ggml.NewContext(16)
	if err != nil {
		panic(err)
	}
	defer g.Close()

	// W is a Linear weight [in=3, out=2]; x holds 2 tokens of 3 features.
	w := g.Input(g.NewTensor(ggml.TypeF32, 3, 2))
	x := g.Input(g.NewTensor(ggml.TypeF32, 3, 2))
	y := g.Output(w.MulMat(g, x)) // [2 outputs, 2 tokens]
	g.Expand(y)

	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	if err != nil {
		panic(err)
	}
	defer buf.Close()
	_ = w.SetFloat32s([]float32{1, 0, 0, 0, 1, 1})
	_ = x.SetFloat32s([]float32{1, 2, 3, 4, 5, 6})

	be, err := ggml.CPUDevice().NewBackend()
	if err != nil {
		panic(err)
	}
	defer be.Close()
	if err := be.Compute(g); err != nil {
		panic(err)
	}
	out, _ := y.Float32s()
	fmt.Println(y.Shape(), out)
	// Output: [2 2] [1 5 4 11]
}

// Ops check their shapes in Go and panic with a *ShapeError before ggml
// would abort the process.
func ExampleShapeError() {
	g, _ := ggml.NewContext(8)
	defer g.Close()
	a := g.NewTensor(ggml.TypeF32, 4, 3)
	b := g.NewTensor(ggml.TypeF32, 5, 3)
	defer func() {
		err := recover().(*ggml.ShapeError)
		fmt.Println(err)
	}()
	a.MulMat(g, b)
	// Output: ggml mul_mat: inner dimensions differ (ne0 4 vs 5) (shapes [4 3 1 1] [5 3 1 1])
}

// A Context is an arena of tensor metadata plus the graph built in it. Ops
// create nodes; shapes are in ggml order (ne0, the fastest dimension, first).
// Nothing is computed until the graph runs on a backend.
func ExampleContext() {
	g, err := ggml.NewContext(8) // room for 8 tensors
	if err != nil {
		panic(err)
	}
	defer g.Close()

	x := g.NewTensor(ggml.TypeF32, 4, 3) // 3 rows of 4
	y := x.Transpose(g)                  // a view: [3, 4]
	z := y.Cont(g).Reshape(g, -1)        // contiguous copy, flattened
	g.Expand(z)

	fmt.Println(y.Shape(), y.IsContiguous())
	fmt.Println(z.Shape(), z.Op())
	fmt.Println(g.Tensors(), "tensors,", g.Nodes(), "graph nodes")
	// Output:
	// [3 4] false
	// [12] RESHAPE
	// 4 tensors, 3 graph nodes
}

// Conv2D takes a kernel [KW, KH, IC, OC] (PyTorch's (OC, IC, KH, KW)
// reversed) and data [W, H, IC, N]. Here a 3x3 box filter with padding 1
// sums each pixel's neighbourhood.
func ExampleTensor_Conv2D() {
	g, _ := ggml.NewContext(16)
	defer g.Close()
	k := g.Input(g.NewTensor(ggml.TypeF32, 3, 3, 1, 1))
	x := g.Input(g.NewTensor(ggml.TypeF32, 4, 3, 1, 1))
	y := g.Output(k.Conv2D(g, x, ggml.Conv2DParams{Pad: 1}))
	g.Expand(y)

	buf, err := g.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageCompute)
	if err != nil {
		panic(err)
	}
	defer buf.Close()
	_ = k.SetFloat32s([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1})
	_ = x.SetFloat32s([]float32{
		1, 0, 0, 0,
		0, 0, 0, 0,
		0, 0, 0, 2,
	})
	be, _ := ggml.CPUDevice().NewBackend()
	defer be.Close()
	if err := be.Compute(g); err != nil {
		panic(err)
	}
	out, _ := y.Float32s()
	fmt.Println(y.Shape())
	for r := 0; r < 3; r++ {
		fmt.Println(out[4*r : 4*r+4])
	}
	// Output:
	// [4 3]
	// [1 1 0 0]
	// [1 1 2 2]
	// [0 0 2 2]
}

// A Scheduler runs graphs over a list of backends (the CPU last), sizing and
// reusing compute buffers. Weights live in their own context and buffer;
// each run builds a graph in a fresh Context, allocates it, sets the
// inputs and computes.
func ExampleScheduler() {
	cpu, err := ggml.CPUDevice().NewBackend()
	if err != nil {
		panic(err)
	}
	defer cpu.Close()
	sched, err := ggml.NewScheduler([]*ggml.Backend{cpu}, 256)
	if err != nil {
		panic(err)
	}
	defer sched.Close()

	// Weights: a bias of 3 values, uploaded once.
	wctx, _ := ggml.NewContext(1)
	defer wctx.Close()
	bias := wctx.NewTensor(ggml.TypeF32, 3)
	wbuf, err := wctx.AllocTensors(ggml.CPUDevice().BufferType(), ggml.UsageWeights)
	if err != nil {
		panic(err)
	}
	defer wbuf.Close()
	_ = bias.SetFloat32s([]float32{10, 20, 30})

	for _, in := range [][]float32{{1, 2, 3, 4, 5, 6}, {-1, -2, -3, -4, -5, -6}} {
		g, _ := ggml.NewContext(8)
		x := g.Input(g.NewTensor(ggml.TypeF32, 3, 2))
		y := g.Output(x.Add(g, bias).ReLU(g))
		g.Expand(y)
		if err := sched.Alloc(g); err != nil {
			panic(err)
		}
		_ = x.SetFloat32s(in)
		if err := sched.Compute(g); err != nil {
			panic(err)
		}
		out, _ := y.Float32s()
		fmt.Println(out, sched.BackendOf(y).Name())
		g.Close()
	}
	// Output:
	// [11 22 33 14 25 36] CPU
	// [9 18 27 6 15 24] CPU
}
