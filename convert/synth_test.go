package convert

import (
	"fmt"
	"slices"
	"strings"
)

// Synthetic checkpoints in the official layouts, written from the naming of
// the official state dicts (depth_anything_3's DepthAnything3Net, Depth Anything V2's
// DepthAnythingV2) and transformers' modeling code (HF),
// independently of the converter's rename tables.

type ckptBuilder struct {
	ts   []stTensor
	seed uint64
}

func (b *ckptBuilder) add(name string, shape ...int64) {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	b.seed++
	b.ts = append(b.ts, stTensor{name: name, dtype: "F32", shape: shape, data: randValues(b.seed, n)})
}

func (b *ckptBuilder) conv(name string, oc, ic, k int64) {
	b.add(name+".weight", oc, ic, k, k)
	b.add(name+".bias", oc)
}

func (b *ckptBuilder) lin(name string, out, in int64) {
	b.add(name+".weight", out, in)
	b.add(name+".bias", out)
}

// tinyArch are the dimensions of a synthetic model.
type tinyArch struct {
	C, depth, hidden, qkStart, grid int64
	heads                           int64
	swiglu, camera                  bool
	f                               int64
	oc                              [4]int64
	outDim                          int64
}

var tinyDA3 = tinyArch{C: 64, depth: 4, hidden: 256, qkStart: 2, grid: 2, heads: 2, camera: true, f: 8, oc: [4]int64{4, 8, 12, 16}, outDim: 2}

// backbone adds DINOv2 tensors under prefix p (named_parameters order).
func (b *ckptBuilder) backbone(p string, a tinyArch, maskToken bool) {
	C := a.C
	b.add(p+"cls_token", 1, 1, C)
	if a.camera {
		b.add(p+"camera_token", 1, 2, C)
	}
	b.add(p+"pos_embed", 1, a.grid*a.grid+1, C)
	if maskToken {
		b.add(p+"mask_token", 1, C)
	}
	b.conv(p+"patch_embed.proj", C, 3, 14)
	for i := range a.depth {
		q := fmt.Sprintf("%sblocks.%d.", p, i)
		b.add(q+"norm1.weight", C)
		b.add(q+"norm1.bias", C)
		b.lin(q+"attn.qkv", 3*C, C)
		if a.qkStart >= 0 && i >= a.qkStart {
			b.add(q+"attn.q_norm.weight", C/a.heads)
			b.add(q+"attn.q_norm.bias", C/a.heads)
			b.add(q+"attn.k_norm.weight", C/a.heads)
			b.add(q+"attn.k_norm.bias", C/a.heads)
		}
		b.lin(q+"attn.proj", C, C)
		b.add(q+"ls1.gamma", C)
		b.add(q+"norm2.weight", C)
		b.add(q+"norm2.bias", C)
		if a.swiglu {
			b.lin(q+"mlp.w12", 2*a.hidden, C)
			b.lin(q+"mlp.w3", C, a.hidden)
		} else {
			b.lin(q+"mlp.fc1", a.hidden, C)
			b.lin(q+"mlp.fc2", C, a.hidden)
		}
		b.add(q+"ls2.gamma", C)
	}
	b.add(p+"norm.weight", C)
	b.add(p+"norm.bias", C)
}

type headOpts struct {
	norm, rn4rc1, sky, aux, merger bool
	lnLevels                       []int // levels under which the shared aux LN is serialised
}

