package ggml_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// binaryRef applies f element-wise with b broadcast (repeated) to a's shape,
// as ggml_add/sub/mul/div do.
func binaryRef(a, b *nd, f func(x, y float64) float64) *nd {
	r := newND(a.ne[:]...)
	a.each(func(i0, i1, i2, i3 int) {
		r.set(f(a.at(i0, i1, i2, i3), b.at(i0%b.ne[0], i1%b.ne[1], i2%b.ne[2], i3%b.ne[3])), i0, i1, i2, i3)
	})
	return r
}

// nonZero returns values with |x| in [0.5, 2) and random signs (divisors).
func nonZero(rng *rand.Rand, n int) []float32 {
	v := uniform(rng, n, 0.5, 2)
	for i := range v {
		if rng.IntN(2) == 0 {
			v[i] = -v[i]
		}
	}
	return v
}

func TestBinaryOps(t *testing.T) {
	ops := []struct {
		name string
		op   func(a *ggml.Tensor, g *ggml.Context, b *ggml.Tensor) *ggml.Tensor
		ref  func(x, y float64) float64
	}{
		{"Add", (*ggml.Tensor).Add, func(x, y float64) float64 { return x + y }},
		{"Sub", (*ggml.Tensor).Sub, func(x, y float64) float64 { return x - y }},
		{"Mul", (*ggml.Tensor).Mul, func(x, y float64) float64 { return x * y }},
		{"Div", (*ggml.Tensor).Div, func(x, y float64) float64 { return x / y }},
	}
	// Operand layouts: a builder returns the node and its reference.
	type operand func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd)
	dense := func(shape ...int) operand {
		return func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			d := nonZero(rng, prod(shape))
			return h.input(ggml.TypeF32, d, shape...), ndFrom(d, shape...)
		}
	}
	// permuted is a [5,4,3,2] view of a [5,3,4,2] tensor (dims 1 and 2 swapped):
	// rows stay contiguous, the tensor does not.
	permuted := func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
		d := nonZero(rng, 5*3*4*2)
		x := h.input(ggml.TypeF32, d, 5, 3, 4, 2)
		return x.Permute(h.g, 0, 2, 1, 3), ndFrom(d, 5, 3, 4, 2).permute(0, 2, 1, 3)
	}
	// transposed is a [5,4,3,2] view of a [4,5,3,2] tensor: not even its rows
	// are contiguous.
	transposed := func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
		d := nonZero(rng, 4*5*3*2)
		x := h.input(ggml.TypeF32, d, 4, 5, 3, 2)
		return x.Transpose(h.g), ndFrom(d, 4, 5, 3, 2).permute(1, 0, 2, 3)
	}
	layouts := []struct {
		name string
		a, b operand
	}{
		{"same shape", dense(5, 4, 3, 2), dense(5, 4, 3, 2)},
		{"broadcast rows", dense(5, 4, 3, 2), dense(5, 1, 3, 1)},
		{"broadcast bias", dense(5, 4, 3, 2), dense(5)},
		{"broadcast inner", dense(6, 4, 3, 2), dense(2, 4, 1, 2)},
		{"broadcast scalar", dense(5, 4, 3, 2), dense(1)},
		{"permuted a", permuted, dense(5, 4, 3, 2)},
		{"permuted a broadcast b", permuted, dense(5, 1, 3, 1)},
		{"permuted b", dense(5, 4, 3, 2), permuted},
		{"transposed b", dense(5, 4, 3, 2), transposed},
		{"permuted a transposed b", permuted, transposed},
	}
	var cases []opCase
	for _, op := range ops {
		for _, l := range layouts {
			cases = append(cases, opCase{
				name: op.name + "/" + l.name,
				build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
					a, ar := l.a(h, rng)
					b, br := l.b(h, rng)
					return op.op(a, h.g, b), binaryRef(ar, br, op.ref)
				},
				atol: 1e-6, rtol: 1e-6,
			})
		}
	}
	runOpCases(t, cases)
}

