package ggml

// #include "da3_ggml.h"
// static int da3_vec_dot_type(enum ggml_type t) { return ggml_get_type_traits_cpu(t)->vec_dot_type; }
import "C"

import "fmt"

// This file holds the element-wise, matrix, reduction and layout ops. Every
// method documents the C function it calls and its shape rule, with shapes in
// ggml order ([ne0, ne1, ne2, ne3], ne0 fastest). Results are new nodes in g.

func (t *Tensor) binary(g *Context, op string, b *Tensor, f func(*C.struct_ggml_context, *C.struct_ggml_tensor, *C.struct_ggml_tensor) *C.struct_ggml_tensor) *Tensor {
	notNil(op, t, b)
	ts := []*Tensor{t, b}
	mustf(canRepeat(b, t), op, ts, "second operand must broadcast to the first (each dim of b divides the dim of a)")
	// The CPU kernels (binary-ops.cpp) assert these.
	mustf(t.rowsContiguous(), op, ts, "first operand rows must be contiguous (nb0 = type size): use Cont")
	mustf(b.rowsContiguous() || sameShape(t, b), op, ts, "a second operand with non-contiguous rows cannot be broadcast: use Cont")
	mustf(isFloat(t.Type()) && (b.Type() == t.Type() || b.Type() == TypeF32) && (t.Type() != TypeF32 || b.Type() == TypeF32),
		op, ts, "unsupported types %s and %s (f32, f16 or bf16; the second may be f32)", t.Type(), b.Type())
	g.reserve(op, 1)
	return g.wrap(op, f(g.c, t.p, b.p))
}

// Add is ggml_add: t + b, with b broadcast (repeated) to t's shape.
func (t *Tensor) Add(g *Context, b *Tensor) *Tensor {
	return t.binary(g, "add", b, func(c *C.struct_ggml_context, x, y *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_add(c, x, y)
	})
}

// Sub is ggml_sub: t - b, b broadcast to t.
func (t *Tensor) Sub(g *Context, b *Tensor) *Tensor {
	return t.binary(g, "sub", b, func(c *C.struct_ggml_context, x, y *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_sub(c, x, y)
	})
}

// Mul is ggml_mul: element-wise t * b, b broadcast to t.
func (t *Tensor) Mul(g *Context, b *Tensor) *Tensor {
	return t.binary(g, "mul", b, func(c *C.struct_ggml_context, x, y *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_mul(c, x, y)
	})
}

// Div is ggml_div: element-wise t / b, b broadcast to t.
func (t *Tensor) Div(g *Context, b *Tensor) *Tensor {
	return t.binary(g, "div", b, func(c *C.struct_ggml_context, x, y *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_div(c, x, y)
	})
}

// Scale is ggml_scale: s * t. t must be contiguous F32 (the CPU kernel asserts it).
func (t *Tensor) Scale(g *Context, s float32) *Tensor {
	notNil("scale", t)
	mustf(t.IsContiguous() && t.Type() == TypeF32, "scale", []*Tensor{t}, "operand must be contiguous f32 (use Cont)")
	g.reserve("scale", 1)
	return g.wrap("scale", C.ggml_scale(g.c, t.p, C.float(s)))
}

// ScaleBias is ggml_scale_bias: s * t + b.
func (t *Tensor) ScaleBias(g *Context, s, b float32) *Tensor {
	notNil("scale_bias", t)
	mustf(t.IsContiguous() && t.Type() == TypeF32, "scale_bias", []*Tensor{t}, "operand must be contiguous f32 (use Cont)")
	g.reserve("scale_bias", 1)
	return g.wrap("scale_bias", C.ggml_scale_bias(g.c, t.p, C.float(s), C.float(b)))
}

