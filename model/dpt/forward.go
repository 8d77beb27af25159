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
		y = nn.Transpose(g, y).Reshape(g, pw, ph, oc, S)
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
// lateral, upsampled ×2), in strips of rows where the kernel policy says so
// (nn.Upsampled): the upsampled map, the largest of the trunk, never exists
// whole then.
func (h *Head) out1(g *ggml.Context, b nn.Builder, top, lateral *ggml.Tensor) *ggml.Tensor {
	sc := &h.Scratch
	up := nn.Upsample{W: 2 * lateral.Dim(0), H: 2 * lateral.Dim(1), Tap: h.tap + ".fusion.1", Convs: []*nn.Conv2D{&sc.Out1}}
	return nn.Upsampled(g, b, sc.RN1.low(g, top, lateral), up, func(x *ggml.Tensor, c []*nn.Conv2D) []*ggml.Tensor {
		return []*ggml.Tensor{c[0].Forward(g, x)}
	})[0]
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
		out.Depth = nn.Exp(g, channel(logits, 0), 1, 0)
		out.Conf = nn.Exp(g, channel(logits, logits.Dim(2)-1), 1, 1)
	case Mono:
		out.Depth = nn.Exp(g, channel(logits, 0), 1, 0)
		out.Sky = b.Tap("head.sky_logits", sky).ReLU(g)
	}
	return out
}

// tail is the full-resolution end of the head on the finest fused map z
// [w, h, f/2, S]: the bilinear resize to W×H (align_corners), the UV
// embedding, then output_conv2 (3×3, ReLU, 1×1) giving the logits [W, H,
// out, S], and the sky head's on the same map (Mono; else sky is nil). In
// strips of rows where the kernel policy says so (nn.Upsampled), so the
// f/2-channel full-resolution maps, the largest tensors of the head, never
// exist whole; the same values.
func (h *Head) tail(g *ggml.Context, b nn.Builder, z *ggml.Tensor, W, H int, aspect float64) (logits, sky *ggml.Tensor) {
	sc := &h.Scratch
	// NaN or Inf would be hidden by the ReLU of the output convolutions: the
	// resized map is probed.
	up := nn.Upsample{W: W, H: H, Tap: "head.out1_up", Check: true, Convs: []*nn.Conv2D{&sc.Out2a}}
	if sc.SkyOut2a != nil {
		up.Convs = append(up.Convs, sc.SkyOut2a)
	}
	if h.Cfg.PosEmbed {
		C := z.Dim(2)
		up.EmbedMap = func() *ggml.Tensor { return h.uvInput(b, C, H, W, aspect) }
		up.EmbedTables = func() (ux, uy *ggml.Tensor) {
			tx, ty := h.UVTables(C, H, W, aspect)
			k := key(C, H, W)
			return b.Input("head.uvx."+k, tx, W, C), b.Input("head.uvy."+k, ty, H, C)
		}
	}
	// Each strip's window dies with its last convolution, so the sky head's
	// run on the window too.
	out := nn.Upsampled(g, b, z, up, func(x *ggml.Tensor, c []*nn.Conv2D) []*ggml.Tensor {
		ts := []*ggml.Tensor{sc.Out2b.Forward(g, c[0].ForwardAct(g, x, kernels.ActReLU))}
		if len(c) > 1 {
			ts = append(ts, sc.SkyOut2b.Forward(g, c[1].ForwardAct(g, x, kernels.ActReLU)))
		}
		return ts
	})
	if len(out) > 1 {
		return out[0], out[1]
	}
	return out[0], nil
}

func key(c, h, w int) string { return strconv.Itoa(c) + "x" + strconv.Itoa(h) + "x" + strconv.Itoa(w) }
