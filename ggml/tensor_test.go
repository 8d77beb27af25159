package ggml_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

func TestTensorMetadata(t *testing.T) {
	g, err := ggml.NewContext(8)
	require.NoError(t, err)
	defer g.Close()

	x := g.NewTensor(ggml.TypeQ8_0, 64, 3, 2).SetName(fmt.Sprintf("w.%d", 7))
	assert.Equal(t, "w.7", x.Name())
	assert.Equal(t, "w.7 q8_0 [64 3 2]", x.String())
	assert.Equal(t, 3, x.NDims())
	assert.Equal(t, []int{64, 3, 2}, x.Shape())
	assert.Equal(t, 64*3*2, x.Elements())
	assert.Equal(t, 2*3*2*34, x.Bytes())
	assert.Equal(t, 34*2, x.Stride(1))
	assert.Equal(t, "NONE", x.Op())
	assert.Nil(t, x.Src(0))
	assert.False(t, x.HasData())
	long := strings.Repeat("n", 100)
	assert.Len(t, g.NewTensor(ggml.TypeF32, 1).SetName(long).Name(), 63, "names are truncated to ggml's 63 bytes")

	y := g.NewTensor(ggml.TypeF32, 4, 1, 1, 1)
	assert.Equal(t, 1, y.NDims())
	assert.Equal(t, []int{4}, y.Shape())
	z := y.Add(g, y).SetName("z")
	assert.Equal(t, "ADD", z.Op())
	assert.Equal(t, "", z.Src(0).Name())
	assert.Nil(t, z.Src(-1))
	assert.Nil(t, z.Src(99))

	var names []string
	g.EachTensor(func(t *ggml.Tensor) { names = append(names, t.Name()) })
	assert.Equal(t, []string{"w.7", long[:63], "", "z"}, names)
	assert.Equal(t, "z", g.TensorByName("z").Name())
	assert.Nil(t, g.TensorByName("missing"))

	assert.Equal(t, 0, g.Nodes())
	g.Expand(z)
	require.Equal(t, 1, g.Nodes())
	assert.Equal(t, "z", g.Node(0).Name())
	se := shapePanic(t, func() { g.Node(1) })
	require.NotNil(t, se)
	assert.Equal(t, "graph_node", se.Op)
	se = shapePanic(t, func() { x.Dim(4) })
	require.NotNil(t, se)
	se = shapePanic(t, func() { x.Stride(-1) })
	require.NotNil(t, se)
}
