package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model/nn"
)

// attentionRef is softmax(q·kᵀ·scale)·v per head: q [hd, H, n, B], k and v
// [hd, H, nk, B], all dense, result [hd, H, n, B].
func attentionRef(q, k, v []float32, hd, H, n, nk, B int, scale float64) []float32 {
	out := make([]float32, hd*H*n*B)
	s := make([]float64, nk)
	at := func(x []float32, d, h, i, b, rows int) float64 { return float64(x[((b*rows+i)*H+h)*hd+d]) }
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for i := 0; i < n; i++ {
				mx := math.Inf(-1)
				for j := range s {
					var dot float64
					for d := 0; d < hd; d++ {
						dot += at(q, d, h, i, b, n) * at(k, d, h, j, b, nk)
					}
					s[j] = dot * scale
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for d := 0; d < hd; d++ {
					var acc float64
					for j := range s {
						acc += s[j] * at(v, d, h, j, b, nk)
					}
					out[((b*n+i)*H+h)*hd+d] = float32(acc / sum)
				}
			}
		}
	}
	return out
}

// TestAttention checks nn.Attention under every attention path of the
// kernel policy against a float64 reference: the fused kernel, flash
// attention, and scores with and without chunks of queries.
func TestAttention(t *testing.T) {
	const hd, H, n, nk, B = 16, 3, 37, 29, 2
	r := rand.New(rand.NewPCG(21, 22))
	q, k, v := randn(r, hd*H*n*B), randn(r, hd*H*nk*B), randn(r, hd*H*nk*B)
	scale := 1 / math.Sqrt(hd)
	want := attentionRef(q, k, v, hd, H, n, nk, B, scale)
	for _, tc := range []struct {
		name string
		p    kernels.Policy
	}{
		{"fused", kernels.Policy{Attention: true}},
		{"flash", kernels.Policy{Flash: true}},
		{"scores", kernels.Policy{}},
		{"scores in chunks", kernels.Policy{GEMM: true, ScoreBytes: 4 * nk * H * B * 5}}, // 5 queries per chunk
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.p.Attention && !kernels.Available().Attention {
				t.Skip("built without AVX-512")
			}
			got := run(t, openCPU(t, tc.p), func(bd *backend.Builder) *ggml.Tensor {
				return nn.Attention(bd.G, bd.Input("q", q, hd, H, n, B), bd.Input("k", k, hd, H, nk, B), bd.Input("v", v, hd, H, nk, B), float32(scale))
			})
			assert.Equal(t, []int{hd, H, n, B}, dims4(got.Shape))
			testutil.AllClose(t, want, got.Data, 2e-5, 1e-5)
		})
	}
}

// TestResize checks nn.Resize with and without the bilinear kernel against
// each other and its routing: the kernel takes bilinear modes only.
func TestResize(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	x := randn(r, 9*7*3)
	var outs [][]float32
	for _, pol := range policies {
		got := run(t, openCPU(t, pol.p), func(bd *backend.Builder) *ggml.Tensor {
			return nn.Resize(bd.G, bd.Input("x", x, 9, 7, 3), 20, 11, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
		})
		assert.Equal(t, []int{20, 11, 3, 1}, dims4(got.Shape))
		outs = append(outs, got.Data)
	}
	testutil.AllClose(t, outs[0], outs[1], 1e-6, 1e-6)
}

// TestLayerNormKernel checks nn.LayerNorm with and without the norm kernel against
// each other, on whole rows and on strided views of heads (as the QK norm of
// DA3 sees q and k inside a fused projection).
func TestLayerNormKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const C, T = 96, 7
	x := randn(r, 3*C*T)
	w, b := randn(r, C), randn(r, C)
	wh, bh := randn(r, C/4), randn(r, C/4)
	for i := range x {
		x[i] = 3*x[i] + 1.5 // mean and spread away from 0 and 1
	}
	var outs [][][]float32
	for _, pol := range policies {
		var got [][]float32
		for _, view := range []bool{false, true} {
			out := run(t, openCPU(t, pol.p), func(bd *backend.Builder) *ggml.Tensor {
				in := bd.Input("x", x, 3*C, T)
				if view { // the second third of each token as 4 heads of C/4: [C/4, 4, T], rows 4 floats apart
					l := nn.LayerNorm{Weight: bd.Input("w", wh, C/4), Bias: bd.Input("b", bh, C/4), Eps: 1e-5}
					return l.Forward(bd.G, in.View(bd.G, C*4, []int{C / 4, 4, T}, []int{C, 3 * C * 4}))
				}
				l := nn.LayerNorm{Weight: bd.Input("w", w, C), Bias: bd.Input("b", b, C), Eps: 1e-6}
				return l.Forward(bd.G, in.View(bd.G, 0, []int{C, T}, []int{3 * C * 4}))
			})
			got = append(got, out.Data)
		}
		outs = append(outs, got)
	}
	for i := range outs[0] {
		testutil.AllClose(t, outs[0][i], outs[1][i], 2e-6, 2e-6)
	}
	// Against float64, whole rows.
	rows := make([]float32, 0, C*T)
	for tk := range T {
		rows = append(rows, x[tk*3*C:tk*3*C+C]...)
	}
	want := f32(layerNormRef(rows, w, b, C, T, 1e-6))
	testutil.AllClose(t, want, outs[1][0], 2e-6, 2e-6)
}

