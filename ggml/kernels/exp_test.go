package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestExp checks Exp against float64: on a channel of a map (rows apart,
// 37 values: whole vectors and a tail) and on a whole map, every value
// within 2⁻²² of e^x·s + b (relative; absolute 2⁻¹⁴⁸ among subnormals),
// across the float range, at the overflow and underflow edges, and NaN, ±Inf
// and ±0 as e^x gives them.
func TestExp(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	const W, H, C, S = 37, 5, 3, 2
	rng := optest.RNG(7)
	v := optest.Uniform(rng, W*H*C*S, -110, 95)
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		88.72283, 88.72284, 88.7229, 89, -87.33654, -87.4, -103.9, -103.97, -103.98, -104, 1e-8, -1e-8, 1, -1, 0.5}
	for i, x := range specials { // in the first row of channel 0 and of channel 1
		v[i] = x
		v[H*W+i] = x
	}
	for _, c := range []struct {
		name        string
		scale, bias float32
		channel     bool
	}{{"channel", 1, 0, true}, {"channel_scaled", 2, 1, true}, {"map", 1, 0, false}, {"map_plus_one", 1, 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			x := h.Input(ggml.TypeF32, v, W, H, C, S)
			in, chans := x, []int{0, 1, 2}
			if c.channel { // channel 1: [W, H, 1, S], rows W apart, images C·H·W apart
				in = x.View(h.G, 1*x.Stride(2), []int{W, H, 1, S}, []int{x.Stride(1), x.Stride(2), x.Stride(3)})
				chans = []int{1}
			}
			require.True(t, kernels.ExpFits(in))
			got := h.Compute(kernels.Exp(h.G, in, c.scale, c.bias))[0]
			o, bad := 0, 0
			for s := range S {
				for _, ch := range chans {
					for i := range H * W {
						xv := v[(s*C+ch)*H*W+i]
						g, w := float64(got[o]), math.Exp(float64(xv))*float64(c.scale)+float64(c.bias)
						o++
						var ok bool
						switch {
						case math.IsNaN(w):
							ok = math.IsNaN(g)
						case w > math.MaxFloat32:
							ok = math.IsInf(g, 1)
						default:
							ok = math.Abs(g-w) <= math.Max(math.Abs(w)*0x1p-22, 0x1p-148*float64(c.scale))
						}
						if !ok {
							if bad < 5 {
								t.Errorf("e^%g·%g + %g: got %g, want %g", xv, c.scale, c.bias, g, w)
							}
							bad++
						}
					}
				}
			}
			assert.Zero(t, bad, "outputs off e^x·s + b")
			assert.Equal(t, len(got), o, "every output checked")
		})
	}
}