func TestScale(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "Scale", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 7, 3, 2)
			return x.Scale(h.g, -1.75), xr.mapv(func(v float64) float64 { return -1.75 * v })
		}, atol: 1e-6, rtol: 1e-6},
		{name: "ScaleBias", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 7, 3, 2)
			return x.ScaleBias(h.g, 0.5, 3), xr.mapv(func(v float64) float64 { return 0.5*v + 3 })
		}, atol: 1e-6, rtol: 1e-6},
	})
}

// mulMatRef is ggml_mul_mat: a:[K,M,a2,a3] × b:[K,N,b2,b3] -> [M,N,b2,b3],
// a broadcast over dims 2 and 3.
func mulMatRef(a, b *nd) *nd {
	K, M, N := a.ne[0], a.ne[1], b.ne[1]
	r2, r3 := b.ne[2]/a.ne[2], b.ne[3]/a.ne[3]
	out := newND(M, N, b.ne[2], b.ne[3])
	out.each(func(m, n, i2, i3 int) {
		var s float64
		for k := 0; k < K; k++ {
			s += a.at(k, m, i2/r2, i3/r3) * b.at(k, n, i2, i3)
		}
		out.set(s, m, n, i2, i3)
	})
	return out
}

func TestMulMat(t *testing.T) {
	plain := func(ka, kb [4]int) func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
		return func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			a, ar := h.rand(rng, ka[:]...)
			b, br := h.rand(rng, kb[:]...)
			return a.MulMat(h.g, b), mulMatRef(ar, br)
		}
	}
	// typed quantizes (or converts) the weight a to typ; the reference uses
	// the dequantized weight and, like the kernel, b converted to the
	// weight type's dot-product type (f16, q8_0 or q8_K), so the tolerance
	// only covers the order of summation.
	typed := func(typ ggml.Type, K, M, N int, bConv func([]float32) []float64) func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
		return func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			ad := randn(rng, K*M, 1)
			q, err := ggml.QuantizeChunk(typ, ad, M, K, nil)
			require.NoError(h.t, err)
			deq, err := ggml.ToFloat32(typ, q, K*M)
			require.NoError(h.t, err)
			a := h.input(typ, ad, K, M)
			bd := randn(rng, K*N, 1)
			b := h.input(ggml.TypeF32, bd, K, N)
			return a.MulMat(h.g, b), mulMatRef(ndFrom(deq, K, M), &nd{ne: [4]int{K, N, 1, 1}, v: bConv(bd)})
		}
	}
	f16 := func(x []float32) []float64 {
		r := make([]float64, len(x))
		for i, v := range x {
			r[i] = roundF16(float64(v))
		}
		return r
	}
	runOpCases(t, []opCase{
		{name: "2d", build: plain([4]int{16, 8, 1, 1}, [4]int{16, 6, 1, 1}), atol: 1e-5, rtol: 1e-5},
		{name: "odd K", build: plain([4]int{37, 5, 1, 1}, [4]int{37, 3, 1, 1}), atol: 1e-5, rtol: 1e-5},
		{name: "vector", build: plain([4]int{64, 9, 1, 1}, [4]int{64, 1, 1, 1}), atol: 1e-5, rtol: 1e-5},
		{name: "batched", build: plain([4]int{16, 8, 3, 2}, [4]int{16, 5, 3, 2}), atol: 1e-5, rtol: 1e-5},
		{name: "broadcast dims 2 and 3", build: plain([4]int{16, 8, 2, 3}, [4]int{16, 5, 4, 6}), atol: 1e-5, rtol: 1e-5},
		{name: "permuted b", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			a, ar := h.rand(rng, 16, 8, 1, 2)
			x, xr := h.rand(rng, 16, 3, 5, 2)
			b := x.Permute(h.g, 0, 2, 1, 3) // [16,5,3,2], rows contiguous
			return a.MulMat(h.g, b), mulMatRef(ar, xr.permute(0, 2, 1, 3))
		}, atol: 1e-5, rtol: 1e-5},
		{name: "permuted a", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 16, 3, 8)
			a := x.Permute(h.g, 0, 2, 1) // [16,8,3]
			b, br := h.rand(rng, 16, 5, 3)
			return a.MulMat(h.g, b), mulMatRef(xr.permute(0, 2, 1), br)
		}, atol: 1e-5, rtol: 1e-5},
		{name: "f16 weight", build: typed(ggml.TypeF16, 64, 8, 5, f16), atol: 1e-4, rtol: 1e-4},
		{name: "q8_0 weight", build: typed(ggml.TypeQ8_0, 64, 8, 5, refQ8_0), atol: 1e-4, rtol: 1e-4},
		{name: "q4_0 weight", build: typed(ggml.TypeQ4_0, 96, 7, 4, refQ8_0), atol: 1e-4, rtol: 1e-4},
		{name: "q4_K weight", build: typed(ggml.TypeQ4K, 256, 4, 3, refQ8K), atol: 1e-4, rtol: 1e-4},
		{name: "q6_K weight", build: typed(ggml.TypeQ6K, 512, 4, 3, refQ8K), atol: 1e-4, rtol: 1e-4},
	})
}

