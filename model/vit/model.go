package vit

import (
	"math"
	"strconv"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/nn"
)

// Attention is multi-head self-attention with a fused QKV projection and, for
// DA3 blocks at or after qknorm_start, LayerNorm on q and k (eps 1e-5, weights
// shared by all heads).
type Attention struct {
	QKV   nn.Linear     `gguf:"attn_qkv"`
	QNorm *nn.LayerNorm `gguf:"attn_qnorm"`
	KNorm *nn.LayerNorm `gguf:"attn_knorm"`
	Proj  nn.Linear     `gguf:"attn_proj"`
}

// Block is a pre-norm transformer block:
//
//	x = x + ls1 ⊙ attn(norm1(x));  x = x + ls2 ⊙ ffn(norm2(x))
type Block struct {
	Norm1 nn.LayerNorm `gguf:"norm1"`
	Attn  Attention
	LS1   nn.LayerScale `gguf:"ls1"`
	Norm2 nn.LayerNorm  `gguf:"norm2"`
	FFN   nn.FFN
	LS2   nn.LayerScale `gguf:"ls2"`
}

// Model is the DINOv2 backbone. Bind it under the root "vit" (or "m_vit" for
// the metric branch of nested files).
type Model struct {
	PatchEmbed  nn.Conv2D    `gguf:"patch_embed"`
	ClsToken    *ggml.Tensor `gguf:"cls_token"`
	CameraToken *ggml.Tensor `gguf:"camera_token,optional"`
	PosEmbed    *ggml.Tensor `gguf:"pos_embed"`
	Blocks      []Block      `gguf:"blk"`
	Norm        nn.LayerNorm `gguf:"norm"`

	Cfg Config
	// Pos is the host copy of PosEmbed with its per-grid interpolation cache.
	Pos *PosEmbed
}

// New returns an unbound backbone shaped by cfg.
func New(cfg Config) *Model {
	m := &Model{Cfg: cfg, Blocks: make([]Block, cfg.Depth)}
	m.PatchEmbed.Params = ggml.Conv2DParams{Stride: cfg.PatchSize}
	m.Norm.Eps = cfg.FinalEps
	for i := range m.Blocks {
		b := &m.Blocks[i]
		b.Norm1.Eps, b.Norm2.Eps = cfg.LNEps, cfg.LNEps
		if cfg.SwiGLU {
			b.FFN = &nn.SwiGLU{}
		} else {
			b.FFN = &nn.MLP{}
		}
		if cfg.QKNorm(i) {
			b.Attn.QNorm = &nn.LayerNorm{Eps: cfg.QKNormEps}
			b.Attn.KNorm = &nn.LayerNorm{Eps: cfg.QKNormEps}
		}
	}
	return m
}

// Grid is a processed image's patch grid.
type Grid struct{ PH, PW int }

// Embed turns pixels [W, H, 3, S] into tokens [C, 1+Np, S]: patch embedding,
// the cls token prepended, plus the (host-interpolated) position embedding.
func (m *Model) Embed(g *ggml.Context, b nn.Builder, pixels *ggml.Tensor) (*ggml.Tensor, Grid) {
	C := m.Cfg.EmbedDim
	S := pixels.Dim(3)
	p := m.PatchEmbed.Forward(g, pixels) // [pw, ph, C, S]
	grid := Grid{PH: p.Dim(1), PW: p.Dim(0)}
	np := grid.PH * grid.PW
	tok := p.Reshape(g, np, C, S).Permute(g, 1, 0, 2).Cont(g) // [C, Np, S]
	cls := m.ClsToken.Reshape(g, C, 1, 1)
	if S > 1 {
		cls = cls.Repeat(g, g.NewTensor(ggml.TypeF32, C, 1, S))
	}
	x := cls.Concat(g, tok, 1) // [C, 1+Np, S]
	pe := b.Input("vit.pos_embed."+gridKey(grid), m.Pos.For(grid.PH, grid.PW), C, 1+np)
	return x.Add(g, pe), grid
}

func gridKey(gr Grid) string { return strconv.Itoa(gr.PH) + "x" + strconv.Itoa(gr.PW) }

