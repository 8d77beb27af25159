package ggml_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
)

// convRef is a 2-D cross-correlation (PyTorch conv2d without bias):
// kernel [KW,KH,IC,OC] over x [W,H,IC,N] with zero padding.
func convRef(k, x *nd, p ggml.Conv2DParams) *nd {
	s, pad, d := max(p.Stride, 1), p.Pad, max(p.Dilation, 1)
	KW, KH, IC, OC := k.ne[0], k.ne[1], k.ne[2], k.ne[3]
	W, H, N := x.ne[0], x.ne[1], x.ne[3]
	OW := (W+2*pad-d*(KW-1)-1)/s + 1
	OH := (H+2*pad-d*(KH-1)-1)/s + 1
	out := newND(OW, OH, OC, N)
	out.each(func(ox, oy, oc, n int) {
		var sum float64
		for ic := 0; ic < IC; ic++ {
			for ky := 0; ky < KH; ky++ {
				for kx := 0; kx < KW; kx++ {
					ix, iy := ox*s+kx*d-pad, oy*s+ky*d-pad
					if ix >= 0 && ix < W && iy >= 0 && iy < H {
						sum += k.at(kx, ky, ic, oc) * x.at(ix, iy, ic, n)
					}
				}
			}
		}
		out.set(sum, ox, oy, oc, n)
	})
	return out
}

// im2colRef unfolds x for a [KW,KH,IC,·] kernel into [IC·KH·KW, OW, OH, N],
// the patch element (ic, ky, kx) at ic·KH·KW + ky·KW + kx.
func im2colRef(KW, KH int, x *nd, p ggml.Conv2DParams) *nd {
	s, pad, d := max(p.Stride, 1), p.Pad, max(p.Dilation, 1)
	W, H, IC, N := x.ne[0], x.ne[1], x.ne[2], x.ne[3]
	OW := (W+2*pad-d*(KW-1)-1)/s + 1
	OH := (H+2*pad-d*(KH-1)-1)/s + 1
	out := newND(IC*KH*KW, OW, OH, N)
	out.each(func(e, ox, oy, n int) {
		ic, ky, kx := e/(KH*KW), e/KW%KH, e%KW
		ix, iy := ox*s+kx*d-pad, oy*s+ky*d-pad
		if ix >= 0 && ix < W && iy >= 0 && iy < H {
			out.set(x.at(ix, iy, ic, n), e, ox, oy, n)
		}
	})
	return out
}