// MulMat is ggml_mul_mat: the matrix product of t:[K, M, a2, a3] and
// b:[K, N, b2, b3] giving [M, N, b2, b3]; b2 and b3 must be multiples of a2 and
// a3 (t is broadcast). For a Linear layer, t is the weight [in, out] and b the
// input [in, tokens]. The rows of both must be contiguous (b may be permuted
// in dims 1 to 3); b must be F32 (the CPU converts it to t's dot type).
func (t *Tensor) MulMat(g *Context, b *Tensor) *Tensor {
	notNil("mul_mat", t, b)
	ts := []*Tensor{t, b}
	mustf(t.ne(0) == b.ne(0), "mul_mat", ts, "inner dimensions differ (ne0 %d vs %d)", t.ne(0), b.ne(0))
	mustf(t.ne(2) != 0 && t.ne(3) != 0 && b.ne(2)%t.ne(2) == 0 && b.ne(3)%t.ne(3) == 0, "mul_mat", ts, "batch dims of b must be multiples of those of a")
	mustf(!t.IsTransposed() && t.rowsContiguous(), "mul_mat", ts, "first operand must not be transposed or permuted in dim 0 (use Cont)")
	mustf(b.rowsContiguous(), "mul_mat", ts, "second operand rows must be contiguous (use Cont)")
	mustf(b.Type() == TypeF32 || int(b.Type()) == int(C.da3_vec_dot_type(C.enum_ggml_type(t.Type()))), "mul_mat", ts,
		"second operand must be f32 (or %s, the dot type of %s), not %s", Type(C.da3_vec_dot_type(C.enum_ggml_type(t.Type()))), t.Type(), b.Type())
	g.reserve("mul_mat", 1)
	return g.wrap("mul_mat", C.ggml_mul_mat(g.c, t.p, b.p))
}

// Norm is ggml_norm: normalise each row (over ne0) to zero mean and unit
// variance (biased), no affine: (x - mean) / sqrt(var + eps).
func (t *Tensor) Norm(g *Context, eps float32) *Tensor {
	notNil("norm", t)
	mustf(t.Type() == TypeF32 && t.rowsContiguous(), "norm", []*Tensor{t}, "operand must be f32 with contiguous rows")
	mustf(eps >= 0, "norm", []*Tensor{t}, "negative eps %g", eps)
	g.reserve("norm", 1)
	return g.wrap("norm", C.ggml_norm(g.c, t.p, C.float(eps)))
}

// RMSNorm is ggml_rms_norm: x / sqrt(mean(x²) + eps) over ne0.
func (t *Tensor) RMSNorm(g *Context, eps float32) *Tensor {
	notNil("rms_norm", t)
	mustf(t.Type() == TypeF32 && t.rowsContiguous(), "rms_norm", []*Tensor{t}, "operand must be f32 with contiguous rows")
	mustf(eps >= 0, "rms_norm", []*Tensor{t}, "negative eps %g", eps)
	g.reserve("rms_norm", 1)
	return g.wrap("rms_norm", C.ggml_rms_norm(g.c, t.p, C.float(eps)))
}

// SoftMaxExt is ggml_soft_max_ext: softmax over ne0 of t*scale + mask (+ ALiBi
// slopes when maxBias > 0). mask may be nil; otherwise F16 or F32, contiguous,
// mask.ne0 == t.ne0, mask.ne1 >= t.ne1, broadcast over dims 2 and 3.
func (t *Tensor) SoftMaxExt(g *Context, mask *Tensor, scale, maxBias float32) *Tensor {
	notNil("soft_max_ext", t)
	mustf(t.IsContiguous() && t.Type() == TypeF32, "soft_max_ext", []*Tensor{t}, "operand must be contiguous f32")
	mustf(maxBias <= 0 || mask != nil, "soft_max_ext", []*Tensor{t}, "ALiBi (maxBias > 0) needs a mask")
	var m *C.struct_ggml_tensor
	if mask != nil {
		ts := []*Tensor{t, mask}
		mustf(mask.Type() == TypeF16 || mask.Type() == TypeF32, "soft_max_ext", ts, "mask must be f16 or f32")
		mustf(mask.IsContiguous(), "soft_max_ext", ts, "mask must be contiguous")
		mustf(mask.ne(0) == t.ne(0) && mask.ne(1) >= t.ne(1), "soft_max_ext", ts, "mask must be [ne0, >=ne1]")
		mustf(mask.ne(2) != 0 && mask.ne(3) != 0 && t.ne(2)%mask.ne(2) == 0 && t.ne(3)%mask.ne(3) == 0, "soft_max_ext", ts, "mask must broadcast over dims 2 and 3")
		m = mask.p
	}
	g.reserve("soft_max_ext", 1)
	return g.wrap("soft_max_ext", C.ggml_soft_max_ext(g.c, t.p, m, C.float(scale), C.float(maxBias)))
}

// unaryOp is ggml_unary with one of ggml's unary ops (what ggml_gelu,
// ggml_relu, … call).
func (t *Tensor) unaryOp(g *Context, op string, u C.enum_ggml_unary_op) *Tensor {
	return t.unary(g, op, func(c *C.struct_ggml_context, x *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_unary(c, x, u)
	})
}

