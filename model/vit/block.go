package vit

import (
	"math"
	"strconv"
	"sync"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/nn"
)

// Pass is what the blocks of one backbone pass share besides their input:
// the graph's builder (host inputs such as the RoPE positions, taps) and the
// views' patch grid.
type Pass struct {
	B    nn.Builder
	Grid Grid
	// Independent: the S views are independent images (a batch), not the
	// views of one scene, so global attention stays within each.
	Independent bool
}

// Layer maps tokens x [C, T, S] (T = 1 + Np tokens per view, S views) to
// tokens of the same shape in a graph. A Block is one, and so is its
// attention; a user may replace or wrap either with any Layer (Model.Blocks,
// Block.Attn) to build a variant of the network without copying it.
type Layer interface {
	Forward(g *ggml.Context, x *ggml.Tensor, p *Pass) *ggml.Tensor
}

// Block is a pre-norm transformer block (DINOv2's Block with LayerScale):
//
//	x = x + ls1 ⊙ attn(norm1(x));  x = x + ls2 ⊙ ffn(norm2(x))
//
// Tensor names: <root>.blk.<i>.{norm1,attn_qkv,attn_qnorm,attn_knorm,
// attn_proj,ls1,norm2,mlp_*,ls2}.
type Block struct {
	Norm1 nn.LayerNorm  `gguf:"norm1"`
	Attn  Layer         // *Attention unless replaced; untagged: its weights are named attn_*
	LS1   nn.LayerScale `gguf:"ls1"`
	Norm2 nn.LayerNorm  `gguf:"norm2"`
	FFN   nn.FFN        // *nn.MLP, or *nn.SwiGLU for ViT-g
	LS2   nn.LayerScale `gguf:"ls2"`
}

// NewBlock returns block i of a backbone shaped by cfg, unbound: its norms'
// eps, its FFN type, and its attention's heads, QK-norm, RoPE and global
// attention as cfg says for block i.
func NewBlock(cfg Config, i int) *Block {
	b := &Block{FFN: &nn.MLP{}}
	b.Norm1.Eps, b.Norm2.Eps = cfg.LNEps, cfg.LNEps
	if cfg.SwiGLU {
		b.FFN = &nn.SwiGLU{}
	}
	a := &Attention{Heads: cfg.Heads, Global: cfg.Global(i)}
	if cfg.QKNorm(i) {
		a.QNorm = &nn.LayerNorm{Eps: cfg.QKNormEps}
		a.KNorm = &nn.LayerNorm{Eps: cfg.QKNormEps}
	}
	if cfg.RoPE(i) {
		a.RoPE = &RoPE2D{Base: cfg.RoPEFreq}
	}
	b.Attn = a
	return b
}

// Forward applies the block to x [C, T, S].
func (b *Block) Forward(g *ggml.Context, x *ggml.Tensor, p *Pass) *ggml.Tensor {
	x = b.LS1.AddTo(g, x, b.Attn.Forward(g, b.Norm1.Forward(g, x), p))
	return b.LS2.AddTo(g, x, b.FFN.Forward(g, b.Norm2.Forward(g, x)))
}

// Attention is multi-head self-attention with a fused QKV projection; for
// DA3 blocks at or after qknorm_start, LayerNorm on q and k (eps 1e-5, one
// weight for all heads); from rope_start on, 2-D RoPE on q and k. Global
// attention (DA3's odd blocks from alt_start on) attends over the tokens of
// all views jointly, local attention within each view.
type Attention struct {
	QKV   nn.Linear     `gguf:"attn_qkv"`
	QNorm *nn.LayerNorm `gguf:"attn_qnorm"`
	KNorm *nn.LayerNorm `gguf:"attn_knorm"`
	Proj  nn.Linear     `gguf:"attn_proj"`

	Heads  int
	Global bool
	RoPE   *RoPE2D // nil: no rotary embedding
}

// Forward applies the attention to x [C, T, S]. The product of the
// probabilities and v is nn.Attention (so the graph's kernel policy chooses
// how it is computed).
func (a *Attention) Forward(g *ggml.Context, x *ggml.Tensor, p *Pass) *ggml.Tensor {
	C, T, S := x.Dim(0), x.Dim(1), x.Dim(2)
	H := a.Heads
	hd := C / H
	qkv := a.QKV.Forward(g, x) // [3C, T, S]
	nb := []int{hd * qkv.Stride(0), qkv.Stride(1), qkv.Stride(2)}
	shape := []int{hd, H, T, S}
	q := qkv.View(g, 0, shape, nb)
	k := qkv.View(g, C*qkv.Stride(0), shape, nb)
	v := qkv.View(g, 2*C*qkv.Stride(0), shape, nb)
	q, k = a.normRoPE(g, q, a.QNorm, p), a.normRoPE(g, k, a.KNorm, p)
	if a.Global && S > 1 && !p.Independent { // all views' tokens attend jointly
		q, k, v = joinViews(g, q), joinViews(g, k), joinViews(g, v)
	}
	o := nn.Attention(g, q, k, v, float32(1/math.Sqrt(float64(hd)))) // [hd, H, n, batch], contiguous
	return a.Proj.Forward(g, o.Reshape(g, C, T, S))
}