// dpt adds DPT-family head tensors under prefix p.
func (b *ckptBuilder) dpt(p string, a tinyArch, d, outDim int64, o headOpts) {
	f, f2, oc := a.f, a.f/2, a.oc
	if o.norm {
		b.add(p+"norm.weight", d)
		b.add(p+"norm.bias", d)
	}
	for i := range 4 {
		b.conv(fmt.Sprintf("%sprojects.%d", p, i), oc[i], d, 1)
	}
	b.conv(p+"resize_layers.0", oc[0], oc[0], 4)
	b.conv(p+"resize_layers.1", oc[1], oc[1], 2)
	b.conv(p+"resize_layers.3", oc[3], oc[3], 3)
	for i := range 4 {
		b.add(fmt.Sprintf("%sscratch.layer%d_rn.weight", p, i+1), f, oc[i], 3, 3)
	}
	fusion := func(suffix string) {
		for k := 1; k <= 4; k++ {
			rn := fmt.Sprintf("%sscratch.refinenet%d%s.", p, k, suffix)
			if k != 4 || o.rn4rc1 {
				b.conv(rn+"resConfUnit1.conv1", f, f, 3)
				b.conv(rn+"resConfUnit1.conv2", f, f, 3)
			}
			b.conv(rn+"resConfUnit2.conv1", f, f, 3)
			b.conv(rn+"resConfUnit2.conv2", f, f, 3)
			b.conv(rn+"out_conv", f, f, 1)
		}
	}
	fusion("")
	b.conv(p+"scratch.output_conv1", f2, f, 3)
	b.conv(p+"scratch.output_conv2.0", 32, f2, 3)
	b.conv(p+"scratch.output_conv2.2", outDim, 32, 1)
	if o.sky {
		b.conv(p+"scratch.sky_output_conv2.0", 32, f2, 3)
		b.conv(p+"scratch.sky_output_conv2.2", 1, 32, 1)
	}
	if o.aux {
		fusion("_aux")
		for l := range 4 {
			for i, io := range [][2]int64{{f2, f}, {f, f2}, {f2, f}, {f, f2}, {f2, f}} {
				b.conv(fmt.Sprintf("%sscratch.output_conv1_aux.%d.%d", p, l, i), io[0], io[1], 3)
			}
		}
		ln := randValues(999, 2*32)
		for l := range 4 {
			q := fmt.Sprintf("%sscratch.output_conv2_aux.%d.", p, l)
			b.conv(q+"0", 32, f2, 3)
			if slices.Contains(o.lnLevels, l) { // one tied module: identical values
				b.ts = append(b.ts, stTensor{q + "2.weight", "F32", []int64{32}, ln[:32]}, stTensor{q + "2.bias", "F32", []int64{32}, ln[32:]})
			}
			b.conv(q+"5", 7, 32, 1)
		}
	}
	if o.merger {
		b.conv(p+"images_merger.0", 5, 3, 3)
		b.conv(p+"images_merger.2", 6, 5, 3)
		b.conv(p+"images_merger.4", f2, 6, 3)
	}
}

// da3AnyView builds a DepthAnything3Net any-view checkpoint under prefix p
// ("model." for the Hugging Face wrapper).
func da3AnyView(p string, a tinyArch, gs bool) []stTensor {
	b := &ckptBuilder{}
	b.backbone(p+"backbone.pretrained.", a, false)
	b.dpt(p+"head.", a, 2*a.C, a.outDim, headOpts{norm: true, aux: true, lnLevels: []int{0, 3}})
	d := 2 * a.C
	b.lin(p+"cam_dec.backbone.0", d, d)
	b.lin(p+"cam_dec.backbone.2", d, d)
	b.lin(p+"cam_dec.fc_t", 3, d)
	b.lin(p+"cam_dec.fc_qvec", 4, d)
	b.lin(p+"cam_dec.fc_fov.0", 2, d)
	b.camEnc(p+"cam_enc.", a.C, 2)
	if gs {
		b.dpt(p+"gs_head.", a, 2*a.C, 38, headOpts{merger: true})
	}
	return b.ts
}

