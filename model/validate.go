package model

import (
	"fmt"
	"strings"

	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model/dpt"
)

// roots are the tensor name roots of the backbone and the head.
func (c Config) roots() (vitRoot, headRoot string) {
	if c.NestedMetric {
		return "m_vit", "m_head"
	}
	return "vit", "head"
}

// schemaOf returns every tensor a file of this config must hold (name, shape,
// role), derived from the hyper-parameters alone, as the converter writes
// them. The auxiliary heads a file may carry (DA3's ray head, DA3-GIANT's
// Gaussian head) are included when their metadata announces them.
func (c Config) schemaOf(kv *loader.KV, files []loader.TensorInfo) ([]schema.Tensor, error) {
	vitRoot, headRoot := c.roots()
	v := c.ViT
	sv := schema.ViT{
		C: v.EmbedDim, Depth: v.Depth, Heads: v.Heads, Hidden: v.MLPHidden, Patch: v.PatchSize,
		Rows: v.PosGrid*v.PosGrid + 1, Grid: v.PosGrid, SwiGLU: v.SwiGLU, QKNormStart: v.QKNormStart, CatToken: v.CatToken,
	}
	d := v.FeatureDim()
	h := schema.Head{D: d, F: c.Head.Features, OC: c.Head.OutChannels, F2: c.Head.Features / 2, HF2: schema.HeadHidden, OutDim: 1}
	switch c.Head.Kind {
	case dpt.DA2:
		h.Kind = schema.HeadDA2
	case dpt.DualDPT:
		h.Kind, h.OutDim = schema.HeadDualDPT, 2
	case dpt.Mono:
		h.Kind = schema.HeadMono
	}
	hr := &kvReader{kv: kv, prefix: kvPrefix + headRoot + "."}
	if h.Kind == schema.HeadDualDPT && hr.boolOr("has_aux", false) {
		h.Aux = true
		h.AuxOut = hr.u32Or("aux_ray_dim", 6, 1, 64) + 1
	}
	out := append(sv.Tensors(vitRoot), h.Tensors(headRoot)...)
	if c.HasCamera {
		out = append(out, schema.Camera(d)...)
	}
	if e := c.CamEnc; e != nil {
		out = append(out, schema.CamEnc{D: e.Dim, Depth: e.Depth, Heads: e.Heads, Hidden: e.Hidden, PoseHidden: e.PoseHidden}.Tensors()...)
	}
	if hasPrefix(files, "gs.") {
		// DA3-GIANT's Gaussian head, unused here: its widths come from its
		// metadata and its images merger's own tensors.
		gr := &kvReader{kv: kv, prefix: kvPrefix + "gs."}
		g := schema.Head{Kind: schema.HeadGS, D: d, F: gr.u32("features", 2, maxFeatures), HF2: schema.HeadHidden,
			OutDim: gr.u32("output_dim", 1, 1024)}
		copy(g.OC[:], gr.ints("out_channels", 4, 1, maxFeatures))
		g.F2 = g.F / 2
		for i := range 2 {
			if ti, ok := find(files, fmt.Sprintf("gs.merger.%d.weight", i)); ok && len(ti.Shape) == 4 && ti.Shape[3] >= 1 && ti.Shape[3] <= maxFeatures {
				g.Merger[i] = int(ti.Shape[3])
			} else {
				gr.fail(fmt.Sprintf("merger.%d", i), "the Gaussian head's images merger is missing or malformed")
			}
		}
		hr.errs = append(hr.errs, gr.errs...)
		out = append(out, g.Tensors("gs")...)
	}
	if len(hr.errs) > 0 {
		return nil, fmt.Errorf("reading model metadata: %w", errList(hr.errs))
	}
	return out, nil
}

// validate checks every tensor of f (name, shape, type) against the schema
// of cfg before anything is allocated for it.
func validate(f *loader.File, cfg Config) error {
	files := f.Tensors()
	want, err := cfg.schemaOf(f.KV(), files)
	if err != nil {
		return err
	}
	return schema.Check(files, want, nil)
}

func hasPrefix(ts []loader.TensorInfo, p string) bool {
	for _, ti := range ts {
		if strings.HasPrefix(ti.Name, p) {
			return true
		}
	}
	return false
}

func find(ts []loader.TensorInfo, name string) (loader.TensorInfo, bool) {
	for _, ti := range ts {
		if ti.Name == name {
			return ti, true
		}
	}
	return loader.TensorInfo{}, false
}
