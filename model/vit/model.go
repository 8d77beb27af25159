package vit

import (
	"strconv"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/nn"
)

// Model is the DINOv2 backbone. Bind it under the root "vit" (or "m_vit" for
// the metric branch of nested files).
type Model struct {
	PatchEmbed  nn.Conv2D    `gguf:"patch_embed"`
	ClsToken    *ggml.Tensor `gguf:"cls_token"`
	CameraToken *ggml.Tensor `gguf:"camera_token,optional"`
	PosEmbed    *ggml.Tensor `gguf:"pos_embed"`
	Blocks      []Layer      `gguf:"blk"` // *Block each, unless replaced
	Norm        nn.LayerNorm `gguf:"norm"`

	Cfg Config
	// Pos is the host copy of PosEmbed with its per-grid interpolation cache.
	Pos *PosEmbed
}

// New returns an unbound backbone shaped by cfg: block i is NewBlock(cfg, i).
func New(cfg Config) *Model {
	m := &Model{Cfg: cfg, Blocks: make([]Layer, cfg.Depth)}
	m.PatchEmbed.Params = ggml.Conv2DParams{Stride: cfg.PatchSize}
	m.Norm.Eps = cfg.FinalEps
	for i := range m.Blocks {
		m.Blocks[i] = NewBlock(cfg, i)
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
	tok := nn.Transpose(g, p.Reshape(g, np, C, S)) // [C, Np, S]
	cls := m.ClsToken.Reshape(g, C, 1, 1)
	if S > 1 {
		cls = cls.Repeat(g, g.NewTensor(ggml.TypeF32, C, 1, S))
	}
	x := nn.Concat(g, cls, tok, 1) // [C, 1+Np, S]
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
	return m.injectCameraTokens(g, x, given, false)
}

// injectCameraTokens is InjectCameraTokens; with independent every view is
// the reference view of its own scene (a batch of independent images).
func (m *Model) injectCameraTokens(g *ggml.Context, x, given *ggml.Tensor, independent bool) *ggml.Tensor {
	C, T, S := x.Dim(0), x.Dim(1), x.Dim(2)
	rest := x.View(g, x.Stride(1), []int{C, T - 1, S}, []int{x.Stride(1), x.Stride(2)})
	if given != nil {
		return nn.Concat(g, given.Reshape(g, C, 1, S), rest, 1)
	}
	ref := m.CameraToken.View(g, 0, []int{C, 1, 1}, nil)
	tok := ref
	if S > 1 && independent {
		tok = ref.Repeat(g, g.NewTensor(ggml.TypeF32, C, 1, S))
	} else if S > 1 {
		src := m.CameraToken.View(g, m.CameraToken.Stride(1), []int{C, 1, 1}, nil)
		if S > 2 {
			src = src.Repeat(g, g.NewTensor(ggml.TypeF32, C, 1, S-1))
		}
		tok = nn.Concat(g, ref, src, 2)
	}
	return nn.Concat(g, tok, rest, 1)
}

// Forward runs blocks [from, Depth) on x (tokens [C, T, S] entering block
// from) and returns the out-layer features. Camera tokens are injected at
// alt_start. Tap names: "vit.cam_injected", "vit.feat.K", "vit.cam_tok.K".
func (m *Model) Forward(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid, from int) Features {
	return m.ForwardWith(g, b, x, gr, from, nil)
}

// ForwardWith is Forward with the camera tokens [C, S] of given cameras
// injected at alt_start instead of the learned ones (nil: the learned ones).
func (m *Model) ForwardWith(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid, from int, camTokens *ggml.Tensor) Features {
	return m.forward(g, x, &Pass{B: b, Grid: gr}, from, camTokens)
}

// ForwardIndependent runs every block on x [C, T, S] holding S independent
// images (a batch, not the views of one scene): the global blocks attend
// within each image and each gets the reference camera token, so image s
// comes out as it would alone.
func (m *Model) ForwardIndependent(g *ggml.Context, b nn.Builder, x *ggml.Tensor, gr Grid) Features {
	return m.forward(g, x, &Pass{B: b, Grid: gr, Independent: true}, 0, nil)
}

func (m *Model) forward(g *ggml.Context, x *ggml.Tensor, p *Pass, from int, camTokens *ggml.Tensor) Features {
	cfg := m.Cfg
	b, gr := p.B, p.Grid
	local := x
	var f Features
	f.Grid = gr
	for i := from; i < cfg.Depth; i++ {
		if i == cfg.AltStart && m.CameraToken != nil {
			x = b.Tap("vit.cam_injected", m.injectCameraTokens(g, x, camTokens, p.Independent))
		}
		x = m.Blocks[i].Forward(g, x, p)
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
			}
		}
	}
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
	feat = nn.Concat(g, patches(local), patches(m.Norm.Forward(g, x)), 0) // [2C, Np, S]
	first := func(t *ggml.Tensor) *ggml.Tensor {
		return t.View(g, 0, []int{C, S}, []int{t.Stride(2)})
	}
	cam = nn.Concat(g, first(local), first(x), 0) // [2C, S]
	return feat, cam
}
