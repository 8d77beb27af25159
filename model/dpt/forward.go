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
// projection, UV, resize), the layerK_rn convs and the fusion blocks, giving
// the levels and the finest fused map [8pw, 8ph, f, S].
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
	p = tap("fusion.1", sc.RN1.Forward(g, p, l[0], 2*l[0].Dim(0), 2*l[0].Dim(1)))
	return out, p
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
	out, p := h.fuse(g, b, feats, ph, pw)
	sc := &h.Scratch
	z := b.Tap("head.out1", sc.Out1.Forward(g, p))
	z = nn.Resize(g, z, W, H, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	if h.Cfg.PosEmbed {
		z = z.Add(g, h.uvInput(b, z.Dim(2), H, W, aspect))
	}
	z = b.Tap("head.out1_up", z)
	// NaN or Inf here would be hidden by the ReLU of the output convolutions.
	b.Check("head.out1_up", z)
	logits := b.Tap("head.logits", sc.Out2b.Forward(g, sc.Out2a.ForwardAct(g, z, kernels.ActReLU))) // [W, H, out, S]

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
		out.Sky = b.Tap("head.sky_logits", sc.SkyOut2b.Forward(g, sc.SkyOut2a.ForwardAct(g, z, kernels.ActReLU))).ReLU(g)
	}
	return out
}

func key(c, h, w int) string { return strconv.Itoa(c) + "x" + strconv.Itoa(h) + "x" + strconv.Itoa(w) }