func TestConv2D(t *testing.T) {
	type variant struct {
		name string
		k, x [4]int // kernel [KW,KH,IC,OC], data [W,H,IC,N]
		p    ggml.Conv2DParams
	}
	variants := []variant{
		{"3x3 pad 1", [4]int{3, 3, 4, 5}, [4]int{9, 7, 4, 1}, ggml.Conv2DParams{Pad: 1}},
		{"1x1", [4]int{1, 1, 6, 3}, [4]int{5, 4, 6, 2}, ggml.Conv2DParams{}},
		{"stride 2", [4]int{3, 3, 3, 4}, [4]int{10, 9, 3, 1}, ggml.Conv2DParams{Stride: 2, Pad: 1}},
		{"dilation 2", [4]int{3, 3, 2, 3}, [4]int{11, 9, 2, 2}, ggml.Conv2DParams{Pad: 2, Dilation: 2}},
		{"patch embed 4x4 stride 4", [4]int{4, 4, 3, 8}, [4]int{12, 8, 3, 1}, ggml.Conv2DParams{Stride: 4}},
		{"non-square 5x3", [4]int{5, 3, 2, 2}, [4]int{8, 6, 2, 1}, ggml.Conv2DParams{Stride: 1, Pad: 2}},
	}
	var cases []opCase
	for _, v := range variants {
		cases = append(cases,
			opCase{name: "Conv2D/" + v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				k, kr := h.rand(rng, v.k[:]...)
				x, xr := h.rand(rng, v.x[:]...)
				return k.Conv2D(h.g, x, v.p), convRef(kr, xr, v.p)
			}, atol: 1e-4, rtol: 1e-5},
			opCase{name: "Conv2DDirect/" + v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				k, kr := h.rand(rng, v.k[:]...)
				x, xr := h.rand(rng, v.x[:]...)
				return k.Conv2DDirect(h.g, x, v.p), convRef(kr, xr, v.p)
			}, atol: 1e-4, rtol: 1e-5},
			opCase{name: "Im2Col/" + v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				k := h.g.NewTensor(ggml.TypeF32, v.k[:]...)
				x, xr := h.rand(rng, v.x[:]...)
				return k.Im2Col(h.g, x, v.p, ggml.TypeF32), im2colRef(v.k[0], v.k[1], xr, v.p)
			}},
		)
	}
	// f16 kernels: the kernel and (in the kernel's type) the data are rounded.
	cases = append(cases,
		opCase{name: "Conv2D/f16 kernel", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			kd := randn(rng, 3*3*4*5, 1)
			k := h.input(ggml.TypeF16, kd, 3, 3, 4, 5)
			x, xr := h.rand(rng, 8, 6, 4, 1)
			return k.Conv2D(h.g, x, ggml.Conv2DParams{Pad: 1}), convRef(ndFrom(kd, 3, 3, 4, 5).mapv(roundF16), xr.mapv(roundF16), ggml.Conv2DParams{Pad: 1})
		}, atol: 1e-3, rtol: 1e-3},
		opCase{name: "Conv2DDirect/f16 kernel", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			kd := randn(rng, 3*3*4*5, 1)
			k := h.input(ggml.TypeF16, kd, 3, 3, 4, 5)
			x, xr := h.rand(rng, 8, 6, 4, 1)
			return k.Conv2DDirect(h.g, x, ggml.Conv2DParams{Pad: 1}), convRef(ndFrom(kd, 3, 3, 4, 5).mapv(roundF16), xr.mapv(roundF16), ggml.Conv2DParams{Pad: 1})
		}, atol: 1e-3, rtol: 1e-3},
		opCase{name: "Im2Col/f16", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			k := h.g.NewTensor(ggml.TypeF16, 3, 3, 2, 1)
			x, xr := h.rand(rng, 6, 5, 2, 1)
			return k.Im2Col(h.g, x, ggml.Conv2DParams{Pad: 1}, ggml.TypeF16), im2colRef(3, 3, xr, ggml.Conv2DParams{Pad: 1}).mapv(roundF16)
		}},
	)
	runOpCases(t, cases)
}

// convTransposeRef is PyTorch's conv_transpose2d with padding 0 and no
// bias: kernel [KW,KH,OC,IC] (torch (IC,OC,KH,KW) reversed) over x [W,H,IC,N].
func convTransposeRef(k, x *nd, s int) *nd {
	KW, KH, OC, IC := k.ne[0], k.ne[1], k.ne[2], k.ne[3]
	W, H, N := x.ne[0], x.ne[1], x.ne[3]
	out := newND((W-1)*s+KW, (H-1)*s+KH, OC, N)
	x.each(func(ix, iy, ic, n int) {
		for oc := 0; oc < OC; oc++ {
			for ky := 0; ky < KH; ky++ {
				for kx := 0; kx < KW; kx++ {
					i := out.idx(ix*s+kx, iy*s+ky, oc, n)
					out.v[i] += x.at(ix, iy, ic, n) * k.at(kx, ky, oc, ic)
				}
			}
		}
	})
	_ = IC
	return out
}