// camEnc adds a CameraEnc (trunk of depth blocks, width c) under prefix p,
// in named_parameters order.
func (b *ckptBuilder) camEnc(p string, c int64, depth int) {
	for i := range depth {
		q := fmt.Sprintf("%strunk.%d.", p, i)
		b.add(q+"norm1.weight", c)
		b.add(q+"norm1.bias", c)
		b.lin(q+"attn.qkv", 3*c, c)
		b.lin(q+"attn.proj", c, c)
		b.add(q+"ls1.gamma", c)
		b.add(q+"norm2.weight", c)
		b.add(q+"norm2.bias", c)
		b.lin(q+"mlp.fc1", 4*c, c)
		b.lin(q+"mlp.fc2", c, 4*c)
		b.add(q+"ls2.gamma", c)
	}
	b.add(p+"token_norm.weight", c)
	b.add(p+"token_norm.bias", c)
	b.add(p+"trunk_norm.weight", c)
	b.add(p+"trunk_norm.bias", c)
	b.lin(p+"pose_branch.fc1", c/2, 9)
	b.lin(p+"pose_branch.fc2", c, c/2)
}

// da3Mono builds a DA3 mono/metric checkpoint (DPT + sky, no camera).
func da3Mono(p string, a tinyArch) []stTensor {
	a.camera, a.qkStart = false, -1
	b := &ckptBuilder{seed: 5000}
	b.backbone(p+"backbone.pretrained.", a, false)
	b.dpt(p+"head.", a, a.C, 1, headOpts{sky: true})
	return b.ts
}

var tinyDA2 = tinyArch{C: 64, depth: 4, hidden: 256, qkStart: -1, grid: 3, heads: 2, f: 8, oc: [4]int64{4, 8, 12, 16}, outDim: 1}

// da2Original builds an original Depth Anything V2 state dict.
func da2Original(a tinyArch) []stTensor {
	b := &ckptBuilder{seed: 9000}
	b.backbone("pretrained.", a, true)
	b.dpt("depth_head.", a, a.C, 1, headOpts{rn4rc1: true})
	return b.ts
}

// da2ToHF converts an original DA2 state dict to transformers' layout:
// qkv split into query/key/value rows, fusion stage reversed.
func da2ToHF(ts []stTensor, C int64) []stTensor {
	r := strings.NewReplacer(
		"pretrained.cls_token", "backbone.embeddings.cls_token",
		"pretrained.mask_token", "backbone.embeddings.mask_token",
		"pretrained.pos_embed", "backbone.embeddings.position_embeddings",
		"pretrained.patch_embed.proj.", "backbone.embeddings.patch_embeddings.projection.",
		"pretrained.blocks.", "backbone.encoder.layer.",
		"pretrained.norm.", "backbone.layernorm.",
		".attn.proj.", ".attention.output.dense.",
		".ls1.gamma", ".layer_scale1.lambda1",
		".ls2.gamma", ".layer_scale2.lambda1",
		"depth_head.scratch.output_conv1.", "head.conv1.",
		"depth_head.scratch.output_conv2.0.", "head.conv2.",
		"depth_head.scratch.output_conv2.2.", "head.conv3.",
		"resConfUnit1.conv", "residual_layer1.convolution",
		"resConfUnit2.conv", "residual_layer2.convolution",
		"out_conv.", "projection.",
	)
	var out []stTensor
	for _, t := range ts {
		name := t.name
		if rest, ok := strings.CutPrefix(name, "depth_head.resize_layers."); ok {
			name = "neck.reassemble_stage.layers." + rest[:1] + ".resize." + rest[2:]
		}
		if rest, ok := strings.CutPrefix(name, "depth_head.projects."); ok {
			name = "neck.reassemble_stage.layers." + rest[:1] + ".projection." + rest[2:]
		}
		for i := 1; i <= 4; i++ {
			name = strings.Replace(name, fmt.Sprintf("depth_head.scratch.layer%d_rn.", i), fmt.Sprintf("neck.convs.%d.", i-1), 1)
			name = strings.Replace(name, fmt.Sprintf("depth_head.scratch.refinenet%d.", i), fmt.Sprintf("neck.fusion_stage.layers.%d.", 4-i), 1)
		}
		name = r.Replace(name)
		if strings.Contains(name, ".attn.qkv.") {
			per := int64(len(t.data)) / 3
			for i, part := range []string{"query", "key", "value"} {
				shape := slices.Clone(t.shape)
				shape[0] = C
				out = append(out, stTensor{strings.Replace(name, "attn.qkv", "attention.attention."+part, 1), "F32", shape, t.data[int64(i)*per : int64(i+1)*per]})
			}
			continue
		}
		out = append(out, stTensor{name, t.dtype, t.shape, t.data})
	}
	return out
}

