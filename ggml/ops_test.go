package ggml_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// binaryRef applies f element-wise with b broadcast (repeated) to a's shape,
// as ggml_add/sub/mul/div do.
func binaryRef(a, b *optest.ND, f func(x, y float64) float64) *optest.ND {
	r := optest.NewND(a.Ne[:]...)
	a.Each(func(i0, i1, i2, i3 int) {
		r.Set(f(a.At(i0, i1, i2, i3), b.At(i0%b.Ne[0], i1%b.Ne[1], i2%b.Ne[2], i3%b.Ne[3])), i0, i1, i2, i3)
	})
	return r
}

// nonZero returns values with |x| in [0.5, 2) and random signs (divisors).
func nonZero(rng *rand.Rand, n int) []float32 {
	v := optest.Uniform(rng, n, 0.5, 2)
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
	type operand func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND)
	dense := func(shape ...int) operand {
		return func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := nonZero(rng, optest.Prod(shape))
			return h.Input(ggml.TypeF32, d, shape...), optest.NDFrom(d, shape...)
		}
	}
	// permuted is a [5,4,3,2] view of a [5,3,4,2] tensor (dims 1 and 2 swapped):
	// rows stay contiguous, the tensor does not.
	permuted := func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
		d := nonZero(rng, 5*3*4*2)
		x := h.Input(ggml.TypeF32, d, 5, 3, 4, 2)
		return x.Permute(h.G, 0, 2, 1, 3), optest.NDFrom(d, 5, 3, 4, 2).Permute(0, 2, 1, 3)
	}
	// transposed is a [5,4,3,2] view of a [4,5,3,2] tensor: not even its rows
	// are contiguous.
	transposed := func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
		d := nonZero(rng, 4*5*3*2)
		x := h.Input(ggml.TypeF32, d, 4, 5, 3, 2)
		return x.Transpose(h.G), optest.NDFrom(d, 4, 5, 3, 2).Permute(1, 0, 2, 3)
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
	var cases []optest.Case
	for _, op := range ops {
		for _, l := range layouts {
			cases = append(cases, optest.Case{
				Name: op.name + "/" + l.name,
				Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
					a, ar := l.a(h, rng)
					b, br := l.b(h, rng)
					return op.op(a, h.G, b), binaryRef(ar, br, op.ref)
				},
				Atol: 1e-6, Rtol: 1e-6,
			})
		}
	}
	optest.RunCases(t, cases)
}

func TestScale(t *testing.T) {
	optest.RunCases(t, []optest.Case{
		{Name: "Scale", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 7, 3, 2)
			return x.Scale(h.G, -1.75), xr.Map(func(v float64) float64 { return -1.75 * v })
		}, Atol: 1e-6, Rtol: 1e-6},
		{Name: "ScaleBias", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 7, 3, 2)
			return x.ScaleBias(h.G, 0.5, 3), xr.Map(func(v float64) float64 { return 0.5*v + 3 })
		}, Atol: 1e-6, Rtol: 1e-6},
	})
}

