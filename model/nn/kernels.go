package nn

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// The kernel choice of the layers, one helper per operation: each builds
// the CPU kernel of ggml/kernels when the graph's kernel policy
// (kernels.PolicyOf) has it and the kernel takes the operands, and ggml's
// own ops otherwise. No other code of the model reads the policy's kernel
// switches: the layers call these helpers.

// dense is act(w·x + b) (b may be nil): the GEMM kernel (on w's panels
// packed at load when the runtime packed them), else ggml's product.
func dense(g *ggml.Context, w, b, x *ggml.Tensor, act kernels.Act) *ggml.Tensor {
	ep := kernels.Epilogue{Bias: b, Act: act}
	if kernels.PolicyOf(g).GEMM && kernels.GEMMFits(w, x, ep) {
		return kernels.GEMM(g, w, x, ep)
	}
	y := w.MulMat(g, x)
	if b != nil {
		y = y.Add(g, b)
	}
	return act.Apply(g, y)
}

// layerNorm is (x − mean)/√(var + eps)·w + b over ne0: one kernel
// (kernels.LayerNorm), else ggml's norm, mul and add (on a contiguous copy
// of x where the policy asks for one).
func layerNorm(g *ggml.Context, x, w, b *ggml.Tensor, eps float32) *ggml.Tensor {
	p := kernels.PolicyOf(g)
	if p.Norm && kernels.LayerNormFits(x, w, b) {
		return kernels.LayerNorm(g, x, w, b, eps)
	}
	if p.ContiguousNorm && !x.IsContiguous() {
		x = x.Cont(g)
	}
	return x.Norm(g, eps).Mul(g, w).Add(g, b)
}

// NormRoPE is rope(n(x)) for a head's queries or keys x [hd, H, T, S]: one
// kernel (kernels.LayerNormRoPE with the rotation table of table, called
// only then), else n's Forward and then rope.
func NormRoPE(g *ggml.Context, x *ggml.Tensor, n *LayerNorm, table func() *ggml.Tensor, rope func(*ggml.Tensor) *ggml.Tensor) *ggml.Tensor {
	if kernels.PolicyOf(g).Norm {
		if cs := table(); kernels.LayerNormRoPEFits(x, n.Weight, n.Bias, cs) {
			return kernels.LayerNormRoPE(g, x, n.Weight, n.Bias, cs, n.Eps)
		}
	}
	return rope(n.Forward(g, x))
}

// Concat is a.Concat(g, b, dim) (b after a along dim): one kernel that
// copies whole rows (kernels.Concat) where the policy has the element-wise
// kernels (Norm), else ggml's concatenation.
func Concat(g *ggml.Context, a, b *ggml.Tensor, dim int) *ggml.Tensor {
	if kernels.PolicyOf(g).Norm && kernels.ConcatFits(a, b, dim) {
		return kernels.Concat(g, a, b, dim)
	}
	return a.Concat(g, b, dim)
}

// Transpose is x.Transpose(g).Cont(g) (x's first two dims swapped,
// contiguous): one kernel that copies in cache-sized blocks
// (kernels.Transpose) where the policy has the token kernels (Norm), else
// ggml's copy of the transposed view.
func Transpose(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	if kernels.PolicyOf(g).Norm && kernels.TransposeFits(x) {
		return kernels.Transpose(g, x)
	}
	return x.Transpose(g).Cont(g)
}

// Exp is e^x · scale + bias, contiguous (x: a view with contiguous rows,
// such as a channel of a map): one kernel (kernels.Exp) where the graph's
// policy has the element-wise kernels (Norm), else ggml's Cont, Exp and,
// unless scale is 1 and bias 0, ScaleBias.
func Exp(g *ggml.Context, x *ggml.Tensor, scale, bias float32) *ggml.Tensor {
	if kernels.PolicyOf(g).Norm && kernels.ExpFits(x) {
		return kernels.Exp(g, x, scale, bias)
	}
	y := x.Cont(g).Exp(g)
	if scale != 1 || bias != 0 {
		y = y.ScaleBias(g, scale, bias)
	}
	return y
}

// addScaled is x + gamma ⊙ y: one kernel (kernels.AddScaled), else ggml's
// mul and add.
func addScaled(g *ggml.Context, x, y, gamma *ggml.Tensor) *ggml.Tensor {
	if kernels.PolicyOf(g).Norm && kernels.AddScaledFits(x, y, gamma) {
		return kernels.AddScaled(g, x, y, gamma)
	}
	return x.Add(g, y.Mul(g, gamma))
}

