package convert

import (
	"strconv"
	"strings"
)

// match matches name against pattern, where '#' stands for a decimal number
// (captured, as an int) and '$' for "weight" or "bias" (captured as a
// string); every other byte must be equal. It returns the captures in
// order.
func match(name, pattern string) ([]string, bool) {
	var caps []string
	i := 0
	for p := 0; p < len(pattern); p++ {
		switch pattern[p] {
		case '#':
			j := i
			for j < len(name) && name[j] >= '0' && name[j] <= '9' {
				j++
			}
			if j == i || j-i > 6 {
				return nil, false
			}
			n, _ := strconv.Atoi(name[i:j])
			if strconv.Itoa(n) != name[i:j] { // no leading zeros: "01" is not block 1
				return nil, false
			}
			caps = append(caps, name[i:j])
			i = j
		case '$':
			switch {
			case strings.HasPrefix(name[i:], "weight"):
				caps = append(caps, "weight")
				i += len("weight")
			case strings.HasPrefix(name[i:], "bias"):
				caps = append(caps, "bias")
				i += len("bias")
			default:
				return nil, false
			}
		default:
			if i >= len(name) || name[i] != pattern[p] {
				return nil, false
			}
			i++
		}
	}
	if i != len(name) {
		return nil, false
	}
	return caps, true
}

