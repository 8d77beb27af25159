package dpt

import (
	"strconv"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model/nn"
)

// Outputs are the head's results at the processed size (W = Patch·pw, H = Patch·ph).
type Outputs struct {
	Depth *ggml.Tensor // [W, H, 1, S]: DA2 disparity or metres, DA3 depth
	Conf  *ggml.Tensor // [W, H, 1, S] (DualDPT), else nil
	Sky   *ggml.Tensor // [W, H, 1, S] (Mono), else nil
	// Levels are the four projected pyramid levels (layer1_rn … layer4_rn
	// outputs) the fusion starts from; the auxiliary ray head (Ray) fuses
	// them again with its own blocks.
	Levels [4]*ggml.Tensor
}

// fuse is the shared trunk of the heads: reassemble (token norm, 1×1
// projection, UV, resize), the layerK_rn convs, the fusion blocks and
// output_conv1, giving the levels and out1 = output_conv1 of the finest
// fused map [8pw, 8ph, f, S] (tapped as "fusion.1").
func (h *Head) fuse(g *ggml.Context, b nn.Builder, feats [4]*ggml.Tensor, ph, pw int) (Outputs, *ggml.Tensor) {
	H, W := ph*h.Cfg.Patch, pw*h.Cfg.Patch
	aspect := float64(W) / float64(H)
	tap := func(name string, t *ggml.Tensor) *ggml.Tensor { return b.Tap(h.tap+"."+name, t) }
	var rs [4]*ggml.Tensor
	for s := 0; s < 4; s++ {
		x := feats[s] // [D, Np, S]
		S := x.Dim(2)
		if h.Norm != nil {
			x = h.Norm.Forward(g, x)
		}
		// 1×1 projection on tokens: [D, Np, S] → [OC, Np, S] → map [pw, ph, OC, S].
		p := &h.Proj[s]
		oc := p.Weight.Dim(3)
		proj := nn.Linear{Weight: p.Weight.Reshape(g, p.Weight.Dim(2), oc), Bias: p.Bias}
		y := proj.Forward(g, x)
		y = y.Permute(g, 1, 0, 2, 3).Cont(g).Reshape(g, pw, ph, oc, S)
		if h.Cfg.PosEmbed {
			y = y.Add(g, h.uvInput(b, oc, ph, pw, aspect))
		}
		switch s {
		case 0:
			y = h.Resize0.Forward(g, y)
		case 1:
			y = h.Resize1.Forward(g, y)
		case 3:
			y = h.Resize3.Forward(g, y)
		}
		rs[s] = tap("reassemble."+strconv.Itoa(s), y)
	}
	sc := &h.Scratch
	var out Outputs
	l := &out.Levels
	l[0] = tap("rn.0", sc.L1.Forward(g, rs[0]))
	l[1] = tap("rn.1", sc.L2.Forward(g, rs[1]))
	l[2] = tap("rn.2", sc.L3.Forward(g, rs[2]))
	l[3] = tap("rn.3", sc.L4.Forward(g, rs[3]))
	p := tap("fusion.4", sc.RN4.Forward(g, l[3], nil, l[2].Dim(0), l[2].Dim(1)))
	p = tap("fusion.3", sc.RN3.Forward(g, p, l[2], l[1].Dim(0), l[1].Dim(1)))
	p = tap("fusion.2", sc.RN2.Forward(g, p, l[1], l[0].Dim(0), l[0].Dim(1)))
	return out, tap("out1", h.out1(g, b, p, l[0]))
}

