package schema

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

// fullSpecs builds the schema of a released model from its published
// hyper-parameters, without any checkpoint.
func fullSpecs(t *testing.T, c, depth, heads, hidden, qk int, swiglu, anyView, gs, aux, da2 bool, f int, oc [4]int) []Tensor {
	t.Helper()
	v := ViT{C: c, Depth: depth, Heads: heads, Hidden: hidden, Patch: 14, Rows: 1370, Grid: 37,
		SwiGLU: swiglu, QKNormStart: qk, CatToken: anyView}
	d := c
	if anyView {
		d = 2 * c
	}
	kind := HeadMono
	switch {
	case da2:
		kind = HeadDA2
	case anyView:
		kind = HeadDualDPT
	}
	outDim := 1
	if anyView {
		outDim = 2
	}
	h := Head{Kind: kind, D: d, F: f, OC: oc, F2: f / 2, HF2: 32, OutDim: outDim, Aux: aux, AuxOut: 7}
	specs := append(v.Tensors("vit"), h.Tensors("head")...)
	if anyView {
		specs = append(specs, Camera(d)...)
	}
	if gs {
		g := Head{Kind: HeadGS, D: d, F: 256, OC: [4]int{256, 512, 1024, 1024}, F2: 128, HF2: 32, OutDim: 38, Merger: [3]int{32, 64, 128}}
		specs = append(specs, g.Tensors("gs")...)
	}
	return specs
}

func countParams(specs []Tensor) int64 {
	var n int64
	for _, s := range specs {
		e := int64(1)
		for _, d := range s.Shape {
			e *= d
		}
		n += e
	}
	return n
}

// TestSchemaCountsMatchSpec checks the schema against the tensor and
// parameter counts of the official networks in the C++ engine's GGUF
// layout (the parameters of depth_anything_3's and Depth Anything V2's
// modules, as the converter keeps them), small to giant.
func TestSchemaCountsMatchSpec(t *testing.T) {
	small := [4]int{48, 96, 192, 384}
	base := [4]int{96, 192, 384, 768}
	large := [4]int{256, 512, 1024, 1024}
	cases := []struct {
		name    string
		specs   []Tensor
		tensors int
		params  int64
	}{
		{"DA3-SMALL", fullSpecs(t, 384, 12, 6, 1536, 4, false, true, false, false, false, 64, small), 279, 26179819},
		{"DA3-SMALL aux", fullSpecs(t, 384, 12, 6, 1536, 4, false, true, false, true, false, 64, small), 331, 0},
		{"DA3-BASE", fullSpecs(t, 768, 12, 12, 3072, 4, false, true, false, false, false, 128, base), 279, 103022955},
		{"DA3-LARGE", fullSpecs(t, 1024, 24, 16, 4096, 8, false, true, false, false, false, 256, large), 479, 345439467},
		{"DA3-LARGE aux", fullSpecs(t, 1024, 24, 16, 4096, 8, false, true, false, true, false, 256, large), 531, 0},
		{"DA3-GIANT", fullSpecs(t, 1536, 40, 24, 4096, 13, true, true, true, false, false, 256, large), 813, 1226566065},
		{"DA3-GIANT aux", fullSpecs(t, 1536, 40, 24, 4096, 13, true, true, true, true, false, 256, large), 865, 0},
		{"DA3MONO-LARGE", fullSpecs(t, 1024, 24, 16, 4096, -1, false, false, false, false, false, 256, large), 406, 334171394},
		{"DA2-Small", fullSpecs(t, 384, 12, 6, 1536, -1, false, false, false, false, true, 64, small), 238, 24784705},
		{"DA2-Base", fullSpecs(t, 768, 12, 12, 3072, -1, false, false, false, false, true, 128, base), 238, 97470017},
		{"DA2-Large", fullSpecs(t, 1024, 24, 16, 4096, -1, false, false, false, false, true, 256, large), 406, 335314625},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, tc.specs)
			assert.Len(t, tc.specs, tc.tensors)
			if tc.params > 0 {
				assert.Equal(t, tc.params, countParams(tc.specs))
			}
			seen := map[string]bool{}
			for _, s := range tc.specs {
				assert.False(t, seen[s.Name], "duplicate %s", s.Name)
				seen[s.Name] = true
			}
		})
	}
}

func TestCheck(t *testing.T) {
	want := []Tensor{
		{"w", []int64{8, 4}, Matrix},
		{"b", []int64{8}, Vector},
		{"k", []int64{2, 3, 3, 3}, Conv},
		{"tok", []int64{1, 1, 4}, Token},
	}
	ok := []loader.TensorInfo{
		{Name: "w", Type: loader.TypeQ8_0, Shape: []uint64{4, 8}},
		{Name: "b", Type: loader.TypeF32, Shape: []uint64{8}},
		{Name: "k", Type: loader.TypeF16, Shape: []uint64{3, 3, 3, 2}},
		{Name: "tok", Type: loader.TypeF32, Shape: []uint64{4}}, // trailing 1s dropped by ggml writers
	}
	require.NoError(t, Check(ok, want, nil))

	bad := []loader.TensorInfo{
		{Name: "w", Type: loader.TypeI32, Shape: []uint64{8, 4}},
		{Name: "b", Type: loader.TypeF16, Shape: []uint64{1}},
		{Name: "k", Type: loader.TypeQ8_0, Shape: []uint64{3, 3, 3, 2}},
		{Name: "extra", Type: loader.TypeF32, Shape: []uint64{1}},
		{Name: "cam_enc.x", Type: loader.TypeF32, Shape: []uint64{1}},
	}
	err := Check(bad, want, func(n string) bool { return n == "cam_enc.x" })
	var se *Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{
		"w has shape [8 4], want [4 8]",
		"w is i32, but a matrix must be f32, f16, bf16, q8_0, q6_K, q5_1, q5_K, q5_0, q4_1, q4_K, q4_0",
		"b has shape [1], want [8]",
		"b is f16, but a vector must be f32",
		"k is q8_0, but a convolution kernel must be f32, f16",
		"missing tok",
		"unexpected tensor extra",
	}, se.Problems)
	assert.NotContains(t, err.Error(), "\n")

	var many []loader.TensorInfo
	for i := range 20 {
		many = append(many, loader.TensorInfo{Name: fmt.Sprintf("x%d", i), Type: loader.TypeF32, Shape: []uint64{1}})
	}
	err = Check(many, nil, nil)
	assert.Contains(t, err.Error(), "20 tensor problems")
	assert.Contains(t, err.Error(), "and 12 more")
}

func TestNE(t *testing.T) {
	assert.Equal(t, []uint64{3, 3, 16, 8}, Tensor{Shape: []int64{8, 16, 3, 3}}.NE())
}