// normRoPE is x [hd, H, T, S] (queries or keys) through the block's QK
// norm n and RoPE, each where the block has it; both in one kernel node
// where the graph's policy allows (nn.NormRoPE).
func (a *Attention) normRoPE(g *ggml.Context, x *ggml.Tensor, n *nn.LayerNorm, p *Pass) *ggml.Tensor {
	rope := func(x *ggml.Tensor) *ggml.Tensor { return a.RoPE.Forward(g, x, p, a.Global) }
	switch {
	case n != nil && a.RoPE != nil:
		return nn.NormRoPE(g, x, n, func() *ggml.Tensor { return a.RoPE.Table(x.Dim(0), p, a.Global) }, rope)
	case n != nil:
		return n.Forward(g, x)
	case a.RoPE != nil:
		return rope(x)
	}
	return x
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

// RoPE2D is DA3's RotaryPositionEmbedding2D: the first half of each head's
// dims rotates by the token's y position, the second half by its x, each as
// NeoX pairs (k, k+hd/4) with θ_k = pos·Base^(−4k/hd).
type RoPE2D struct {
	Base float32
}

// Forward rotates x [hd, H, T, S] (T = 1 + Np tokens of p.Grid). In global
// blocks all patches sit at (1, 1) ("pos_nodiff"); in local blocks patch
// (row, col) is at (row+1, col+1); token 0 is at (0, 0).
//
// The views are rotated as one axis of T·S tokens with the positions repeated
// per view: ggml's rope takes one position per row of its third axis, and only
// the CPU backend repeats them over a fourth (the Vulkan and CUDA kernels read
// past them for the second view on). The CPU computes the same rows either way.
func (r *RoPE2D) Forward(g *ggml.Context, x *ggml.Tensor, p *Pass, global bool) *ggml.Tensor {
	hd, H, T, S := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	half := hd / 2
	key := "local"
	if global {
		key = "global"
	}
	py, px := ropePositions(p.Grid, global)
	name := key + "." + gridKey(p.Grid)
	if S > 1 {
		py, px = repeatViews(py, S), repeatViews(px, S)
		name += ".x" + strconv.Itoa(S)
	}
	posY := p.B.InputI32("vit.rope_y."+name, py, T*S)
	posX := p.B.InputI32("vit.rope_x."+name, px, T*S)
	if x.Stride(3) != T*x.Stride(2) { // the views do not follow each other in memory
		x = x.Cont(g)
	}
	nb := []int{x.Stride(1), x.Stride(2)}
	xy := x.View(g, 0, []int{half, H, T * S}, nb)
	xx := x.View(g, half*x.Stride(0), []int{half, H, T * S}, nb)
	rp := ggml.RoPEParams{Dims: half, Mode: ggml.RoPENeoX, Base: r.Base}
	return xy.RoPEExt(g, posY, rp).Concat(g, xx.RoPEExt(g, posX, rp), 0).Reshape(g, hd, H, T, S)
}

// repeatViews is pos repeated n times, one copy per view.
func repeatViews(pos []int32, n int) []int32 {
	out := make([]int32, 0, len(pos)*n)
	for range n {
		out = append(out, pos...)
	}
	return out
}

// Table is the rotation of Forward as the graph input kernels.LayerNormRoPE
// takes, for heads of hd dims: [hd, T], per token the cosines and sines of
// its y angles, then of its x angles (hd/4 each).
func (r *RoPE2D) Table(hd int, p *Pass, global bool) *ggml.Tensor {
	key := "local"
	if global {
		key = "global"
	}
	name := "vit.rope_cs." + key + "." + gridKey(p.Grid) + "." + strconv.Itoa(hd)
	cs := ropeTables.get(ropeKey{base: r.Base, hd: hd, grid: p.Grid, global: global})
	return p.B.Input(name, cs, hd, len(cs)/hd)
}

// ropeKey names one RoPE table: it depends on nothing else.
type ropeKey struct {
	base   float32
	hd     int
	grid   Grid
	global bool
}

// ropeCache keeps the RoPE tables computed (every rotating block of every
// run asks for the same one; computing it, 4 trigonometric functions per
// token and frequency, took 1–2 % of a DA3-BASE run), up to ropeCacheMax of
// them: a run of images of many sizes starts again from empty.
type ropeCache struct {
	mu sync.Mutex
	m  map[ropeKey][]float32
}

const ropeCacheMax = 16

var ropeTables = &ropeCache{m: map[ropeKey][]float32{}}

// get returns the table of k, computing it once. Callers must not modify it.
func (c *ropeCache) get(k ropeKey) []float32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.m[k]; ok {
		return cs
	}
	if len(c.m) >= ropeCacheMax {
		clear(c.m)
	}
	py, px := ropePositions(k.grid, k.global)
	cs := ropeTable(py, px, k.hd, k.base)
	c.m[k] = cs
	return cs
}

// ropeTable computes RoPE2D's table as the reference computes its angles
// (VGGT's RotaryPositionEmbedding2D, in float32): for each axis the
// frequencies over dim = hd/2 are 1/base^(2i/dim), i < hd/4 (the exponent,
// the power and the inverse each rounded to float32), the angle pos·f is
// rounded to float32, and its cosine and sine are rounded once from double.
func ropeTable(py, px []int32, hd int, base float32) []float32 {
	q, dim := hd/4, float32(hd/2)
	inv := make([]float32, q)
	for i := range inv {
		e := float32(2*i) / dim
		inv[i] = float32(1 / float64(float32(math.Pow(float64(base), float64(e)))))
	}
	cs := make([]float32, hd*len(py))
	for t := range py {
		row := cs[t*hd : (t+1)*hd]
		for i, f := range inv {
			ay := float64(float32(float64(py[t]) * float64(f))) // the float32 product, rounded once
			ax := float64(float32(float64(px[t]) * float64(f)))
			row[i], row[q+i] = float32(math.Cos(ay)), float32(math.Sin(ay))
			row[2*q+i], row[3*q+i] = float32(math.Cos(ax)), float32(math.Sin(ax))
		}
	}
	return cs
}