func TestConvTranspose2D(t *testing.T) {
	// The CPU kernel takes an f16 kernel and rounds the data to f16 too; the
	// products are accumulated in f32, so the reference rounds both inputs.
	var cases []opCase
	for _, v := range []struct {
		name   string
		k, x   [4]int
		stride int
	}{
		{"2x2 stride 2 (DPT upsample)", [4]int{2, 2, 3, 4}, [4]int{5, 4, 4, 1}, 2},
		{"4x4 stride 4", [4]int{4, 4, 2, 3}, [4]int{3, 3, 3, 1}, 4},
		{"3x3 stride 2 overlapping", [4]int{3, 3, 2, 2}, [4]int{4, 3, 2, 1}, 2},
		{"3x3 stride 1", [4]int{3, 3, 3, 2}, [4]int{4, 4, 2, 1}, 1},
		// ggml's CPU kernel computes only image 0 of a batch; the binding
		// splits the batch.
		{"batch of 3", [4]int{2, 2, 3, 4}, [4]int{3, 2, 4, 3}, 2},
	} {
		cases = append(cases, opCase{name: v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			kd := randn(rng, prod(v.k[:]), 1)
			k := h.input(ggml.TypeF16, kd, v.k[:]...)
			x, xr := h.rand(rng, v.x[:]...)
			return k.ConvTranspose2D(h.g, x, v.stride), convTransposeRef(ndFrom(kd, v.k[:]...).mapv(roundF16), xr.mapv(roundF16), v.stride)
		}, atol: 1e-5, rtol: 1e-5})
	}
	runOpCases(t, cases)
}

// poolRef is PyTorch's max_pool2d / avg_pool2d (count_include_pad=True,
// ceil_mode=False): padding never wins a max and counts as zeros in an average.
func poolRef(x *nd, op ggml.PoolOp, k, s, p int) *nd {
	OW, OH := (x.ne[0]+2*p-k)/s+1, (x.ne[1]+2*p-k)/s+1
	out := newND(OW, OH, x.ne[2], x.ne[3])
	out.each(func(ox, oy, c, n int) {
		acc := math.Inf(-1)
		if op == ggml.PoolAvg {
			acc = 0
		}
		for ky := 0; ky < k; ky++ {
			for kx := 0; kx < k; kx++ {
				ix, iy := ox*s+kx-p, oy*s+ky-p
				if ix < 0 || ix >= x.ne[0] || iy < 0 || iy >= x.ne[1] {
					continue
				}
				if op == ggml.PoolAvg {
					acc += x.at(ix, iy, c, n)
				} else {
					acc = math.Max(acc, x.at(ix, iy, c, n))
				}
			}
		}
		if op == ggml.PoolAvg {
			acc /= float64(k * k)
		}
		out.set(acc, ox, oy, c, n)
	})
	return out
}

func TestPool2D(t *testing.T) {
	var cases []opCase
	for _, op := range []struct {
		name string
		op   ggml.PoolOp
	}{{"max", ggml.PoolMax}, {"avg", ggml.PoolAvg}} {
		for _, v := range []struct {
			name    string
			k, s, p int
		}{{"2x2 stride 2", 2, 2, 0}, {"3x3 stride 1 pad 1", 3, 1, 1}, {"3x3 stride 2 pad 1", 3, 2, 1}} {
			cases = append(cases, opCase{name: op.name + "/" + v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				x, xr := h.rand(rng, 9, 7, 3, 2)
				return x.Pool2D(h.g, op.op, v.k, v.s, v.p), poolRef(xr, op.op, v.k, v.s, v.p)
			}, atol: 1e-6, rtol: 1e-6})
		}
	}
	runOpCases(t, cases)
}

// The Interpolate references follow PyTorch's F.interpolate with size=
// (aten/src/ATen/native/UpSample.h): scale = in/out, and
//
//	nearest:                 src = min(floor(dst·scale), in−1) in float32
//	bilinear, align=False:   src = max(0, (dst+0.5)·scale − 0.5)
//	bilinear, align=True:    src = dst·(in−1)/(out−1)
//	bicubic:                 as bilinear but src is not clamped at 0; 4 taps
//	                         with A = −0.75 and indices clamped to [0, in−1].
func interpNearestIdx(dst, in, out int) int {
	switch out {
	case in: // torch's nearest_idx special cases
		return dst
	case 2 * in:
		return dst >> 1
	}
	scale := float32(in) / float32(out)
	return min(int(math.Floor(float64(float32(dst)*scale))), in-1)
}