func (t *Tensor) unary(g *Context, op string, f func(*C.struct_ggml_context, *C.struct_ggml_tensor) *C.struct_ggml_tensor) *Tensor {
	notNil(op, t)
	mustf(bool(C.ggml_is_contiguous_1(t.p)), op, []*Tensor{t}, "operand rows must be contiguous (use Cont)")
	mustf(isFloat(t.Type()), op, []*Tensor{t}, "operand must be f32, f16 or bf16, not %s", t.Type())
	g.reserve(op, 1)
	return g.wrap(op, f(g.c, t.p))
}

// GELU is ggml_gelu, the tanh approximation of GELU. PyTorch's default
// nn.GELU() is the exact form: use GELUErf for parity.
func (t *Tensor) GELU(g *Context) *Tensor {
	return t.unaryOp(g, "gelu", C.GGML_UNARY_OP_GELU)
}

// GELUErf is ggml_gelu_erf: 0.5·x·(1 + erf(x/√2)), torch's nn.GELU().
func (t *Tensor) GELUErf(g *Context) *Tensor {
	return t.unaryOp(g, "gelu_erf", C.GGML_UNARY_OP_GELU_ERF)
}

// SiLU is ggml_silu: x·sigmoid(x).
func (t *Tensor) SiLU(g *Context) *Tensor {
	return t.unaryOp(g, "silu", C.GGML_UNARY_OP_SILU)
}

// SwiGLU is ggml_swiglu: t [2n, ...] split in halves along ne0, SiLU of
// the first times the second, [n, ...]: SiLU(t[:n])·t[n:] in one op. Rows
// must be contiguous and ne0 even.
func (t *Tensor) SwiGLU(g *Context) *Tensor {
	notNil("swiglu", t)
	mustf(t.ne(0)%2 == 0, "swiglu", []*Tensor{t}, "ne0 must be even to split in halves")
	return t.unary(g, "swiglu", func(c *C.struct_ggml_context, x *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_swiglu(c, x)
	})
}

// ReLU is ggml_relu: max(x, 0).
func (t *Tensor) ReLU(g *Context) *Tensor {
	return t.unaryOp(g, "relu", C.GGML_UNARY_OP_RELU)
}

// Sigmoid is ggml_sigmoid: 1/(1+exp(-x)).
func (t *Tensor) Sigmoid(g *Context) *Tensor {
	return t.unaryOp(g, "sigmoid", C.GGML_UNARY_OP_SIGMOID)
}

// Tanh is ggml_tanh.
func (t *Tensor) Tanh(g *Context) *Tensor {
	return t.unaryOp(g, "tanh", C.GGML_UNARY_OP_TANH)
}

// Exp is ggml_exp.
func (t *Tensor) Exp(g *Context) *Tensor {
	return t.unaryOp(g, "exp", C.GGML_UNARY_OP_EXP)
}

// Neg is ggml_neg: -x.
func (t *Tensor) Neg(g *Context) *Tensor {
	return t.unaryOp(g, "neg", C.GGML_UNARY_OP_NEG)
}

// Abs is ggml_abs: |x|.
func (t *Tensor) Abs(g *Context) *Tensor {
	return t.unaryOp(g, "abs", C.GGML_UNARY_OP_ABS)
}

// Sqr is ggml_sqr: x².
func (t *Tensor) Sqr(g *Context) *Tensor {
	return t.unary(g, "sqr", func(c *C.struct_ggml_context, x *C.struct_ggml_tensor) *C.struct_ggml_tensor { return C.ggml_sqr(c, x) })
}

// Sqrt is ggml_sqrt: √x.
func (t *Tensor) Sqrt(g *Context) *Tensor {
	return t.unary(g, "sqrt", func(c *C.struct_ggml_context, x *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		return C.ggml_sqrt(c, x)
	})
}

// Clamp is ggml_clamp: min(max(x, lo), hi), into a new contiguous tensor.
// ggml_clamp itself works in place (its result is a view of its operand), so
// the binding clamps a ggml_cont copy: t is left unchanged for its other
// users.
func (t *Tensor) Clamp(g *Context, lo, hi float32) *Tensor {
	notNil("clamp", t)
	mustf(t.Type() == TypeF32 || t.Type() == TypeF16, "clamp", []*Tensor{t}, "operand must be f32 or f16")
	g.reserve("clamp", 2)
	c := g.wrap("clamp", C.ggml_cont(g.c, t.p))
	return g.wrap("clamp", C.ggml_clamp(g.c, c.p, C.float(lo), C.float(hi)))
}

