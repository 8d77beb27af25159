package nn

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Linear is y = W·x + b. W: [in, out] in ggml order (torch (out, in) reversed);
// x: [in, tokens, ...] gives [out, tokens, ...].
type Linear struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias,optional"`
}

// Forward applies the layer.
func (l *Linear) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return dense(g, l.Weight, l.Bias, x, kernels.ActNone)
}

// ForwardAct applies the layer, then act. With the GEMM kernel (the graph's
// kernel policy, kernels.PolicyOf) the bias and the activation are fused
// into the product's store: one pass over the output instead of three.
func (l *Linear) ForwardAct(g *ggml.Context, x *ggml.Tensor, act kernels.Act) *ggml.Tensor {
	return dense(g, l.Weight, l.Bias, x, act)
}

// MatMul is w.MulMat(g, x) (w [K, N], x [K, …] give [N, …]; batched as
// ggml_mul_mat), computed by the GEMM kernel when the graph's kernel policy
// allows it and the operands fit.
func MatMul(g *ggml.Context, w, x *ggml.Tensor) *ggml.Tensor {
	return dense(g, w, nil, x, kernels.ActNone)
}

// LayerNorm normalises over ne0 (the channels of a token) and applies the affine
// weight and bias: (x − mean)/√(var + Eps)·w + b, biased variance as torch.
type LayerNorm struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias"`
	Eps    float32
}

// Forward applies the layer: one kernel (kernels.LayerNorm) where the
// graph's policy has Norm, else ggml's norm, mul and add.
func (l *LayerNorm) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return layerNorm(g, x, l.Weight, l.Bias, l.Eps)
}

// LayerScale multiplies each channel by a learned gamma ([C]). The field is an
// untagged leaf: it binds to its parent's path (e.g. "vit.blk.3.ls1").
type LayerScale struct {
	Gamma *ggml.Tensor
}

// Forward applies the layer.
func (l *LayerScale) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return x.Mul(g, l.Gamma)
}

// AddTo is x + gamma ⊙ y: a block's skip connection around its branch y,
// in one pass with the CPU kernels (kernels.AddScaled: the same values).
func (l *LayerScale) AddTo(g *ggml.Context, x, y *ggml.Tensor) *ggml.Tensor {
	return addScaled(g, x, y, l.Gamma)
}

// FFN is a transformer block's feed-forward network (MLP or SwiGLU), chosen
// by the model config.
type FFN interface {
	Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor
}

// MLP is fc2(GELU(fc1(x))) with the exact (erf) GELU of torch's nn.GELU().
type MLP struct {
	FC1 Linear `gguf:"mlp_fc1"`
	FC2 Linear `gguf:"mlp_fc2"`
}

// Forward applies the layer.
func (m *MLP) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return m.FC2.Forward(g, m.FC1.ForwardAct(g, x, kernels.ActGELU))
}

// SwiGLU is w3(SiLU(x1) ⊙ x2) where [x1; x2] = w12(x) split in halves along
// the channels (DINOv2 ViT-g).
type SwiGLU struct {
	W12 Linear `gguf:"mlp_w12"`
	W3  Linear `gguf:"mlp_w3"`
}

// Forward applies the layer. The gate is ggml's one op (ggml_swiglu), which
// every backend runs on the halves of w12's rows in place; SiLU of a strided
// half is not (ggml-vulkan's unary ops take contiguous operands only).
func (m *SwiGLU) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	h := m.W12.Forward(g, x) // [2·hidden, T, ...]
	return m.W3.Forward(g, h.SwiGLU(g))
}