func interpSrc(dst, in, out int, align, cubic bool) float64 {
	if align {
		if out <= 1 {
			return 0
		}
		return float64(dst) * float64(in-1) / float64(out-1)
	}
	src := (float64(dst)+0.5)*float64(in)/float64(out) - 0.5
	if !cubic && src < 0 {
		src = 0
	}
	return src
}

func cubicWeights(t float64) [4]float64 {
	const a = -0.75
	c1 := func(x float64) float64 { return ((a+2)*x-(a+3))*x*x + 1 }
	c2 := func(x float64) float64 { return ((a*x-5*a)*x+8*a)*x - 4*a }
	return [4]float64{c2(t + 1), c1(t), c1(1 - t), c2(2 - t)}
}

func interpolateRef(x *nd, w, h int, mode ggml.ScaleMode) *nd {
	W, H := x.ne[0], x.ne[1]
	out := newND(w, h, x.ne[2], x.ne[3])
	align := mode&ggml.ScaleAlignCorners != 0
	clampIdx := func(i, n int) int { return min(max(i, 0), n-1) }
	out.each(func(ox, oy, c, n int) {
		var v float64
		switch mode &^ ggml.ScaleAlignCorners {
		case ggml.ScaleNearest:
			v = x.at(interpNearestIdx(ox, W, w), interpNearestIdx(oy, H, h), c, n)
		case ggml.ScaleBilinear:
			sx, sy := interpSrc(ox, W, w, align, false), interpSrc(oy, H, h, align, false)
			x0, y0 := int(sx), int(sy)
			lx, ly := sx-float64(x0), sy-float64(y0)
			x1, y1 := min(x0+1, W-1), min(y0+1, H-1)
			v = (1-ly)*((1-lx)*x.at(x0, y0, c, n)+lx*x.at(x1, y0, c, n)) +
				ly*((1-lx)*x.at(x0, y1, c, n)+lx*x.at(x1, y1, c, n))
		case ggml.ScaleBicubic:
			sx, sy := interpSrc(ox, W, w, align, true), interpSrc(oy, H, h, align, true)
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			wx, wy := cubicWeights(sx-float64(x0)), cubicWeights(sy-float64(y0))
			for j := 0; j < 4; j++ {
				var row float64
				for i := 0; i < 4; i++ {
					row += wx[i] * x.at(clampIdx(x0-1+i, W), clampIdx(y0-1+j, H), c, n)
				}
				v += wy[j] * row
			}
		}
		out.set(v, ox, oy, c, n)
	})
	return out
}

func TestInterpolate(t *testing.T) {
	modes := []struct {
		name string
		mode ggml.ScaleMode
	}{
		{"nearest", ggml.ScaleNearest},
		{"bilinear", ggml.ScaleBilinear},
		{"bilinear align corners", ggml.ScaleBilinear | ggml.ScaleAlignCorners},
		{"bicubic", ggml.ScaleBicubic},
		{"bicubic align corners", ggml.ScaleBicubic | ggml.ScaleAlignCorners},
	}
	sizes := []struct {
		name    string
		in, out [2]int
	}{
		{"x2", [2]int{4, 3}, [2]int{8, 6}},
		{"up non-integer", [2]int{5, 4}, [2]int{11, 9}},
		{"down", [2]int{9, 7}, [2]int{4, 3}},
		{"DPT 37 to 74 by 28", [2]int{37, 16}, [2]int{74, 28}},
		{"to one row", [2]int{5, 4}, [2]int{3, 1}},
		{"same size", [2]int{5, 4}, [2]int{5, 4}},
		{"from one pixel", [2]int{1, 1}, [2]int{3, 2}},
	}
	var cases []opCase
	for _, m := range modes {
		for _, s := range sizes {
			cases = append(cases, opCase{name: m.name + "/" + s.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				x, xr := h.rand(rng, s.in[0], s.in[1], 2, 2)
				return x.Interpolate(h.g, s.out[0], s.out[1], m.mode), interpolateRef(xr, s.out[0], s.out[1], m.mode)
			}, atol: 1e-5, rtol: 1e-5})
		}
	}
	runOpCases(t, cases)
}

