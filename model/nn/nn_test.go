package nn_test

// Each layer is built into a tiny graph, computed on the CPU backend, and
// compared with a naive float64 reference written from the PyTorch definition
// of the layer. Shapes are in ggml order (ne0 fastest).

import (
	"context"
	"log/slog"
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

// openCPU opens a CPU runtime with the kernel policy p (nil: the default,
// every kernel of this build).
func openCPU(t *testing.T, p ...kernels.Policy) *backend.Runtime {
	t.Helper()
	opts := backend.Options{Device: "cpu", Threads: 1, Logger: slog.New(slog.DiscardHandler)}
	if len(p) > 0 {
		opts.Kernels = p[0]
	}
	rt, err := backend.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt
}

// run builds one graph with build and returns its output "y".
func run(t *testing.T, rt *backend.Runtime, build func(b *backend.Builder) *ggml.Tensor) backend.Tensor {
	t.Helper()
	out, err := rt.Run(context.Background(), backend.RunOptions{}, func(b *backend.Builder) error {
		b.Output("y", build(b))
		return nil
	})
	require.NoError(t, err)
	return out["y"]
}

func randn(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// dims4 pads a ggml shape with trailing 1s (Shape drops them).
func dims4(shape []int) []int {
	d := []int{1, 1, 1, 1}
	copy(d, shape)
	return d
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// linearRef is torch's F.linear: y[t, o] = Σ_i W[o, i]·x[t, i] + b[o], with
// W stored torch-style (out, in) row-major, which is ggml [in, out].
func linearRef(w, b, x []float32, in, out, tokens int) []float64 {
	y := make([]float64, out*tokens)
	for tk := 0; tk < tokens; tk++ {
		for o := 0; o < out; o++ {
			var s float64
			for i := 0; i < in; i++ {
				s += float64(w[o*in+i]) * float64(x[tk*in+i])
			}
			if b != nil {
				s += float64(b[o])
			}
			y[tk*out+o] = s
		}
	}
	return y
}

// policies are the kernel policies the layers are tested under: ggml's own
// ops only, and every kernel of this build (the default on the CPU).
var policies = []struct {
	name string
	p    kernels.Policy
}{{"ggml", kernels.Policy{Explicit: true}}, {"kernels", kernels.Policy{}}}

func TestLinear(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) { testLinear(t, openCPU(t, pol.p)) })
	}
}

func testLinear(t *testing.T, rt *backend.Runtime) {
	r := rand.New(rand.NewPCG(1, 2))
	const in, out, tokens, views = 7, 5, 3, 2
	w, b, x := randn(r, in*out), randn(r, out), randn(r, in*tokens*views)
	for _, withBias := range []bool{true, false} {
		got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
			l := nn.Linear{Weight: bd.Input("w", w, in, out)}
			if withBias {
				l.Bias = bd.Input("b", b, out)
			}
			return l.Forward(bd.G, bd.Input("x", x, in, tokens, views))
		})
		assert.Equal(t, []int{out, tokens, views, 1}, dims4(got.Shape))
		var bias []float32
		if withBias {
			bias = b
		}
		want := linearRef(w, bias, x, in, out, tokens*views)
		testutil.AllClose(t, f32(want), got.Data, 1e-5, 1e-5, "bias=%v", withBias)
	}
}

func layerNormRef(x, w, b []float32, c, rows int, eps float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < rows; r++ {
		row := x[r*c : (r+1)*c]
		var mean, v float64
		for _, a := range row {
			mean += float64(a)
		}
		mean /= float64(c)
		for _, a := range row {
			v += (float64(a) - mean) * (float64(a) - mean)
		}
		v /= float64(c) // biased, as torch
		for i, a := range row {
			y[r*c+i] = (float64(a)-mean)/math.Sqrt(v+eps)*float64(w[i]) + float64(b[i])
		}
	}
	return y
}