func TestMulMat(t *testing.T) {
	plain := func(ka, kb [4]int) func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
		return func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			a, ar := h.Rand(rng, ka[:]...)
			b, br := h.Rand(rng, kb[:]...)
			return a.MulMat(h.G, b), optest.MulMatRef(ar, br)
		}
	}
	// typed quantizes (or converts) the weight a to typ; the reference uses
	// the dequantized weight and, like the kernel, b converted to the
	// weight type's dot-product type (f16, q8_0 or q8_K), so the tolerance
	// only covers the order of summation.
	typed := func(typ ggml.Type, K, M, N int, bConv func([]float32) []float64) func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
		return func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			ad := optest.Randn(rng, K*M, 1)
			q, err := ggml.QuantizeChunk(typ, ad, M, K, nil)
			require.NoError(h.T, err)
			deq, err := ggml.ToFloat32(typ, q, K*M)
			require.NoError(h.T, err)
			a := h.Input(typ, ad, K, M)
			bd := optest.Randn(rng, K*N, 1)
			b := h.Input(ggml.TypeF32, bd, K, N)
			return a.MulMat(h.G, b), optest.MulMatRef(optest.NDFrom(deq, K, M), &optest.ND{Ne: [4]int{K, N, 1, 1}, V: bConv(bd)})
		}
	}
	f16 := func(x []float32) []float64 {
		r := make([]float64, len(x))
		for i, v := range x {
			r[i] = optest.RoundF16(float64(v))
		}
		return r
	}
	optest.RunCases(t, []optest.Case{
		{Name: "2d", Build: plain([4]int{16, 8, 1, 1}, [4]int{16, 6, 1, 1}), Atol: 1e-5, Rtol: 1e-5},
		{Name: "odd K", Build: plain([4]int{37, 5, 1, 1}, [4]int{37, 3, 1, 1}), Atol: 1e-5, Rtol: 1e-5},
		{Name: "vector", Build: plain([4]int{64, 9, 1, 1}, [4]int{64, 1, 1, 1}), Atol: 1e-5, Rtol: 1e-5},
		{Name: "batched", Build: plain([4]int{16, 8, 3, 2}, [4]int{16, 5, 3, 2}), Atol: 1e-5, Rtol: 1e-5},
		{Name: "broadcast dims 2 and 3", Build: plain([4]int{16, 8, 2, 3}, [4]int{16, 5, 4, 6}), Atol: 1e-5, Rtol: 1e-5},
		{Name: "permuted b", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			a, ar := h.Rand(rng, 16, 8, 1, 2)
			x, xr := h.Rand(rng, 16, 3, 5, 2)
			b := x.Permute(h.G, 0, 2, 1, 3) // [16,5,3,2], rows contiguous
			return a.MulMat(h.G, b), optest.MulMatRef(ar, xr.Permute(0, 2, 1, 3))
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "permuted a", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 16, 3, 8)
			a := x.Permute(h.G, 0, 2, 1) // [16,8,3]
			b, br := h.Rand(rng, 16, 5, 3)
			return a.MulMat(h.G, b), optest.MulMatRef(xr.Permute(0, 2, 1), br)
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "f16 weight", Build: typed(ggml.TypeF16, 64, 8, 5, f16), Atol: 1e-4, Rtol: 1e-4},
		{Name: "q8_0 weight", Build: typed(ggml.TypeQ8_0, 64, 8, 5, refQ8_0), Atol: 1e-4, Rtol: 1e-4},
		{Name: "q4_0 weight", Build: typed(ggml.TypeQ4_0, 96, 7, 4, refQ8_0), Atol: 1e-4, Rtol: 1e-4},
		{Name: "q4_K weight", Build: typed(ggml.TypeQ4K, 256, 4, 3, refQ8K), Atol: 1e-4, Rtol: 1e-4},
		{Name: "q6_K weight", Build: typed(ggml.TypeQ6K, 512, 4, 3, refQ8K), Atol: 1e-4, Rtol: 1e-4},
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
			r[b+j] = optest.RoundF16(float64(d)) * math.RoundToEven(float64(v*id))
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

func normRef(x *optest.ND, eps float64, rms bool) *optest.ND {
	r := optest.NewND(x.Ne[:]...)
	n := x.Ne[0]
	for i3 := 0; i3 < x.Ne[3]; i3++ {
		for i2 := 0; i2 < x.Ne[2]; i2++ {
			for i1 := 0; i1 < x.Ne[1]; i1++ {
				var mean, v float64
				if !rms {
					for i0 := 0; i0 < n; i0++ {
						mean += x.At(i0, i1, i2, i3)
					}
					mean /= float64(n)
				}
				for i0 := 0; i0 < n; i0++ {
					d := x.At(i0, i1, i2, i3) - mean
					v += d * d
				}
				v /= float64(n)
				for i0 := 0; i0 < n; i0++ {
					r.Set((x.At(i0, i1, i2, i3)-mean)/math.Sqrt(v+eps), i0, i1, i2, i3)
				}
			}
		}
	}
	return r
}

func TestNorm(t *testing.T) {
	optest.RunCases(t, []optest.Case{
		{Name: "Norm", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := optest.Randn(rng, 48*5*3, 2)
			for i := range d {
				d[i] += 3 // a mean far from 0
			}
			x := h.Input(ggml.TypeF32, d, 48, 5, 3)
			return x.Norm(h.G, 1e-5), normRef(optest.NDFrom(d, 48, 5, 3), 1e-5, false)
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "Norm permuted", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 33, 4, 3)
			return x.Permute(h.G, 0, 2, 1).Norm(h.G, 1e-6), normRef(xr.Permute(0, 2, 1), 1e-6, false)
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "Norm large eps", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 16, 4)
			return x.Norm(h.G, 0.5), normRef(xr, 0.5, false)
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "RMSNorm", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 64, 3, 2)
			return x.RMSNorm(h.G, 1e-6), normRef(xr, 1e-6, true)
		}, Atol: 1e-5, Rtol: 1e-5},
	})
}