// TestInterpolateNearestDeviation pins a known difference from PyTorch:
// ggml's nearest computes src = floor(dst / (out/in)) with the ratio rounded
// to float32, so where the exact source position is an integer it can land
// one pixel lower than torch's floor(dst · (in/out)). Resizing 14 → 4 picks
// source columns 0 3 6 10 where torch picks 0 3 7 10 (exactly 3.5·dst).
func TestInterpolateNearestDeviation(t *testing.T) {
	h := newHarness(t, 4)
	d := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	x := h.input(ggml.TypeF32, d, 14, 1)
	got := h.compute(x.Interpolate(h.g, 4, 1, ggml.ScaleNearest))[0]
	assert.Equal(t, []float32{0, 3, 6, 10}, got, "ggml")
	torch := make([]float32, 4)
	for i := range torch {
		torch[i] = float32(interpNearestIdx(i, 14, 4))
	}
	assert.Equal(t, []float32{0, 3, 7, 10}, torch, "PyTorch")
}

// ropeNeoXRef rotates the pairs (k, k+dims/2), k < dims/2, of each row of
// x [D, heads, tokens, B] by θ = pos·base^(−2k/dims); dims beyond are copied.
func ropeNeoXRef(x *nd, pos []int32, dims int, base float64) *nd {
	r := &nd{ne: x.ne, v: append([]float64(nil), x.v...)}
	half := dims / 2
	for i3 := 0; i3 < x.ne[3]; i3++ {
		for i2 := 0; i2 < x.ne[2]; i2++ {
			for i1 := 0; i1 < x.ne[1]; i1++ {
				for k := 0; k < half; k++ {
					th := float64(pos[i2]) * math.Pow(base, -2*float64(k)/float64(dims))
					a, b := x.at(k, i1, i2, i3), x.at(k+half, i1, i2, i3)
					r.set(a*math.Cos(th)-b*math.Sin(th), k, i1, i2, i3)
					r.set(a*math.Sin(th)+b*math.Cos(th), k+half, i1, i2, i3)
				}
			}
		}
	}
	return r
}

// ropeVisionRef is ggml's GGML_ROPE_TYPE_VISION (ggml_rope_multi, used by
// Qwen2-VL's vision encoder): with n = D/2 rotated dims, pair (i, i+n) for
// i < n belongs to section 0 when i < s0 (position pos[0][token], frequency
// index j = i) and to section 1 otherwise (pos[1][token], j = i − s0): the
// frequencies restart in each section. θ = p·base^(−2j/n).
func ropeVisionRef(x *nd, pos []int32, s0 int, base float64) *nd {
	r := newND(x.ne[:]...)
	n := x.ne[0] / 2
	N := x.ne[2]
	for i3 := 0; i3 < x.ne[3]; i3++ {
		for i2 := 0; i2 < N; i2++ {
			for i1 := 0; i1 < x.ne[1]; i1++ {
				for i := 0; i < n; i++ {
					p, j := pos[i2], i
					if i >= s0 {
						p, j = pos[i2+N], i-s0
					}
					th := float64(p) * math.Pow(base, -2*float64(j)/float64(n))
					a, b := x.at(i, i1, i2, i3), x.at(i+n, i1, i2, i3)
					r.set(a*math.Cos(th)-b*math.Sin(th), i, i1, i2, i3)
					r.set(a*math.Sin(th)+b*math.Cos(th), i+n, i1, i2, i3)
				}
			}
		}
	}
	return r
}

