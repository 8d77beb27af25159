package kernels_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// TestGEMMPacked checks that a weight packed once (PackWeights) gives the
// products of the per-call packing bit for bit, in every variant and in f32
// and bf16 (F32 and F16 weights; and int8, whose F32 and F16 weights run in
// bf16 and whose Q8_0 weights are packed as int8 panels), with a bias and GELU, on depths that are and
// are not multiples of the bf16 fast path's 32 and of the depth blocks
// (256, 512), row counts off the tile heights, and several panels; and that
// a packing for another variant or precision is not taken.
func TestGEMMPacked(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, prec := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8} {
			if !kernels.PrecisionRuns(v, prec) {
				continue
			}
			types := []ggml.Type{ggml.TypeF32}
			if prec != kernels.PrecisionF32 { // F16 weights are packed for bf16 products (int8's too)
				types = append(types, ggml.TypeF16)
			}
			if prec == kernels.PrecisionInt8 {
				types = append(types, ggml.TypeQ8_0)
			}
			for _, typ := range types {
				// 300 rows: threads share the rows of bf16 and int8 products (each packs its own rows of A)
				sizes := [][2]int{{64, 15}, {700, 33}, {768, 29}, {37, 1}, {256, 300}}
				if typ == ggml.TypeQ8_0 { // whole blocks of 32; a last depth block of 32 and of 256
					sizes = [][2]int{{64, 15}, {288, 33}, {800, 29}, {512, 6}, {32, 1}, {256, 300}}
				}
				for _, s := range sizes {
					K, M := s[0], s[1]
					t.Run(fmt.Sprintf("%s/%s/%s/K%d_M%d", v, prec, typ, K, M), func(t *testing.T) {
						testGEMMPacked(t, v, prec, typ, K, M)
					})
				}
			}
		}
	}
}

func testGEMMPacked(t *testing.T, v kernels.Variant, prec kernels.Precision, typ ggml.Type, K, M int) {
	pp := prec // how the weight is packed: int8 takes F32 and F16 weights in bf16
	if prec == kernels.PrecisionInt8 && typ != ggml.TypeQ8_0 {
		pp = kernels.PrecisionBF16
	}
	shape, ok := kernels.PackedShape(v, pp, K, 96)
	N := 96
	if !ok { // the panel width does not divide 96
		shape, ok = kernels.PackedShape(v, pp, K, 120)
		N = 120
	}
	require.True(t, ok)
	h := optest.NewHarness(t, 64)
	pol := kernels.Policy{GEMM: true, Variant: v, Precision: prec}
	kernels.SetPolicy(h.G, pol)
	rng := optest.RNG(uint64(K*10 + M))
	wv := optest.Randn(rng, K*N, 1)
	var data []byte
	if typ != ggml.TypeF32 {
		var err error
		data, err = ggml.QuantizeChunk(typ, wv, N, K, nil)
		require.NoError(t, err)
	} else {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&wv[0])), 4*len(wv))
	}
	w := h.Input(typ, wv, K, N)
	x, _ := h.Rand(rng, K, M)
	b, _ := h.Rand(rng, N)
	set, err := kernels.PackWeights(pol, []*ggml.Tensor{w, x}, func(*ggml.Tensor) ([]byte, error) { return data, nil }, nil)
	require.NoError(t, err)
	defer set.Close()
	require.Len(t, set.Weights(), 1, "w packed; x (%d columns) is not a multiple of the panel width", M)
	pw := set.Weights()[w]
	require.NotNil(t, pw)
	assert.Equal(t, shape, pw.T.Shape())
	assert.Equal(t, pp, pw.Precision)
	assert.Equal(t, typ, pw.Type)
	ep := kernels.Epilogue{Bias: b, Act: kernels.ActGELU}
	require.True(t, kernels.GEMMPackedFits(h.G, pw, x, ep))
	ref := kernels.GEMM(h.G, w, x, ep)
	if typ == ggml.TypeF16 {
		// Per call an F16 weight is widened in 256-deep blocks, a packed one is an F32 weight of
		// the same values (512-deep blocks in bf16: C is summed in other steps): that weight's product.
		wd, err := ggml.ToFloat32(typ, data, K*N)
		require.NoError(t, err)
		ref = kernels.GEMM(h.G, h.Input(ggml.TypeF32, wd, K, N), x, ep)
	}
	before := kernelcount.Calls(v, prec)
	out := h.Compute(kernels.GEMMPacked(h.G, pw, x, ep), ref)
	assert.Equal(t, out[1], out[0], "packed once = packed per call, bit for bit")
	if typ == ggml.TypeQ8_0 {
		assert.Greater(t, kernelcount.Calls(v, prec), before, "the int8 kernels ran")
	}
	for _, op := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8} {
		if op != pw.Precision {
			other := *pw
			other.Precision = op
			assert.False(t, kernels.GEMMPackedFits(h.G, &other, x, ep), "a packing of precision %s", op)
		}
	}
	for _, ov := range variants {
		if ov != v {
			other := *pw
			other.Variant = ov
			assert.False(t, kernels.GEMMPackedFits(h.G, &other, x, ep), "a packing for %s", ov)
		}
	}
}
