package camera

import (
	"math"
	"strconv"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model/nn"
)

// EncoderConfig are the hyper-parameters of DA3's camera encoder (CameraEnc):
// width Dim (the backbone's embed dim), Depth transformer blocks of Heads
// heads and MLP width Hidden, pose MLP width PoseHidden.
type EncoderConfig struct {
	Dim, Depth, Heads, Hidden, PoseHidden int
	Eps                                   float32
}

// EncoderBlock is one of CameraEnc's trunk blocks: a pre-norm transformer
// block with LayerScale and a GELU MLP, no q/k-norm, no RoPE.
type EncoderBlock struct {
	Norm1 nn.LayerNorm  `gguf:"norm1"`
	QKV   nn.Linear     `gguf:"attn_qkv"`
	Proj  nn.Linear     `gguf:"attn_proj"`
	LS1   nn.LayerScale `gguf:"ls1"`
	Norm2 nn.LayerNorm  `gguf:"norm2"`
	MLP   nn.MLP
	LS2   nn.LayerScale `gguf:"ls2"`
}

// Encoder is DA3's CameraEnc: it turns given cameras into the camera tokens
// that replace the learned ones at block alt_start (pose-conditioned depth).
// Bind it under "cam_enc".
type Encoder struct {
	PoseFC1   nn.Linear      `gguf:"pose_fc1"`
	PoseFC2   nn.Linear      `gguf:"pose_fc2"`
	TokenNorm nn.LayerNorm   `gguf:"token_norm"`
	Blocks    []EncoderBlock `gguf:"blk"`
	TrunkNorm nn.LayerNorm   `gguf:"trunk_norm"`

	Cfg EncoderConfig
}

// NewEncoder returns an unbound encoder shaped by cfg.
func NewEncoder(cfg EncoderConfig) *Encoder {
	e := &Encoder{Cfg: cfg, Blocks: make([]EncoderBlock, cfg.Depth)}
	e.TokenNorm.Eps, e.TrunkNorm.Eps = cfg.Eps, cfg.Eps
	for i := range e.Blocks {
		e.Blocks[i].Norm1.Eps, e.Blocks[i].Norm2.Eps = cfg.Eps, cfg.Eps
	}
	return e
}

// Forward maps the pose encodings enc [9, S] (EncodePose of each view's
// normalised camera) to camera tokens [Dim, S]: pose MLP (GELU), LayerNorm,
// the trunk blocks attending over the S views' tokens, LayerNorm. Tap names:
// "cam_enc.branch", "cam_enc.token_norm", "cam_enc.trunk.N", "cam_enc.tokens".
func (e *Encoder) Forward(g *ggml.Context, b nn.Builder, enc *ggml.Tensor) *ggml.Tensor {
	x := b.Tap("cam_enc.branch", e.PoseFC2.Forward(g, e.PoseFC1.ForwardAct(g, enc, kernels.ActGELU)))
	x = b.Tap("cam_enc.token_norm", e.TokenNorm.Forward(g, x))
	for i := range e.Blocks {
		blk := &e.Blocks[i]
		x = blk.LS1.AddTo(g, x, e.attention(g, blk, blk.Norm1.Forward(g, x)))
		x = blk.LS2.AddTo(g, x, blk.MLP.Forward(g, blk.Norm2.Forward(g, x)))
		b.Tap("cam_enc.trunk."+strconv.Itoa(i), x)
	}
	return b.Tap("cam_enc.tokens", e.TrunkNorm.Forward(g, x))
}

// attention is multi-head self-attention over the S tokens of x [D, S]
// (scaled dot product, no mask), with the fused QKV and output projections;
// the kernel is the graph's policy's (nn.Attention).
func (e *Encoder) attention(g *ggml.Context, blk *EncoderBlock, x *ggml.Tensor) *ggml.Tensor {
	D, S := x.Dim(0), x.Dim(1)
	H := e.Cfg.Heads
	hd := D / H
	qkv := blk.QKV.Forward(g, x) // [3D, S]
	nb := []int{hd * qkv.Stride(0), qkv.Stride(1), qkv.Stride(1) * S}
	part := func(k int) *ggml.Tensor { return qkv.View(g, k*D*qkv.Stride(0), []int{hd, H, S, 1}, nb) }
	o := nn.Attention(g, part(0), part(1), part(2), float32(1/math.Sqrt(float64(hd)))) // [hd, H, S, 1]
	return blk.Proj.Forward(g, o.Reshape(g, D, S))
}