// refQ8_0 quantizes x to q8_0 and back as ggml's CPU does for the
// activations of a q8_0 or q4_0 matrix product: blocks of 32 with the scale
// amax/127 stored as f16.
func refQ8_0(x []float32) []float64 {
	r := make([]float64, len(x))
	for b := 0; b < len(x); b += 32 {
		var amax float32
		for _, v := range x[b : b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j, v := range x[b : b+32] {
			r[b+j] = roundF16(float64(d)) * math.RoundToEven(float64(v*id))
		}
	}
	return r
}

// refQ8K is quantize_row_q8_K_ref: blocks of 256, scale -127/max with the
// signed value of largest magnitude, f32 scale.
func refQ8K(x []float32) []float64 {
	r := make([]float64, len(x))
	for b := 0; b < len(x); b += 256 {
		var amax, mx float32
		for _, v := range x[b : b+256] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		d := 1 / iscale
		for j, v := range x[b : b+256] {
			r[b+j] = float64(d) * math.Min(127, math.RoundToEven(float64(iscale*v)))
		}
	}
	return r
}

func normRef(x *nd, eps float64, rms bool) *nd {
	r := newND(x.ne[:]...)
	n := x.ne[0]
	for i3 := 0; i3 < x.ne[3]; i3++ {
		for i2 := 0; i2 < x.ne[2]; i2++ {
			for i1 := 0; i1 < x.ne[1]; i1++ {
				var mean, v float64
				if !rms {
					for i0 := 0; i0 < n; i0++ {
						mean += x.at(i0, i1, i2, i3)
					}
					mean /= float64(n)
				}
				for i0 := 0; i0 < n; i0++ {
					d := x.at(i0, i1, i2, i3) - mean
					v += d * d
				}
				v /= float64(n)
				for i0 := 0; i0 < n; i0++ {
					r.set((x.at(i0, i1, i2, i3)-mean)/math.Sqrt(v+eps), i0, i1, i2, i3)
				}
			}
		}
	}
	return r
}

func TestNorm(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "Norm", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			d := randn(rng, 48*5*3, 2)
			for i := range d {
				d[i] += 3 // a mean far from 0
			}
			x := h.input(ggml.TypeF32, d, 48, 5, 3)
			return x.Norm(h.g, 1e-5), normRef(ndFrom(d, 48, 5, 3), 1e-5, false)
		}, atol: 1e-5, rtol: 1e-5},
		{name: "Norm permuted", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 33, 4, 3)
			return x.Permute(h.g, 0, 2, 1).Norm(h.g, 1e-6), normRef(xr.permute(0, 2, 1), 1e-6, false)
		}, atol: 1e-5, rtol: 1e-5},
		{name: "Norm large eps", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 16, 4)
			return x.Norm(h.g, 0.5), normRef(xr, 0.5, false)
		}, atol: 1e-5, rtol: 1e-5},
		{name: "RMSNorm", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 64, 3, 2)
			return x.RMSNorm(h.g, 1e-6), normRef(xr, 1e-6, true)
		}, atol: 1e-5, rtol: 1e-5},
	})
}