// fill substitutes the captures into template: each '#' takes the next
// numeric capture and each '$' the next "weight"/"bias" capture, so a
// template may omit numbers of the pattern (out2_aux_ln drops the level).
func fill(template string, caps []string) string {
	var nums, words []string
	for _, c := range caps {
		if c == "weight" || c == "bias" {
			words = append(words, c)
		} else {
			nums = append(nums, c)
		}
	}
	var b strings.Builder
	for i := 0; i < len(template); i++ {
		switch c := template[i]; {
		case c == '#' && len(nums) > 0:
			b.WriteString(nums[0])
			nums = nums[1:]
		case c == '$' && len(words) > 0:
			b.WriteString(words[0])
			words = words[1:]
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rule renames a checkpoint name matching From to To (a template, see
// fill). An empty To drops the tensor.
type rule struct{ From, To string }

func applyRules(rules []rule, name string) (to string, ok bool) {
	for _, r := range rules {
		if caps, ok := match(name, r.From); ok {
			return fill(r.To, caps), true
		}
	}
	return "", false
}

// target is where a checkpoint tensor goes: a GGUF name and, for tensors
// fused from several checkpoint tensors (transformers' separate q, k, v),
// the position of this part along the output (outermost) dimension.
type target struct {
	name string
	part int // -1: not fused
	drop bool
}

// vitRules renames DINOv2 backbone tensors (checkpoint prefix removed) to
// GGUF names under "vit." (rename_backbone of the C++ converters).
var vitRules = []rule{
	{"cls_token", "vit.cls_token"},
	{"camera_token", "vit.camera_token"},
	{"pos_embed", "vit.pos_embed"},
	{"mask_token", ""}, // training-only (DA2), never used at inference
	{"patch_embed.proj.$", "vit.patch_embed.$"},
	{"blocks.#.norm1.$", "vit.blk.#.norm1.$"},
	{"blocks.#.attn.qkv.$", "vit.blk.#.attn_qkv.$"},
	{"blocks.#.attn.q_norm.$", "vit.blk.#.attn_qnorm.$"},
	{"blocks.#.attn.k_norm.$", "vit.blk.#.attn_knorm.$"},
	{"blocks.#.attn.proj.$", "vit.blk.#.attn_proj.$"},
	{"blocks.#.ls1.gamma", "vit.blk.#.ls1"},
	{"blocks.#.ls2.gamma", "vit.blk.#.ls2"},
	{"blocks.#.norm2.$", "vit.blk.#.norm2.$"},
	{"blocks.#.mlp.fc1.$", "vit.blk.#.mlp_fc1.$"},
	{"blocks.#.mlp.fc2.$", "vit.blk.#.mlp_fc2.$"},
	{"blocks.#.mlp.w12.$", "vit.blk.#.mlp_w12.$"},
	{"blocks.#.mlp.w3.$", "vit.blk.#.mlp_w3.$"},
	{"norm.$", "vit.norm.$"},
}

// headRules renames DPT / DualDPT / GSDPT head tensors (prefix removed) to
// GGUF names under "head." (rename_head). Aux-head tensors are handled by
// headAuxRules.
var headRules = []rule{
	{"norm.$", "head.norm.$"},
	{"projects.#.$", "head.proj.#.$"},
	{"resize_layers.#.$", "head.resize.#.$"},
	{"scratch.layer#_rn.weight", "head.scratch.layer#_rn.weight"},
	{"scratch.refinenet#.resConfUnit#.conv#.$", "head.scratch.rn#.rc#.c#.$"},
	{"scratch.refinenet#.out_conv.$", "head.scratch.rn#.out.$"},
	{"scratch.output_conv1.$", "head.scratch.out1.$"},
	{"scratch.output_conv2.0.$", "head.scratch.out2a.$"},
	{"scratch.output_conv2.2.$", "head.scratch.out2b.$"},
	{"scratch.sky_output_conv2.0.$", "head.scratch.sky_out2a.$"},
	{"scratch.sky_output_conv2.2.$", "head.scratch.sky_out2b.$"},
}

// headAuxRules renames the DualDPT auxiliary ray head (rename_head_aux).
// Only the finest level (3) of output_conv1_aux / output_conv2_aux is used
// by the forward pass; levels 0-2 are dropped. The LayerNorm inside
// output_conv2_aux is one module shared by all levels, serialised under one
// or several level indices: every alias maps to the same GGUF name and the
// first one wins.
var headAuxRules = []rule{
	{"scratch.refinenet#_aux.resConfUnit#.conv#.$", "head.scratch.rn#_aux.rc#.c#.$"},
	{"scratch.refinenet#_aux.out_conv.$", "head.scratch.rn#_aux.out.$"},
	{"scratch.output_conv1_aux.3.#.$", "head.scratch.out1_aux.#.$"},
	{"scratch.output_conv2_aux.3.0.$", "head.scratch.out2a_aux.$"},
	{"scratch.output_conv2_aux.3.5.$", "head.scratch.out2b_aux.$"},
	{"scratch.output_conv2_aux.#.2.$", "head.scratch.out2_aux_ln.$"},
	{"scratch.output_conv1_aux.#.#.$", ""},
	{"scratch.output_conv2_aux.#.#.$", ""},
}

// camRules renames the camera decoder (rename_cam).
var camRules = []rule{
	{"backbone.0.$", "cam.bb0.$"},
	{"backbone.2.$", "cam.bb2.$"},
	{"fc_t.$", "cam.fc_t.$"},
	{"fc_qvec.$", "cam.fc_q.$"},
	{"fc_fov.0.$", "cam.fc_fov.$"},
}

// camEncRules renames the camera encoder (CameraEnc, pose-conditioned
// input; the C++ engine has no schema for it): its transformer blocks take
// the backbone block names under "cam_enc.blk.".
var camEncRules = []rule{
	{"trunk.#.norm1.$", "cam_enc.blk.#.norm1.$"},
	{"trunk.#.attn.qkv.$", "cam_enc.blk.#.attn_qkv.$"},
	{"trunk.#.attn.proj.$", "cam_enc.blk.#.attn_proj.$"},
	{"trunk.#.ls1.gamma", "cam_enc.blk.#.ls1"},
	{"trunk.#.norm2.$", "cam_enc.blk.#.norm2.$"},
	{"trunk.#.mlp.fc1.$", "cam_enc.blk.#.mlp_fc1.$"},
	{"trunk.#.mlp.fc2.$", "cam_enc.blk.#.mlp_fc2.$"},
	{"trunk.#.ls2.gamma", "cam_enc.blk.#.ls2"},
	{"token_norm.$", "cam_enc.token_norm.$"},
	{"trunk_norm.$", "cam_enc.trunk_norm.$"},
	{"pose_branch.fc1.$", "cam_enc.pose_fc1.$"},
	{"pose_branch.fc2.$", "cam_enc.pose_fc2.$"},
}

// gsRules renames the 3D-Gaussian head (rename_gs): head names under "gs."
// plus images_merger.{0,2,4} -> gs.merger.{0,1,2}.
var gsRules = []rule{
	{"images_merger.0.$", "gs.merger.0.$"},
	{"images_merger.2.$", "gs.merger.1.$"},
	{"images_merger.4.$", "gs.merger.2.$"},
}

// renameDA2 maps an original Depth Anything V2 state-dict key (Appendix B).
func renameDA2(name string) (target, bool) {
	if rest, ok := strings.CutPrefix(name, "pretrained."); ok {
		return fromRules(vitRules, rest)
	}
	if rest, ok := strings.CutPrefix(name, "depth_head."); ok {
		return fromRules(headRules, rest)
	}
	return target{}, false
}

// renameDA3 maps a DepthAnything3Net parameter name (Appendix A, without the
// "model." of the Hugging Face wrapper). withAux keeps the auxiliary ray head.
func renameDA3(name string, withAux bool) (target, bool) {
	switch {
	case strings.HasPrefix(name, "backbone.pretrained."):
		return fromRules(vitRules, strings.TrimPrefix(name, "backbone.pretrained."))
	case strings.HasPrefix(name, "head."):
		rest := strings.TrimPrefix(name, "head.")
		if strings.Contains(rest, "_aux.") {
			if !withAux {
				if _, ok := applyRules(headAuxRules, rest); ok {
					return target{drop: true}, true
				}
				return target{}, false
			}
			return fromRules(headAuxRules, rest)
		}
		return fromRules(headRules, rest)
	case strings.HasPrefix(name, "cam_dec."):
		return fromRules(camRules, strings.TrimPrefix(name, "cam_dec."))
	case strings.HasPrefix(name, "cam_enc."):
		return fromRules(camEncRules, strings.TrimPrefix(name, "cam_enc."))
	case strings.HasPrefix(name, "gs_head."):
		rest := strings.TrimPrefix(name, "gs_head.")
		if t, ok := fromRules(gsRules, rest); ok {
			return t, true
		}
		t, ok := fromRules(headRules, rest)
		if ok && !t.drop {
			t.name = "gs." + strings.TrimPrefix(t.name, "head.")
		}
		return t, ok
	}
	return target{}, false
}

// renameDA2HF maps a transformers DepthAnythingForDepthEstimation key. Its
// DINOv2 has separate query/key/value linears, fused here into attn_qkv in
// q, k, v order; its fusion stage is numbered from the coarsest level, so
// fusion_stage.layers.j is refinenet(4-j).
func renameDA2HF(name string) (target, bool) {
	one := func(to string) (target, bool) { return target{name: to, part: -1}, true }
	for i, p := range []string{"query", "key", "value"} {
		if caps, ok := match(name, "backbone.encoder.layer.#.attention.attention."+p+".$"); ok {
			return target{name: fill("vit.blk.#.attn_qkv.$", caps), part: i}, true
		}
	}
	if caps, ok := match(name, "neck.fusion_stage.layers.#.projection.$"); ok {
		return fusionTarget(caps, "head.scratch.rn#.out.$")
	}
	if caps, ok := match(name, "neck.fusion_stage.layers.#.residual_layer#.convolution#.$"); ok {
		return fusionTarget(caps, "head.scratch.rn#.rc#.c#.$")
	}
	if caps, ok := match(name, "neck.convs.#.weight"); ok {
		n, _ := strconv.Atoi(caps[0])
		return one("head.scratch.layer" + strconv.Itoa(n+1) + "_rn.weight")
	}
	if to, ok := applyRules(hfRules, name); ok {
		if to == "" {
			return target{drop: true}, true
		}
		return one(to)
	}
	return target{}, false
}

func fusionTarget(caps []string, template string) (target, bool) {
	j, _ := strconv.Atoi(caps[0])
	if j > 3 {
		return target{}, false
	}
	caps[0] = strconv.Itoa(4 - j)
	return target{name: fill(template, caps), part: -1}, true
}

var hfRules = []rule{
	{"backbone.embeddings.cls_token", "vit.cls_token"},
	{"backbone.embeddings.mask_token", ""},
	{"backbone.embeddings.position_embeddings", "vit.pos_embed"},
	{"backbone.embeddings.patch_embeddings.projection.$", "vit.patch_embed.$"},
	{"backbone.encoder.layer.#.norm1.$", "vit.blk.#.norm1.$"},
	{"backbone.encoder.layer.#.attention.output.dense.$", "vit.blk.#.attn_proj.$"},
	{"backbone.encoder.layer.#.layer_scale1.lambda1", "vit.blk.#.ls1"},
	{"backbone.encoder.layer.#.norm2.$", "vit.blk.#.norm2.$"},
	{"backbone.encoder.layer.#.mlp.fc1.$", "vit.blk.#.mlp_fc1.$"},
	{"backbone.encoder.layer.#.mlp.fc2.$", "vit.blk.#.mlp_fc2.$"},
	{"backbone.encoder.layer.#.mlp.weights_in.$", "vit.blk.#.mlp_w12.$"},
	{"backbone.encoder.layer.#.mlp.weights_out.$", "vit.blk.#.mlp_w3.$"},
	{"backbone.encoder.layer.#.layer_scale2.lambda1", "vit.blk.#.ls2"},
	{"backbone.layernorm.$", "vit.norm.$"},
	{"neck.reassemble_stage.layers.#.projection.$", "head.proj.#.$"},
	{"neck.reassemble_stage.layers.#.resize.$", "head.resize.#.$"},
	{"head.conv1.$", "head.scratch.out1.$"},
	{"head.conv2.$", "head.scratch.out2a.$"},
	{"head.conv3.$", "head.scratch.out2b.$"},
}

func fromRules(rules []rule, name string) (target, bool) {
	to, ok := applyRules(rules, name)
	if !ok {
		return target{}, false
	}
	if to == "" {
		return target{drop: true}, true
	}
	return target{name: to, part: -1}, true
}