func TestLayerNorm(t *testing.T) {
	rt := openCPU(t)
	r := rand.New(rand.NewPCG(3, 4))
	const c, rows = 6, 4
	w, b := randn(r, c), randn(r, c)
	// Small-variance rows make eps matter: with var ≈ 1e-4, eps 1e-2 vs 1e-6
	// changes the output by a factor of about 10.
	x := randn(r, c*rows)
	for i := range x[:2*c] {
		x[i] = 0.3 + 0.01*x[i]
	}
	for _, eps := range []float32{1e-6, 1e-2} {
		got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
			l := nn.LayerNorm{Weight: bd.Input("w", w, c), Bias: bd.Input("b", b, c), Eps: eps}
			return l.Forward(bd.G, bd.Input("x", x, c, rows))
		})
		want := layerNormRef(x, w, b, c, rows, float64(eps))
		testutil.AllClose(t, f32(want), got.Data, 1e-4, 1e-4, "eps=%g", eps)
	}
	// The two eps values must give visibly different outputs on the
	// small-variance rows, or the test above would not check eps.
	a := layerNormRef(x, w, b, c, rows, 1e-6)
	d := layerNormRef(x, w, b, c, rows, 1e-2)
	assert.Greater(t, math.Abs(a[0]-d[0]), 0.1)
}

func TestLayerScale(t *testing.T) {
	rt := openCPU(t)
	g, x := []float32{2, -1, 0.5}, []float32{1, 2, 3, 4, 5, 6}
	got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
		l := nn.LayerScale{Gamma: bd.Input("g", g, 3)}
		return l.Forward(bd.G, bd.Input("x", x, 3, 2))
	})
	assert.Equal(t, []float32{2, -2, 1.5, 8, -5, 3}, got.Data)
}

func TestMLP(t *testing.T) {
	rt := openCPU(t)
	r := rand.New(rand.NewPCG(5, 6))
	const in, hid, tokens = 4, 8, 3
	w1, b1, w2, b2 := randn(r, in*hid), randn(r, hid), randn(r, hid*in), randn(r, in)
	x := randn(r, in*tokens)
	got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
		m := nn.MLP{
			FC1: nn.Linear{Weight: bd.Input("w1", w1, in, hid), Bias: bd.Input("b1", b1, hid)},
			FC2: nn.Linear{Weight: bd.Input("w2", w2, hid, in), Bias: bd.Input("b2", b2, in)},
		}
		return m.Forward(bd.G, bd.Input("x", x, in, tokens))
	})
	h := linearRef(w1, b1, x, in, hid, tokens)
	hf := make([]float32, len(h))
	for i, v := range h {
		hf[i] = float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2))) // nn.GELU(): exact erf form
	}
	want := linearRef(w2, b2, hf, hid, in, tokens)
	testutil.AllClose(t, f32(want), got.Data, 1e-4, 1e-4)
}

func TestSwiGLU(t *testing.T) {
	rt := openCPU(t)
	r := rand.New(rand.NewPCG(7, 8))
	const in, hid, tokens, views = 4, 6, 3, 2
	w12, b12 := randn(r, in*2*hid), randn(r, 2*hid)
	w3, b3 := randn(r, hid*in), randn(r, in)
	x := randn(r, in*tokens*views)
	got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
		m := nn.SwiGLU{
			W12: nn.Linear{Weight: bd.Input("w12", w12, in, 2*hid), Bias: bd.Input("b12", b12, 2*hid)},
			W3:  nn.Linear{Weight: bd.Input("w3", w3, hid, in), Bias: bd.Input("b3", b3, in)},
		}
		return m.Forward(bd.G, bd.Input("x", x, in, tokens, views))
	})
	require.Equal(t, []int{in, tokens, views, 1}, dims4(got.Shape))
	// DINOv2 SwiGLUFFN: x1, x2 = w12(x).chunk(2, dim=-1); w3(silu(x1) * x2).
	h := linearRef(w12, b12, x, in, 2*hid, tokens*views)
	g := make([]float32, hid*tokens*views)
	for tk := 0; tk < tokens*views; tk++ {
		for k := 0; k < hid; k++ {
			x1, x2 := h[tk*2*hid+k], h[tk*2*hid+hid+k]
			g[tk*hid+k] = float32(x1 / (1 + math.Exp(-x1)) * x2)
		}
	}
	want := linearRef(w3, b3, g, hid, in, tokens*views)
	testutil.AllClose(t, f32(want), got.Data, 1e-4, 1e-4)
}

