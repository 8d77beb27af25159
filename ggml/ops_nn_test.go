package ggml_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// im2colRef unfolds x for a [KW,KH,IC,·] kernel into [IC·KH·KW, OW, OH, N],
// the patch element (ic, ky, kx) at ic·KH·KW + ky·KW + kx.
func im2colRef(KW, KH int, x *optest.ND, p ggml.Conv2DParams) *optest.ND {
	s, pad, d := max(p.Stride, 1), p.Pad, max(p.Dilation, 1)
	W, H, IC, N := x.Ne[0], x.Ne[1], x.Ne[2], x.Ne[3]
	OW := (W+2*pad-d*(KW-1)-1)/s + 1
	OH := (H+2*pad-d*(KH-1)-1)/s + 1
	out := optest.NewND(IC*KH*KW, OW, OH, N)
	out.Each(func(e, ox, oy, n int) {
		ic, ky, kx := e/(KH*KW), e/KW%KH, e%KW
		ix, iy := ox*s+kx*d-pad, oy*s+ky*d-pad
		if ix >= 0 && ix < W && iy >= 0 && iy < H {
			out.Set(x.At(ix, iy, ic, n), e, ox, oy, n)
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
	var cases []optest.Case
	for _, v := range variants {
		cases = append(cases,
			optest.Case{Name: "Conv2D/" + v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				k, kr := h.Rand(rng, v.k[:]...)
				x, xr := h.Rand(rng, v.x[:]...)
				return k.Conv2D(h.G, x, v.p), optest.ConvRef(kr, xr, v.p)
			}, Atol: 1e-4, Rtol: 1e-5},
			optest.Case{Name: "Conv2DDirect/" + v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				k, kr := h.Rand(rng, v.k[:]...)
				x, xr := h.Rand(rng, v.x[:]...)
				return k.Conv2DDirect(h.G, x, v.p), optest.ConvRef(kr, xr, v.p)
			}, Atol: 1e-4, Rtol: 1e-5},
			optest.Case{Name: "Im2Col/" + v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				k := h.G.NewTensor(ggml.TypeF32, v.k[:]...)
				x, xr := h.Rand(rng, v.x[:]...)
				return k.Im2Col(h.G, x, v.p, ggml.TypeF32), im2colRef(v.k[0], v.k[1], xr, v.p)
			}},
		)
	}
	// f16 kernels: the kernel and (in the kernel's type) the data are rounded.
	cases = append(cases,
		optest.Case{Name: "Conv2D/f16 kernel", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			kd := optest.Randn(rng, 3*3*4*5, 1)
			k := h.Input(ggml.TypeF16, kd, 3, 3, 4, 5)
			x, xr := h.Rand(rng, 8, 6, 4, 1)
			return k.Conv2D(h.G, x, ggml.Conv2DParams{Pad: 1}), optest.ConvRef(optest.NDFrom(kd, 3, 3, 4, 5).Map(optest.RoundF16), xr.Map(optest.RoundF16), ggml.Conv2DParams{Pad: 1})
		}, Atol: 1e-3, Rtol: 1e-3},
		optest.Case{Name: "Conv2DDirect/f16 kernel", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			kd := optest.Randn(rng, 3*3*4*5, 1)
			k := h.Input(ggml.TypeF16, kd, 3, 3, 4, 5)
			x, xr := h.Rand(rng, 8, 6, 4, 1)
			return k.Conv2DDirect(h.G, x, ggml.Conv2DParams{Pad: 1}), optest.ConvRef(optest.NDFrom(kd, 3, 3, 4, 5).Map(optest.RoundF16), xr.Map(optest.RoundF16), ggml.Conv2DParams{Pad: 1})
		}, Atol: 1e-3, Rtol: 1e-3},
		optest.Case{Name: "Im2Col/f16", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			k := h.G.NewTensor(ggml.TypeF16, 3, 3, 2, 1)
			x, xr := h.Rand(rng, 6, 5, 2, 1)
			return k.Im2Col(h.G, x, ggml.Conv2DParams{Pad: 1}, ggml.TypeF16), im2colRef(3, 3, xr, ggml.Conv2DParams{Pad: 1}).Map(optest.RoundF16)
		}},
	)
	optest.RunCases(t, cases)
}

