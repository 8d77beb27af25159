// Package model composes the Depth Anything networks (DA3 any-view, DA3
// mono/metric, DA2 relative/metric) from their parts, loads them from GGUF
// files and runs them: Load, then Depth, DepthAndPose or MultiView.
package model

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/gs"
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

// kvPrefix prefixes every Depth Anything metadata key.
const kvPrefix = schema.Arch + "."

// Config is everything Load reads from a model file's metadata.
type Config struct {
	Arch Arch
	Name string
	// Licence and Source are the file's general.license (an SPDX id) and
	// general.source.url, when it has them (files from da3-go convert).
	Licence, Source string
	// Metric: DA2 metric (sigmoid·max_depth) or DA3 metric-large.
	Metric bool
	ViT    vit.Config
	Head   dpt.Config
	// HasCamera: the file has camera_token and cam.* (DA3 any-view).
	HasCamera bool
	// Preprocessing.
	ResizeTarget int // 504 (DA3) or 518 (DA2)
	Mean, Std    [3]float32
	// NestedMetric: the file is the metric branch of a nested model (m_vit.*).
	NestedMetric bool
	// CamEnc is the camera encoder (pose-conditioned input) when the file
	// has one (DA3 any-view files converted by da3-go).
	CamEnc *camera.EncoderConfig
	// GS is the Gaussian head (DA3-GIANT) and GSAdapter its adapter, when
	// the file has them.
	GS        *dpt.Config
	GSAdapter gs.Config
}

// errList is several errors on one line ("a; b"); errors.Is and As see
// each of them.
type errList []error

func (e errList) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e errList) Unwrap() []error { return e }

// kvReader reads typed, bounded metadata values under a key prefix and
// collects every problem: a missing required key, a value of the wrong type,
// or one outside the sane range of the architecture. Nothing is allocated
// from a value before it passed its bounds.
type kvReader struct {
	kv     *loader.KV
	prefix string
	errs   []error
}

func (r *kvReader) fail(key, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s%s: %s", r.prefix, key, fmt.Sprintf(format, args...)))
}

func (r *kvReader) has(key string) bool { _, ok := r.kv.Get(r.prefix + key); return ok }

// get reads key with getter, or returns def when it is absent (required
// keys record an error then).
func get[T any](r *kvReader, key string, getter func(string) (T, error), def T, required bool) (T, bool) {
	if !r.has(key) {
		if required {
			r.fail(key, "missing")
		}
		return def, false
	}
	v, err := getter(r.prefix + key)
	if err != nil {
		r.errs = append(r.errs, err)
		return def, false
	}
	return v, true
}

func (r *kvReader) intIn(key string, v, lo, hi int) int {
	if v < lo || v > hi {
		r.fail(key, "%d is outside %d..%d", v, lo, hi)
		return lo
	}
	return v
}

// u32 reads a required unsigned integer in [lo, hi].
func (r *kvReader) u32(key string, lo, hi int) int {
	v, ok := get(r, key, r.kv.Uint32, 0, true)
	if !ok {
		return lo
	}
	return r.intIn(key, int(v), lo, hi)
}

// u32Or reads an optional unsigned integer in [lo, hi].
func (r *kvReader) u32Or(key string, def, lo, hi int) int {
	v, ok := get(r, key, r.kv.Uint32, uint32(def), false)
	if !ok {
		return def
	}
	return r.intIn(key, int(v), lo, hi)
}

// i32Or reads an optional signed integer in [lo, hi].
func (r *kvReader) i32Or(key string, def, lo, hi int) int {
	v, ok := get(r, key, r.kv.Int32, int32(def), false)
	if !ok {
		return def
	}
	return r.intIn(key, int(v), lo, hi)
}

// f32Or reads an optional finite float in [lo, hi].
func (r *kvReader) f32Or(key string, def, lo, hi float32) float32 {
	v, ok := get(r, key, r.kv.Float32, def, false)
	if !ok {
		return def
	}
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) || v < lo || v > hi {
		r.fail(key, "%g is outside %g..%g", v, lo, hi)
		return def
	}
	return v
}

func (r *kvReader) boolOr(key string, def bool) bool {
	v, _ := get(r, key, r.kv.Bool, def, false)
	return v
}

func (r *kvReader) strOr(key, def string) string {
	v, _ := get(r, key, r.kv.String, def, false)
	return v
}