// out1 is output_conv1 of the last fusion block's output (RN1 on top and
// lateral, upsampled ×2), in strips of rows when the kernel policy says so
// (see tail): the upsampled map, the largest of the trunk, never exists
// whole then.
func (h *Head) out1(g *ggml.Context, b nn.Builder, top, lateral *ggml.Tensor) *ggml.Tensor {
	sc := &h.Scratch
	w, hh := 2*lateral.Dim(0), 2*lateral.Dim(1)
	low := sc.RN1.low(g, top, lateral)
	name := h.tap + ".fusion.1"
	if rows := stripRows(g, low, w, hh, &sc.Out1); rows > 0 {
		if b.Tapping(name) {
			b.Tap(name, kernels.BilinearWindow(g, low, nil, nil, w, hh, 0, hh, 0, true))
		}
		c := unpadded(&sc.Out1)
		return strips(g, low, nil, nil, w, hh, rows, func(win *ggml.Tensor) *ggml.Tensor { return c.Forward(g, win) })
	}
	p := nn.Resize(g, low, w, hh, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	return sc.Out1.Forward(g, b.Tap(name, p))
}

// strips computes f on the windows of rows rows (zero border of 1) of the
// bilinear resize of z to W×H (plus the tables ux, uy) and stacks the
// results along the rows. ggml's allocator frees each window after its last
// use, so only one strip's maps exist at a time.
func strips(g *ggml.Context, z, ux, uy *ggml.Tensor, W, H, rows int, f func(win *ggml.Tensor) *ggml.Tensor) *ggml.Tensor {
	var ts []*ggml.Tensor
	for y0 := 0; y0 < H; y0 += rows {
		ts = append(ts, f(kernels.BilinearWindow(g, z, ux, uy, W, H, y0, min(rows, H-y0), 1, true)))
	}
	return concatRows(g, ts)
}

// uvInput is the UV embedding of c channels on an h×w map as a graph input.
func (h *Head) uvInput(b nn.Builder, c, hh, ww int, aspect float64) *ggml.Tensor {
	return b.Input("head.uv."+key(c, hh, ww), h.UV(c, hh, ww, aspect), ww, hh, c, 1)
}

// Forward runs the head on the 4 features [D, Np, S] of a ph×pw patch grid
// (Config.Patch pixels each). Tap names ("gs." instead of "head." for the Gaussian
// head): "head.reassemble.K", "head.rn.K", "head.fusion.K" (K = 4..1),
// "head.out1", "head.out1_up", "head.logits".
func (h *Head) Forward(g *ggml.Context, b nn.Builder, feats [4]*ggml.Tensor, ph, pw int) Outputs {
	H, W := ph*h.Cfg.Patch, pw*h.Cfg.Patch
	aspect := float64(W) / float64(H)
	out, z := h.fuse(g, b, feats, ph, pw)
	logits, sky := h.tail(g, b, z, W, H, aspect)
	logits = b.Tap("head.logits", logits) // [W, H, out, S]

	S := logits.Dim(3)
	channel := func(t *ggml.Tensor, c int) *ggml.Tensor {
		return t.View(g, c*t.Stride(2), []int{W, H, 1, S}, []int{t.Stride(1), t.Stride(2), t.Stride(3)})
	}
	switch h.Cfg.Kind {
	case DA2:
		if h.Cfg.MaxDepth > 0 {
			out.Depth = logits.Sigmoid(g).Scale(g, h.Cfg.MaxDepth)
		} else {
			out.Depth = logits.ReLU(g)
		}
	case DualDPT:
		out.Depth = channel(logits, 0).Cont(g).Exp(g)
		out.Conf = channel(logits, logits.Dim(2)-1).Cont(g).Exp(g).ScaleBias(g, 1, 1)
	case Mono:
		out.Depth = channel(logits, 0).Cont(g).Exp(g)
		out.Sky = b.Tap("head.sky_logits", sky).ReLU(g)
	}
	return out
}

// tail is the full-resolution end of the head on the finest fused map z
// [w, h, f/2, S]: the bilinear resize to W×H (align_corners), the UV
// embedding, then output_conv2 (3×3, ReLU, 1×1) giving the logits [W, H,
// out, S], and the sky head's on the same map (Mono; else sky is nil).
// With the Strips kernel policy it runs in strips of rows (see
// kernels.BilinearWindow), so the f/2-channel full-resolution maps, the
// largest tensors of the head, never exist whole; the same values.
func (h *Head) tail(g *ggml.Context, b nn.Builder, z *ggml.Tensor, W, H int, aspect float64) (logits, sky *ggml.Tensor) {
	sc := &h.Scratch
	convs := func(x *ggml.Tensor, a, c *nn.Conv2D) *ggml.Tensor {
		return c.Forward(g, a.ForwardAct(g, x, kernels.ActReLU))
	}
	if rows := stripRows(g, z, W, H, &sc.Out2a, sc.SkyOut2a); rows > 0 {
		var ux, uy *ggml.Tensor // the UV embedding as its two tables
		if h.Cfg.PosEmbed {
			C := z.Dim(2)
			tx, ty := h.UVTables(C, H, W, aspect)
			k := key(C, H, W)
			ux, uy = b.Input("head.uvx."+k, tx, W, C), b.Input("head.uvy."+k, ty, H, C)
		}
		// NaN or Inf would be hidden by the ReLU of the output convolutions;
		// the resized map is finite when z is (each value is a convex
		// combination of z's, plus the finite UV).
		b.Check("head.out1_up", z)
		if b.Tapping("head.out1_up") {
			// The whole resized map only for the tap, from the same kernel.
			b.Tap("head.out1_up", kernels.BilinearWindow(g, z, ux, uy, W, H, 0, H, 0, true))
		}
		a, sa := unpadded(&sc.Out2a), (*nn.Conv2D)(nil)
		if sc.SkyOut2a != nil {
			sa = unpadded(sc.SkyOut2a)
		}
		// Each strip's window dies with its last convolution, so the sky
		// head's run on the window too, its channels after the logits'.
		all := strips(g, z, ux, uy, W, H, rows, func(win *ggml.Tensor) *ggml.Tensor {
			t := convs(win, a, &sc.Out2b)
			if sa != nil {
				t = t.Concat(g, convs(win, sa, sc.SkyOut2b), 2)
			}
			return t
		})
		if sa == nil {
			return all, nil
		}
		n := sc.Out2b.Weight.Dim(3)
		channels := func(c0, c1 int) *ggml.Tensor {
			return all.View(g, c0*all.Stride(2), []int{W, H, c1 - c0, all.Dim(3)}, []int{all.Stride(1), all.Stride(2), all.Stride(3)}).Cont(g)
		}
		return channels(0, n), channels(n, all.Dim(2))
	}
	z = nn.Resize(g, z, W, H, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	if h.Cfg.PosEmbed {
		z = z.Add(g, h.uvInput(b, z.Dim(2), H, W, aspect))
	}
	z = b.Tap("head.out1_up", z)
	b.Check("head.out1_up", z)
	logits = convs(z, &sc.Out2a, &sc.Out2b)
	if sc.SkyOut2a != nil {
		sky = convs(z, sc.SkyOut2a, sc.SkyOut2b)
	}
	return logits, sky
}

// stripRows is the height of the strips (a multiple of 4, so that
// Winograd's 2×2 and 4×4 tiles fall where they do on the whole map) in which
// the resize of z to W×H and
// the convolutions convs (nil ones skipped) run, or 0 for the whole map:
// without the Strips policy, when one strip would hold the whole map, or
// when a convolution is not 3×3 with padding 1.
func stripRows(g *ggml.Context, z *ggml.Tensor, W, H int, convs ...*nn.Conv2D) int {
	p := kernels.PolicyOf(g)
	if !p.Strips {
		return 0
	}
	size := p.StripBytes
	if size <= 0 {
		size = 8 << 20
	}
	for _, c := range convs {
		if c == nil {
			continue
		}
		st, pad, dil := c.Params.Norm()
		if c.Weight == nil || c.Weight.Dim(0) != 3 || c.Weight.Dim(1) != 3 || st != 1 || pad != 1 || dil != 1 {
			return 0
		}
	}
	C, S := z.Dim(2), z.Dim(3)
	// At most maxStrips strips (a bounded number of graph nodes).
	rows := int(max(4, size/int64((W+2)*C*S*4), int64((H+maxStrips-1)/maxStrips+3))) &^ 3
	if rows >= H || !kernels.BilinearWindowFits(z, nil, nil, W, H, 0, rows, 1) {
		return 0
	}
	return rows
}

// maxStrips bounds the number of strips of one head.
const maxStrips = 64

// unpadded is c without padding (its input window carries the zero border).
func unpadded(c *nn.Conv2D) *nn.Conv2D {
	u := *c
	u.Params.Pad = 0
	return &u
}

// concatRows stacks maps [W, h_i, C, S] along the rows: with the Strips
// policy by kernels.StackRows (each value copied once for up to
// kernels.MaxStack maps, else once per level of a tree of such stacks),
// otherwise as a balanced tree of concatenations (each value copied about
// log2(len) times).
func concatRows(g *ggml.Context, ts []*ggml.Tensor) *ggml.Tensor {
	if len(ts) == 1 {
		return ts[0]
	}
	if kernels.PolicyOf(g).Strips && kernels.StackRowsFits(ts[:min(len(ts), kernels.MaxStack)]) {
		for len(ts) > kernels.MaxStack {
			var level []*ggml.Tensor
			for i := 0; i < len(ts); i += kernels.MaxStack {
				level = append(level, kernels.StackRows(g, ts[i:min(i+kernels.MaxStack, len(ts))]))
			}
			ts = level
		}
		if kernels.StackRowsFits(ts) {
			return kernels.StackRows(g, ts)
		}
	}
	m := len(ts) / 2
	return concatRows(g, ts[:m]).Concat(g, concatRows(g, ts[m:]), 1)
}

func key(c, h, w int) string { return strconv.Itoa(c) + "x" + strconv.Itoa(h) + "x" + strconv.Itoa(w) }