// SumRows is ggml_sum_rows: [n0, n1, n2, n3] -> [1, n1, n2, n3], the sum over ne0.
func (t *Tensor) SumRows(g *Context) *Tensor {
	notNil("sum_rows", t)
	mustf(t.Type() == TypeF32 && t.rowsContiguous(), "sum_rows", []*Tensor{t}, "operand must be f32 with contiguous rows")
	g.reserve("sum_rows", 1)
	return g.wrap("sum_rows", C.ggml_sum_rows(g.c, t.p))
}

// Mean is ggml_mean: [n0, n1, n2, n3] -> [1, n1, n2, n3], the mean over ne0.
func (t *Tensor) Mean(g *Context) *Tensor {
	notNil("mean", t)
	mustf(t.Type() == TypeF32 && t.rowsContiguous(), "mean", []*Tensor{t}, "operand must be f32 with contiguous rows")
	g.reserve("mean", 1)
	return g.wrap("mean", C.ggml_mean(g.c, t.p))
}

// Sum is ggml_sum: the sum of all elements, shape [1].
func (t *Tensor) Sum(g *Context) *Tensor {
	notNil("sum", t)
	mustf(isFloat(t.Type()) && t.rowsContiguous(), "sum", []*Tensor{t}, "operand must be f32, f16 or bf16 with contiguous rows")
	g.reserve("sum", 1)
	return g.wrap("sum", C.ggml_sum(g.c, t.p))
}

// Concat is ggml_concat: t and b joined along dim; all other dims must match
// and the types must be equal.
func (t *Tensor) Concat(g *Context, b *Tensor, dim int) *Tensor {
	notNil("concat", t, b)
	ts := []*Tensor{t, b}
	mustf(dim >= 0 && dim < 4, "concat", ts, "dim %d out of range [0,4)", dim)
	mustf(t.Type() == b.Type(), "concat", ts, "types differ (%s vs %s)", t.Type(), b.Type())
	mustf(!t.Type().IsQuantized(), "concat", ts, "cannot concatenate quantized %s tensors", t.Type())
	for d := 0; d < 4; d++ {
		if d != dim {
			mustf(t.ne(d) == b.ne(d), "concat", ts, "dim %d differs (%d vs %d)", d, t.ne(d), b.ne(d))
		}
	}
	g.reserve("concat", 1)
	return g.wrap("concat", C.ggml_concat(g.c, t.p, b.p, C.int(dim)))
}

// Reshape is ggml_reshape_4d: the same data viewed with a new shape of 1 to 4
// dims. One dimension may be -1 (inferred). The element count must match and t
// must be contiguous.
func (t *Tensor) Reshape(g *Context, shape ...int) *Tensor {
	notNil("reshape", t)
	if len(shape) == 0 || len(shape) > 4 {
		panic(&ShapeError{Op: "reshape", Shapes: [][]int{t.ne4(), shape}, Msg: "need 1 to 4 dims"})
	}
	s := append([]int(nil), shape...)
	infer, known := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			panic(&ShapeError{Op: "reshape", Shapes: [][]int{t.ne4(), shape}, Msg: "invalid dimension (at most one -1)"})
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || t.Elements()%known != 0 {
			panic(&ShapeError{Op: "reshape", Shapes: [][]int{t.ne4(), shape}, Msg: "cannot infer the -1 dimension"})
		}
		s[infer] = t.Elements() / known
		known *= s[infer]
	}
	mustf(known == t.Elements(), "reshape", []*Tensor{t}, "element count %d does not match the new shape %v", t.Elements(), shape)
	mustf(t.IsContiguous(), "reshape", []*Tensor{t}, "operand must be contiguous (use Cont)")
	ne := normShape("reshape", s)
	g.reserve("reshape", 1)
	return g.wrap("reshape", C.ggml_reshape_4d(g.c, t.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3])))
}

