// Package convert turns official Depth Anything checkpoints into GGUF files
// in the schema of the C++ engine depth-anything.cpp (internal/schema), in
// pure Go: no cgo, no Python.
//
// Inputs: the original Depth Anything V2 .pth state dicts, transformers'
// DepthAnythingForDepthEstimation checkpoints (Depth Anything V2 "-hf"
// repositories), and the Depth Anything 3 Hugging Face repositories
// (model.safetensors + config.json: any-view, mono/metric and nested).
//
// Output: the KVs, KV types, tensor names and shapes the C++ converters
// write (GGUF ne = reversed PyTorch shape). Differences, all deliberate:
//   - transformers' separate query/key/value linears are fused into
//     attn_qkv (rows in q, k, v order), as in the original checkpoints;
//   - cam.dim_in holds the real decoder width 2C (the C++ converter always
//     writes 1536); readers must not rely on either value;
//   - Type F16 stores every weight of two or more dimensions named
//     "*.weight" as F16: matrix-multiplication weights and convolution
//     kernels (patch embedding, head convolutions and transposed
//     convolutions). Norm weights, biases, LayerScale, cls/camera tokens and
//     pos_embed stay F32. (The C++ quantizer converts only the backbone and
//     camera matmul weights.)
//
// Conversion streams one tensor at a time, so memory stays bounded by the
// largest tensor, and the output appears atomically.
package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/loader"
)

// Options controls Convert. The zero value converts to F32 with every
// hyper-parameter inferred.
type Options struct {
	// Type is the storage type of weights with two or more dimensions:
	// loader.TypeF32 (default) or loader.TypeF16.
	Type loader.Type
	// Name is written as general.name and depthanything3.checkpoint_name;
	// default: the checkpoint's directory or file name.
	Name string
	// Heads overrides the number of attention heads (default: from the q/k
	// norm width, config.json, or embed_dim/64).
	Heads int
	// OutLayers overrides the four backbone layers fed to the head (default:
	// config.json, else the standard table of the reference configs by width).
	OutLayers []int
	// MaxDepth > 0 marks a Depth Anything V2 metric model (sigmoid output
	// scaled by MaxDepth metres: 20 Hypersim indoor, 80 VKITTI outdoor).
	MaxDepth float32
	// WithAux keeps the auxiliary ray head of DA3 any-view models.
	WithAux bool
	// Progress, when set, is called after each tensor with the bytes of
	// tensor data written so far and the total.
	Progress func(done, total int64)
}

// MissingTensorsError lists tensors the architecture requires that the
// checkpoint lacks (GGUF names), sorted.
type MissingTensorsError struct{ Names []string }

func (e *MissingTensorsError) Error() string {
	return fmt.Sprintf("checkpoint lacks %d required tensor(s): %s", len(e.Names), strings.Join(e.Names, ", "))
}

// UnknownTensorsError lists checkpoint tensors that have no place in the
// GGUF schema (no rename rule, or a renamed name outside the architecture),
// by checkpoint name, sorted.
type UnknownTensorsError struct{ Names []string }

func (e *UnknownTensorsError) Error() string {
	return fmt.Sprintf("checkpoint has %d tensor(s) with no GGUF counterpart: %s", len(e.Names), strings.Join(e.Names, ", "))
}

// ShapeError lists tensors whose shapes do not fit the architecture.
type ShapeError struct{ Mismatches []string }

func (e *ShapeError) Error() string {
	return fmt.Sprintf("%d tensor shape(s) do not fit the architecture: %s", len(e.Mismatches), strings.Join(e.Mismatches, "; "))
}

const (
	archKey   = schema.Arch
	alignment = 32
)