func TestRoPE(t *testing.T) {
	positions := func(rng *rand.Rand, n, hi int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(rng.IntN(hi))
		}
		return p
	}
	runOpCases(t, []opCase{
		// DA3's 2-D RoPE: each 64-dim head is split into y and x halves of
		// 32 rotated with NeoX pairs (k, k+16) and θ_k = p·100^(−2k/32); the
		// halves are rows of a [32, 2·heads, tokens] view.
		{name: "NeoX base 100 on 32-dim rows", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 32, 6, 40, 1)
			pos := positions(rng, 40, 38)
			p := h.inputI32(pos, 40)
			return x.RoPEExt(h.g, p, ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100}), ropeNeoXRef(xr, pos, 32, 100)
		}, atol: 2e-5, rtol: 1e-5},
		{name: "NeoX partial dims", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 16, 2, 5, 2)
			pos := positions(rng, 5, 100)
			p := h.inputI32(pos, 5)
			return x.RoPEExt(h.g, p, ggml.RoPEParams{Dims: 8, Mode: ggml.RoPENeoX, Base: 10000}), ropeNeoXRef(xr, pos, 8, 10000)
		}, atol: 5e-5, rtol: 1e-5},
		{name: "NeoX on a permuted view", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 32, 7, 3) // [D, tokens, heads]
			pos := positions(rng, 7, 38)
			p := h.inputI32(pos, 7)
			v := x.Permute(h.g, 0, 2, 1) // [D, heads, tokens]
			return v.RoPEExt(h.g, p, ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100}), ropeNeoXRef(xr.permute(0, 2, 1), pos, 32, 100)
		}, atol: 2e-5, rtol: 1e-5},
		{name: "Multi vision", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			const D, N = 32, 12
			x, xr := h.rand(rng, D, 3, N, 1)
			pos := positions(rng, 4*N, 20)
			p := h.inputI32(pos, 4*N)
			y := x.RoPEMulti(h.g, p, [4]int{8, 8, 0, 0}, ggml.RoPEParams{Dims: D / 2, Mode: ggml.RoPEVision, Base: 100})
			return y, ropeVisionRef(xr, pos, 8, 100)
		}, atol: 2e-5, rtol: 1e-5},
		{name: "Multi vision uneven sections", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			const D, N = 16, 6
			x, xr := h.rand(rng, D, 2, N, 1)
			pos := positions(rng, 4*N, 20)
			p := h.inputI32(pos, 4*N)
			y := x.RoPEMulti(h.g, p, [4]int{3, 5, 0, 0}, ggml.RoPEParams{Dims: D / 2, Mode: ggml.RoPEVision, Base: 10000})
			return y, ropeVisionRef(xr, pos, 3, 10000)
		}, atol: 2e-5, rtol: 1e-5},
	})
}