// softMaxRef is softmax over ne0 of x·scale + mask, the mask broadcast over
// dims 2 and 3 (row i1 of x uses row i1 of the mask).
func softMaxRef(x, mask *optest.ND, scale float64) *optest.ND {
	r := optest.NewND(x.Ne[:]...)
	n := x.Ne[0]
	s := make([]float64, n)
	for i3 := 0; i3 < x.Ne[3]; i3++ {
		for i2 := 0; i2 < x.Ne[2]; i2++ {
			for i1 := 0; i1 < x.Ne[1]; i1++ {
				mx := math.Inf(-1)
				for i0 := 0; i0 < n; i0++ {
					s[i0] = x.At(i0, i1, i2, i3) * scale
					if mask != nil {
						s[i0] += mask.At(i0, i1, i2%mask.Ne[2], i3%mask.Ne[3])
					}
					mx = math.Max(mx, s[i0])
				}
				var sum float64
				for i0 := range s {
					s[i0] = math.Exp(s[i0] - mx)
					sum += s[i0]
				}
				for i0 := range s {
					r.Set(s[i0]/sum, i0, i1, i2, i3)
				}
			}
		}
	}
	return r
}

func TestSoftMaxExt(t *testing.T) {
	// maskData has random values and -Inf at a few positions (never a whole row).
	maskData := func(rng *rand.Rand, n0, n int) []float32 {
		m := optest.Randn(rng, n, 1)
		for i := range m {
			if i%n0 != 0 && rng.IntN(5) == 0 {
				m[i] = float32(math.Inf(-1))
			}
		}
		return m
	}
	optest.RunCases(t, []optest.Case{
		{Name: "no mask", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 13, 5, 3, 2)
			return x.SoftMaxExt(h.G, nil, 1, 0), softMaxRef(xr, nil, 1)
		}, Atol: 1e-6, Rtol: 1e-5},
		{Name: "scale", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 64, 7)
			return x.SoftMaxExt(h.G, nil, 0.125, 0), softMaxRef(xr, nil, 0.125)
		}, Atol: 1e-6, Rtol: 1e-5},
		{Name: "f32 mask taller and broadcast", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 13, 5, 3, 2)
			md := maskData(rng, 13, 13*6*1*2)
			m := h.Input(ggml.TypeF32, md, 13, 6, 1, 2)
			return x.SoftMaxExt(h.G, m, 0.5, 0), softMaxRef(xr, optest.NDFrom(md, 13, 6, 1, 2), 0.5)
		}, Atol: 1e-6, Rtol: 1e-5},
		{Name: "f16 mask", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 16, 5, 3)
			md := maskData(rng, 16, 16*5*3)
			m := h.Input(ggml.TypeF16, md, 16, 5, 3)
			return x.SoftMaxExt(h.G, m, 2, 0), softMaxRef(xr, optest.NDFrom(md, 16, 5, 3).Map(optest.RoundF16), 2)
		}, Atol: 1e-6, Rtol: 1e-5},
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
			return optest.RoundF16(geluTanh(optest.RoundF16(x)))
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
	}
	var cases []optest.Case
	for _, u := range ops {
		cases = append(cases, optest.Case{
			Name: u.name,
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				d := optest.Uniform(rng, 37*5*2*2, u.lo, u.hi)
				x := h.Input(ggml.TypeF32, d, 37, 5, 2, 2)
				return u.op(x, h.G), optest.NDFrom(d, 37, 5, 2, 2).Map(u.ref)
			},
			Atol: u.atol, Rtol: u.rtol,
		})
		// The same op on a view of the first 37 columns of a [40, ...] tensor:
		// rows are contiguous, the tensor is not.
		cases = append(cases, optest.Case{
			Name: u.name + "/row view",
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				d := optest.Uniform(rng, 40*5*2*2, u.lo, u.hi)
				x := h.Input(ggml.TypeF32, d, 40, 5, 2, 2)
				v := x.View(h.G, 0, []int{37, 5, 2, 2}, []int{x.Stride(1), x.Stride(2), x.Stride(3)})
				require.False(h.T, v.IsContiguous())
				xr := optest.NDFrom(d, 40, 5, 2, 2)
				r := optest.NewND(37, 5, 2, 2)
				r.Each(func(i0, i1, i2, i3 int) { r.Set(u.ref(xr.At(i0, i1, i2, i3)), i0, i1, i2, i3) })
				return u.op(v, h.G), r
			},
			Atol: u.atol, Rtol: u.rtol,
		})
	}
	optest.RunCases(t, cases)
}