// conv2dRef is torch's F.conv2d with weight (OC, IC, KH, KW) (= ggml
// [KW, KH, IC, OC]) on x (N, IC, H, W) (= ggml [W, H, IC, N]), zero padding.
func conv2dRef(x, w, b []float32, W, H, IC, N, KW, KH, OC, stride, pad int) (y []float64, ow, oh int) {
	ow = (W+2*pad-KW)/stride + 1
	oh = (H+2*pad-KH)/stride + 1
	y = make([]float64, ow*oh*OC*N)
	for n := 0; n < N; n++ {
		for oc := 0; oc < OC; oc++ {
			for oy := 0; oy < oh; oy++ {
				for ox := 0; ox < ow; ox++ {
					var s float64
					if b != nil {
						s = float64(b[oc])
					}
					for ic := 0; ic < IC; ic++ {
						for ky := 0; ky < KH; ky++ {
							for kx := 0; kx < KW; kx++ {
								iy, ix := oy*stride-pad+ky, ox*stride-pad+kx
								if iy < 0 || iy >= H || ix < 0 || ix >= W {
									continue
								}
								s += float64(w[((oc*IC+ic)*KH+ky)*KW+kx]) * float64(x[((n*IC+ic)*H+iy)*W+ix])
							}
						}
					}
					y[((n*OC+oc)*oh+oy)*ow+ox] = s
				}
			}
		}
	}
	return y, ow, oh
}

func TestConv2D(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) { testConv2D(t, openCPU(t, pol.p)) })
	}
}

func testConv2D(t *testing.T, rt *backend.Runtime) {
	r := rand.New(rand.NewPCG(9, 10))
	const W, H, IC, OC, N = 7, 5, 3, 4, 2
	x := randn(r, W*H*IC*N)
	cases := []struct {
		name        string
		k           int
		stride, pad int
	}{
		{"3x3 pad1", 3, 1, 1},
		{"3x3 stride2 pad1", 3, 2, 1},
		{"1x1 pointwise", 1, 1, 0},
		{"1x1 stride2 (not pointwise)", 1, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, b := randn(r, tc.k*tc.k*IC*OC), randn(r, OC)
			for _, withBias := range []bool{true, false} {
				got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
					c := nn.Conv2D{
						Weight: bd.Input("w", w, tc.k, tc.k, IC, OC),
						Params: ggml.Conv2DParams{Stride: tc.stride, Pad: tc.pad},
					}
					if withBias {
						c.Bias = bd.Input("b", b, OC)
					}
					return c.Forward(bd.G, bd.Input("x", x, W, H, IC, N))
				})
				var bias []float32
				if withBias {
					bias = b
				}
				want, ow, oh := conv2dRef(x, w, bias, W, H, IC, N, tc.k, tc.k, OC, tc.stride, tc.pad)
				assert.Equal(t, []int{ow, oh, OC, N}, dims4(got.Shape), "bias=%v", withBias)
				testutil.AllClose(t, f32(want), got.Data, 1e-4, 1e-4, "bias=%v", withBias)
			}
		})
	}
}

// convTransposeRef is torch's F.conv_transpose2d with padding 0:
// out[n, oc, y·s+j, x·s+i] += W[ic, oc, j, i]·in[n, ic, y, x], W stored torch
// (IC, OC, KH, KW) row-major = ggml [KW, KH, OC, IC].
func convTransposeRef(x, w, b []float32, W, H, IC, N, K, OC, s int) (y []float64, ow, oh int) {
	ow, oh = (W-1)*s+K, (H-1)*s+K
	y = make([]float64, ow*oh*OC*N)
	for n := 0; n < N; n++ {
		for oc := 0; oc < OC; oc++ {
			for oy := 0; oy < oh; oy++ {
				for ox := 0; ox < ow; ox++ {
					if b != nil {
						y[((n*OC+oc)*oh+oy)*ow+ox] = float64(b[oc])
					}
				}
			}
		}
		for ic := 0; ic < IC; ic++ {
			for iy := 0; iy < H; iy++ {
				for ix := 0; ix < W; ix++ {
					v := float64(x[((n*IC+ic)*H+iy)*W+ix])
					for oc := 0; oc < OC; oc++ {
						for j := 0; j < K; j++ {
							for i := 0; i < K; i++ {
								y[((n*OC+oc)*oh+iy*s+j)*ow+ix*s+i] += float64(w[((ic*OC+oc)*K+j)*K+i]) * v
							}
						}
					}
				}
			}
		}
	}
	return y, ow, oh
}

