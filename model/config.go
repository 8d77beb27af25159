// Package model composes the Depth Anything networks (DA3 any-view, DA3
// mono/metric, DA2 relative/metric) from their parts, loads them from GGUF
// files and runs them: Load, then Depth, DepthAndPose or MultiView.
package model

import (
	"errors"
	"fmt"
	"strings"

	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/vit"
)

// Arch is the model family.
type Arch int

const (
	// DA2 is Depth Anything V2 (relative disparity, or metric depth).
	DA2 Arch = iota
	// DA3 is a Depth Anything 3 any-view model: depth, confidence, camera.
	DA3
	// DA3Mono is DA3 mono-large or metric-large: depth and sky.
	DA3Mono
)

func (a Arch) String() string {
	switch a {
	case DA2:
		return "depthanything2"
	case DA3:
		return "depthanything3"
	case DA3Mono:
		return "depthanything3-mono"
	}
	return fmt.Sprintf("Arch(%d)", int(a))
}

// ErrUnsupportedArch reports a GGUF that is not a Depth Anything model this
// package can run.
var ErrUnsupportedArch = errors.New("unsupported model architecture")

// KVPrefix prefixes every Depth Anything metadata key.
const KVPrefix = "depthanything3."

// Config is everything Load reads from a model file's metadata.
type Config struct {
	Arch Arch
	Name string
	// Metric: DA2 metric (sigmoid·max_depth) or DA3 metric-large.
	Metric bool
	ViT    vit.Config
	Head   dpt.Config
	// HasCamera: the file has camera_token and cam.* (DA3 any-view).
	HasCamera bool
	// Preprocessing.
	ResizeMode   string // "upper_bound" (DA3) or "lower_bound" (DA2)
	ResizeTarget int    // 504 (DA3) or 518 (DA2)
	Mean, Std    [3]float32
	// NestedMetric: the file is the metric branch of a nested model (m_vit.*).
	NestedMetric bool
}

type kvReader struct {
	kv     *loader.KV
	prefix string
	errs   []error
}

func (r *kvReader) u32(key string) int {
	v, err := r.kv.Uint32(r.prefix + key)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	return int(v)
}

func (r *kvReader) i32Or(key string, def int) int { return int(r.kv.Int32Or(r.prefix+key, int32(def))) }
func (r *kvReader) f32Or(key string, def float32) float32 {
	return r.kv.Float32Or(r.prefix+key, def)
}
func (r *kvReader) u32Or(key string, def int) int {
	return int(r.kv.Uint32Or(r.prefix+key, uint32(def)))
}