// softMaxRef is softmax over ne0 of x·scale + mask, the mask broadcast over
// dims 2 and 3 (row i1 of x uses row i1 of the mask).
func softMaxRef(x, mask *nd, scale float64) *nd {
	r := newND(x.ne[:]...)
	n := x.ne[0]
	s := make([]float64, n)
	for i3 := 0; i3 < x.ne[3]; i3++ {
		for i2 := 0; i2 < x.ne[2]; i2++ {
			for i1 := 0; i1 < x.ne[1]; i1++ {
				mx := math.Inf(-1)
				for i0 := 0; i0 < n; i0++ {
					s[i0] = x.at(i0, i1, i2, i3) * scale
					if mask != nil {
						s[i0] += mask.at(i0, i1, i2%mask.ne[2], i3%mask.ne[3])
					}
					mx = math.Max(mx, s[i0])
				}
				var sum float64
				for i0 := range s {
					s[i0] = math.Exp(s[i0] - mx)
					sum += s[i0]
				}
				for i0 := range s {
					r.set(s[i0]/sum, i0, i1, i2, i3)
				}
			}
		}
	}
	return r
}

func TestSoftMaxExt(t *testing.T) {
	// maskData has random values and -Inf at a few positions (never a whole row).
	maskData := func(rng *rand.Rand, n0, n int) []float32 {
		m := randn(rng, n, 1)
		for i := range m {
			if i%n0 != 0 && rng.IntN(5) == 0 {
				m[i] = float32(math.Inf(-1))
			}
		}
		return m
	}
	runOpCases(t, []opCase{
		{name: "no mask", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 13, 5, 3, 2)
			return x.SoftMaxExt(h.g, nil, 1, 0), softMaxRef(xr, nil, 1)
		}, atol: 1e-6, rtol: 1e-5},
		{name: "scale", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 64, 7)
			return x.SoftMaxExt(h.g, nil, 0.125, 0), softMaxRef(xr, nil, 0.125)
		}, atol: 1e-6, rtol: 1e-5},
		{name: "f32 mask taller and broadcast", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 13, 5, 3, 2)
			md := maskData(rng, 13, 13*6*1*2)
			m := h.input(ggml.TypeF32, md, 13, 6, 1, 2)
			return x.SoftMaxExt(h.g, m, 0.5, 0), softMaxRef(xr, ndFrom(md, 13, 6, 1, 2), 0.5)
		}, atol: 1e-6, rtol: 1e-5},
		{name: "f16 mask", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 16, 5, 3)
			md := maskData(rng, 16, 16*5*3)
			m := h.input(ggml.TypeF16, md, 16, 5, 3)
			return x.SoftMaxExt(h.g, m, 2, 0), softMaxRef(xr, ndFrom(md, 16, 5, 3).mapv(roundF16), 2)
		}, atol: 1e-6, rtol: 1e-5},
	})
}

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func TestUnaryOps(t *testing.T) {
	type unary struct {
		name       string
		op         func(x *ggml.Tensor, g *ggml.Context) *ggml.Tensor
		ref        func(float64) float64
		lo, hi     float64 // input range
		atol, rtol float64
	}
	sigmoid := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	ops := []unary{
		// ggml's CPU GELU looks the result up in an f16 table indexed by the
		// f16-rounded input (GGML_GELU_FP16), so the reference rounds both.
		{"GELU", (*ggml.Tensor).GELU, func(x float64) float64 {
			if x <= -10 {
				return 0
			}
			if x >= 10 {
				return x
			}
			return roundF16(geluTanh(roundF16(x)))
		}, -12, 12, 1e-6, 1e-6},
		{"GELUErf", (*ggml.Tensor).GELUErf, func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, -6, 6, 1e-6, 1e-5},
		{"SiLU", (*ggml.Tensor).SiLU, func(x float64) float64 { return x * sigmoid(x) }, -10, 10, 1e-6, 1e-5},
		{"ReLU", (*ggml.Tensor).ReLU, func(x float64) float64 { return math.Max(x, 0) }, -3, 3, 0, 0},
		{"Sigmoid", (*ggml.Tensor).Sigmoid, sigmoid, -10, 10, 1e-6, 1e-5},
		{"Tanh", (*ggml.Tensor).Tanh, math.Tanh, -5, 5, 1e-6, 1e-5},
		{"Exp", (*ggml.Tensor).Exp, math.Exp, -10, 10, 1e-6, 1e-5},
		{"Neg", (*ggml.Tensor).Neg, func(x float64) float64 { return -x }, -3, 3, 0, 0},
		{"Abs", (*ggml.Tensor).Abs, math.Abs, -3, 3, 0, 0},
		{"Sqr", (*ggml.Tensor).Sqr, func(x float64) float64 { return x * x }, -3, 3, 1e-6, 1e-6},
		{"Sqrt", (*ggml.Tensor).Sqrt, math.Sqrt, 0, 9, 1e-6, 1e-6},
		{"Clamp", func(x *ggml.Tensor, g *ggml.Context) *ggml.Tensor { return x.Clamp(g, -0.5, 0.75) },
			func(x float64) float64 { return math.Min(math.Max(x, -0.5), 0.75) }, -2, 2, 0, 0},
		{"ExpP1", (*ggml.Tensor).ExpP1, func(x float64) float64 { return math.Exp(x) + 1 }, -10, 10, 1e-6, 1e-5},
	}
	var cases []opCase
	for _, u := range ops {
		cases = append(cases, opCase{
			name: u.name,
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				d := uniform(rng, 37*5*2*2, u.lo, u.hi)
				x := h.input(ggml.TypeF32, d, 37, 5, 2, 2)
				return u.op(x, h.g), ndFrom(d, 37, 5, 2, 2).mapv(u.ref)
			},
			atol: u.atol, rtol: u.rtol,
		})
		// The same op on a view of the first 37 columns of a [40, ...] tensor:
		// rows are contiguous, the tensor is not.
		cases = append(cases, opCase{
			name: u.name + "/row view",
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				d := uniform(rng, 40*5*2*2, u.lo, u.hi)
				x := h.input(ggml.TypeF32, d, 40, 5, 2, 2)
				v := x.View(h.g, 0, []int{37, 5, 2, 2}, []int{x.Stride(1), x.Stride(2), x.Stride(3)})
				require.False(h.t, v.IsContiguous())
				xr := ndFrom(d, 40, 5, 2, 2)
				r := newND(37, 5, 2, 2)
				r.each(func(i0, i1, i2, i3 int) { r.set(u.ref(xr.at(i0, i1, i2, i3)), i0, i1, i2, i3) })
				return u.op(v, h.g), r
			},
			atol: u.atol, rtol: u.rtol,
		})
	}
	runOpCases(t, cases)
}

