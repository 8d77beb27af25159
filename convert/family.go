package convert

import (
	"fmt"
	"strings"
)

// Family is the layout of a checkpoint.
type Family int

// Checkpoint families.
const (
	FamilyUnknown Family = iota
	// FamilyDA2 is an original Depth Anything V2 state dict (keys
	// "pretrained.*" and "depth_head.*"), relative or metric.
	FamilyDA2
	// FamilyDA2HF is a transformers DepthAnythingForDepthEstimation
	// checkpoint (keys "backbone.embeddings.*", "neck.*", "head.conv*").
	FamilyDA2HF
	// FamilyDA3 is a Depth Anything 3 any-view model (DualDPT head, camera
	// token and decoder): DA3-SMALL/BASE/LARGE/GIANT.
	FamilyDA3
	// FamilyDA3Mono is a Depth Anything 3 monocular model (DPT head with sky
	// output): DA3MONO-LARGE, DA3METRIC-LARGE.
	FamilyDA3Mono
	// FamilyDA3Nested is DA3NESTED-GIANT-LARGE: an any-view giant branch
	// ("da3.*") and a metric branch ("da3_metric.*"), written as two GGUF
	// files.
	FamilyDA3Nested
)

func (f Family) String() string {
	switch f {
	case FamilyDA2:
		return "Depth Anything V2"
	case FamilyDA2HF:
		return "Depth Anything V2 (transformers)"
	case FamilyDA3:
		return "Depth Anything 3 any-view"
	case FamilyDA3Mono:
		return "Depth Anything 3 mono"
	case FamilyDA3Nested:
		return "Depth Anything 3 nested"
	}
	return "unknown"
}

// detectFamily classifies a checkpoint by its tensor names (and, for DA3,
// the model_name of config.json).
func detectFamily(c *Checkpoint) (Family, error) {
	has := func(name string) bool { _, ok := c.Tensor(name); return ok }
	hasPrefix := func(p string) bool {
		for _, n := range c.names {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has("pretrained.cls_token") || hasPrefix("depth_head."):
		return FamilyDA2, nil
	case has("backbone.embeddings.cls_token") || hasPrefix("neck.fusion_stage."):
		return FamilyDA2HF, nil
	}
	p := da3Prefix(c)
	switch {
	case hasPrefix(p+"da3.") && hasPrefix(p+"da3_metric."):
		return FamilyDA3Nested, nil
	case has(p + "backbone.pretrained.cls_token"):
		if preset, ok := da3PresetOf(c.Config); ok {
			if preset.anyView {
				return FamilyDA3, nil
			}
			return FamilyDA3Mono, nil
		}
		if has(p+"backbone.pretrained.camera_token") || hasPrefix(p+"cam_dec.") {
			return FamilyDA3, nil
		}
		return FamilyDA3Mono, nil
	}
	n := c.Names()
	if len(n) > 5 {
		n = append(n[:5], "...")
	}
	return FamilyUnknown, fmt.Errorf("unrecognised checkpoint layout (first tensors: %s)", strings.Join(n, ", "))
}

// da3Prefix returns "model." when the checkpoint uses the Hugging Face
// DepthAnything3 wrapper's key prefix.
func da3Prefix(c *Checkpoint) string {
	for _, n := range c.names {
		if !strings.HasPrefix(n, "model.") {
			return ""
		}
	}
	return "model."
}

// da3Preset is one DA3 model_name of the upstream registry.
type da3Preset struct {
	anyView, gs bool
	hints       vitHints
	// camEncHeads is CameraEnc's num_heads (its default, 16, in every
	// published model).
	camEncHeads int
}

func da3Std(depth, heads int, out []int, start int, anyView, swiglu bool) vitHints {
	return vitHints{
		depth: depth, heads: heads, outLayers: out,
		qkStart: ptr(start), catToken: ptr(anyView), swiglu: ptr(swiglu),
	}
}

var da3Presets = map[string]da3Preset{
	"da3-small":       {anyView: true, hints: da3Std(12, 6, []int{5, 7, 9, 11}, 4, true, false)},
	"da3-base":        {anyView: true, hints: da3Std(12, 12, []int{5, 7, 9, 11}, 4, true, false)},
	"da3-large":       {anyView: true, hints: da3Std(24, 16, []int{11, 15, 19, 23}, 8, true, false)},
	"da3-giant":       {anyView: true, gs: true, hints: da3Std(40, 24, []int{19, 27, 33, 39}, 13, true, true)},
	"da3mono-large":   {hints: da3Std(24, 16, []int{4, 11, 17, 23}, -1, false, false)},
	"da3metric-large": {hints: da3Std(24, 16, []int{4, 11, 17, 23}, -1, false, false)},
}

// da3PresetOf returns the preset named by config.json: the "arch" object
// written for non-standard (test) configurations, else "model_name".
func da3PresetOf(cfg map[string]any) (da3Preset, bool) {
	if cfg == nil {
		return da3Preset{}, false
	}
	if arch, ok := cfg["arch"].(map[string]any); ok {
		return archPreset(arch)
	}
	name, _ := cfg["model_name"].(string)
	p, ok := da3Presets[name]
	return p, ok
}

// archPreset reads the explicit hyper-parameters of the tiny test
// configuration (tests/oracle/da3_common.py TINY_ARCH): "backbone" holds the
// DinoVisionTransformer arguments, "cam_dec" marks an any-view model.
func archPreset(arch map[string]any) (da3Preset, bool) {
	bb, ok := arch["backbone"].(map[string]any)
	if !ok {
		return da3Preset{}, false
	}
	var h vitHints
	if v, ok := jsonInt(bb["depth"]); ok {
		h.depth = v
	}
	if v, ok := jsonInt(bb["num_heads"]); ok {
		h.heads = v
	}
	if l, ok := jsonInts(bb["out_layers"]); ok {
		h.outLayers = l
	}
	if v, ok := jsonInt(bb["qknorm_start"]); ok {
		h.qkStart = ptr(v)
	}
	if v, ok := jsonInt(bb["alt_start"]); ok {
		h.altStart = ptr(v)
	}
	if v, ok := jsonInt(bb["rope_start"]); ok {
		h.ropeStart = ptr(v)
	}
	if v, ok := bb["cat_token"].(bool); ok {
		h.catToken = ptr(v)
	}
	if v, ok := bb["ffn_layer"].(string); ok {
		h.swiglu = ptr(strings.HasPrefix(v, "swiglu"))
	}
	for key, dst := range map[string]**float32{"init_values": &h.initValues, "rope_freq": &h.ropeFreq, "interpolate_offset": &h.interpOffset} {
		if v, ok := bb[key].(float64); ok {
			*dst = ptr(float32(v))
		}
	}
	_, cam := arch["cam_dec"]
	anyView := cam || (h.catToken != nil && *h.catToken)
	p := da3Preset{anyView: anyView, hints: h}
	if ce, ok := arch["cam_enc"].(map[string]any); ok {
		if v, ok := jsonInt(ce["num_heads"]); ok {
			p.camEncHeads = v
		}
	}
	_, p.gs = arch["gs_head"]
	return p, true
}

func jsonInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func jsonInts(v any) ([]int, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int, len(l))
	for i, x := range l {
		n, ok := jsonInt(x)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// Inspect opens src (see OpenCheckpoint) and reports its family.
func Inspect(src string) (Family, error) {
	c, err := OpenCheckpoint(src)
	if err != nil {
		return FamilyUnknown, err
	}
	defer c.Close()
	return detectFamily(c)
}
