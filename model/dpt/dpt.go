// Package dpt holds the dense prediction heads of Depth Anything as ggml
// graphs: the DA2 DPT head, the DA3 DualDPT head (depth + confidence, with UV
// position embeddings) and the DA3 mono/metric DPT head with its sky branch.
//
// Layout: tokens are [D, Np, S]; feature maps [W, H, C, S] (x fastest).
// Conv kernels are [KW, KH, IC, OC]. All bilinear resampling uses
// align_corners=True, as the references do.
package dpt

import (
	"fmt"
	"math"
	"sync"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/tmath"
	"github.com/da3-go/da3-go/model/nn"
)

// Kind is the head variant.
type Kind int

const (
	// DA2 is the Depth Anything V2 head: ReLU (relative) or sigmoid·max_depth
	// (metric) on one output channel.
	DA2 Kind = iota
	// DualDPT is the DA3 any-view head: LayerNorm on tokens, UV embeddings,
	// depth = exp(ch0), confidence = exp(ch1) + 1.
	DualDPT
	// Mono is the DA3 mono/metric head: depth = exp(ch0) plus a sky map
	// relu(sky logit).
	Mono
	// GS is DA3-GIANT's Gaussian head (GSDPT): no token norm, UV embeddings,
	// the normalised image merged in before the output convolutions, raw
	// (linear) Gaussian parameters out. Bind it under "gs".
	GS
)

