package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestGEMMPacked checks that a weight packed once (PackWeight) gives the
// products of the per-call packing bit for bit, in every variant and in f32
// and bf16 (and int8, whose F32 weights run in f32), with a bias and GELU, on
// depths that are and are not multiples of the bf16 fast path's 32 and of
// the depth blocks (256, 512), row counts off the tile height, and several
// panels; and that a packing for another variant or precision is not taken.
func TestGEMMPacked(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("kernels off (DA3_KERNELS=off)")
	}
	for _, v := range variants {
		if !v.Runs() {
			continue
		}
		for _, prec := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8} {
			if !kernels.PrecisionRuns(v, prec) {
				continue
			}
			for _, s := range [][2]int{{64, 15}, {700, 33}, {768, 29}, {37, 1}} {
				K, M := s[0], s[1]
				t.Run(fmt.Sprintf("%s/%s/K%d_M%d", v, prec, K, M), func(t *testing.T) {
					pp := prec // how F32 weights are multiplied: int8 takes them in bf16
					if prec == kernels.PrecisionInt8 {
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
					w := h.Input(ggml.TypeF32, wv, K, N)
					x, _ := h.Rand(rng, K, M)
					b, _ := h.Rand(rng, N)
					set, err := kernels.PackWeights(pol, []*ggml.Tensor{w, x}, func(*ggml.Tensor) ([]float32, error) { return wv, nil }, nil)
					require.NoError(t, err)
					defer set.Close()
					require.Len(t, set.Weights(), 1, "w packed; x (%d columns) is not a multiple of the panel width", M)
					pw := set.Weights()[w]
					require.NotNil(t, pw)
					assert.Equal(t, shape, pw.T.Shape())
					ep := kernels.Epilogue{Bias: b, Act: kernels.ActGELU}
					require.True(t, kernels.GEMMPackedFits(h.G, pw, x, ep))
					out := h.Compute(kernels.GEMMPacked(h.G, pw, x, ep), kernels.GEMM(h.G, w, x, ep))
					assert.Equal(t, out[1], out[0], "packed once = packed per call, bit for bit")
					other := *pw
					other.Precision = map[kernels.Precision]kernels.Precision{kernels.PrecisionF32: kernels.PrecisionBF16, kernels.PrecisionBF16: kernels.PrecisionF32}[pw.Precision]
					assert.False(t, kernels.GEMMPackedFits(h.G, &other, x, ep), "a packing of the other precision")
					for _, ov := range variants {
						if ov != v {
							other := *pw
							other.Variant = ov
							assert.False(t, kernels.GEMMPackedFits(h.G, &other, x, ep), "a packing for %s", ov)
						}
					}
				})
			}
		}
	}
}
