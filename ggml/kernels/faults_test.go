package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// TestEntryChecks builds nodes around the Go checks, straight from the raw
// kernels, with operands the kernels must refuse: each call must record a
// fault and leave its output alone instead of reading or writing out of
// bounds.
func TestEntryChecks(t *testing.T) {
	f32 := ggml.TypeF32
	cases := []struct {
		name  string
		avx   bool // the kernel needs an AVX-512 build
		build func(g *ggml.Context) (dst *ggml.Tensor, ins []*ggml.Tensor)
	}{
		{"gemm depth mismatch", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 8, 4), g.NewTensor(f32, 16, 3)
			return g.Custom(opGEMM, f32, []int{4, 3}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"gemm output too small", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 8, 40), g.NewTensor(f32, 8, 30)
			return g.Custom(opGEMM, f32, []int{40, 2}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"gemm short bias", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x, b := g.NewTensor(f32, 8, 40), g.NewTensor(f32, 8, 3), g.NewTensor(f32, 4)
			return g.Custom(opGEMM, f32, []int{40, 3}, []*ggml.Tensor{w, x, b}, 0), []*ggml.Tensor{w, x, b}
		}},
		{"gemm unknown activation", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 8, 4), g.NewTensor(f32, 8, 3)
			return g.Custom(opGEMM, f32, []int{4, 3}, []*ggml.Tensor{w, x}, 9), []*ggml.Tensor{w, x}
		}},
		{"conv stride 0", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 3, 3, 2, 4), g.NewTensor(f32, 10, 10, 2, 1)
			return g.Custom(opConv2D, f32, []int{8, 8, 4, 1}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"conv output larger than the input allows", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 3, 3, 2, 4), g.NewTensor(f32, 10, 10, 2, 1)
			return g.Custom(opConv2D, f32, []int{20, 8, 4, 1}, []*ggml.Tensor{w, x}, 1), []*ggml.Tensor{w, x}
		}},
		{"conv channel mismatch", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 3, 3, 5, 4), g.NewTensor(f32, 10, 10, 2, 1)
			return g.Custom(opConv2D, f32, []int{8, 8, 4, 1}, []*ggml.Tensor{w, x}, 1), []*ggml.Tensor{w, x}
		}},
		{"winograd transformed kernel of the wrong size", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			u, x := g.NewTensor(f32, 100), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opWinograd, f32, []int{10, 10, 8, 1}, []*ggml.Tensor{u, x}, 1|1<<16), []*ggml.Tensor{u, x}
		}},
		{"winograd output larger than the input allows", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			u, x := g.NewTensor(f32, 100), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opWinograd, f32, []int{12, 10, 8, 1}, []*ggml.Tensor{u, x}, 1), []*ggml.Tensor{u, x}
		}},
		{"winograd residual of another shape", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			u, x, r := g.NewTensor(f32, 100000), g.NewTensor(f32, 10, 10, 8, 1), g.NewTensor(f32, 10, 9, 8, 1)
			return g.Custom(opWinograd, f32, []int{10, 10, 8, 1}, []*ggml.Tensor{u, x, r}, 1|1<<18), []*ggml.Tensor{u, x, r}
		}},
		{"winograd residual flagged but missing", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			u, x := g.NewTensor(f32, 100000), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opWinograd, f32, []int{10, 10, 8, 1}, []*ggml.Tensor{u, x}, 1|1<<18), []*ggml.Tensor{u, x}
		}},
		{"winograd kernel transform of a 5x5 kernel", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w := g.NewTensor(f32, 5, 5, 8, 8)
			return g.Custom(opWinoKernel, f32, []int{100000}, []*ggml.Tensor{w}, 4), []*ggml.Tensor{w}
		}},
		{"winograd kernel transform output too small", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w := g.NewTensor(f32, 3, 3, 8, 8)
			return g.Custom(opWinoKernel, f32, []int{36 * 64}, []*ggml.Tensor{w}, 4), []*ggml.Tensor{w}
		}},
		{"winograd kernel transform tile 3", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w := g.NewTensor(f32, 3, 3, 8, 8)
			return g.Custom(opWinoKernel, f32, []int{100000}, []*ggml.Tensor{w}, 3), []*ggml.Tensor{w}
		}},
		{"attention head dims differ", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			q, k, v := g.NewTensor(f32, 64, 2, 10), g.NewTensor(f32, 32, 2, 10), g.NewTensor(f32, 64, 2, 10)
			return g.Custom(opAttention, f32, []int{64, 2, 10}, []*ggml.Tensor{q, k, v}, 0), []*ggml.Tensor{q, k, v}
		}},
		{"attention missing v", true, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			q, k := g.NewTensor(f32, 64, 2, 10), g.NewTensor(f32, 64, 2, 10)
			return g.Custom(opAttention, f32, []int{64, 2, 10}, []*ggml.Tensor{q, k}, 0), []*ggml.Tensor{q, k}
		}},
		{"bilinear f16 input", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(ggml.TypeF16, 8, 8, 2)
			return g.Custom(opBilinear, f32, []int{16, 16, 2}, []*ggml.Tensor{x}, 0), []*ggml.Tensor{x}
		}},
		{"bilinear channel mismatch", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 8, 2)
			return g.Custom(opBilinear, f32, []int{16, 16, 5}, []*ggml.Tensor{x}, 0), []*ggml.Tensor{x}
		}},
		{"bilinear window past the last row", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 8, 2)
			return g.Custom(opBilinearWindow, f32, []int{18, 10, 2}, []*ggml.Tensor{x}, uintptr(uint64(1)<<1|uint64(10)<<4|uint64(16)<<24|uint64(16)<<44)), []*ggml.Tensor{x}
		}},
		{"bilinear window width not the target's", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 8, 2)
			return g.Custom(opBilinearWindow, f32, []int{40, 6, 2}, []*ggml.Tensor{x}, uintptr(uint64(1)<<1|uint64(0)<<4|uint64(16)<<24|uint64(16)<<44)), []*ggml.Tensor{x}
		}},
		{"bilinear window one table", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, ux := g.NewTensor(f32, 8, 8, 2), g.NewTensor(f32, 16, 2)
			return g.Custom(opBilinearWindow, f32, []int{18, 6, 2}, []*ggml.Tensor{x, ux}, uintptr(uint64(1)<<1|uint64(0)<<4|uint64(16)<<24|uint64(16)<<44)), []*ggml.Tensor{x, ux}
		}},
		{"bilinear window short table", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, ux, uy := g.NewTensor(f32, 8, 8, 2), g.NewTensor(f32, 16, 2), g.NewTensor(f32, 8, 2)
			return g.Custom(opBilinearWindow, f32, []int{18, 6, 2}, []*ggml.Tensor{x, ux, uy}, uintptr(uint64(1)<<1|uint64(0)<<4|uint64(16)<<24|uint64(16)<<44)), []*ggml.Tensor{x, ux, uy}
		}},
		{"sum parts of an f16 input", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(ggml.TypeF16, 8, 8)
			return g.Custom(opSumParts, f32, []int{4}, []*ggml.Tensor{x}, 0), []*ggml.Tensor{x}
		}},
		{"stack rows wrong height", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			a, b := g.NewTensor(f32, 8, 3, 2), g.NewTensor(f32, 8, 4, 2)
			return g.Custom(opStackRows, f32, []int{8, 9, 2}, []*ggml.Tensor{a, b}, 0), []*ggml.Tensor{a, b}
		}},
		{"stack rows width mismatch", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			a, b := g.NewTensor(f32, 8, 3, 2), g.NewTensor(f32, 7, 4, 2)
			return g.Custom(opStackRows, f32, []int{8, 7, 2}, []*ggml.Tensor{a, b}, 0), []*ggml.Tensor{a, b}
		}},
		{"concat wrong length", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			a, b := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 8, 4)
			return g.Custom(opConcat, f32, []int{8, 8}, []*ggml.Tensor{a, b}, 1), []*ggml.Tensor{a, b}
		}},
		{"concat off-dim mismatch", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			a, b := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 7, 4)
			return g.Custom(opConcat, f32, []int{8, 7}, []*ggml.Tensor{a, b}, 1), []*ggml.Tensor{a, b}
		}},
		{"pointwise with five outputs", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 1, 1, 8, 5), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opPointwise, f32, []int{10, 10, 5, 1}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"pointwise with a 3x3 kernel", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 3, 3, 8, 2), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opPointwise, f32, []int{10, 10, 2, 1}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"pointwise channel mismatch", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			w, x := g.NewTensor(f32, 1, 1, 4, 2), g.NewTensor(f32, 10, 10, 8, 1)
			return g.Custom(opPointwise, f32, []int{10, 10, 2, 1}, []*ggml.Tensor{w, x}, 0), []*ggml.Tensor{w, x}
		}},
		{"transpose wrong shape", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 3)
			return g.Custom(opTranspose, f32, []int{8, 3}, []*ggml.Tensor{x}, 0), []*ggml.Tensor{x}
		}},
		{"add scaled short gamma", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, y, gm := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 8, 3), g.NewTensor(f32, 4)
			return g.Custom(opAddScaled, f32, []int{8, 3}, []*ggml.Tensor{x, y, gm}, 0), []*ggml.Tensor{x, y, gm}
		}},
		{"exp output of another shape", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 3)
			return g.Custom(opExp, f32, []int{8, 4}, []*ggml.Tensor{x}, 0), []*ggml.Tensor{x}
		}},
		{"exp of strided rows", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 3)
			xt := x.Transpose(g)
			return g.Custom(opExp, f32, []int{3, 8}, []*ggml.Tensor{xt}, 0), []*ggml.Tensor{x}
		}},
		{"depth to space of too few rows", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			r := g.NewTensor(f32, 12, 10)
			return g.Custom(opDepthToSpace, f32, []int{10, 4, 1, 1}, []*ggml.Tensor{r}, 2|2<<8), []*ggml.Tensor{r}
		}},
		{"depth to space of a kernel of 0", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			r := g.NewTensor(f32, 12, 10)
			return g.Custom(opDepthToSpace, f32, []int{10, 12, 1, 1}, []*ggml.Tensor{r}, 0), []*ggml.Tensor{r}
		}},
		{"im2col output of another size", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 6, 2, 1)
			return g.Custom(opIm2Col, f32, []int{18, 8, 6, 1}, []*ggml.Tensor{x}, 3|3<<8|1<<16), []*ggml.Tensor{x}
		}},
		{"im2col stride 0", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x := g.NewTensor(f32, 8, 6, 2, 1)
			return g.Custom(opIm2Col, f32, []int{18, 6, 4, 1}, []*ggml.Tensor{x}, 3|3<<8), []*ggml.Tensor{x}
		}},
		{"layer norm short weight", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, w, b := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 4), g.NewTensor(f32, 8)
			return g.Custom(opLayerNorm, f32, []int{8, 3}, []*ggml.Tensor{x, w, b}, 0), []*ggml.Tensor{x, w, b}
		}},
		{"layer norm missing bias", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, w := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 8)
			return g.Custom(opLayerNorm, f32, []int{8, 3}, []*ggml.Tensor{x, w}, 0), []*ggml.Tensor{x, w}
		}},
		{"layer norm rope table of the wrong size", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, w, b, cs := g.NewTensor(f32, 8, 2, 3), g.NewTensor(f32, 8), g.NewTensor(f32, 8), g.NewTensor(f32, 8, 2)
			return g.Custom(opLayerNorm, f32, []int{8, 2, 3}, []*ggml.Tensor{x, w, b, cs}, 0), []*ggml.Tensor{x, w, b, cs}
		}},
		{"layer norm rope rows not a multiple of 4", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, w, b, cs := g.NewTensor(f32, 6, 2, 3), g.NewTensor(f32, 6), g.NewTensor(f32, 6), g.NewTensor(f32, 6, 3)
			return g.Custom(opLayerNorm, f32, []int{6, 2, 3}, []*ggml.Tensor{x, w, b, cs}, 0), []*ggml.Tensor{x, w, b, cs}
		}},
		{"layer norm output larger than the input", false, func(g *ggml.Context) (*ggml.Tensor, []*ggml.Tensor) {
			x, w, b := g.NewTensor(f32, 8, 3), g.NewTensor(f32, 8), g.NewTensor(f32, 8)
			return g.Custom(opLayerNorm, f32, []int{8, 30}, []*ggml.Tensor{x, w, b}, 0), []*ggml.Tensor{x, w, b}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.avx && !Available().GEMM {
				t.Skip("built without AVX-512: the kernel records a fault for any operands")
			}
			h := optest.NewHarness(t, 16)
			dst, ins := tc.build(h.G)
			h.Alloc(dst)
			for _, in := range ins {
				require.NoError(t, in.SetFloat32s(make([]float32, in.Elements())))
			}
			sentinel := make([]float32, dst.Elements())
			for i := range sentinel {
				sentinel[i] = 42
			}
			require.NoError(t, dst.SetFloat32s(sentinel))
			before := Faults()
			require.NoError(t, optest.NewCPUBackend(t, 2).Compute(h.G))
			assert.Greater(t, Faults(), before, "the kernel records a fault")
			err := FaultsSince(before)
			require.ErrorIs(t, err, ErrFault)
			assert.Contains(t, err.Error(), "rejected their operands")
			got, err := dst.Float32s()
			require.NoError(t, err)
			assert.Equal(t, sentinel, got, "the output is left alone")
			assert.NoError(t, FaultsSince(Faults()))
		})
	}
}
