package dpt

import (
	"strconv"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model/nn"
)

// Outputs are the head's results at the processed size (W = 14·pw, H = 14·ph).
type Outputs struct {
	Depth *ggml.Tensor // [W, H, 1, S]: DA2 disparity or metres, DA3 depth
	Conf  *ggml.Tensor // [W, H, 1, S] (DualDPT), else nil
	Sky   *ggml.Tensor // [W, H, 1, S] (Mono), else nil
}

// Forward runs the head on the 4 features [D, Np, S] of a ph×pw patch grid
// (patch size 14). Tap names: "head.reassemble.K", "head.rn.K",
// "head.fusion.K" (K = 4..1), "head.out1", "head.out1_up", "head.logits".
func (h *Head) Forward(g *ggml.Context, b nn.Builder, feats [4]*ggml.Tensor, ph, pw int) Outputs {
	const patch = 14
	H, W := ph*patch, pw*patch
	aspect := float64(W) / float64(H)
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
			y = y.Add(g, b.Input("head.uv."+key(oc, ph, pw), h.UV(oc, ph, pw, aspect), pw, ph, oc, 1))
		}
		switch s {
		case 0:
			y = h.Resize0.Forward(g, y)
		case 1:
			y = h.Resize1.Forward(g, y)
		case 3:
			y = h.Resize3.Forward(g, y)
		}
		rs[s] = b.Tap("head.reassemble."+strconv.Itoa(s), y)
	}
	sc := &h.Scratch
	l1 := b.Tap("head.rn.0", sc.L1.Forward(g, rs[0]))
	l2 := b.Tap("head.rn.1", sc.L2.Forward(g, rs[1]))
	l3 := b.Tap("head.rn.2", sc.L3.Forward(g, rs[2]))
	l4 := b.Tap("head.rn.3", sc.L4.Forward(g, rs[3]))

	p := b.Tap("head.fusion.4", sc.RN4.Forward(g, l4, nil, l3.Dim(0), l3.Dim(1)))
	p = b.Tap("head.fusion.3", sc.RN3.Forward(g, p, l3, l2.Dim(0), l2.Dim(1)))
	p = b.Tap("head.fusion.2", sc.RN2.Forward(g, p, l2, l1.Dim(0), l1.Dim(1)))
	p = b.Tap("head.fusion.1", sc.RN1.Forward(g, p, l1, 2*l1.Dim(0), 2*l1.Dim(1)))

	z := b.Tap("head.out1", sc.Out1.Forward(g, p))
	z = nn.Resize(g, z, W, H, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	if h.Cfg.PosEmbed {
		c := z.Dim(2)
		z = z.Add(g, b.Input("head.uv."+key(c, H, W), h.UV(c, H, W, aspect), W, H, c, 1))
	}
	z = b.Tap("head.out1_up", z)
	// NaN or Inf here would be hidden by the ReLU of the output convolutions.
	b.Check("head.out1_up", z)
	logits := b.Tap("head.logits", sc.Out2b.Forward(g, sc.Out2a.ForwardAct(g, z, kernels.ActReLU))) // [W, H, out, S]

	var out Outputs
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