// ints reads a required array of n integers, each in [lo, hi].
func (r *kvReader) ints(key string, n, lo, hi int) []int {
	v, ok := get(r, key, r.kv.Int32s, nil, true)
	if !ok {
		return nil
	}
	if len(v) != n {
		r.fail(key, "want %d values, got %d", n, len(v))
		return nil
	}
	out := make([]int, n)
	for i, x := range v {
		if int(x) < lo || int(x) > hi {
			r.fail(key, "value %d is outside %d..%d", x, lo, hi)
			return nil
		}
		out[i] = int(x)
	}
	return out
}

// floats3 reads an optional array of 3 finite floats in [lo, hi].
func (r *kvReader) floats3(key string, def [3]float32, lo, hi float32) [3]float32 {
	v, ok := get(r, key, r.kv.Float32s, nil, false)
	if !ok {
		return def
	}
	if len(v) != 3 {
		r.fail(key, "want 3 values, got %d", len(v))
		return def
	}
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) || x < lo || x > hi {
			r.fail(key, "value %g is outside %g..%g", x, lo, hi)
			return def
		}
	}
	return [3]float32{v[0], v[1], v[2]}
}

// Sane bounds of the hyper-parameters (see package schema).
const (
	maxEmbedDim  = schema.MaxEmbedDim
	maxDepth     = schema.MaxDepth
	maxHeads     = schema.MaxHeads
	maxMLPHidden = schema.MaxMLPHidden
	maxPosGrid   = schema.MaxPosGrid
	maxFeatures  = schema.MaxFeatures
	maxRes       = 8192
)

// configFromFile reads the model config from a GGUF's metadata and tensor
// list. It never hard-codes sizes: everything comes from the file.
func configFromFile(f *loader.File) (Config, error) {
	kv := f.KV()
	var c Config
	c.Name = kv.StringOr(kvPrefix+"checkpoint_name", kv.StringOr("general.name", ""))
	c.Licence, c.Source = kv.StringOr("general.license", ""), kv.StringOr("general.source.url", "")
	vitPrefix, headPrefix := "vit.", "head."
	if _, ok := kv.Get(kvPrefix + "m_vit.embed_dim"); ok {
		c.NestedMetric = true
		vitPrefix, headPrefix = "m_vit.", "m_head."
	}
	arch, err := archOf(f, vitPrefix, headPrefix)
	if err != nil {
		return Config{}, err
	}
	c.Arch = arch
	if c.ViT, err = vitConfig(f, arch, vitPrefix); err != nil {
		return Config{}, err
	}
	hr := &kvReader{kv: kv, prefix: kvPrefix + headPrefix}
	c.headConfig(f, hr)
	ir := &kvReader{kv: kv, prefix: kvPrefix + "img."}
	target := preprocess.DefaultProcessRes
	if c.Arch == DA2 {
		target = preprocess.DefaultDA2Res
	}
	c.ResizeTarget = ir.u32Or("resize_target", target, c.ViT.PatchSize, maxRes)
	c.Mean = ir.floats3("mean", preprocess.ImageNetMean, -1e3, 1e3)
	c.Std = ir.floats3("std", preprocess.ImageNetStd, 1e-6, 1e3)
	if errs := append(hr.errs, ir.errs...); len(errs) > 0 {
		return Config{}, fmt.Errorf("reading model metadata: %w", errList(errs))
	}
	return c, nil
}

// archOf is the model family of f, whose backbone and head tensors have
// the prefixes vitPrefix and headPrefix.
func archOf(f *loader.File, vitPrefix, headPrefix string) (Arch, error) {
	kv := f.KV()
	arch, err := kv.String(kvPrefix + "arch")
	if err != nil {
		ga := kv.StringOr("general.architecture", "")
		return 0, fmt.Errorf("%w: not a Depth Anything file (general.architecture %q, no %sarch key)", ErrUnsupportedArch, ga, kvPrefix)
	}
	has := func(name string) bool { _, ok := f.Tensor(name); return ok }
	switch arch {
	case "depthanything2":
		return DA2, nil
	case "depthanything3":
		switch {
		case has(vitPrefix + "camera_token"):
			return DA3, nil
		case has(headPrefix + "scratch.sky_out2a.weight"):
			return DA3Mono, nil
		}
		return 0, fmt.Errorf("%w: depthanything3 file with neither a camera token nor a sky head", ErrUnsupportedArch)
	}
	return 0, fmt.Errorf("%w: %q", ErrUnsupportedArch, arch)
}