// View is ggml_view_4d: a view of t's data starting at byte offset with the
// given shape (1 to 4 dims) and byte strides nb1..nb3 (len(strides) ==
// len(shape)-1; nil keeps t's own strides). The view must stay inside t.
func (t *Tensor) View(g *Context, offset int, shape []int, strides []int) *Tensor {
	notNil("view", t)
	ne := normShape("view", shape)
	var nb [4]int64
	nb[0] = int64(t.Type().TypeSize())
	if strides == nil {
		nb[1], nb[2], nb[3] = t.nb(1), t.nb(2), t.nb(3)
		if t.Type().BlockSize() == 1 {
			// Keep t's strides for the dims given; dense above them.
			for i := len(shape); i < 4; i++ {
				nb[i] = nb[i-1] * ne[i-1]
			}
		}
	} else {
		if len(strides) != len(shape)-1 {
			panic(&ShapeError{Op: "view", Shapes: [][]int{t.ne4(), shape}, Msg: fmt.Sprintf("need %d strides, got %d", len(shape)-1, len(strides))})
		}
		for i, s := range strides {
			nb[i+1] = int64(s)
		}
		for i := len(shape); i < 4; i++ {
			nb[i] = nb[i-1] * ne[i-1]
		}
	}
	mustf(offset >= 0, "view", []*Tensor{t}, "negative offset")
	// Last byte touched must be inside t.
	end := int64(offset)
	empty := false
	for i := 0; i < 4; i++ {
		if ne[i] == 0 {
			empty = true
		}
		if i == 0 {
			end += ne[0] / int64(t.Type().BlockSize()) * nb[0]
		} else {
			end += (ne[i] - 1) * nb[i]
		}
	}
	mustf(empty || end <= int64(t.Bytes()), "view", []*Tensor{t}, "view of shape %v at offset %d with strides %v ends at byte %d, past the %d bytes of the source", shape, offset, nb, end, t.Bytes())
	g.reserve("view", 1)
	return g.wrap("view", C.ggml_view_4d(g.c, t.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]), C.size_t(nb[1]), C.size_t(nb[2]), C.size_t(nb[3]), C.size_t(offset)))
}

// Permute is ggml_permute: axis i of t becomes axis axes[i] of the result.
// Up to 4 axes; missing ones stay in place. The result is a view; call Cont
// before ops that need contiguous data.
func (t *Tensor) Permute(g *Context, axes ...int) *Tensor {
	notNil("permute", t)
	ax := [4]int{0, 1, 2, 3}
	if len(axes) > 4 {
		panic(&ShapeError{Op: "permute", Shapes: [][]int{t.ne4()}, Msg: "more than 4 axes"})
	}
	copy(ax[:], axes)
	var seen [4]bool
	for _, a := range ax {
		if a < 0 || a > 3 || seen[a] {
			panic(&ShapeError{Op: "permute", Shapes: [][]int{t.ne4()}, Msg: fmt.Sprintf("axes %v are not a permutation of 0..3", axes)})
		}
		seen[a] = true
	}
	g.reserve("permute", 1)
	return g.wrap("permute", C.ggml_permute(g.c, t.p, C.int(ax[0]), C.int(ax[1]), C.int(ax[2]), C.int(ax[3])))
}

// Transpose is ggml_transpose: swaps dims 0 and 1 (a view).
func (t *Tensor) Transpose(g *Context) *Tensor {
	notNil("transpose", t)
	g.reserve("transpose", 1)
	return g.wrap("transpose", C.ggml_transpose(g.c, t.p))
}

// Cont is ggml_cont: a contiguous copy of t (views and permutations made dense).
func (t *Tensor) Cont(g *Context) *Tensor {
	notNil("cont", t)
	g.reserve("cont", 1)
	return g.wrap("cont", C.ggml_cont(g.c, t.p))
}

// Cpy is ggml_cpy: copies t into dst (converting the type) and returns the
// node that performs it. Element counts must match.
func (t *Tensor) Cpy(g *Context, dst *Tensor) *Tensor {
	notNil("cpy", t, dst)
	mustf(t.Elements() == dst.Elements(), "cpy", []*Tensor{t, dst}, "element counts differ")
	checkConvert("cpy", t, dst.Type(), dst)
	g.reserve("cpy", 1)
	return g.wrap("cpy", C.ggml_cpy(g.c, t.p, dst.p))
}

// Cast is ggml_cast: t converted to type typ (same shape).
func (t *Tensor) Cast(g *Context, typ Type) *Tensor {
	notNil("cast", t)
	mustf(typ.Valid() && t.ne(0)%int64(typ.BlockSize()) == 0, "cast", []*Tensor{t}, "cannot cast to %s", typ)
	checkConvert("cast", t, typ, nil)
	g.reserve("cast", 1)
	return g.wrap("cast", C.ggml_cast(g.c, t.p, C.enum_ggml_type(typ)))
}

