package dpt

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model/nn"
)

// Ray runs the auxiliary ray head on the pyramid levels of Forward for a
// ph×pw patch grid (h.Scratch.Aux must be bound): its own fusion chain, the
// five convs of output_conv1_aux[3] at 8ph×8pw (not upsampled), 0.1·UV of
// the image aspect, then conv 3×3 → LayerNorm over the 32 channels → ReLU →
// conv 1×1. It returns the logits [8pw, 8ph, 7, S]: ray direction (0–2) and
// origin (3–5), linear, and the confidence logit (6; confidence = exp + 1),
// as DualDPT._forward_impl's aux branch. Tap names: "head.aux.out1" (before
// the UV), "head.aux.logits".
func (h *Head) Ray(g *ggml.Context, b nn.Builder, levels [4]*ggml.Tensor, ph, pw int) *ggml.Tensor {
	a := h.Scratch.Aux
	l := levels
	p := a.RN4.Forward(g, l[3], nil, l[2].Dim(0), l[2].Dim(1))
	p = a.RN3.Forward(g, p, l[2], l[1].Dim(0), l[1].Dim(1))
	p = a.RN2.Forward(g, p, l[1], l[0].Dim(0), l[0].Dim(1))
	p = a.RN1.Forward(g, p, l[0], 2*l[0].Dim(0), 2*l[0].Dim(1))
	for i := range a.Out1 {
		p = a.Out1[i].Forward(g, p)
	}
	p = b.Tap("head.aux.out1", p)
	w, hh, c := p.Dim(0), p.Dim(1), p.Dim(2)
	if h.Cfg.PosEmbed {
		p = p.Add(g, h.uvInput(b, c, hh, w, float64(pw)/float64(ph)))
	}
	z := a.Out2a.Forward(g, p) // [w, h, 32, S]
	// LayerNorm over the channels: channels first, normalise, back.
	z = a.LN.Forward(g, z.Permute(g, 1, 2, 0, 3).Cont(g)).Permute(g, 2, 0, 1, 3).Cont(g)
	return b.Tap("head.aux.logits", a.Out2b.Forward(g, z.ReLU(g)))
}

// ForwardGS runs the Gaussian head (Kind GS) on the 4 features [D, Np, S]
// and the normalised images [W, H, 3, S] the network saw: the DPT trunk,
// output_conv1, bilinear (align_corners) to W×H, plus images_merger(images)
// (three 3×3 convs with exact GELU), plus 0.1·UV, then conv 3×3 → ReLU →
// conv 1×1. It returns the raw Gaussian parameters [W, H, C, S] (C = 38 for
// DA3-GIANT: the adapter's channels, the opacity logit last), at any
// processed size. Tap names: "gs.reassemble.K", "gs.rn.K", "gs.fusion.K",
// "gs.out1", "gs.merger", "gs.out2_in", "gs.logits".
func (h *Head) ForwardGS(g *ggml.Context, b nn.Builder, feats [4]*ggml.Tensor, images *ggml.Tensor, ph, pw int) *ggml.Tensor {
	H, W := ph*h.Cfg.Patch, pw*h.Cfg.Patch
	_, z := h.fuse(g, b, feats, ph, pw) // gs.out1
	sc := &h.Scratch
	z = nn.Resize(g, z, W, H, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	m := images
	for i := range h.Merger {
		m = h.Merger[i].ForwardAct(g, m, kernels.ActGELU)
	}
	z = z.Add(g, b.Tap("gs.merger", m))
	if h.Cfg.PosEmbed {
		z = z.Add(g, h.uvInput(b, z.Dim(2), H, W, float64(W)/float64(H)))
	}
	z = b.Tap("gs.out2_in", z)
	return b.Tap("gs.logits", sc.Out2b.Forward(g, sc.Out2a.ForwardAct(g, z, kernels.ActReLU)))
}