func sumRowsRef(x *nd, mean bool) *nd {
	r := newND(1, x.ne[1], x.ne[2], x.ne[3])
	r.each(func(_, i1, i2, i3 int) {
		var s float64
		for i0 := 0; i0 < x.ne[0]; i0++ {
			s += x.at(i0, i1, i2, i3)
		}
		if mean {
			s /= float64(x.ne[0])
		}
		r.set(s, 0, i1, i2, i3)
	})
	return r
}

func TestReductions(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "SumRows", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 29, 4, 3, 2)
			return x.SumRows(h.g), sumRowsRef(xr, false)
		}, atol: 1e-5, rtol: 1e-5},
		{name: "Mean", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 29, 4, 3, 2)
			return x.Mean(h.g), sumRowsRef(xr, true)
		}, atol: 1e-6, rtol: 1e-5},
		{name: "Sum", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 29, 4, 3, 2)
			var s float64
			for _, v := range xr.v {
				s += v
			}
			r := newND(1)
			r.v[0] = s
			return x.Sum(h.g), r
		}, atol: 1e-4, rtol: 1e-5},
	})
}

func concatRef(a, b *nd, dim int) *nd {
	ne := a.ne
	ne[dim] += b.ne[dim]
	r := newND(ne[:]...)
	r.each(func(i0, i1, i2, i3 int) {
		i := [4]int{i0, i1, i2, i3}
		if i[dim] < a.ne[dim] {
			r.set(a.at(i0, i1, i2, i3), i0, i1, i2, i3)
			return
		}
		i[dim] -= a.ne[dim]
		r.set(b.at(i[0], i[1], i[2], i[3]), i0, i1, i2, i3)
	})
	return r
}