// ropePositions are the (y, x) RoPE positions of the T = 1+Np tokens of one
// view: token 0 at (0,0); patches at (row+1, col+1) in local blocks and (1,1)
// in global blocks ("pos_nodiff").
func ropePositions(gr Grid, global bool) (py, px []int32) {
	t := 1 + gr.PH*gr.PW
	py, px = make([]int32, t), make([]int32, t)
	for r := 0; r < gr.PH; r++ {
		for c := 0; c < gr.PW; c++ {
			i := 1 + r*gr.PW + c
			if global {
				py[i], px[i] = 1, 1
			} else {
				py[i], px[i] = int32(r+1), int32(c+1)
			}
		}
	}
	return py, px
}

// rope2D rotates x:[hd, H, T, S]: the first hd/2 dims by the y positions and
// the last hd/2 by the x positions, each as NeoX pairs (k, k+hd/4) with
// θ_k = p·base^(−4k/hd) — DA3's RotaryPositionEmbedding2D.
func (m *Model) rope2D(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid, global bool) *ggml.Tensor {
	hd, H, T, S := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	half := hd / 2
	key := "local"
	if global {
		key = "global"
	}
	py, px := ropePositions(gr, global)
	posY := b.InputI32("vit.rope_y."+key+"."+gridKey(gr), py, T)
	posX := b.InputI32("vit.rope_x."+key+"."+gridKey(gr), px, T)
	nb := []int{x.Stride(1), x.Stride(2), x.Stride(3)}
	xy := x.View(g, 0, []int{half, H, T, S}, nb)
	xx := x.View(g, half*x.Stride(0), []int{half, H, T, S}, nb)
	p := ggml.RoPEParams{Dims: half, Mode: ggml.RoPENeoX, Base: m.Cfg.RoPEFreq}
	return xy.RoPEExt(g, posY, p).Concat(g, xx.RoPEExt(g, posX, p), 0)
}

// attention runs block i's attention over x:[C, T, S]; global blocks attend
// over all S·T tokens jointly.
func (m *Model) attention(g *ggml.Context, b nn.Builder, i int, x *ggml.Tensor, gr Grid) *ggml.Tensor {
	a := &m.Blocks[i].Attn
	C, T, S := x.Dim(0), x.Dim(1), x.Dim(2)
	H, hd := m.Cfg.Heads, m.Cfg.HeadDim
	global := m.Cfg.Global(i)
	qkv := a.QKV.Forward(g, x) // [3C, T, S]
	nb := []int{hd * qkv.Stride(0), qkv.Stride(1), qkv.Stride(2)}
	shape := []int{hd, H, T, S}
	q := qkv.View(g, 0, shape, nb)
	k := qkv.View(g, C*qkv.Stride(0), shape, nb)
	v := qkv.View(g, 2*C*qkv.Stride(0), shape, nb)
	if a.QNorm != nil {
		q = a.QNorm.Forward(g, q)
		k = a.KNorm.Forward(g, k)
	}
	if m.Cfg.RoPE(i) {
		q = m.rope2D(g, b, q, gr, global)
		k = m.rope2D(g, b, k, gr, global)
	}
	if global && S > 1 { // all views' tokens attend jointly
		q, k, v = joinViews(g, q), joinViews(g, k), joinViews(g, v)
	}
	o := nn.Attention(g, q, k, v, float32(1/math.Sqrt(float64(hd)))) // [hd, H, n, batch], contiguous
	return a.Proj.Forward(g, o.Reshape(g, C, T, S))
}

// joinViews views x [hd, H, T, S] as [hd, H, T·S, 1] (the tokens of all
// views in one sequence): a view when the views follow each other in memory
// (a projection's output), else a copy.
func joinViews(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	hd, H, T, S := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	if x.Stride(3) == T*x.Stride(2) {
		return x.View(g, 0, []int{hd, H, T * S, 1}, []int{x.Stride(1), x.Stride(2), T * S * x.Stride(2)})
	}
	return x.Cont(g).Reshape(g, hd, H, T*S, 1)
}

// Block applies block i to x:[C, T, S].
func (m *Model) Block(g *ggml.Context, b nn.Builder, i int, x *ggml.Tensor, gr Grid) *ggml.Tensor {
	blk := &m.Blocks[i]
	x = x.Add(g, blk.LS1.Forward(g, m.attention(g, b, i, blk.Norm1.Forward(g, x), gr)))
	return x.Add(g, blk.LS2.Forward(g, blk.FFN.Forward(g, blk.Norm2.Forward(g, x))))
}