// Convert converts the checkpoint src (see OpenCheckpoint) to the GGUF file
// dst. A nested DA3 checkpoint produces two files, dst with "-anyview" and
// "-metric" inserted before the .gguf extension. dst appears atomically; on
// error or cancellation no partial file is left.
func Convert(ctx context.Context, src, dst string, opts Options) error {
	if opts.Type != loader.TypeF32 && opts.Type != loader.TypeF16 {
		return fmt.Errorf("convert: output type %v is not supported (f32 or f16; quantize afterwards)", opts.Type)
	}
	c, err := OpenCheckpoint(src)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer c.Close()
	name := opts.Name
	if name == "" {
		name = defaultName(src)
	}
	outs, err := plan(c, name, opts)
	if err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	for _, o := range outs {
		o.kv = append(o.kv, provenanceKVs(src, c, o)...)
	}
	var total, done int64
	for _, o := range outs {
		for _, t := range o.tensors {
			total += t.bytes()
		}
	}
	var written []string
	for _, o := range outs {
		path := dst
		if o.suffix != "" {
			path = suffixed(dst, o.suffix)
		}
		wts := make([]loader.WriterTensor, len(o.tensors))
		for i, t := range o.tensors {
			wts[i] = loader.WriterTensor{
				Name:  t.name,
				Type:  t.typ,
				Shape: t.ne(),
				Data: &tensorWriter{ctx: ctx, t: t, after: func(n int64) {
					done += n
					if opts.Progress != nil {
						opts.Progress(done, total)
					}
				}},
			}
		}
		if err := loader.WriteFile(path, o.kv, wts, alignment); err != nil {
			for _, p := range written { // all outputs or none
				_ = os.Remove(p)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("convert %s: %w", src, err)
		}
		written = append(written, path)
	}
	return nil
}

// OutputPaths returns the files Convert writes for a checkpoint of family f
// and destination dst: dst itself, or for FamilyDA3Nested dst with
// "-anyview" and "-metric" inserted before the .gguf extension.
func OutputPaths(f Family, dst string) []string {
	if f == FamilyDA3Nested {
		return []string{suffixed(dst, "-anyview"), suffixed(dst, "-metric")}
	}
	return []string{dst}
}

func suffixed(dst, suffix string) string {
	return strings.TrimSuffix(dst, ".gguf") + suffix + ".gguf"
}

// output is one GGUF file to write.
type output struct {
	suffix  string
	kv      []loader.KeyValue
	tensors []*outTensor
	// kind and size name the official checkpoint the layout matches, for
	// its licence (size "" when the backbone width is not an official one).
	kind licence.Kind
	size string
}

// outTensor is one GGUF tensor and the checkpoint tensors it is made of.
type outTensor struct {
	name  string
	shape []int64 // PyTorch order
	typ   loader.Type
	keys  []string  // checkpoint names, one per part
	parts []*Tensor // concatenated along the outermost dimension
}

func (t *outTensor) ne() []uint64 {
	ne := make([]uint64, len(t.shape))
	for i, d := range t.shape {
		ne[len(t.shape)-1-i] = uint64(d)
	}
	return ne
}

func (t *outTensor) bytes() int64 {
	n, _ := numElements(t.shape)
	if t.typ == loader.TypeF16 {
		return 2 * n
	}
	return 4 * n
}

// tensorWriter streams one tensor: each part is read, converted and written
// in chunks, so at most one part is held in memory.
type tensorWriter struct {
	ctx   context.Context
	t     *outTensor
	after func(n int64)
}

func (w *tensorWriter) WriteTo(dst io.Writer) (int64, error) {
	var written int64
	const chunk = 1 << 16
	buf := make([]byte, 4*chunk)
	for _, p := range w.t.parts {
		if err := w.ctx.Err(); err != nil {
			return written, err
		}
		vals, err := p.Float32s()
		if err != nil {
			return written, err
		}
		for len(vals) > 0 {
			n := min(len(vals), chunk)
			var b []byte
			if w.t.typ == loader.TypeF16 {
				b = buf[:2*n]
				for i, v := range vals[:n] {
					binary.LittleEndian.PutUint16(b[2*i:], f32ToF16(v))
				}
			} else {
				b = buf[:4*n]
				for i, v := range vals[:n] {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
				}
			}
			m, err := dst.Write(b)
			written += int64(m)
			if err != nil {
				return written, err
			}
			vals = vals[n:]
		}
	}
	w.after(written)
	return written, nil
}

// storageType is the GGUF type of a tensor under opts (see the package doc).
func storageType(name string, shape []int64, t loader.Type) loader.Type {
	if t == loader.TypeF16 && len(shape) >= 2 && strings.HasSuffix(name, ".weight") {
		return loader.TypeF16
	}
	return loader.TypeF32
}

// collected holds the renamed tensors of one output.
type collected struct {
	byName map[string]*outTensor
	order  []string
}

// aliasNames may be produced by several checkpoint tensors that are one
// tied parameter (the aux head's shared LayerNorm); the first wins.
func isAlias(name string) bool { return strings.Contains(name, ".scratch.out2_aux_ln.") }

// router maps a checkpoint name to an output index and a target.
type router func(key string) (out int, t target, ok bool)

// collect routes every checkpoint tensor. Unknown names are returned, not
// failed, so that all of them can be reported at once.
func collect(c *Checkpoint, nOut int, route router) ([]collected, []string, error) {
	cols := make([]collected, nOut)
	for i := range cols {
		cols[i].byName = map[string]*outTensor{}
	}
	var unknown []string
	for _, key := range c.names {
		out, t, ok := route(key)
		if !ok {
			unknown = append(unknown, key)
			continue
		}
		if t.drop {
			continue
		}
		col := &cols[out]
		ot, seen := col.byName[t.name]
		if !seen {
			ot = &outTensor{name: t.name}
			col.byName[t.name] = ot
			col.order = append(col.order, t.name)
		}
		tensor, _ := c.Tensor(key)
		if t.part < 0 {
			if seen {
				if isAlias(t.name) {
					continue
				}
				return nil, nil, fmt.Errorf("tensors %q and %q both map to %s", ot.keys[0], key, t.name)
			}
			ot.keys, ot.parts = []string{key}, []*Tensor{tensor}
			continue
		}
		for len(ot.parts) <= t.part {
			ot.parts = append(ot.parts, nil)
			ot.keys = append(ot.keys, "")
		}
		if ot.parts[t.part] != nil {
			return nil, nil, fmt.Errorf("tensors %q and %q both map to part %d of %s", ot.keys[t.part], key, t.part, t.name)
		}
		ot.parts[t.part], ot.keys[t.part] = tensor, key
	}
	return cols, unknown, nil
}

var qkvPartNames = []string{"query", "key", "value"}

// shapes computes the PyTorch shape of every collected tensor (fused ones
// concatenated along dim 0) and reports incomplete or inconsistent fusions.
func (col *collected) shapes(fused int) (shapeMap, []string, error) {
	sh := shapeMap{}
	var missing []string
	for _, name := range col.order {
		ot := col.byName[name]
		if len(ot.parts) == 1 && fused == 0 {
			ot.shape = slices.Clone(ot.parts[0].Shape)
			sh[name] = ot.shape
			continue
		}
		complete := len(ot.parts) == fused
		for i := range fused {
			if i >= len(ot.parts) || ot.parts[i] == nil {
				missing = append(missing, fmt.Sprintf("%s (%s part)", name, qkvPartNames[i]))
				complete = false
			}
		}
		if !complete {
			continue
		}
		shape := slices.Clone(ot.parts[0].Shape)
		if len(shape) == 0 {
			return nil, nil, fmt.Errorf("%s: cannot fuse scalars", name)
		}
		for _, p := range ot.parts[1:] {
			if len(p.Shape) != len(shape) || !slices.Equal(p.Shape[1:], shape[1:]) {
				return nil, nil, fmt.Errorf("%s: parts of shapes %v and %v cannot be concatenated", name, ot.parts[0].Shape, p.Shape)
			}
			shape[0] += p.Shape[0]
		}
		ot.shape = shape
		sh[name] = shape
	}
	return sh, missing, nil
}

// finish checks the collected tensors against the schema and returns them
// in schema order, typed for opts.
func (col *collected) finish(specs []schema.Tensor, typ loader.Type) ([]*outTensor, []string, []string, []string) {
	var missing, unexpected, mismatch []string
	want := map[string]bool{}
	var out []*outTensor
	for _, s := range specs {
		want[s.Name] = true
		ot, ok := col.byName[s.Name]
		if !ok || ot.shape == nil {
			if !ok {
				missing = append(missing, s.Name)
			}
			continue
		}
		if !slices.Equal(ot.shape, s.Shape) {
			mismatch = append(mismatch, fmt.Sprintf("%s (from %s): shape %v, want %v", s.Name, strings.Join(ot.keys, "+"), ot.shape, s.Shape))
		}
		if len(ot.shape) > 4 {
			mismatch = append(mismatch, fmt.Sprintf("%s: %d dimensions (GGUF allows 4)", s.Name, len(ot.shape)))
		}
		ot.typ = storageType(ot.name, ot.shape, typ)
		out = append(out, ot)
	}
	for _, name := range col.order {
		if !want[name] {
			for _, k := range col.byName[name].keys {
				if k != "" {
					unexpected = append(unexpected, k)
				}
			}
		}
	}
	return out, missing, unexpected, mismatch
}

// plan maps the checkpoint onto the GGUF schema and builds the KVs.
func plan(c *Checkpoint, name string, opts Options) ([]*output, error) {
	fam, err := detectFamily(c)
	if err != nil {
		return nil, err
	}
	if opts.MaxDepth < 0 || math.IsNaN(float64(opts.MaxDepth)) || math.IsInf(float64(opts.MaxDepth), 0) {
		return nil, fmt.Errorf("invalid max depth %v", opts.MaxDepth)
	}
	if opts.Heads < 0 {
		return nil, fmt.Errorf("invalid number of heads %d", opts.Heads)
	}
	if opts.MaxDepth > 0 && fam != FamilyDA2 && fam != FamilyDA2HF {
		return nil, fmt.Errorf("max depth applies to Depth Anything V2 metric models, not to %v", fam)
	}
	if opts.WithAux && fam != FamilyDA3 && fam != FamilyDA3Nested {
		return nil, fmt.Errorf("the auxiliary ray head exists only in DA3 any-view models, not in %v", fam)
	}
	switch fam {
	case FamilyDA2, FamilyDA2HF:
		return planDA2(c, fam, name, opts)
	case FamilyDA3, FamilyDA3Mono:
		return planDA3(c, fam, name, opts)
	case FamilyDA3Nested:
		return planNested(c, name, opts)
	}
	return nil, fmt.Errorf("unsupported family %v", fam)
}

// report combines the schema-check results into one error (nil if clean).
// Unknown and missing tensors are reported together; shapes only when the
// names are right.
func report(unknown, missing, mismatch []string) error {
	var errs []error
	if len(unknown) > 0 {
		slices.Sort(unknown)
		errs = append(errs, &UnknownTensorsError{Names: unknown})
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		errs = append(errs, &MissingTensorsError{Names: missing})
	}
	if len(errs) == 0 && len(mismatch) > 0 {
		return &ShapeError{Mismatches: mismatch}
	}
	return errors.Join(errs...)
}

func userHints(h vitHints, opts Options) vitHints {
	if opts.Heads > 0 {
		h.heads = opts.Heads
	}
	if len(opts.OutLayers) > 0 {
		h.outLayers = slices.Clone(opts.OutLayers)
	}
	return h
}

// planDA2 handles the original and transformers Depth Anything V2 layouts.
func planDA2(c *Checkpoint, fam Family, name string, opts Options) ([]*output, error) {
	route := func(key string) (int, target, bool) {
		t, ok := renameDA2(key)
		return 0, t, ok
	}
	fused := 0
	hints := vitHints{qkStart: ptr(-1), catToken: ptr(false)}
	maxDepth := opts.MaxDepth
	if fam == FamilyDA2HF {
		route = func(key string) (int, target, bool) {
			t, ok := renameDA2HF(key)
			return 0, t, ok
		}
		fused = 3
		var err error
		hints, maxDepth, err = hfHints(c.Config, hints, maxDepth)
		if err != nil {
			return nil, err
		}
	}
	hints = userHints(hints, opts)
	cols, unknown, err := collect(c, 1, route)
	if err != nil {
		return nil, err
	}
	col := &cols[0]
	var sh shapeMap
	var missingParts []string
	if fused > 0 {
		sh, missingParts, err = col.shapesFused()
	} else {
		sh, missingParts, err = col.shapes(0)
	}
	if err != nil {
		return nil, err
	}
	vit, err := deriveViT(sh, hints, da2Std, 1.0)
	if err != nil {
		return nil, errors.Join(err, report(unknown, missingParts, nil))
	}
	head := deriveHead(sh, "head", schema.HeadDA2, vit.C, false)
	specs := append(vit.Tensors("vit"), head.Tensors("head")...)
	tensors, missing, unexpected, mismatch := col.finish(specs, opts.Type)
	if err := report(append(unknown, unexpected...), append(missing, missingParts...), mismatch); err != nil {
		return nil, err
	}

	kv := baseKVs("depthanything2", name, vit.Patch)
	kv = append(kv, vitKVs(vit, archKey+".vit")...)
	kv = append(kv, imgKVs("lower_bound", 518)...)
	act := "relu"
	if maxDepth > 0 {
		act = "sigmoid"
	}
	p := archKey + ".head"
	kv = append(kv,
		loader.KeyValue{Key: p + ".features", Value: loader.ValueOf[uint32](uint32(head.F))},
		loader.KeyValue{Key: p + ".out_channels", Value: loader.ArrayOf[int32](outChannels(head))},
		loader.KeyValue{Key: p + ".output_dim", Value: loader.ValueOf[uint32](uint32(head.OutDim))},
		loader.KeyValue{Key: p + ".pos_embed", Value: loader.ValueOf[bool](false)},
		loader.KeyValue{Key: p + ".activation", Value: loader.ValueOf[string](act)},
		loader.KeyValue{Key: p + ".norm_type", Value: loader.ValueOf[string]("idt")},
	)
	if maxDepth > 0 {
		kv = append(kv, loader.KeyValue{Key: p + ".max_depth", Value: loader.ValueOf[float32](maxDepth)})
	}
	return []*output{{kv: kv, tensors: tensors, kind: da2Kind(maxDepth), size: licence.SizeOfWidth(vit.C)}}, nil
}

// shapesFused is shapes for the transformers layout, where only attn_qkv
// tensors are fused (3 parts) and every other tensor is single.
func (col *collected) shapesFused() (shapeMap, []string, error) {
	single := &collected{byName: map[string]*outTensor{}}
	multi := &collected{byName: map[string]*outTensor{}}
	for _, n := range col.order {
		if strings.Contains(n, ".attn_qkv.") {
			multi.byName[n] = col.byName[n]
			multi.order = append(multi.order, n)
		} else {
			single.byName[n] = col.byName[n]
			single.order = append(single.order, n)
		}
	}
	sh, _, err := single.shapes(0)
	if err != nil {
		return nil, nil, err
	}
	sh2, missing, err := multi.shapes(3)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range sh2 {
		sh[k] = v
	}
	return sh, missing, nil
}

// hfHints reads transformers' DepthAnythingConfig (config.json).
func hfHints(cfg map[string]any, h vitHints, maxDepth float32) (vitHints, float32, error) {
	if cfg == nil {
		return h, maxDepth, nil
	}
	if bb, ok := cfg["backbone_config"].(map[string]any); ok {
		if v, ok := jsonInt(bb["num_attention_heads"]); ok {
			h.heads = v
		}
		if v, ok := jsonInt(bb["num_hidden_layers"]); ok {
			h.depth = v
		}
		// Backbone stage k is the output of block k-1 (stage 0 = embeddings).
		if l, ok := jsonInts(bb["out_indices"]); ok {
			for i := range l {
				if l[i] < 1 {
					return h, 0, fmt.Errorf("config.json: out_indices %v includes the embedding stage", l)
				}
				l[i]--
			}
			h.outLayers = l
		}
		if v, ok := bb["use_swiglu_ffn"].(bool); ok {
			h.swiglu = ptr(v)
		}
		if v, ok := bb["layerscale_value"].(float64); ok {
			h.initValues = ptr(float32(v))
		}
	}
	if t, _ := cfg["depth_estimation_type"].(string); t == "metric" && maxDepth == 0 {
		md, ok := cfg["max_depth"].(float64)
		if !ok || md <= 0 {
			return h, 0, errors.New("config.json: metric model without a positive max_depth")
		}
		maxDepth = float32(md)
	}
	return h, maxDepth, nil
}

// planDA3 handles the any-view and mono DA3 layouts.
func planDA3(c *Checkpoint, fam Family, name string, opts Options) ([]*output, error) {
	prefix := da3Prefix(c)
	route := func(key string) (int, target, bool) {
		t, ok := renameDA3(strings.TrimPrefix(key, prefix), opts.WithAux)
		return 0, t, ok
	}
	preset, hasPreset := da3PresetOf(c.Config)
	var hints vitHints
	if hasPreset {
		hints = preset.hints
	} else {
		hints.catToken = ptr(fam == FamilyDA3)
	}
	hints = userHints(hints, opts)
	cols, unknown, err := collect(c, 1, route)
	if err != nil {
		return nil, err
	}
	o, err := da3Output(&cols[0], fam, preset, hints, name, "", "vit", "head", opts, unknown)
	if err != nil {
		return nil, err
	}
	if model, _ := c.Config["model_name"].(string); model == "da3metric-large" {
		o.kind = licence.DA3Metric
	}
	return []*output{o}, nil
}

// da3Output checks one DA3 network (an any-view or mono model, or one
// branch of the nested model) and builds its GGUF. vitP/headP are the GGUF
// name roots ("vit"/"head", or "m_vit"/"m_head" for the nested metric file).
func da3Output(col *collected, fam Family, preset da3Preset, hints vitHints, name, suffix, vitP, headP string, opts Options, unknown []string) (*output, error) {
	gs := preset.gs
	sh, _, err := col.shapes(0)
	if err != nil {
		return nil, err
	}
	// Rename the m_vit/m_head roots to vit/head to reuse the derivations.
	if vitP != "vit" {
		plain := shapeMap{}
		for k, v := range sh {
			k = strings.Replace(strings.Replace(k, vitP+".", "vit.", 1), headP+".", "head.", 1)
			plain[k] = v
		}
		sh = plain
	}
	anyView := fam == FamilyDA3
	std := da3MonoStd
	if anyView {
		std = da3AnyViewStd
	}
	vit, err := deriveViT(sh, hints, std, 0)
	if err != nil {
		return nil, errors.Join(err, report(unknown, nil, nil))
	}
	d := vit.C
	if vit.CatToken {
		d = 2 * vit.C
	}
	kind := schema.HeadMono
	if anyView {
		kind = schema.HeadDualDPT
	}
	head := deriveHead(sh, "head", kind, d, opts.WithAux && anyView)
	if !gs && sh.has("gs.scratch.layer1_rn.weight") {
		gs = true
	}
	specs := append(vit.Tensors(vitP), head.Tensors(headP)...)
	if anyView {
		specs = append(specs, schema.Camera(d)...)
	}
	var gsHead schema.Head
	if gs {
		gsHead = deriveHead(sh, "gs", schema.HeadGS, d, false)
		specs = append(specs, gsHead.Tensors("gs")...)
	}
	camEnc, hasCamEnc, err := deriveCamEnc(sh, preset.camEncHeads)
	if err != nil {
		return nil, err
	}
	if hasCamEnc && anyView {
		specs = append(specs, camEnc.Tensors()...)
	}
	tensors, missing, unexpected, mismatch := col.finish(specs, opts.Type)
	if err := report(append(unknown, unexpected...), missing, mismatch); err != nil {
		return nil, err
	}

	metricBranch := vitP != "vit"
	kv := baseKVs("depthanything3", name, vit.Patch)
	kv = append(kv, vitKVs(vit, archKey+"."+vitP)...)
	if !metricBranch {
		kv = append(kv, imgKVs("upper_bound", 504)...)
	}
	p := archKey + "." + headP
	kv = append(kv,
		loader.KeyValue{Key: p + ".features", Value: loader.ValueOf[uint32](uint32(head.F))},
		loader.KeyValue{Key: p + ".out_channels", Value: loader.ArrayOf[int32](outChannels(head))},
		loader.KeyValue{Key: p + ".output_dim", Value: loader.ValueOf[uint32](uint32(head.OutDim))},
	)
	if !metricBranch {
		kv = append(kv, loader.KeyValue{Key: p + ".pos_embed", Value: loader.ValueOf[bool](anyView)})
	}
	kv = append(kv,
		loader.KeyValue{Key: p + ".down_ratio", Value: loader.ValueOf[uint32](1)},
		loader.KeyValue{Key: p + ".activation", Value: loader.ValueOf[string]("exp")},
		loader.KeyValue{Key: p + ".conf_activation", Value: loader.ValueOf[string]("expp1")},
	)
	if !anyView {
		kv = append(kv,
			loader.KeyValue{Key: p + ".sky_activation", Value: loader.ValueOf[string]("relu")},
			loader.KeyValue{Key: p + ".norm_type", Value: loader.ValueOf[string]("idt")},
		)
	}
	if head.Aux {
		kv = append(kv,
			loader.KeyValue{Key: p + ".has_aux", Value: loader.ValueOf[bool](true)},
			loader.KeyValue{Key: p + ".aux_ray_dim", Value: loader.ValueOf[uint32](uint32(head.AuxOut - 1))},
			loader.KeyValue{Key: p + ".aux_levels", Value: loader.ValueOf[uint32](4)},
		)
	}
	if anyView {
		// The C++ converter writes 1536 whatever the model; this is the real width.
		kv = append(kv, loader.KeyValue{Key: archKey + ".cam.dim_in", Value: loader.ValueOf[uint32](uint32(d))})
	}
	if hasCamEnc && anyView {
		kv = append(kv, camEncKVs(camEnc)...)
	}
	if gs {
		g := archKey + ".gs"
		kv = append(kv,
			loader.KeyValue{Key: g + ".output_dim", Value: loader.ValueOf[uint32](uint32(gsHead.OutDim))},
			loader.KeyValue{Key: g + ".features", Value: loader.ValueOf[uint32](uint32(gsHead.F))},
			loader.KeyValue{Key: g + ".out_channels", Value: loader.ArrayOf[int32](outChannels(gsHead))},
			loader.KeyValue{Key: g + ".sh_degree", Value: loader.ValueOf[uint32](2)},
			loader.KeyValue{Key: g + ".scale_min", Value: loader.ValueOf[float32](1e-5)},
			loader.KeyValue{Key: g + ".scale_max", Value: loader.ValueOf[float32](30)},
			loader.KeyValue{Key: g + ".pred_offset_depth", Value: loader.ValueOf[bool](true)},
			loader.KeyValue{Key: g + ".pred_offset_xy", Value: loader.ValueOf[bool](true)},
			loader.KeyValue{Key: g + ".pred_color", Value: loader.ValueOf[bool](false)},
		)
	}
	lk := licence.DA3
	if !anyView {
		lk = licence.DA3Mono // or DA3Metric: the caller knows from config.json
	}
	return &output{suffix: suffix, kv: kv, tensors: tensors, kind: lk, size: licence.SizeOfWidth(vit.C)}, nil
}

// planNested splits DA3NESTED-GIANT-LARGE into the any-view file (giant
// schema) and the metric file (m_vit.* / m_head.*), as the C++ converter
// does. With config.json's model_name "da3nested-giant-large" the branches
// use the DA3-GIANT and DA3METRIC-LARGE presets; otherwise their
// hyper-parameters are inferred, and Options.Heads/OutLayers apply to both.
func planNested(c *Checkpoint, name string, opts Options) ([]*output, error) {
	prefix := da3Prefix(c)
	route := func(key string) (int, target, bool) {
		key = strings.TrimPrefix(key, prefix)
		if rest, ok := strings.CutPrefix(key, "da3_metric."); ok {
			t, ok := renameDA3(rest, false)
			if ok && !t.drop && (strings.HasPrefix(t.name, "vit.") || strings.HasPrefix(t.name, "head.")) {
				t.name = "m_" + t.name
			}
			return 1, t, ok
		}
		if rest, ok := strings.CutPrefix(key, "da3."); ok {
			t, ok := renameDA3(rest, opts.WithAux)
			return 0, t, ok
		}
		return 0, target{}, false
	}
	cols, unknown, err := collect(c, 2, route)
	if err != nil {
		return nil, err
	}
	anyHints := vitHints{catToken: ptr(true)}
	metHints := vitHints{catToken: ptr(false), qkStart: ptr(-1)}
	gs := false
	if model, _ := c.Config["model_name"].(string); model == "da3nested-giant-large" {
		anyHints, metHints, gs = da3Presets["da3-giant"].hints, da3Presets["da3metric-large"].hints, true
	}
	// Test configurations spell out each branch's hyper-parameters under
	// "arch" (tests/oracle/da3nested_oracle.py): "anyview" and "metric".
	if arch, ok := c.Config["arch"].(map[string]any); ok {
		for key, dst := range map[string]*vitHints{"anyview": &anyHints, "metric": &metHints} {
			if sub, ok := arch[key].(map[string]any); ok {
				if p, ok := archPreset(sub); ok {
					*dst = p.hints
				}
			}
		}
	}
	anyview, err := da3Output(&cols[0], FamilyDA3, da3Preset{gs: gs}, userHints(anyHints, opts), name+"-anyview", "-anyview", "vit", "head", opts, unknown)
	if err != nil {
		return nil, fmt.Errorf("any-view branch: %w", err)
	}
	m, err := da3Output(&cols[1], FamilyDA3Mono, da3Preset{}, userHints(metHints, opts), name+"-metric", "-metric", "m_vit", "m_head", opts, nil)
	if err != nil {
		return nil, fmt.Errorf("metric branch: %w", err)
	}
	if anyview.size == "giant" && m.size == "large" { // DA3NESTED-GIANT-LARGE's layout
		anyview.kind, m.kind = licence.DA3Nested, licence.DA3Nested
	} else {
		anyview.size, m.size = "", "" // no official checkpoint of that shape
	}
	return []*output{anyview, m}, nil
}

// baseKVs are the general.* keys (as the gguf Python writer emits them)
// and the keys every file carries.
func baseKVs(arch, name string, patch int) []loader.KeyValue {
	return []loader.KeyValue{
		{Key: "general.architecture", Value: loader.ValueOf[string](archKey)},
		{Key: "general.name", Value: loader.ValueOf[string](name)},
		{Key: archKey + ".arch", Value: loader.ValueOf[string](arch)},
		{Key: archKey + ".checkpoint_name", Value: loader.ValueOf[string](name)},
		{Key: archKey + ".patch_size", Value: loader.ValueOf[uint32](uint32(patch))},
	}
}

// imgKVs are the preprocessing keys (ImageNet normalisation).
func imgKVs(mode string, target uint32) []loader.KeyValue {
	p := archKey + ".img"
	return []loader.KeyValue{
		{Key: p + ".mean", Value: loader.ArrayOf[float32]([]float32{0.485, 0.456, 0.406})},
		{Key: p + ".std", Value: loader.ArrayOf[float32]([]float32{0.229, 0.224, 0.225})},
		{Key: p + ".resize_mode", Value: loader.ValueOf[string](mode)},
		{Key: p + ".resize_target", Value: loader.ValueOf[uint32](target)},
	}
}