func (k Kind) String() string {
	switch k {
	case DA2:
		return "dpt-da2"
	case DualDPT:
		return "dualdpt"
	case Mono:
		return "dpt-mono"
	case GS:
		return "gsdpt"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Config is the head's hyper-parameters.
type Config struct {
	Kind        Kind
	Patch       int    // the backbone's patch size: a ph×pw grid is a (Patch·pw)×(Patch·ph) image
	Features    int    // f
	OutChannels [4]int // oc
	PosEmbed    bool   // add 0.1·UV embeddings (DualDPT)
	MaxDepth    float32
	OutputDim   int
	// NormEps is the token LayerNorm's eps (DualDPT, 1e-5).
	NormEps float32
	// Aux: the DualDPT head carries the auxiliary ray head (ray pose).
	Aux bool
}

// RCU is a residual conv unit: x + c2(ReLU(c1(ReLU(x)))).
type RCU struct {
	C1 nn.Conv2D `gguf:"c1"`
	C2 nn.Conv2D `gguf:"c2"`
}

// Forward applies the unit.
func (r *RCU) Forward(g *ggml.Context, x *ggml.Tensor) *ggml.Tensor {
	return r.C2.ForwardAdd(g, r.C1.ForwardReLUIn(g, x, kernels.ActReLU), x)
}

// Fusion is a DPT feature-fusion block.
type Fusion struct {
	RC1 *RCU      `gguf:"rc1"`
	RC2 RCU       `gguf:"rc2"`
	Out nn.Conv2D `gguf:"out"`
}

// Forward fuses top with the lateral input (nil for the deepest block),
// upsamples bilinearly (align_corners) to w×h and applies the 1×1 out conv.
// The 1×1 conv (the schema's shape, checked at load) runs before the
// upsampling: both are linear over the channels and the bilinear weights of
// a pixel sum to 1, so the result is upstream's up to float rounding, for a
// quarter of the products and without the upsampled input map (the largest
// maps of the head).
func (f *Fusion) Forward(g *ggml.Context, top, lateral *ggml.Tensor, w, h int) *ggml.Tensor {
	return nn.Resize(g, f.low(g, top, lateral), w, h, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
}

// low is Forward before the upsampling.
func (f *Fusion) low(g *ggml.Context, top, lateral *ggml.Tensor) *ggml.Tensor {
	y := top
	if lateral != nil {
		y = y.Add(g, f.RC1.Forward(g, lateral))
	}
	return f.Out.Forward(g, f.RC2.Forward(g, y))
}

// Scratch holds the fusion path and the output convolutions.
type Scratch struct {
	L1  nn.Conv2D `gguf:"layer1_rn"`
	L2  nn.Conv2D `gguf:"layer2_rn"`
	L3  nn.Conv2D `gguf:"layer3_rn"`
	L4  nn.Conv2D `gguf:"layer4_rn"`
	RN1 Fusion    `gguf:"rn1"`
	RN2 Fusion    `gguf:"rn2"`
	RN3 Fusion    `gguf:"rn3"`
	RN4 Fusion    `gguf:"rn4"`

	Out1     nn.Conv2D  `gguf:"out1"`
	Out2a    nn.Conv2D  `gguf:"out2a"`
	Out2b    nn.Conv2D  `gguf:"out2b"`
	SkyOut2a *nn.Conv2D `gguf:"sky_out2a"`
	SkyOut2b *nn.Conv2D `gguf:"sky_out2b"`

	// Aux is DualDPT's auxiliary ray head (files converted with -with-aux).
	Aux *AuxHead
}

// AuxHead is DualDPT's auxiliary ray head at its finest level: its own
// fusion blocks over the shared pyramid levels, output_conv1_aux[3] (five
// 3×3 convs without activations), then 3×3 conv, LayerNorm over the 32
// channels, ReLU, 1×1 conv to 7 channels (ray direction, origin, confidence).
type AuxHead struct {
	RN1   Fusion       `gguf:"rn1_aux"`
	RN2   Fusion       `gguf:"rn2_aux"`
	RN3   Fusion       `gguf:"rn3_aux"`
	RN4   Fusion       `gguf:"rn4_aux"`
	Out1  [5]nn.Conv2D `gguf:"out1_aux"`
	Out2a nn.Conv2D    `gguf:"out2a_aux"`
	LN    nn.LayerNorm `gguf:"out2_aux_ln"`
	Out2b nn.Conv2D    `gguf:"out2b_aux"`
}

// Head is a DPT head. Bind it under "head" (or "m_head").
type Head struct {
	Norm    *nn.LayerNorm      `gguf:"norm"`
	Proj    [4]nn.Conv2D       `gguf:"proj"`
	Resize0 nn.ConvTranspose2D `gguf:"resize.0"`
	Resize1 nn.ConvTranspose2D `gguf:"resize.1"`
	Resize3 nn.Conv2D          `gguf:"resize.3"`
	Scratch Scratch            `gguf:"scratch"`
	// Merger is GSDPT's images_merger (three 3×3 convs with GELU).
	Merger []nn.Conv2D `gguf:"merger"`

	Cfg Config
	// tap prefixes the head's tap names: "head", or "gs" for the Gaussian head.
	tap string

	uvMu    sync.Mutex
	uvCache map[uvKey][]float32
}

// New returns an unbound head shaped by cfg.
func New(cfg Config) *Head {
	h := &Head{Cfg: cfg, uvCache: map[uvKey][]float32{}, tap: "head"}
	if cfg.Kind == DualDPT {
		h.Norm = &nn.LayerNorm{Eps: cfg.NormEps}
	}
	pad1 := ggml.Conv2DParams{Pad: 1}
	if cfg.Kind == GS {
		h.tap = "gs"
		h.Merger = make([]nn.Conv2D, 3)
		for i := range h.Merger {
			h.Merger[i].Params = pad1
		}
	}
	if cfg.Kind == DualDPT && cfg.Aux {
		a := &AuxHead{LN: nn.LayerNorm{Eps: 1e-5}}
		a.RN1.RC1, a.RN2.RC1, a.RN3.RC1 = &RCU{}, &RCU{}, &RCU{}
		for i := range a.Out1 {
			a.Out1[i].Params = pad1
		}
		a.Out2a.Params = pad1
		h.Scratch.Aux = a
	}
	if cfg.Kind == Mono {
		h.Scratch.SkyOut2a = &nn.Conv2D{}
		h.Scratch.SkyOut2b = &nn.Conv2D{}
	}
	h.Resize0.Stride, h.Resize1.Stride = 4, 2
	h.Resize3.Params = ggml.Conv2DParams{Stride: 2, Pad: 1}
	s := &h.Scratch
	for _, c := range []*nn.Conv2D{&s.L1, &s.L2, &s.L3, &s.L4, &s.Out1, &s.Out2a} {
		c.Params = pad1
	}
	if s.SkyOut2a != nil {
		s.SkyOut2a.Params = pad1
	}
	for i, f := range []*Fusion{&s.RN1, &s.RN2, &s.RN3, &s.RN4} {
		if i < 3 {
			f.RC1 = &RCU{}
		}
	}
	for _, f := range h.fusions() {
		for _, r := range []*RCU{f.RC1, &f.RC2} {
			if r != nil {
				r.C1.Params, r.C2.Params = pad1, pad1
			}
		}
	}
	return h
}

// fusions are the head's fusion blocks, the auxiliary head's included.
func (h *Head) fusions() []*Fusion {
	s := &h.Scratch
	fs := []*Fusion{&s.RN1, &s.RN2, &s.RN3, &s.RN4}
	if a := s.Aux; a != nil {
		fs = append(fs, &a.RN1, &a.RN2, &a.RN3, &a.RN4)
	}
	return fs
}

// UV returns the UV position embedding (already scaled by 0.1) of C channels
// for an h×w map of an image with aspect ratio W/H = aspect, as [w, h, C]
// floats (x fastest). Cached per (C, h, w, aspect).
func (h *Head) UV(c, hh, ww int, aspect float64) []float32 {
	return h.uv(uvKey{c, hh, ww, aspect, false})
}

// UVTables returns the UV embedding of UV(c, hh, ww, aspect) as its two
// separable parts: ux [ww, C] and uy [hh, C] (fastest first) with
// UV[x, y, ch] = ux[x, ch] + uy[y, ch] exactly (for each channel one of the
// two is 0). Cached like UV.
func (h *Head) UVTables(c, hh, ww int, aspect float64) (ux, uy []float32) {
	v := h.uv(uvKey{c, hh, ww, aspect, true})
	return v[:c*ww], v[c*ww:]
}

func (h *Head) uv(key uvKey) []float32 {
	h.uvMu.Lock()
	defer h.uvMu.Unlock()
	if v, ok := h.uvCache[key]; ok {
		return v
	}
	var v []float32
	if key.tables {
		ux, uy := uvTables(key.c, key.h, key.w, key.aspect)
		v = append(ux, uy...)
	} else {
		v = uvEmbed(key.c, key.h, key.w, key.aspect)
	}
	h.uvCache[key] = v
	return v
}

// uvEmbed is the UV embedding [w, h, C] from its tables (see uvTables).
func uvEmbed(c, h, w int, aspect float64) []float32 {
	ux, uy := uvTables(c, h, w, aspect)
	v := make([]float32, w*h*c)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < h; i++ {
			row := v[(ch*h+i)*w:][:w]
			for j := range row {
				row[j] = ux[ch*w+j] + uy[ch*h+i]
			}
		}
	}
	return v
}

type uvKey struct {
	c, h, w int
	aspect  float64
	tables  bool
}

// uvTables is DA3's create_uv_grid + position_grid_to_embed, times 0.1, in
// float32 like torch: span_x = a/√(a²+1), span_y = 1/√(a²+1);
// x_j = linspace(−span_x(w−1)/w, +span_x(w−1)/w, w); channels
// [sin(x·ω_k)] ‖ [cos(x·ω_k)] ‖ [sin(y·ω_k)] ‖ [cos(y·ω_k)], ω_k = 100^(−k/q), q = C/4,
// as its x part ux [w, C] (zero in the y channels) and y part uy [h, C]
// (zero in the x channels); channels past 4q are zero.
func uvTables(c, h, w int, aspect float64) (ux, uy []float32) {
	// Spans in double precision as Python computes them; linspace in float32
	// as torch does.
	diag := math.Pow(aspect*aspect+1, 0.5)
	spanX, spanY := aspect/diag, 1/diag
	lin := func(span float64, n int) []float32 {
		end := span * float64(n-1) / float64(n)
		return tmath.Linspace32(-end, end, n)
	}
	xs, ys := lin(spanX, w), lin(spanY, h)
	q := c / 4
	omega := make([]float32, q)
	for k := range omega {
		e := float32(k) / float32(q)
		omega[k] = 1 / float32(math.Pow(100, float64(e)))
	}
	ux, uy = make([]float32, c*w), make([]float32, c*h)
	for k := 0; k < q; k++ {
		for j, x := range xs {
			a := float64(x * omega[k])
			ux[k*w+j] = 0.1 * float32(math.Sin(a))
			ux[(q+k)*w+j] = 0.1 * float32(math.Cos(a))
		}
		for i, y := range ys {
			a := float64(y * omega[k])
			uy[(2*q+k)*h+i] = 0.1 * float32(math.Sin(a))
			uy[(3*q+k)*h+i] = 0.1 * float32(math.Cos(a))
		}
	}
	return ux, uy
}