// Repeat is ggml_repeat: t tiled to the shape of like (each of like's dims
// must be a multiple of t's).
func (t *Tensor) Repeat(g *Context, like *Tensor) *Tensor {
	notNil("repeat", t, like)
	mustf(canRepeat(t, like), "repeat", []*Tensor{t, like}, "target dims must be multiples of the source dims")
	mustf(t.rowsContiguous() && (isFloat(t.Type()) || t.Type() == TypeI32 || t.Type() == TypeI16), "repeat", []*Tensor{t, like}, "operand must be f32, f16, bf16, i32 or i16 with contiguous rows")
	g.reserve("repeat", 1)
	return g.wrap("repeat", C.ggml_repeat(g.c, t.p, like.p))
}

// PadExt is ggml_pad_ext: zero padding before (lp) and after (rp) each of the
// 4 dims: pads = [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3].
func (t *Tensor) PadExt(g *Context, pads [8]int) *Tensor {
	notNil("pad_ext", t)
	mustf(t.Type() == TypeF32 && t.rowsContiguous(), "pad_ext", []*Tensor{t}, "operand must be f32 with contiguous rows")
	for _, p := range pads {
		mustf(p >= 0, "pad_ext", []*Tensor{t}, "negative padding %v", pads)
	}
	g.reserve("pad_ext", 1)
	return g.wrap("pad_ext", C.ggml_pad_ext(g.c, t.p, C.int(pads[0]), C.int(pads[1]), C.int(pads[2]), C.int(pads[3]), C.int(pads[4]), C.int(pads[5]), C.int(pads[6]), C.int(pads[7])))
}

// GetRows is ggml_get_rows: gathers rows of t:[n0, n1, n2, n3] by the I32
// indices rows:[k, n2, n3] giving [n0, k, n2, n3] (F32; I32 for an I32 t).
// Every index must be in [0, n1): the CPU kernel aborts the process on an
// index out of range, which cannot be checked when the graph is built.
func (t *Tensor) GetRows(g *Context, rows *Tensor) *Tensor {
	notNil("get_rows", t, rows)
	ts := []*Tensor{t, rows}
	mustf(rows.Type() == TypeI32, "get_rows", ts, "indices must be i32")
	mustf(t.rowsContiguous(), "get_rows", ts, "source rows must be contiguous")
	mustf(t.ne(2) == rows.ne(1) && t.ne(3) == rows.ne(2) && rows.ne(3) == 1, "get_rows", ts, "indices must be [k, ne2, ne3] of the source")
	g.reserve("get_rows", 1)
	return g.wrap("get_rows", C.ggml_get_rows(g.c, t.p, rows.p))
}

// checkConvert mirrors the CPU copy kernel (ggml_compute_forward_dup) and
// the CPU's supports_op: float sources convert to float, i32 and the types
// with a from_float (quantizing needs contiguous source rows and a contiguous
// destination); i32 converts to f32; quantized types dequantize to f32.
// dst is nil for Cast (a new contiguous tensor).
func checkConvert(op string, t *Tensor, to Type, dst *Tensor) {
	from := t.Type()
	ts := []*Tensor{t, dst}
	if dst == nil {
		ts = ts[:1]
	}
	switch {
	case from == to:
	case isFloat(from) && isFloat(to), from == TypeF32 && to == TypeI32, from == TypeI32 && to == TypeF32:
	case isFloat(from) && to.IsQuantized():
		switch to {
		case TypeIQ3XXS, TypeIQ3S, TypeIQ2XXS, TypeIQ2XS, TypeIQ2S, TypeIQ1S, TypeIQ1M, TypeQ8_1:
			panic(shapeErr(op, fmt.Sprintf("cannot convert %s to %s (no CPU quantizer)", from, to), ts...))
		}
		mustf(t.rowsContiguous() && (dst == nil || dst.IsContiguous()), op, ts, "quantizing to %s needs contiguous source rows and a contiguous destination", to)
	case from.IsQuantized() && to == TypeF32:
		mustf(dst == nil || dst.rowsContiguous(), op, ts, "dequantizing needs destination rows that are contiguous")
	default:
		panic(shapeErr(op, fmt.Sprintf("cannot convert %s to %s", from, to), ts...))
	}
}