// SwiGLU: SiLU of the first half of each row times the second half, on
// a tensor and on a row view.
func TestSwiGLU(t *testing.T) {
	ref := func(x *optest.ND, n int) *optest.ND {
		r := optest.NewND(n, x.Ne[1], x.Ne[2], x.Ne[3])
		r.Each(func(i0, i1, i2, i3 int) {
			a, b := x.At(i0, i1, i2, i3), x.At(i0+n, i1, i2, i3)
			r.Set(a/(1+math.Exp(-a))*b, i0, i1, i2, i3)
		})
		return r
	}
	optest.RunCases(t, []optest.Case{
		{Name: "tensor", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := optest.Uniform(rng, 34*5*2, -6, 6)
			x := h.Input(ggml.TypeF32, d, 34, 5, 2)
			return x.SwiGLU(h.G), ref(optest.NDFrom(d, 34, 5, 2), 17)
		}, Atol: 1e-6, Rtol: 1e-5},
		{Name: "row view", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := optest.Uniform(rng, 40*5, -6, 6)
			x := h.Input(ggml.TypeF32, d, 40, 5)
			v := x.View(h.G, 0, []int{34, 5}, []int{x.Stride(1)})
			xr := optest.NDFrom(d, 40, 5)
			r := optest.NewND(17, 5)
			r.Each(func(i0, i1, _, _ int) {
				a, b := xr.At(i0, i1, 0, 0), xr.At(i0+17, i1, 0, 0)
				r.Set(a/(1+math.Exp(-a))*b, i0, i1, 0, 0)
			})
			return v.SwiGLU(h.G), r
		}, Atol: 1e-6, Rtol: 1e-5},
	})
	g, err := ggml.NewContext(4)
	require.NoError(t, err)
	defer g.Close()
	se := shapePanic(t, func() { g.NewTensor(ggml.TypeF32, 5, 2).SwiGLU(g) })
	require.NotNil(t, se, "odd ne0")
	require.Equal(t, "swiglu", se.Op)
}

func sumRowsRef(x *optest.ND, mean bool) *optest.ND {
	r := optest.NewND(1, x.Ne[1], x.Ne[2], x.Ne[3])
	r.Each(func(_, i1, i2, i3 int) {
		var s float64
		for i0 := 0; i0 < x.Ne[0]; i0++ {
			s += x.At(i0, i1, i2, i3)
		}
		if mean {
			s /= float64(x.Ne[0])
		}
		r.Set(s, 0, i1, i2, i3)
	})
	return r
}

func TestReductions(t *testing.T) {
	optest.RunCases(t, []optest.Case{
		{Name: "SumRows", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 29, 4, 3, 2)
			return x.SumRows(h.G), sumRowsRef(xr, false)
		}, Atol: 1e-5, Rtol: 1e-5},
		{Name: "Mean", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 29, 4, 3, 2)
			return x.Mean(h.G), sumRowsRef(xr, true)
		}, Atol: 1e-6, Rtol: 1e-5},
		{Name: "Sum", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 29, 4, 3, 2)
			var s float64
			for _, v := range xr.V {
				s += v
			}
			r := optest.NewND(1)
			r.V[0] = s
			return x.Sum(h.G), r
		}, Atol: 1e-4, Rtol: 1e-5},
	})
}