// convTransposeRef is PyTorch's conv_transpose2d with padding 0 and no
// bias: kernel [KW,KH,OC,IC] (torch (IC,OC,KH,KW) reversed) over x [W,H,IC,N].
func convTransposeRef(k, x *optest.ND, s int) *optest.ND {
	KW, KH, OC, IC := k.Ne[0], k.Ne[1], k.Ne[2], k.Ne[3]
	W, H, N := x.Ne[0], x.Ne[1], x.Ne[3]
	out := optest.NewND((W-1)*s+KW, (H-1)*s+KH, OC, N)
	x.Each(func(ix, iy, ic, n int) {
		for oc := 0; oc < OC; oc++ {
			for ky := 0; ky < KH; ky++ {
				for kx := 0; kx < KW; kx++ {
					ox, oy := ix*s+kx, iy*s+ky
					out.Set(out.At(ox, oy, oc, n)+x.At(ix, iy, ic, n)*k.At(kx, ky, oc, ic), ox, oy, oc, n)
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
	var cases []optest.Case
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
		cases = append(cases, optest.Case{Name: v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			kd := optest.Randn(rng, optest.Prod(v.k[:]), 1)
			k := h.Input(ggml.TypeF16, kd, v.k[:]...)
			x, xr := h.Rand(rng, v.x[:]...)
			return k.ConvTranspose2D(h.G, x, v.stride), convTransposeRef(optest.NDFrom(kd, v.k[:]...).Map(optest.RoundF16), xr.Map(optest.RoundF16), v.stride)
		}, Atol: 1e-5, Rtol: 1e-5})
	}
	optest.RunCases(t, cases)
}

// poolRef is PyTorch's max_pool2d / avg_pool2d (count_include_pad=True,
// ceil_mode=False): padding never wins a max and counts as zeros in an average.
func poolRef(x *optest.ND, op ggml.PoolOp, k, s, p int) *optest.ND {
	OW, OH := (x.Ne[0]+2*p-k)/s+1, (x.Ne[1]+2*p-k)/s+1
	out := optest.NewND(OW, OH, x.Ne[2], x.Ne[3])
	out.Each(func(ox, oy, c, n int) {
		acc := math.Inf(-1)
		if op == ggml.PoolAvg {
			acc = 0
		}
		for ky := 0; ky < k; ky++ {
			for kx := 0; kx < k; kx++ {
				ix, iy := ox*s+kx-p, oy*s+ky-p
				if ix < 0 || ix >= x.Ne[0] || iy < 0 || iy >= x.Ne[1] {
					continue
				}
				if op == ggml.PoolAvg {
					acc += x.At(ix, iy, c, n)
				} else {
					acc = math.Max(acc, x.At(ix, iy, c, n))
				}
			}
		}
		if op == ggml.PoolAvg {
			acc /= float64(k * k)
		}
		out.Set(acc, ox, oy, c, n)
	})
	return out
}

func TestPool2D(t *testing.T) {
	var cases []optest.Case
	for _, op := range []struct {
		name string
		op   ggml.PoolOp
	}{{"max", ggml.PoolMax}, {"avg", ggml.PoolAvg}} {
		for _, v := range []struct {
			name    string
			k, s, p int
		}{{"2x2 stride 2", 2, 2, 0}, {"3x3 stride 1 pad 1", 3, 1, 1}, {"3x3 stride 2 pad 1", 3, 2, 1}} {
			cases = append(cases, optest.Case{Name: op.name + "/" + v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				x, xr := h.Rand(rng, 9, 7, 3, 2)
				return x.Pool2D(h.G, op.op, v.k, v.s, v.p), poolRef(xr, op.op, v.k, v.s, v.p)
			}, Atol: 1e-6, Rtol: 1e-6})
		}
	}
	optest.RunCases(t, cases)
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

func interpolateRef(x *optest.ND, w, h int, mode ggml.ScaleMode) *optest.ND {
	W, H := x.Ne[0], x.Ne[1]
	out := optest.NewND(w, h, x.Ne[2], x.Ne[3])
	align := mode&ggml.ScaleAlignCorners != 0
	clampIdx := func(i, n int) int { return min(max(i, 0), n-1) }
	out.Each(func(ox, oy, c, n int) {
		var v float64
		switch mode &^ ggml.ScaleAlignCorners {
		case ggml.ScaleNearest:
			v = x.At(interpNearestIdx(ox, W, w), interpNearestIdx(oy, H, h), c, n)
		case ggml.ScaleBilinear:
			sx, sy := interpSrc(ox, W, w, align, false), interpSrc(oy, H, h, align, false)
			x0, y0 := int(sx), int(sy)
			lx, ly := sx-float64(x0), sy-float64(y0)
			x1, y1 := min(x0+1, W-1), min(y0+1, H-1)
			v = (1-ly)*((1-lx)*x.At(x0, y0, c, n)+lx*x.At(x1, y0, c, n)) +
				ly*((1-lx)*x.At(x0, y1, c, n)+lx*x.At(x1, y1, c, n))
		case ggml.ScaleBicubic:
			sx, sy := interpSrc(ox, W, w, align, true), interpSrc(oy, H, h, align, true)
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			wx, wy := cubicWeights(sx-float64(x0)), cubicWeights(sy-float64(y0))
			for j := 0; j < 4; j++ {
				var row float64
				for i := 0; i < 4; i++ {
					row += wx[i] * x.At(clampIdx(x0-1+i, W), clampIdx(y0-1+j, H), c, n)
				}
				v += wy[j] * row
			}
		}
		out.Set(v, ox, oy, c, n)
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
	var cases []optest.Case
	for _, m := range modes {
		for _, s := range sizes {
			cases = append(cases, optest.Case{Name: m.name + "/" + s.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				x, xr := h.Rand(rng, s.in[0], s.in[1], 2, 2)
				return x.Interpolate(h.G, s.out[0], s.out[1], m.mode), interpolateRef(xr, s.out[0], s.out[1], m.mode)
			}, Atol: 1e-5, Rtol: 1e-5})
		}
	}
	optest.RunCases(t, cases)
}

// TestInterpolateNearestDeviation pins a known difference from PyTorch:
// ggml's nearest computes src = floor(dst / (out/in)) with the ratio rounded
// to float32, so where the exact source position is an integer it can land
// one pixel lower than torch's floor(dst · (in/out)). Resizing 14 → 4 picks
// source columns 0 3 6 10 where torch picks 0 3 7 10 (exactly 3.5·dst).
func TestInterpolateNearestDeviation(t *testing.T) {
	h := optest.NewHarness(t, 4)
	d := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	x := h.Input(ggml.TypeF32, d, 14, 1)
	got := h.Compute(x.Interpolate(h.G, 4, 1, ggml.ScaleNearest))[0]
	assert.Equal(t, []float32{0, 3, 6, 10}, got, "ggml")
	torch := make([]float32, 4)
	for i := range torch {
		torch[i] = float32(interpNearestIdx(i, 14, 4))
	}
	assert.Equal(t, []float32{0, 3, 7, 10}, torch, "PyTorch")
}

// ropeNeoXRef rotates the pairs (k, k+dims/2), k < dims/2, of each row of
// x [D, heads, tokens, B] by θ = pos·base^(−2k/dims); dims beyond are copied.
func ropeNeoXRef(x *optest.ND, pos []int32, dims int, base float64) *optest.ND {
	r := &optest.ND{Ne: x.Ne, V: append([]float64(nil), x.V...)}
	half := dims / 2
	for i3 := 0; i3 < x.Ne[3]; i3++ {
		for i2 := 0; i2 < x.Ne[2]; i2++ {
			for i1 := 0; i1 < x.Ne[1]; i1++ {
				for k := 0; k < half; k++ {
					th := float64(pos[i2]) * math.Pow(base, -2*float64(k)/float64(dims))
					a, b := x.At(k, i1, i2, i3), x.At(k+half, i1, i2, i3)
					r.Set(a*math.Cos(th)-b*math.Sin(th), k, i1, i2, i3)
					r.Set(a*math.Sin(th)+b*math.Cos(th), k+half, i1, i2, i3)
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
func ropeVisionRef(x *optest.ND, pos []int32, s0 int, base float64) *optest.ND {
	r := optest.NewND(x.Ne[:]...)
	n := x.Ne[0] / 2
	N := x.Ne[2]
	for i3 := 0; i3 < x.Ne[3]; i3++ {
		for i2 := 0; i2 < N; i2++ {
			for i1 := 0; i1 < x.Ne[1]; i1++ {
				for i := 0; i < n; i++ {
					p, j := pos[i2], i
					if i >= s0 {
						p, j = pos[i2+N], i-s0
					}
					th := float64(p) * math.Pow(base, -2*float64(j)/float64(n))
					a, b := x.At(i, i1, i2, i3), x.At(i+n, i1, i2, i3)
					r.Set(a*math.Cos(th)-b*math.Sin(th), i, i1, i2, i3)
					r.Set(a*math.Sin(th)+b*math.Cos(th), i+n, i1, i2, i3)
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
	optest.RunCases(t, []optest.Case{
		// DA3's 2-D RoPE: each 64-dim head is split into y and x halves of
		// 32 rotated with NeoX pairs (k, k+16) and θ_k = p·100^(−2k/32); the
		// halves are rows of a [32, 2·heads, tokens] view.
		{Name: "NeoX base 100 on 32-dim rows", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 32, 6, 40, 1)
			pos := positions(rng, 40, 38)
			p := h.InputI32(pos, 40)
			return x.RoPEExt(h.G, p, ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100}), ropeNeoXRef(xr, pos, 32, 100)
		}, Atol: 2e-5, Rtol: 1e-5},
		{Name: "NeoX partial dims", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 16, 2, 5, 2)
			pos := positions(rng, 5, 100)
			p := h.InputI32(pos, 5)
			return x.RoPEExt(h.G, p, ggml.RoPEParams{Dims: 8, Mode: ggml.RoPENeoX, Base: 10000}), ropeNeoXRef(xr, pos, 8, 10000)
		}, Atol: 5e-5, Rtol: 1e-5},
		{Name: "NeoX on a permuted view", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 32, 7, 3) // [D, tokens, heads]
			pos := positions(rng, 7, 38)
			p := h.InputI32(pos, 7)
			v := x.Permute(h.G, 0, 2, 1) // [D, heads, tokens]
			return v.RoPEExt(h.G, p, ggml.RoPEParams{Mode: ggml.RoPENeoX, Base: 100}), ropeNeoXRef(xr.Permute(0, 2, 1), pos, 32, 100)
		}, Atol: 2e-5, Rtol: 1e-5},
		{Name: "Multi vision", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			const D, N = 32, 12
			x, xr := h.Rand(rng, D, 3, N, 1)
			pos := positions(rng, 4*N, 20)
			p := h.InputI32(pos, 4*N)
			y := x.RoPEMulti(h.G, p, [4]int{8, 8, 0, 0}, ggml.RoPEParams{Dims: D / 2, Mode: ggml.RoPEVision, Base: 100})
			return y, ropeVisionRef(xr, pos, 8, 100)
		}, Atol: 2e-5, Rtol: 1e-5},
		{Name: "Multi vision uneven sections", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			const D, N = 16, 6
			x, xr := h.Rand(rng, D, 2, N, 1)
			pos := positions(rng, 4*N, 20)
			p := h.InputI32(pos, 4*N)
			y := x.RoPEMulti(h.G, p, [4]int{3, 5, 0, 0}, ggml.RoPEParams{Dims: D / 2, Mode: ggml.RoPEVision, Base: 10000})
			return y, ropeVisionRef(xr, pos, 3, 10000)
		}, Atol: 2e-5, Rtol: 1e-5},
	})
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
	var cases []optest.Case
	for _, v := range variants {
		cases = append(cases, optest.Case{Name: v.name, Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			q, qr := h.Rand(rng, v.D, v.Nq, v.H, v.B)
			kd, vd := optest.Randn(rng, v.D*v.Nk*v.Hk*v.B, 1), optest.Randn(rng, v.Dv*v.Nk*v.Hk*v.B, 1)
			k := h.Input(v.kv, kd, v.D, v.Nk, v.Hk, v.B)
			vv := h.Input(v.kv, vd, v.Dv, v.Nk, v.Hk, v.B)
			kr, vr := optest.NDFrom(kd, v.D, v.Nk, v.Hk, v.B), optest.NDFrom(vd, v.Dv, v.Nk, v.Hk, v.B)
			if v.kv == ggml.TypeF16 {
				qr, kr, vr = qr.Map(optest.RoundF16), kr.Map(optest.RoundF16), vr.Map(optest.RoundF16)
			}
			var m *ggml.Tensor
			var mr *optest.ND
			if v.mask {
				md := optest.Randn(rng, v.Nk*v.Nq, 1)
				for i := range md {
					if i%v.Nk > 0 && rng.IntN(4) == 0 {
						md[i] = float32(math.Inf(-1))
					}
				}
				m = h.Input(ggml.TypeF16, md, v.Nk, v.Nq)
				mr = optest.NDFrom(md, v.Nk, v.Nq).Map(optest.RoundF16)
			}
			scale := 1 / math.Sqrt(float64(v.D))
			return q.FlashAttnExt(h.G, k, vv, m, float32(scale)), optest.AttnRef(qr, kr, vr, mr, scale)
		}, Atol: v.atol, Rtol: v.rtol})
	}
	// DA3's attention layout: q, k, v come from a [D, H, N] projection
	// permuted to [D, N, H] views.
	cases = append(cases, optest.Case{Name: "permuted views", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
		const D, H, N = 16, 3, 11
		qx, qxr := h.Rand(rng, D, H, N)
		kx, kxr := h.Rand(rng, D, H, N)
		vx, vxr := h.Rand(rng, D, H, N)
		q, k, v := qx.Permute(h.G, 0, 2, 1), kx.Permute(h.G, 0, 2, 1), vx.Permute(h.G, 0, 2, 1)
		return q.FlashAttnExt(h.G, k, v, nil, 0.25), optest.AttnRef(qxr.Permute(0, 2, 1), kxr.Permute(0, 2, 1), vxr.Permute(0, 2, 1), nil, 0.25)
	}, Atol: 1e-5, Rtol: 1e-5})
	optest.RunCases(t, cases)
}
