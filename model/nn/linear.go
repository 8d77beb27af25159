package nn

import "github.com/da3-go/da3-go/ggml"

// Linear is y = W·x + b. W: [in, out] in ggml order (torch (out, in) reversed);
// x: [in, tokens, ...] gives [out, tokens, ...].
type Linear struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias,optional"`
}

// Forward applies the layer.
func (l *Linear) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return l.ForwardAct(g, x, ggml.ActNone)
}

// ForwardAct applies the layer, then act. On the CPU GEMM path the bias and
// the activation are fused into the product's store (one pass over the
// output instead of three).
func (l *Linear) ForwardAct(g *ggml.Context, x *ggml.Tensor, act ggml.Act) *ggml.Tensor {
	ep := ggml.Epilogue{Bias: l.Bias, Act: act}
	if g.GEMM() && ggml.GEMMWithFits(l.Weight, x, ep) {
		return l.Weight.GEMMWith(g, x, ep)
	}
	y := l.Weight.MatMul(g, x)
	if l.Bias != nil {
		y = y.Add(g, l.Bias)
	}
	return act.Apply(g, y)
}

// LayerNorm normalises over ne0 (the channels of a token) and applies the affine
// weight and bias: (x − mean)/√(var + Eps)·w + b, biased variance as torch.
type LayerNorm struct {
	Weight *ggml.Tensor `gguf:"weight"`
	Bias   *ggml.Tensor `gguf:"bias"`
	Eps    float32
}

// Forward applies the layer.
func (l *LayerNorm) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return x.Norm(g, l.Eps).Mul(g, l.Weight).Add(g, l.Bias)
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
	return m.FC2.Forward(g, m.FC1.ForwardAct(g, x, ggml.ActGELU))
}

// SwiGLU is w3(SiLU(x1) ⊙ x2) where [x1; x2] = w12(x) split in halves along
// the channels (DINOv2 ViT-g).
type SwiGLU struct {
	W12 Linear `gguf:"mlp_w12"`
	W3  Linear `gguf:"mlp_w3"`
}

// Forward applies the layer.
func (m *SwiGLU) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	h := m.W12.Forward(g, x) // [2·hidden, T, ...]
	hidden := h.Dim(0) / 2
	shape := h.Shape()
	shape[0] = hidden
	x1 := h.View(g, 0, shape, strides(h, len(shape)))
	x2 := h.View(g, hidden*h.Stride(0), shape, strides(h, len(shape)))
	return m.W3.Forward(g, x1.SiLU(g).Mul(g, x2))
}

// strides returns nb1..nb(n-1) of t, for views that keep t's layout.
func strides(t *ggml.Tensor, n int) []int {
	s := make([]int, n-1)
	for i := range s {
		s[i] = t.Stride(i + 1)
	}
	return s
}