// expectedName is the GGUF name of an original DA2/DA3 checkpoint key, or ""
// when the converter must drop it (withAux: keep the aux ray head).
func expectedName(key string, withAux bool) string {
	key = strings.TrimPrefix(key, "model.")
	switch {
	case strings.HasSuffix(key, "mask_token"):
		return ""
	case strings.HasPrefix(key, "cam_enc."):
		return strings.NewReplacer("cam_enc.trunk.", "cam_enc.blk.", ".attn.qkv.", ".attn_qkv.", ".attn.proj.", ".attn_proj.",
			".ls1.gamma", ".ls1", ".ls2.gamma", ".ls2", ".mlp.fc1.", ".mlp_fc1.", ".mlp.fc2.", ".mlp_fc2.",
			"pose_branch.fc", "pose_fc").Replace(key)
	case strings.Contains(key, "_aux."):
		if !withAux {
			return ""
		}
		for l := range 3 {
			if strings.Contains(key, fmt.Sprintf("output_conv1_aux.%d.", l)) ||
				strings.Contains(key, fmt.Sprintf("output_conv2_aux.%d.0.", l)) ||
				strings.Contains(key, fmt.Sprintf("output_conv2_aux.%d.5.", l)) {
				return ""
			}
		}
		if strings.Contains(key, "output_conv2_aux.3.2.") {
			return "" // alias of level 0, which wins
		}
	}
	r := strings.NewReplacer(
		"backbone.pretrained.", "vit.", "pretrained.", "vit.",
		"patch_embed.proj.", "patch_embed.",
		"blocks.", "blk.",
		".attn.qkv.", ".attn_qkv.", ".attn.q_norm.", ".attn_qnorm.", ".attn.k_norm.", ".attn_knorm.",
		".attn.proj.", ".attn_proj.", ".ls1.gamma", ".ls1", ".ls2.gamma", ".ls2",
		".mlp.fc1.", ".mlp_fc1.", ".mlp.fc2.", ".mlp_fc2.", ".mlp.w12.", ".mlp_w12.", ".mlp.w3.", ".mlp_w3.",
		"depth_head.", "head.", "gs_head.", "gs.",
		"projects.", "proj.", "resize_layers.", "resize.",
		"refinenet", "rn", "resConfUnit", "rc", ".conv1.", ".c1.", ".conv2.", ".c2.", "out_conv.", "out.",
		"output_conv1_aux.3.", "out1_aux.", "output_conv2_aux.3.0.", "out2a_aux.", "output_conv2_aux.3.5.", "out2b_aux.",
		"output_conv2_aux.0.2.", "out2_aux_ln.",
		"sky_output_conv2.0.", "sky_out2a.", "sky_output_conv2.2.", "sky_out2b.",
		"output_conv1.", "out1.", "output_conv2.0.", "out2a.", "output_conv2.2.", "out2b.",
		"images_merger.0.", "merger.0.", "images_merger.2.", "merger.1.", "images_merger.4.", "merger.2.",
		"cam_dec.backbone.0.", "cam.bb0.", "cam_dec.backbone.2.", "cam.bb2.", "cam_dec.fc_qvec.", "cam.fc_q.",
		"cam_dec.fc_fov.0.", "cam.fc_fov.", "cam_dec.", "cam.",
	)
	return r.Replace(key)
}