// vitConfig reads the backbone's configuration of an arch file (tensors
// under vitPrefix) and checks it.
func vitConfig(f *loader.File, arch Arch, vitPrefix string) (vit.Config, error) {
	kv := f.KV()
	r := &kvReader{kv: kv, prefix: kvPrefix + vitPrefix}
	v := vit.Config{
		EmbedDim:  r.u32("embed_dim", 1, maxEmbedDim),
		Depth:     r.u32("depth", 1, maxDepth),
		Heads:     r.u32("num_heads", 1, maxHeads),
		HeadDim:   r.u32Or("head_dim", 64, 1, maxEmbedDim),
		MLPHidden: r.u32Or("mlp_hidden", 0, 0, maxMLPHidden),
		SwiGLU:    strings.EqualFold(r.strOr("ffn_type", "mlp"), "swiglu"),
		PosGrid:   r.u32Or("pos_embed_grid", 37, 1, maxPosGrid),
		InterpOff: r.f32Or("interpolate_offset", 0.1, 0, 1),
		RoPEFreq:  r.f32Or("rope_freq", 100, 1e-3, 1e9),
		CatToken:  r.boolOr("cat_token", false),
		LNEps:     r.f32Or("ln_eps", 1e-6, 1e-12, 0.1),
		QKNormEps: 1e-5,
	}
	depth := v.Depth
	if len(r.errs) > 0 {
		depth = maxDepth // bound the block indices loosely: the depth is already reported
	}
	v.AltStart = r.i32Or("alt_start", -1, -1, depth)
	v.RoPEStart = r.i32Or("rope_start", -1, -1, depth)
	v.QKNormStart = r.i32Or("qknorm_start", -1, -1, depth)
	v.OutLayers = r.ints("out_layers", 4, 0, depth-1)
	top := &kvReader{kv: kv, prefix: kvPrefix}
	// DINOv2's patch size where the file does not say; everything else (the
	// patch embedding, preprocessing, the heads' output size) takes it from here.
	v.PatchSize = top.u32Or("patch_size", 14, 2, 64)
	// The final norm's eps: torch's nn.LayerNorm default 1e-5 in DA3, 1e-6 in
	// DA2. (The C++ engine uses ln_eps, 1e-6, for both; the PyTorch code wins.)
	v.FinalEps = 1e-5
	if arch == DA2 {
		v.FinalEps = 1e-6
	}
	if arch != DA3 {
		v.AltStart, v.RoPEStart, v.QKNormStart, v.CatToken = -1, -1, -1, false
	}
	if errs := append(r.errs, top.errs...); len(errs) > 0 {
		return vit.Config{}, fmt.Errorf("reading model metadata: %w", errList(errs))
	}
	if err := v.Validate(); err != nil {
		return vit.Config{}, err
	}
	return completeViT(f, v, vitPrefix)
}

// completeViT is v with what the file implies: the position embedding's
// grid from its tensor's rows, and DINOv2's MLP width where none is given.
func completeViT(f *loader.File, v vit.Config, vitPrefix string) (vit.Config, error) {
	if pe, ok := f.Tensor(vitPrefix + "pos_embed"); ok && len(pe.Shape) >= 2 {
		rows := pe.Shape[1]
		m := uint64(0)
		for m <= maxPosGrid && m*m < rows-1 {
			m++
		}
		if rows < 2 || m*m+1 != rows {
			return vit.Config{}, fmt.Errorf("%spos_embed has %d rows, not M²+1 with M ≤ %d", vitPrefix, rows, maxPosGrid)
		}
		v.PosGrid = int(m)
	}
	if v.MLPHidden == 0 {
		v.MLPHidden = 4 * v.EmbedDim // DINOv2's mlp_ratio 4
		if v.SwiGLU {
			// SwiGLUFFNFused: 2/3 of 4C rounded up to a multiple of 8.
			v.MLPHidden = (4*v.EmbedDim*2/3 + 7) / 8 * 8
		}
	}
	return v, nil
}