// Features are the backbone outputs the heads consume.
type Features struct {
	// Feats are the 4 out-layer features [D, Np, S] (D = 2C with cat_token).
	Feats [4]*ggml.Tensor
	// CamTokens are the token-0 rows [2C, S] of each out layer (cat_token only).
	CamTokens [4]*ggml.Tensor
	Grid      Grid
}

// InjectCameraTokens replaces token 0 of every view: the reference token
// (camera_token row 0) for view 0, the source token (row 1) for the others;
// or, when given is not nil, the camera tokens [C, S] of given cameras (the
// camera encoder's output, pose-conditioned runs).
func (m *Model) InjectCameraTokens(g *ggml.Context, x, given *ggml.Tensor) *ggml.Tensor {
	C, T, S := x.Dim(0), x.Dim(1), x.Dim(2)
	rest := x.View(g, x.Stride(1), []int{C, T - 1, S}, []int{x.Stride(1), x.Stride(2)})
	if given != nil {
		return given.Reshape(g, C, 1, S).Concat(g, rest, 1)
	}
	ref := m.CameraToken.View(g, 0, []int{C, 1, 1}, nil)
	tok := ref
	if S > 1 {
		src := m.CameraToken.View(g, m.CameraToken.Stride(1), []int{C, 1, 1}, nil)
		if S > 2 {
			src = src.Repeat(g, g.NewTensor(ggml.TypeF32, C, 1, S-1))
		}
		tok = ref.Concat(g, src, 2)
	}
	return tok.Concat(g, rest, 1)
}

// Forward runs blocks [from, Depth) on x (tokens [C, T, S] entering block
// from; localX the local stream at that point, or nil = x) and returns the
// out-layer features. Camera tokens are injected at alt_start. Tap names:
// "vit.embed", "vit.cam_injected", "vit.feat.K", "vit.cam_tok.K".
func (m *Model) Forward(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid, from int) Features {
	return m.ForwardWith(g, b, x, gr, from, nil)
}

// ForwardWith is Forward with the camera tokens [C, S] of given cameras
// injected at alt_start instead of the learned ones (nil: the learned ones).
func (m *Model) ForwardWith(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid, from int, camTokens *ggml.Tensor) Features {
	cfg := m.Cfg
	local := x
	var f Features
	f.Grid = gr
	out := 0
	for i := from; i < cfg.Depth; i++ {
		if i == cfg.AltStart && m.CameraToken != nil {
			x = b.Tap("vit.cam_injected", m.InjectCameraTokens(g, x, camTokens))
		}
		x = m.Block(g, b, i, x, gr)
		if !cfg.Global(i) {
			local = x
		}
		for k, l := range cfg.OutLayers {
			if l == i {
				f.Feats[k], f.CamTokens[k] = m.output(g, local, x)
				b.Tap("vit.feat."+strconv.Itoa(k), f.Feats[k])
				if f.CamTokens[k] != nil {
					b.Tap("vit.cam_tok."+strconv.Itoa(k), f.CamTokens[k])
				}
				out++
			}
		}
	}
	_ = out
	return f
}

// output forms an out-layer feature from the local and global streams.
func (m *Model) output(g *ggml.Context, local, x *ggml.Tensor) (feat, cam *ggml.Tensor) {
	C, T, S := x.Dim(0), x.Dim(1), x.Dim(2)
	patches := func(t *ggml.Tensor) *ggml.Tensor {
		return t.View(g, t.Stride(1), []int{t.Dim(0), T - 1, S}, []int{t.Stride(1), t.Stride(2)})
	}
	if !m.Cfg.CatToken {
		return patches(m.Norm.Forward(g, x)).Cont(g), nil
	}
	feat = patches(local).Concat(g, patches(m.Norm.Forward(g, x)), 0) // [2C, Np, S]
	first := func(t *ggml.Tensor) *ggml.Tensor {
		return t.View(g, 0, []int{C, S}, []int{t.Stride(2)})
	}
	cam = first(local).Concat(g, first(x), 0) // [2C, S]
	return feat, cam
}
