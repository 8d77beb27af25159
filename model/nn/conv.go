package nn

import (
	"reflect"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Conv2D is a 2-D convolution with optional bias. Weight: [KW, KH, IC, OC]
// (torch (OC, IC, KH, KW) reversed); bias [OC]. Input [W, H, IC, N] gives
// [OW, OH, OC, N].
type Conv2D struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias,optional"`
	Params ggml.Conv2DParams
}

// Forward applies the layer.
func (c *Conv2D) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return c.ForwardAct(g, x, kernels.ActNone)
}

// ForwardAct applies the layer, then act. With the GEMM kernel (the graph's
// kernel policy, kernels.PolicyOf) the convolution is an implicit-im2col
// GEMM with the bias and activation fused into its store; otherwise a 1×1
// convolution is one matrix product over the channels and others are
// ggml_conv_2d_direct where the policy routes them there (DirectConv, f32
// weights) or im2col and a matrix product (ggml_conv_2d).
func (c *Conv2D) ForwardAct(g *ggml.Context, x *ggml.Tensor, act kernels.Act) *ggml.Tensor {
	return conv2D(g, c, x, act, convFusion{})
}

// ForwardReLUIn is ForwardAct(g, x.ReLU(g), act) (a pre-activation
// convolution, as in DPT's residual units), with the input's ReLU done by
// the convolution where the kernels can (kernels.Conv2DReLUIn): the same
// values without a pass over the map.
func (c *Conv2D) ForwardReLUIn(g *ggml.Context, x *ggml.Tensor, act kernels.Act) *ggml.Tensor {
	return conv2D(g, c, x, act, convFusion{reluIn: true})
}

// ForwardAdd is res.Add(g, Forward(g, x)) (a residual unit's sum), with the
// sum done by the convolution's store where the kernels can
// (kernels.Conv2DAdd): the same values without a pass over the maps.
func (c *Conv2D) ForwardAdd(g *ggml.Context, x, res *ggml.Tensor) *ggml.Tensor {
	return conv2D(g, c, x, kernels.ActNone, convFusion{res: res})
}

// im2colConv is ggml_conv_2d (im2col, then one matrix product) built from
// its parts so that the product goes through MatMul (the GEMM kernel for
// F32 kernels when the policy allows it) and a single image needs no final
// copy.
func im2colConv(g *ggml.Context, w, x *ggml.Tensor, p ggml.Conv2DParams) *ggml.Tensor {
	col := w.Im2Col(g, x, p, w.Type()) // [KW·KH·IC, OW, OH, N]
	K, OW, OH, N := col.Dim(0), col.Dim(1), col.Dim(2), col.Dim(3)
	OC := w.Dim(3)
	y := MatMul(g, col.Reshape(g, K, OW*OH*N), w.Reshape(g, K, OC)) // [OW·OH·N, OC]
	if N == 1 {
		return y.Reshape(g, OW, OH, OC, 1)
	}
	return y.Reshape(g, OW, OH, N, OC).Permute(g, 0, 1, 3, 2).Cont(g)
}

// pointwise is a 1×1 convolution as one matrix product over channels:
// x [W, H, IC, N] → [IC, W·H·N] → W [IC, OC] → [OC, W·H·N] → [W, H, OC, N].
func pointwise(g *ggml.Context, w, x *ggml.Tensor) *ggml.Tensor {
	W, H, IC, N := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	OC := w.Dim(3)
	xt := x.Permute(g, 1, 2, 0, 3).Cont(g).Reshape(g, IC, W*H*N) // [IC, W, H, N]
	wm := w.Reshape(g, IC, OC)
	y := MatMul(g, wm, xt) // [OC, W·H·N]
	return y.Reshape(g, OC, W, H, N).Permute(g, 2, 0, 1, 3).Cont(g)
}