// convFusion is what a convolution's kernel may fuse besides its bias and
// activation: the ReLU of its input, or a sum with res (a residual unit's).
type convFusion struct {
	reluIn bool
	res    *ggml.Tensor
}

// conv2D is c's convolution of x (of ReLU(x), plus res, as f says) with its
// bias and then act: the convolution kernels (kernels.Conv2D, Conv2DReLUIn,
// Conv2DAdd), else a 1×1 convolution as one matrix product over the
// channels, ggml_conv_2d_direct where the policy routes convolutions there
// (DirectConv, f32 weights), or im2col and a matrix product.
func conv2D(g *ggml.Context, c *Conv2D, x *ggml.Tensor, act kernels.Act, f convFusion) *ggml.Tensor {
	ep := kernels.Epilogue{Bias: c.Bias, Act: act}
	if c.Bias != nil {
		ep.Bias = c.Bias.Reshape(g, c.Bias.Dim(0))
	}
	p := kernels.PolicyOf(g)
	if p.GEMM && kernels.Conv2DFits(c.Weight, x, c.Params, ep) {
		switch {
		case f.reluIn:
			return kernels.Conv2DReLUIn(g, c.Weight, x, c.Params, ep)
		case f.res != nil:
			return kernels.Conv2DAdd(g, c.Weight, x, c.Params, ep, f.res)
		}
		return kernels.Conv2D(g, c.Weight, x, c.Params, ep)
	}
	if f.reluIn { // the ReLU's output may fit the kernels where x did not
		return conv2D(g, c, x.ReLU(g), act, convFusion{res: f.res})
	}
	var y *ggml.Tensor
	switch w := c.Weight; {
	case w.Dim(0) == 1 && w.Dim(1) == 1 && c.Params.Stride <= 1 && c.Params.Pad == 0:
		y = pointwise(g, w, x)
	case p.DirectConv && w.Type() == ggml.TypeF32 && x.Type() == ggml.TypeF32 && w.IsContiguous():
		y = w.Conv2DDirect(g, x, c.Params)
	default:
		y = im2colConv(g, w, x, c.Params)
	}
	if c.Bias != nil {
		y = y.Add(g, c.Bias.Reshape(g, 1, 1, c.Bias.Dim(0), 1))
	}
	y = act.Apply(g, y)
	if f.res != nil {
		return f.res.Add(g, y)
	}
	return y
}

// Attention is softmax(q·kᵀ·scale)·v per head for q [hd, H, n, B] and k, v
// [hd, H, nk, B] (rows contiguous, any strides above), giving [hd, H, n, B]
// contiguous: reshape to [hd·H, n, B] for the output projection. The fused
// CPU kernel (kernels.Attention), else ggml_flash_attn_ext where the policy
// has Flash, else two matrix products and a softmax with the queries in
// chunks whose scores stay under the policy's ScoreBytes.
func Attention(g *ggml.Context, q, k, v *ggml.Tensor, scale float32) *ggml.Tensor {
	p := kernels.PolicyOf(g)
	if p.Attention && kernels.AttentionFits(q, k, v) {
		return kernels.Attention(g, q, k, v, scale)
	}
	q = q.Permute(g, 0, 2, 1, 3) // [hd, n, H, B]
	k = k.Permute(g, 0, 2, 1, 3)
	v = v.Permute(g, 0, 2, 1, 3)
	if p.Flash {
		return q.FlashAttnExt(g, k.Cont(g), v.Cont(g), nil, scale) // [hd, H, n, B]
	}
	return scoresAttention(g, q, k, v, scale, p.ScoreBytes).Cont(g)
}

// Resize resamples x [W, H, C, N] to [w, h, C, N] as x.Interpolate(g, w, h,
// mode) does: the bilinear kernel (kernels.Bilinear) for bilinear modes
// (with or without ScaleAlignCorners, no antialias) of F32 contiguous maps,
// else ggml's interpolation.
func Resize(g *ggml.Context, x *ggml.Tensor, w, h int, mode ggml.ScaleMode) *ggml.Tensor {
	if kernels.PolicyOf(g).Resize && (mode == ggml.ScaleBilinear || mode == ggml.ScaleBilinear|ggml.ScaleAlignCorners) && kernels.BilinearFits(x, w, h) {
		return kernels.Bilinear(g, x, w, h, mode&ggml.ScaleAlignCorners != 0)
	}
	return x.Interpolate(g, w, h, mode)
}