func concatRef(a, b *optest.ND, dim int) *optest.ND {
	ne := a.Ne
	ne[dim] += b.Ne[dim]
	r := optest.NewND(ne[:]...)
	r.Each(func(i0, i1, i2, i3 int) {
		i := [4]int{i0, i1, i2, i3}
		if i[dim] < a.Ne[dim] {
			r.Set(a.At(i0, i1, i2, i3), i0, i1, i2, i3)
			return
		}
		i[dim] -= a.Ne[dim]
		r.Set(b.At(i[0], i[1], i[2], i[3]), i0, i1, i2, i3)
	})
	return r
}

func TestConcat(t *testing.T) {
	var cases []optest.Case
	for dim := 0; dim < 4; dim++ {
		cases = append(cases, optest.Case{
			Name: "dim " + string(rune('0'+dim)),
			Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
				sa, sb := []int{3, 4, 2, 2}, []int{3, 4, 2, 2}
				sb[dim] = 5
				a, ar := h.Rand(rng, sa...)
				b, br := h.Rand(rng, sb...)
				return a.Concat(h.G, b, dim), concatRef(ar, br, dim)
			},
		})
	}
	cases = append(cases, optest.Case{
		Name: "permuted operand",
		Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			a, ar := h.Rand(rng, 3, 4, 2)
			x, xr := h.Rand(rng, 4, 3, 5)
			return a.Concat(h.G, x.Permute(h.G, 1, 0, 2), 2), concatRef(ar, xr.Permute(1, 0, 2), 2)
		},
	})
	optest.RunCases(t, cases)
}