// ConvTranspose2D is a transposed convolution with padding 0 and bias.
// Weight: [KW, KH, OC, IC] (torch (IC, OC, KH, KW) reversed). Input
// [W, H, IC, N] gives [(W−1)·s+KW, (H−1)·s+KH, OC, N].
//
// When the stride equals the kernel size (the DPT reassemble layers: k4 s4,
// k2 s2) the output patches do not overlap, and the layer is computed exactly
// in F32 as one matrix product followed by a pixel shuffle. Otherwise it uses
// ggml_conv_transpose_2d_p0, whose CPU kernel rounds to F16.
type ConvTranspose2D struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias,optional"`
	Stride int
}

// Forward applies the layer.
func (c *ConvTranspose2D) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	KW, KH, OC, IC := c.Weight.Dim(0), c.Weight.Dim(1), c.Weight.Dim(2), c.Weight.Dim(3)
	s := c.Stride
	var y *ggml.Tensor
	if s == KW && s == KH {
		W, H, N := x.Dim(0), x.Dim(1), x.Dim(3)
		// Weight as a matrix [IC, KW·KH·OC].
		wm := Transpose(g, c.Weight.Reshape(g, KW*KH*OC, IC))
		if wm.Type() != ggml.TypeF32 {
			wm = wm.Cast(g, ggml.TypeF32)
		}
		xt := x.Permute(g, 1, 2, 0, 3).Cont(g).Reshape(g, IC, W*H*N) // [IC, W·H·N]
		// The bias, one per (i, j, oc) row of the product, is added by its store (the GEMM's
		// epilogue: the same sums without a broadcast pass over the upsampled map).
		var b *ggml.Tensor
		if c.Bias != nil {
			b = c.Bias.Reshape(g, 1, 1, OC).Repeat(g, g.NewTensor(ggml.TypeF32, KW, KH, OC)).Reshape(g, KW*KH*OC)
		}
		r := dense(g, wm, b, xt, kernels.ActNone) // [KW·KH·OC, W·H·N] = (i, j, oc, x, y, n)
		// The shuffle in one pass where the policy has the element-wise kernels, else ggml's permutes.
		if kernels.PolicyOf(g).Norm && kernels.DepthToSpaceFits(r, KW, KH, W, H) {
			return kernels.DepthToSpace(g, r, KW, KH, W, H)
		}
		// (i, (j,oc), x, y·n) → (i, x, (j,oc), y·n)
		r = r.Reshape(g, KW, KH*OC, W, H*N).Permute(g, 0, 2, 1, 3).Cont(g)
		// (i·x, j, oc, y·n) → (i·x, j, y·n, oc)
		r = r.Reshape(g, KW*W, KH, OC, H*N).Permute(g, 0, 1, 3, 2).Cont(g)
		if N == 1 {
			y = r.Reshape(g, KW*W, KH*H, OC, 1)
		} else {
			// (i·x, j, y, n, oc) → (i·x, (j, y), oc, n)
			y = r.Reshape(g, KW*W, KH*H, N, OC).Permute(g, 0, 1, 3, 2).Cont(g)
		}
		return y
	}
	w := c.Weight
	if w.Type() != ggml.TypeF16 {
		w = w.Cast(g, ggml.TypeF16)
	}
	y = w.ConvTranspose2D(g, x, s)
	if c.Bias != nil {
		y = y.Add(g, c.Bias.Reshape(g, 1, 1, c.Bias.Dim(0), 1))
	}
	return y
}

// Conv2Ds lists the convolution layers (Conv2D values and pointers, in
// struct fields, slices and arrays, at any depth) of the layer struct that
// v points to, in field order.
func Conv2Ds(v any) []*Conv2D {
	var out []*Conv2D
	var walk func(r reflect.Value)
	walk = func(r reflect.Value) {
		switch r.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !r.IsNil() {
				walk(r.Elem())
			}
		case reflect.Struct:
			if r.Type() == reflect.TypeFor[Conv2D]() {
				if r.CanAddr() {
					out = append(out, r.Addr().Interface().(*Conv2D))
				}
				return
			}
			for i := range r.NumField() {
				if r.Type().Field(i).IsExported() {
					walk(r.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range r.Len() {
				walk(r.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
	return out
}