// TestPolicyRouting checks that each layer asks the graph's kernel policy:
// with a kernel turned on (and available) the layer builds its custom op,
// with it off ggml's ops.
func TestPolicyRouting(t *testing.T) {
	avail := kernels.Available()
	for _, tc := range []struct {
		name  string
		on    kernels.Policy
		build func(g *ggml.Context) *ggml.Tensor
		ggml  string // the op without the kernel
	}{
		{"Linear", kernels.Policy{GEMM: true}, func(g *ggml.Context) *ggml.Tensor {
			l := nn.Linear{Weight: g.NewTensor(ggml.TypeF32, 8, 4), Bias: g.NewTensor(ggml.TypeF32, 4)}
			return l.ForwardAct(g, g.NewTensor(ggml.TypeF32, 8, 3), kernels.ActGELU)
		}, "GELU_ERF"},
		{"Linear q8_0", kernels.Policy{GEMM: true}, func(g *ggml.Context) *ggml.Tensor {
			l := nn.Linear{Weight: g.NewTensor(ggml.TypeQ8_0, 32, 4)}
			return l.Forward(g, g.NewTensor(ggml.TypeF32, 32, 3))
		}, "MUL_MAT"},
		{"Conv2D", kernels.Policy{GEMM: true}, func(g *ggml.Context) *ggml.Tensor {
			c := nn.Conv2D{Weight: g.NewTensor(ggml.TypeF32, 3, 3, 2, 4), Params: ggml.Conv2DParams{Pad: 1}}
			return c.Forward(g, g.NewTensor(ggml.TypeF32, 9, 9, 2, 1))
		}, "RESHAPE"},
		{"Attention", kernels.Policy{Attention: true}, func(g *ggml.Context) *ggml.Tensor {
			q := g.NewTensor(ggml.TypeF32, 16, 2, 10)
			return nn.Attention(g, q, q, q, 0.25)
		}, "CONT"},
		{"Resize", kernels.Policy{Resize: true}, func(g *ggml.Context) *ggml.Tensor {
			return nn.Resize(g, g.NewTensor(ggml.TypeF32, 9, 9, 2), 20, 20, ggml.ScaleBilinear)
		}, "UPSCALE"},
		{"LayerNorm", kernels.Policy{Norm: true}, func(g *ggml.Context) *ggml.Tensor {
			l := nn.LayerNorm{Weight: g.NewTensor(ggml.TypeF32, 8), Bias: g.NewTensor(ggml.TypeF32, 8), Eps: 1e-6}
			return l.Forward(g, g.NewTensor(ggml.TypeF32, 8, 3))
		}, "ADD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, on := range []bool{false, true} {
				g, err := ggml.NewContext(64)
				require.NoError(t, err)
				if on {
					kernels.SetPolicy(g, tc.on)
				}
				want := tc.ggml
				if m := tc.on.Mask(); on && m.GEMM == tc.on.GEMM && m.Attention == tc.on.Attention && m.Resize == tc.on.Resize {
					want = "CUSTOM"
				}
				assert.Equal(t, want, tc.build(g).Op(), fmt.Sprintf("kernel on: %v (available: %+v)", on, avail))
				require.NoError(t, g.Close())
			}
		})
	}
	// The resize and norm kernels are portable: they do not depend on AVX-512.
	assert.True(t, avail.Resize)
	assert.True(t, avail.Norm)
}