func (r *kvReader) ints(key string, n int) []int {
	v, err := r.kv.Int32s(r.prefix + key)
	if err != nil {
		r.errs = append(r.errs, err)
		return nil
	}
	if len(v) != n {
		r.errs = append(r.errs, fmt.Errorf("%s%s: want %d values, got %d", r.prefix, key, n, len(v)))
		return nil
	}
	out := make([]int, n)
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func (r *kvReader) floats3(key string, def [3]float32) [3]float32 {
	v, err := r.kv.Float32s(r.prefix + key)
	if err != nil || len(v) != 3 {
		return def
	}
	return [3]float32{v[0], v[1], v[2]}
}

// ConfigFromFile reads the model config from a GGUF's metadata and tensor
// list. It never hard-codes sizes: everything comes from the file.
func ConfigFromFile(f *loader.File) (Config, error) {
	kv := f.KV()
	arch, err := kv.String(KVPrefix + "arch")
	if err != nil {
		ga := kv.StringOr("general.architecture", "")
		return Config{}, fmt.Errorf("%w: not a Depth Anything file (general.architecture %q, no %sarch key)", ErrUnsupportedArch, ga, KVPrefix)
	}
	has := func(name string) bool { _, ok := f.Tensor(name); return ok }
	var c Config
	c.Name = kv.StringOr(KVPrefix+"checkpoint_name", kv.StringOr("general.name", ""))
	vitPrefix, headPrefix := "vit.", "head."
	if _, ok := kv.Get(KVPrefix + "m_vit.embed_dim"); ok {
		c.NestedMetric = true
		vitPrefix, headPrefix = "m_vit.", "m_head."
	}
	switch arch {
	case "depthanything2":
		c.Arch = DA2
	case "depthanything3":
		switch {
		case has(vitPrefix + "camera_token"):
			c.Arch = DA3
		case has(headPrefix + "scratch.sky_out2a.weight"):
			c.Arch = DA3Mono
		default:
			return Config{}, fmt.Errorf("%w: depthanything3 file with neither a camera token nor a sky head", ErrUnsupportedArch)
		}
	default:
		return Config{}, fmt.Errorf("%w: %q", ErrUnsupportedArch, arch)
	}
	r := &kvReader{kv: kv, prefix: KVPrefix + vitPrefix}
	v := vit.Config{
		EmbedDim:    r.u32("embed_dim"),
		Depth:       r.u32("depth"),
		Heads:       r.u32("num_heads"),
		HeadDim:     r.u32Or("head_dim", 64),
		MLPHidden:   r.u32Or("mlp_hidden", 0),
		SwiGLU:      strings.EqualFold(kv.StringOr(r.prefix+"ffn_type", "mlp"), "swiglu"),
		PatchSize:   int(kv.Uint32Or(KVPrefix+"patch_size", 14)),
		PosGrid:     r.u32Or("pos_embed_grid", 37),
		InterpOff:   r.f32Or("interpolate_offset", 0.1),
		AltStart:    r.i32Or("alt_start", -1),
		RoPEStart:   r.i32Or("rope_start", -1),
		QKNormStart: r.i32Or("qknorm_start", -1),
		RoPEFreq:    r.f32Or("rope_freq", 100),
		CatToken:    kv.BoolOr(r.prefix+"cat_token", false),
		LNEps:       r.f32Or("ln_eps", 1e-6),
		QKNormEps:   1e-5,
		OutLayers:   r.ints("out_layers", 4),
	}
	// The final norm's eps: torch's nn.LayerNorm default 1e-5 in DA3, 1e-6 in
	// DA2. (The C++ engine uses ln_eps, 1e-6, for both; the PyTorch code wins.)
	v.FinalEps = 1e-5
	if c.Arch == DA2 {
		v.FinalEps = 1e-6
	}
	if c.Arch != DA3 {
		v.AltStart, v.RoPEStart, v.QKNormStart, v.CatToken = -1, -1, -1, false
	}
	if len(r.errs) > 0 {
		return Config{}, fmt.Errorf("reading model metadata: %w", errors.Join(r.errs...))
	}
	if err := v.Validate(); err != nil {
		return Config{}, err
	}
	if pe, ok := f.Tensor(vitPrefix + "pos_embed"); ok && len(pe.Shape) >= 2 {
		rows := int(pe.Shape[1])
		m := 0
		for m*m < rows-1 {
			m++
		}
		if m*m+1 != rows {
			return Config{}, fmt.Errorf("%spos_embed has %d rows, not M²+1", vitPrefix, rows)
		}
		v.PosGrid = m
	}
	c.ViT = v

	hr := &kvReader{kv: kv, prefix: KVPrefix + headPrefix}
	h := dpt.Config{
		Features: hr.u32("features"),
		NormEps:  1e-5,
	}
	oc := hr.ints("out_channels", 4)
	if len(hr.errs) > 0 {
		return Config{}, fmt.Errorf("reading head metadata: %w", errors.Join(hr.errs...))
	}
	copy(h.OutChannels[:], oc)
	switch c.Arch {
	case DA2:
		h.Kind = dpt.DA2
		h.MaxDepth = hr.f32Or("max_depth", 0)
		c.Metric = h.MaxDepth > 0
	case DA3:
		h.Kind = dpt.DualDPT
		h.PosEmbed = kv.BoolOr(hr.prefix+"pos_embed", true)
		c.HasCamera = has("cam.bb0.weight")
	case DA3Mono:
		h.Kind = dpt.Mono
		c.Metric = strings.Contains(strings.ToLower(c.Name), "metric")
	}
	c.Head = h

	ir := &kvReader{kv: kv, prefix: KVPrefix + "img."}
	c.ResizeMode = kv.StringOr(ir.prefix+"resize_mode", "upper_bound")
	c.ResizeTarget = int(kv.Uint32Or(ir.prefix+"resize_target", 504))
	if c.Arch == DA2 {
		c.ResizeMode = kv.StringOr(ir.prefix+"resize_mode", "lower_bound")
		c.ResizeTarget = int(kv.Uint32Or(ir.prefix+"resize_target", 518))
	}
	c.Mean = ir.floats3("mean", [3]float32{0.485, 0.456, 0.406})
	c.Std = ir.floats3("std", [3]float32{0.229, 0.224, 0.225})
	return c, nil
}