// headConfig reads the head's configuration (and the camera encoder's and
// Gaussian head's of DA3 any-view files) through hr, which records the
// problems.
func (c *Config) headConfig(f *loader.File, hr *kvReader) {
	h := dpt.Config{
		Patch:    c.ViT.PatchSize,
		Features: hr.u32("features", 2, maxFeatures),
		NormEps:  1e-5,
	}
	oc := hr.ints("out_channels", 4, 1, maxFeatures)
	copy(h.OutChannels[:], oc)
	switch c.Arch {
	case DA2:
		h.Kind = dpt.DA2
		h.MaxDepth = hr.f32Or("max_depth", 0, 0, 1e6)
		c.Metric = h.MaxDepth > 0
	case DA3:
		h.Kind = dpt.DualDPT
		h.PosEmbed = hr.boolOr("pos_embed", true)
		h.Aux = hr.boolOr("has_aux", false)
		c.HasCamera = true
		if !c.NestedMetric {
			c.CamEnc = camEncConfig(f, f.KV(), hr)
			c.GS, c.GSAdapter = gsConfig(f.KV(), hr)
			if c.GS != nil {
				c.GS.Patch = c.ViT.PatchSize
			}
		}
	case DA3Mono:
		h.Kind = dpt.Mono
		c.Metric = strings.Contains(strings.ToLower(c.Name), "metric")
	}
	c.Head = h
}

// camEncConfig reads the camera encoder's metadata (depthanything3.cam_enc.*,
// written by da3-go's converter); nil when the file has none. Problems are
// recorded in r.
func camEncConfig(f *loader.File, kv *loader.KV, r *kvReader) *camera.EncoderConfig {
	cr := &kvReader{kv: kv, prefix: kvPrefix + "cam_enc."}
	if !cr.has("embed_dim") {
		return nil
	}
	e := &camera.EncoderConfig{
		Dim:    cr.u32("embed_dim", 1, maxEmbedDim),
		Depth:  cr.u32("depth", 1, maxDepth),
		Heads:  cr.u32("num_heads", 1, maxHeads),
		Hidden: cr.u32("mlp_hidden", 1, maxMLPHidden),
		Eps:    cr.f32Or("ln_eps", schema.CamEncEps, 1e-12, 1),
	}
	e.PoseHidden = e.Dim / 2 // CameraEnc's pose_branch width
	if ti, ok := f.Tensor("cam_enc.pose_fc1.weight"); ok && len(ti.Shape) == 2 && ti.Shape[1] >= 1 && ti.Shape[1] <= maxEmbedDim {
		e.PoseHidden = int(ti.Shape[1])
	}
	if e.Heads > 0 && e.Dim%e.Heads != 0 {
		cr.fail("num_heads", "%d does not divide the width %d", e.Heads, e.Dim)
	}
	r.errs = append(r.errs, cr.errs...)
	return e
}

// gsConfig reads the Gaussian head's metadata (depthanything3.gs.*, DA3-GIANT
// files); nil when the file has none. Problems are recorded in r.
func gsConfig(kv *loader.KV, r *kvReader) (*dpt.Config, gs.Config) {
	gr := &kvReader{kv: kv, prefix: kvPrefix + "gs."}
	if !gr.has("features") {
		return nil, gs.Config{}
	}
	h := &dpt.Config{Kind: dpt.GS, Features: gr.u32("features", 2, maxFeatures), PosEmbed: true}
	copy(h.OutChannels[:], gr.ints("out_channels", 4, 1, maxFeatures))
	a := gs.Config{
		SHDegree:    gr.u32Or("sh_degree", 2, 0, 8),
		ScaleMin:    float64(gr.f32Or("scale_min", 1e-5, 0, 1e6)),
		ScaleMax:    float64(gr.f32Or("scale_max", 30, 0, 1e6)),
		OffsetDepth: gr.boolOr("pred_offset_depth", true),
		OffsetXY:    gr.boolOr("pred_offset_xy", true),
	}
	h.OutputDim = gr.u32Or("output_dim", a.Channels(), 1, 1024)
	if gr.boolOr("pred_color", false) {
		gr.fail("pred_color", "Gaussian heads that predict colours instead of SH coefficients are not supported")
	}
	if h.OutputDim != a.Channels() {
		gr.fail("output_dim", "%d channels, but the adapter settings need %d", h.OutputDim, a.Channels())
	}
	r.errs = append(r.errs, gr.errs...)
	return h, a
}