func TestConvTranspose2D(t *testing.T) {
	rt := openCPU(t)
	r := rand.New(rand.NewPCG(11, 12))
	const W, H, IC, OC = 3, 2, 5, 3
	cases := []struct {
		k, s, n int
		tol     float64
	}{
		// stride == kernel: exact F32 matrix product + pixel shuffle.
		{4, 4, 1, 1e-5},
		{4, 4, 2, 1e-5},
		{2, 2, 1, 1e-5},
		{2, 2, 2, 1e-5},
		// overlapping patches: ggml's kernel, which rounds to F16.
		{3, 2, 1, 2e-2},
		{3, 2, 2, 2e-2},
	}
	for _, tc := range cases {
		x := randn(r, W*H*IC*tc.n)
		w, b := randn(r, tc.k*tc.k*OC*IC), randn(r, OC)
		got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
			c := nn.ConvTranspose2D{Weight: bd.Input("w", w, tc.k, tc.k, OC, IC), Bias: bd.Input("b", b, OC), Stride: tc.s}
			return c.Forward(bd.G, bd.Input("x", x, W, H, IC, tc.n))
		})
		want, ow, oh := convTransposeRef(x, w, b, W, H, IC, tc.n, tc.k, OC, tc.s)
		assert.Equal(t, []int{ow, oh, OC, tc.n}, dims4(got.Shape), "k=%d s=%d n=%d", tc.k, tc.s, tc.n)
		testutil.AllClose(t, f32(want), got.Data, tc.tol, tc.tol, "k=%d s=%d n=%d", tc.k, tc.s, tc.n)
	}
}

// A non-square input and distinct W/H sizes catch a swapped pixel shuffle that
// a square one would hide; no bias.
func TestConvTranspose2DNonSquareNoBias(t *testing.T) {
	rt := openCPU(t)
	r := rand.New(rand.NewPCG(13, 14))
	const W, H, IC, OC, K, N = 5, 2, 2, 3, 2, 2
	x := randn(r, W*H*IC*N)
	w := randn(r, K*K*OC*IC)
	got := run(t, rt, func(bd *backend.Builder) *ggml.Tensor {
		c := nn.ConvTranspose2D{Weight: bd.Input("w", w, K, K, OC, IC), Stride: K}
		return c.Forward(bd.G, bd.Input("x", x, W, H, IC, N))
	})
	want, ow, oh := convTransposeRef(x, w, nil, W, H, IC, N, K, OC, K)
	assert.Equal(t, []int{ow, oh, OC, N}, dims4(got.Shape))
	testutil.AllClose(t, f32(want), got.Data, 1e-5, 1e-5)
}

// TestConv2Ds checks that nn.Conv2Ds finds the convolution layers of a layer
// struct at any depth, in field order: values, pointers, slices and arrays
// of them, inside nested structs and pointers to structs; nil pointers and
// unexported fields are skipped, other layers are not convolutions.
func TestConv2Ds(t *testing.T) {
	type inner struct {
		C  nn.Conv2D
		Cs []*nn.Conv2D
	}
	type layer struct {
		A     nn.Conv2D
		P     *nn.Conv2D
		Nil   *nn.Conv2D
		Arr   [2]nn.Conv2D
		In    *inner
		Iface any
		LN    nn.LayerNorm
		hid   nn.Conv2D
	}
	l := &layer{P: &nn.Conv2D{}, In: &inner{Cs: []*nn.Conv2D{{}, nil, {}}}, Iface: &nn.Conv2D{}}
	want := []*nn.Conv2D{&l.A, l.P, &l.Arr[0], &l.Arr[1], &l.In.C, l.In.Cs[0], l.In.Cs[2], l.Iface.(*nn.Conv2D)}
	got := nn.Conv2Ds(l)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Same(t, want[i], got[i], "layer %d", i)
	}
	_ = l.hid
	assert.Empty(t, nn.Conv2Ds(&nn.LayerNorm{}))
	assert.Empty(t, nn.Conv2Ds(nil))
}
