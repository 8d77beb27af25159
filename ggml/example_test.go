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