// attnRef is softmax(q·kᵀ·scale + mask)·v per head, in FlashAttnExt's
// layouts: q [D,Nq,H,B], k [D,Nk,Hkv,B], v [Dv,Nk,Hkv,B], mask [Nk,≥Nq]
// (or nil), result [Dv,H,Nq,B].
func attnRef(q, k, v, mask *nd, scale float64) *nd {
	D, Nq, H, B := q.ne[0], q.ne[1], q.ne[2], q.ne[3]
	Nk, Hkv, Dv := k.ne[1], k.ne[2], v.ne[0]
	out := newND(Dv, H, Nq, B)
	s := make([]float64, Nk)
	for b := 0; b < B; b++ {
		for hd := 0; hd < H; hd++ {
			hk := hd / (H / Hkv)
			for i := 0; i < Nq; i++ {
				mx := math.Inf(-1)
				for j := 0; j < Nk; j++ {
					var dot float64
					for d := 0; d < D; d++ {
						dot += q.at(d, i, hd, b) * k.at(d, j, hk, b)
					}
					s[j] = dot * scale
					if mask != nil {
						s[j] += mask.at(j, i, 0, 0)
					}
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for d := 0; d < Dv; d++ {
					var acc float64
					for j := 0; j < Nk; j++ {
						acc += s[j] * v.at(d, j, hk, b)
					}
					out.set(acc/sum, d, hd, i, b)
				}
			}
		}
	}
	return out
}

func TestFlashAttnExt(t *testing.T) {
	type variant struct {
		name          string
		kv            ggml.Type
		D, Dv         int
		Nq, Nk, H, Hk int
		B             int
		mask          bool
		atol, rtol    float64
	}
	// With f16 K/V the CPU kernel converts q to f16 for q·k and accumulates
	// the f16 V rows in an f16 vector (whatever the requested precision), so
	// the reference rounds q, k and v and the tolerance covers f16
	// accumulation.
	variants := []variant{
		{"f32", ggml.TypeF32, 64, 64, 9, 13, 4, 4, 1, false, 1e-5, 1e-5},
		{"f32 GQA batch", ggml.TypeF32, 32, 16, 5, 7, 6, 2, 2, false, 1e-5, 1e-5},
		{"f32 mask", ggml.TypeF32, 32, 32, 6, 10, 2, 2, 1, true, 1e-5, 1e-5},
		{"f16", ggml.TypeF16, 64, 64, 9, 13, 4, 4, 1, false, 2e-3, 2e-3},
		{"f16 mask", ggml.TypeF16, 64, 64, 8, 21, 3, 3, 1, true, 2e-3, 2e-3},
	}
	var cases []opCase
	for _, v := range variants {
		cases = append(cases, opCase{name: v.name, build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			q, qr := h.rand(rng, v.D, v.Nq, v.H, v.B)
			kd, vd := randn(rng, v.D*v.Nk*v.Hk*v.B, 1), randn(rng, v.Dv*v.Nk*v.Hk*v.B, 1)
			k := h.input(v.kv, kd, v.D, v.Nk, v.Hk, v.B)
			vv := h.input(v.kv, vd, v.Dv, v.Nk, v.Hk, v.B)
			kr, vr := ndFrom(kd, v.D, v.Nk, v.Hk, v.B), ndFrom(vd, v.Dv, v.Nk, v.Hk, v.B)
			if v.kv == ggml.TypeF16 {
				qr, kr, vr = qr.mapv(roundF16), kr.mapv(roundF16), vr.mapv(roundF16)
			}
			var m *ggml.Tensor
			var mr *nd
			if v.mask {
				md := randn(rng, v.Nk*v.Nq, 1)
				for i := range md {
					if i%v.Nk > 0 && rng.IntN(4) == 0 {
						md[i] = float32(math.Inf(-1))
					}
				}
				m = h.input(ggml.TypeF16, md, v.Nk, v.Nq)
				mr = ndFrom(md, v.Nk, v.Nq).mapv(roundF16)
			}
			scale := 1 / math.Sqrt(float64(v.D))
			return q.FlashAttnExt(h.g, k, vv, m, float32(scale)), attnRef(qr, kr, vr, mr, scale)
		}, atol: v.atol, rtol: v.rtol})
	}
	// DA3's attention layout: q, k, v come from a [D, H, N] projection
	// permuted to [D, N, H] views.
	cases = append(cases, opCase{name: "permuted views", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
		const D, H, N = 16, 3, 11
		qx, qxr := h.rand(rng, D, H, N)
		kx, kxr := h.rand(rng, D, H, N)
		vx, vxr := h.rand(rng, D, H, N)
		q, k, v := qx.Permute(h.g, 0, 2, 1), kx.Permute(h.g, 0, 2, 1), vx.Permute(h.g, 0, 2, 1)
		return q.FlashAttnExt(h.g, k, v, nil, 0.25), attnRef(qxr.permute(0, 2, 1), kxr.permute(0, 2, 1), vxr.permute(0, 2, 1), nil, 0.25)
	}, atol: 1e-5, rtol: 1e-5})
	runOpCases(t, cases)
}

func TestCustomExpP1(t *testing.T) {
	// g.Custom with the OpExpP1 kernel directly, on a 4-D input bigger than
	// one row per thread.
	h := newHarness(t, 8)
	rng := newRNG(7)
	d := uniform(rng, 100*9*2*3, -5, 5)
	x := h.input(ggml.TypeF32, d, 100, 9, 2, 3)
	y := h.g.Custom(ggml.OpExpP1, ggml.TypeF32, []int{100, 9, 2, 3}, []*ggml.Tensor{x}, 0)
	require.Equal(t, "expp1", ggml.OpExpP1.Name())
	got := h.compute(y)[0]
	want := ndFrom(d, 100, 9, 2, 3).mapv(func(v float64) float64 { return math.Exp(v) + 1 })
	testutil.AllClose(t, want.f32(), got, 1e-6, 1e-6)
}