func TestConcat(t *testing.T) {
	var cases []opCase
	for dim := 0; dim < 4; dim++ {
		cases = append(cases, opCase{
			name: "dim " + string(rune('0'+dim)),
			build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
				sa, sb := []int{3, 4, 2, 2}, []int{3, 4, 2, 2}
				sb[dim] = 5
				a, ar := h.rand(rng, sa...)
				b, br := h.rand(rng, sb...)
				return a.Concat(h.g, b, dim), concatRef(ar, br, dim)
			},
		})
	}
	cases = append(cases, opCase{
		name: "permuted operand",
		build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			a, ar := h.rand(rng, 3, 4, 2)
			x, xr := h.rand(rng, 4, 3, 5)
			return a.Concat(h.g, x.Permute(h.g, 1, 0, 2), 2), concatRef(ar, xr.permute(1, 0, 2), 2)
		},
	})
	runOpCases(t, cases)
}

func TestLayoutOps(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "Reshape", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 6, 4)
			y := x.Reshape(h.g, 3, 2, 4)
			return y, &nd{ne: [4]int{3, 2, 4, 1}, v: xr.v}
		}},
		{name: "Reshape infer", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 6, 4, 2)
			y := x.Reshape(h.g, 4, -1, 3)
			return y, &nd{ne: [4]int{4, 4, 3, 1}, v: xr.v}
		}},
		{name: "View strided", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			// Every other row of planes 1..2, from column 1: [3, 3, 2].
			x, xr := h.rand(rng, 8, 6, 4)
			nb1, nb2 := x.Stride(1), x.Stride(2)
			v := x.View(h.g, 4*1+nb2, []int{3, 3, 2}, []int{2 * nb1, nb2})
			assert.Equal(t, []int{3, 3, 2}, v.Shape())
			assert.Equal(t, 2*nb1, v.Stride(1))
			assert.False(t, v.IsContiguous())
			r := newND(3, 3, 2)
			r.each(func(i0, i1, i2, _ int) { r.set(xr.at(1+i0, 2*i1, 1+i2, 0), i0, i1, i2, 0) })
			return v.Cont(h.g), r
		}},
		{name: "View default strides", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			// Rows 2..4 of plane 1 keep the source's row stride.
			x, xr := h.rand(rng, 5, 6, 2)
			v := x.View(h.g, x.Stride(1)*2+x.Stride(2), []int{5, 3}, nil)
			r := newND(5, 3)
			r.each(func(i0, i1, _, _ int) { r.set(xr.at(i0, 2+i1, 1, 0), i0, i1, 0, 0) })
			return v.Cont(h.g), r
		}},
		{name: "View 1d", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 5, 6)
			v := x.View(h.g, 4*7, []int{11}, nil)
			return v, &nd{ne: [4]int{11, 1, 1, 1}, v: xr.v[7:18]}
		}},
		{name: "Permute", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 2, 3, 4, 5)
			p := x.Permute(h.g, 2, 0, 3, 1)
			assert.Equal(t, [4]int{3, 5, 2, 4}, dims4(p))
			return p.Cont(h.g), xr.permute(2, 0, 3, 1)
		}},
		{name: "Permute 3 axes", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 2, 3, 4)
			return x.Permute(h.g, 1, 2, 0).Cont(h.g), xr.permute(1, 2, 0)
		}},
		{name: "Transpose", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 5, 3, 2)
			tr := x.Transpose(h.g)
			assert.True(t, tr.IsTransposed())
			return tr.Cont(h.g), xr.permute(1, 0)
		}},
		{name: "Cont of a view of a permutation", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 4, 3, 2)
			return x.Permute(h.g, 2, 1, 0).Cont(h.g).Reshape(h.g, 6, 4), &nd{ne: [4]int{6, 4, 1, 1}, v: xr.permute(2, 1, 0).v}
		}},
		{name: "Clamp leaves its operand unchanged", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			// ggml_clamp works in place; the binding clamps a copy, so x
			// read after the clamp is still x.
			x, xr := h.rand(rng, 9, 4)
			y := x.Clamp(h.g, -0.25, 0.25)
			return y.Add(h.g, x), xr.mapv(func(v float64) float64 { return math.Min(math.Max(v, -0.25), 0.25) + v })
		}, atol: 1e-6},
		{name: "Cpy to f16", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 4, 6)
			dst := h.g.NewTensor(ggml.TypeF16, 24)
			return x.Cpy(h.g, dst), &nd{ne: [4]int{24, 1, 1, 1}, v: xr.mapv(roundF16).v}
		}},
		{name: "Cpy from a transposed view", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 4, 6)
			dst := h.g.NewTensor(ggml.TypeF32, 6, 4)
			return x.Transpose(h.g).Cpy(h.g, dst), xr.permute(1, 0)
		}},
		{name: "Cast f32 f16 f32", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			d := randn(rng, 40*3, 100)
			d[0], d[1], d[2] = 1e-6, 70000, 3.0001
			x := h.input(ggml.TypeF32, d, 40, 3)
			h16 := x.Cast(h.g, ggml.TypeF16)
			assert.Equal(t, ggml.TypeF16, h16.Type())
			return h16.Cast(h.g, ggml.TypeF32), ndFrom(d, 40, 3).mapv(roundF16)
		}},
		{name: "Repeat", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 3, 1, 2)
			like := h.g.NewTensor(ggml.TypeF32, 6, 4, 2, 3)
			r := newND(6, 4, 2, 3)
			r.each(func(i0, i1, i2, i3 int) { r.set(xr.at(i0%3, 0, i2%2, 0), i0, i1, i2, i3) })
			return x.Repeat(h.g, like), r
		}},
		{name: "PadExt", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 3, 4, 2, 1)
			p := [8]int{1, 2, 0, 1, 2, 0, 0, 1}
			r := newND(3+3, 4+1, 2+2, 1+1)
			xr.each(func(i0, i1, i2, i3 int) { r.set(xr.at(i0, i1, i2, i3), i0+1, i1, i2+2, i3) })
			return x.PadExt(h.g, p), r
		}},
		{name: "GetRows", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			x, xr := h.rand(rng, 5, 7, 2)
			idx := []int32{6, 0, 3, 1, 1, 5}
			rows := h.inputI32(idx, 3, 2)
			r := newND(5, 3, 2)
			r.each(func(i0, i1, i2, _ int) { r.set(xr.at(i0, int(idx[i2*3+i1]), i2, 0), i0, i1, i2, 0) })
			return x.GetRows(h.g, rows), r
		}},
		{name: "GetRows f16", build: func(h *harness, rng *rand.Rand) (*ggml.Tensor, *nd) {
			d := randn(rng, 8*6, 1)
			x := h.input(ggml.TypeF16, d, 8, 6)
			idx := []int32{5, 2, 2, 0}
			rows := h.inputI32(idx, 4)
			xr := ndFrom(d, 8, 6).mapv(roundF16)
			r := newND(8, 4)
			r.each(func(i0, i1, _, _ int) { r.set(xr.at(i0, int(idx[i1]), 0, 0), i0, i1, 0, 0) })
			return x.GetRows(h.g, rows), r
		}},
	})
}