func TestLayoutOps(t *testing.T) {
	optest.RunCases(t, []optest.Case{
		{Name: "Reshape", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 6, 4)
			y := x.Reshape(h.G, 3, 2, 4)
			return y, &optest.ND{Ne: [4]int{3, 2, 4, 1}, V: xr.V}
		}},
		{Name: "Reshape infer", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 6, 4, 2)
			y := x.Reshape(h.G, 4, -1, 3)
			return y, &optest.ND{Ne: [4]int{4, 4, 3, 1}, V: xr.V}
		}},
		{Name: "View strided", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			// Every other row of planes 1..2, from column 1: [3, 3, 2].
			x, xr := h.Rand(rng, 8, 6, 4)
			nb1, nb2 := x.Stride(1), x.Stride(2)
			v := x.View(h.G, 4*1+nb2, []int{3, 3, 2}, []int{2 * nb1, nb2})
			assert.Equal(t, []int{3, 3, 2}, v.Shape())
			assert.Equal(t, 2*nb1, v.Stride(1))
			assert.False(t, v.IsContiguous())
			r := optest.NewND(3, 3, 2)
			r.Each(func(i0, i1, i2, _ int) { r.Set(xr.At(1+i0, 2*i1, 1+i2, 0), i0, i1, i2, 0) })
			return v.Cont(h.G), r
		}},
		{Name: "View default strides", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			// Rows 2..4 of plane 1 keep the source's row stride.
			x, xr := h.Rand(rng, 5, 6, 2)
			v := x.View(h.G, x.Stride(1)*2+x.Stride(2), []int{5, 3}, nil)
			r := optest.NewND(5, 3)
			r.Each(func(i0, i1, _, _ int) { r.Set(xr.At(i0, 2+i1, 1, 0), i0, i1, 0, 0) })
			return v.Cont(h.G), r
		}},
		{Name: "View 1d", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 5, 6)
			v := x.View(h.G, 4*7, []int{11}, nil)
			return v, &optest.ND{Ne: [4]int{11, 1, 1, 1}, V: xr.V[7:18]}
		}},
		{Name: "Permute", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 2, 3, 4, 5)
			p := x.Permute(h.G, 2, 0, 3, 1)
			assert.Equal(t, [4]int{3, 5, 2, 4}, optest.Dims4(p))
			return p.Cont(h.G), xr.Permute(2, 0, 3, 1)
		}},
		{Name: "Permute 3 axes", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 2, 3, 4)
			return x.Permute(h.G, 1, 2, 0).Cont(h.G), xr.Permute(1, 2, 0)
		}},
		{Name: "Transpose", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 5, 3, 2)
			tr := x.Transpose(h.G)
			assert.True(t, tr.IsTransposed())
			return tr.Cont(h.G), xr.Permute(1, 0)
		}},
		{Name: "Cont of a view of a permutation", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 4, 3, 2)
			return x.Permute(h.G, 2, 1, 0).Cont(h.G).Reshape(h.G, 6, 4), &optest.ND{Ne: [4]int{6, 4, 1, 1}, V: xr.Permute(2, 1, 0).V}
		}},
		{Name: "Clamp leaves its operand unchanged", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			// ggml_clamp works in place; the binding clamps a copy, so x
			// read after the clamp is still x.
			x, xr := h.Rand(rng, 9, 4)
			y := x.Clamp(h.G, -0.25, 0.25)
			return y.Add(h.G, x), xr.Map(func(v float64) float64 { return math.Min(math.Max(v, -0.25), 0.25) + v })
		}, Atol: 1e-6},
		{Name: "Cpy to f16", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 4, 6)
			dst := h.G.NewTensor(ggml.TypeF16, 24)
			return x.Cpy(h.G, dst), &optest.ND{Ne: [4]int{24, 1, 1, 1}, V: xr.Map(optest.RoundF16).V}
		}},
		{Name: "Cpy from a transposed view", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 4, 6)
			dst := h.G.NewTensor(ggml.TypeF32, 6, 4)
			return x.Transpose(h.G).Cpy(h.G, dst), xr.Permute(1, 0)
		}},
		{Name: "Cast f32 f16 f32", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := optest.Randn(rng, 40*3, 100)
			d[0], d[1], d[2] = 1e-6, 70000, 3.0001
			x := h.Input(ggml.TypeF32, d, 40, 3)
			h16 := x.Cast(h.G, ggml.TypeF16)
			assert.Equal(t, ggml.TypeF16, h16.Type())
			return h16.Cast(h.G, ggml.TypeF32), optest.NDFrom(d, 40, 3).Map(optest.RoundF16)
		}},
		{Name: "Repeat", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 3, 1, 2)
			like := h.G.NewTensor(ggml.TypeF32, 6, 4, 2, 3)
			r := optest.NewND(6, 4, 2, 3)
			r.Each(func(i0, i1, i2, i3 int) { r.Set(xr.At(i0%3, 0, i2%2, 0), i0, i1, i2, i3) })
			return x.Repeat(h.G, like), r
		}},
		{Name: "PadExt", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 3, 4, 2, 1)
			p := [8]int{1, 2, 0, 1, 2, 0, 0, 1}
			r := optest.NewND(3+3, 4+1, 2+2, 1+1)
			xr.Each(func(i0, i1, i2, i3 int) { r.Set(xr.At(i0, i1, i2, i3), i0+1, i1, i2+2, i3) })
			return x.PadExt(h.G, p), r
		}},
		{Name: "GetRows", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			x, xr := h.Rand(rng, 5, 7, 2)
			idx := []int32{6, 0, 3, 1, 1, 5}
			rows := h.InputI32(idx, 3, 2)
			r := optest.NewND(5, 3, 2)
			r.Each(func(i0, i1, i2, _ int) { r.Set(xr.At(i0, int(idx[i2*3+i1]), i2, 0), i0, i1, i2, 0) })
			return x.GetRows(h.G, rows), r
		}},
		{Name: "GetRows f16", Build: func(h *optest.Harness, rng *rand.Rand) (*ggml.Tensor, *optest.ND) {
			d := optest.Randn(rng, 8*6, 1)
			x := h.Input(ggml.TypeF16, d, 8, 6)
			idx := []int32{5, 2, 2, 0}
			rows := h.InputI32(idx, 4)
			xr := optest.NDFrom(d, 8, 6).Map(optest.RoundF16)
			r := optest.NewND(8, 4)
			r.Each(func(i0, i1, _, _ int) { r.Set(xr.At(i0, int(idx[i1]), 0, 0), i0, i1, 0, 0) })
			return x.GetRows(h.G, rows), r
		}},
	})
}
