package convert

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/loader"
)

// shapeMap holds the PyTorch shapes of the renamed checkpoint tensors.
type shapeMap map[string][]int64

// dim returns dimension i of tensor name, or 0 when the tensor is absent or
// has fewer dimensions (the missing tensor is reported by the schema check).
func (s shapeMap) dim(name string, i int) int {
	sh, ok := s[name]
	if !ok {
		return 0
	}
	if i < 0 {
		i += len(sh)
	}
	if i < 0 || i >= len(sh) {
		return 0
	}
	return int(sh[i])
}

func (s shapeMap) has(name string) bool { _, ok := s[name]; return ok }

// vitHints are hyper-parameters known from outside the tensors (a preset,
// config.json or Options). Zero values mean unknown, except where noted.
type vitHints struct {
	depth, heads int
	outLayers    []int
	qkStart      *int // also alt_start and rope_start unless set below
	altStart     *int
	ropeStart    *int
	catToken     *bool
	swiglu       *bool
	initValues   *float32
	ropeFreq     *float32
	interpOffset *float32
}

func ptr[T any](v T) *T { return &v }

// deriveViT reads the backbone hyper-parameters from the tensor shapes and
// hints. Values that no tensor determines (heads without q/k-norm,
// out_layers, attention starts) come from the hints or the standard tables.
func deriveViT(sh shapeMap, h vitHints, table map[int]stdViT, defInit float32) (schema.ViT, error) {
	v := schema.ViT{
		C:            sh.dim("vit.cls_token", -1),
		Patch:        sh.dim("vit.patch_embed.weight", 2),
		Rows:         sh.dim("vit.pos_embed", 1),
		QKNormStart:  -1,
		AltStart:     -1,
		RopeStart:    -1,
		RopeFreq:     100,
		InterpOffset: 0.1,
		LNEps:        1e-6,
		InitValues:   defInit,
	}
	if v.C == 0 {
		v.C = sh.dim("vit.patch_embed.weight", 0)
	}
	if v.Rows > 1 {
		g := int(math.Round(math.Sqrt(float64(v.Rows - 1))))
		if g*g != v.Rows-1 {
			return v, fmt.Errorf("vit.pos_embed has %d rows, not a square grid plus the class token", v.Rows)
		}
		v.Grid = g
	}
	qdim := 0
	for name := range sh {
		rest, ok := strings.CutPrefix(name, "vit.blk.")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest[:strings.IndexByte(rest+".", '.')])
		if err != nil {
			continue
		}
		v.Depth = max(v.Depth, i+1)
		if strings.HasSuffix(name, ".attn_qnorm.weight") && (v.QKNormStart < 0 || i < v.QKNormStart) {
			v.QKNormStart = i
			qdim = sh.dim(name, 0)
		}
	}
	v.SwiGLU = sh.has("vit.blk.0.mlp_w12.weight")
	v.CatToken = sh.has("vit.camera_token")
	if h.swiglu != nil {
		v.SwiGLU = *h.swiglu
	}
	if v.SwiGLU {
		v.Hidden = sh.dim("vit.blk.0.mlp_w3.weight", 1)
	} else {
		v.Hidden = sh.dim("vit.blk.0.mlp_fc1.weight", 0)
	}
	if h.depth > 0 {
		v.Depth = h.depth
	}
	if v.Depth > schema.MaxDepth {
		return v, fmt.Errorf("%d blocks: more than %d is not a Depth Anything backbone", v.Depth, schema.MaxDepth)
	}
	if h.heads < 0 || h.heads > schema.MaxHeads {
		return v, fmt.Errorf("%d heads is outside 1..%d", h.heads, schema.MaxHeads)
	}
	if h.catToken != nil {
		v.CatToken = *h.catToken
	}
	if h.qkStart != nil {
		v.QKNormStart = *h.qkStart
	}
	v.AltStart, v.RopeStart = v.QKNormStart, v.QKNormStart
	if h.altStart != nil {
		v.AltStart = *h.altStart
	}
	if h.ropeStart != nil {
		v.RopeStart = *h.ropeStart
	}
	if h.initValues != nil {
		v.InitValues = *h.initValues
	}
	if h.ropeFreq != nil {
		v.RopeFreq = *h.ropeFreq
	}
	if h.interpOffset != nil {
		v.InterpOffset = *h.interpOffset
	}

	if v.C == 0 {
		return v, nil // no backbone tensors: reported as missing by the schema check
	}
	// Heads: an explicit value wins but must agree with the q/k-norm width.
	switch {
	case h.heads > 0:
		v.Heads = h.heads
		if qdim > 0 && v.C/h.heads != qdim {
			return v, fmt.Errorf("%d heads give a head dim of %d but the q/k-norm tensors have %d", h.heads, v.C/h.heads, qdim)
		}
	case qdim > 0:
		v.Heads = v.C / qdim
	case v.C > 0 && v.C%64 == 0:
		v.Heads = v.C / 64 // DINOv2 head dim
	case v.C > 0:
		return v, fmt.Errorf("cannot infer the number of attention heads for embed dim %d (not a multiple of 64): give the number of heads (-heads)", v.C)
	}
	if v.Heads > 0 && v.C%v.Heads != 0 {
		return v, fmt.Errorf("embed dim %d is not divisible by %d heads", v.C, v.Heads)
	}

	switch {
	case len(h.outLayers) > 0:
		v.OutLayers = slices.Clone(h.outLayers)
	default:
		std, ok := table[v.C]
		if !ok || std.depth != v.Depth {
			return v, fmt.Errorf("cannot infer the four backbone layers the head reads for embed dim %d with %d blocks (not a standard configuration): give them (-out-layers)", v.C, v.Depth)
		}
		v.OutLayers = slices.Clone(std.outLayers)
	}
	if len(v.OutLayers) != 4 {
		return v, fmt.Errorf("out_layers %v: want 4 layers", v.OutLayers)
	}
	for _, l := range v.OutLayers {
		if l < 0 || l >= v.Depth {
			return v, fmt.Errorf("out_layers %v: layer %d outside the %d blocks", v.OutLayers, l, v.Depth)
		}
	}
	return v, nil
}

// stdViT is a standard backbone configuration of one model family.
type stdViT struct {
	depth     int
	outLayers []int
}

// Standard out_layers by embed dim: the intermediate_layer_idx tables of
// Depth Anything V2's DepthAnythingV2 and depth_anything_3's model configs.
var (
	da2Std = map[int]stdViT{
		384:  {12, []int{2, 5, 8, 11}},
		768:  {12, []int{2, 5, 8, 11}},
		1024: {24, []int{4, 11, 17, 23}},
		1536: {40, []int{9, 19, 29, 39}},
	}
	da3AnyViewStd = map[int]stdViT{
		384:  {12, []int{5, 7, 9, 11}},
		768:  {12, []int{5, 7, 9, 11}},
		1024: {24, []int{11, 15, 19, 23}},
		1536: {40, []int{19, 27, 33, 39}},
	}
	da3MonoStd = map[int]stdViT{
		1024: {24, []int{4, 11, 17, 23}},
	}
)

// vitKVs returns the 19 backbone KVs under key prefix p
// ("depthanything3.vit" or "depthanything3.m_vit").
func vitKVs(v schema.ViT, p string) []loader.KeyValue {
	ffn := "mlp"
	if v.SwiGLU {
		ffn = "swiglu"
	}
	out := make([]int32, len(v.OutLayers))
	for i, l := range v.OutLayers {
		out[i] = int32(l)
	}
	return []loader.KeyValue{
		{Key: p + ".embed_dim", Value: loader.ValueOf[uint32](uint32(v.C))},
		{Key: p + ".depth", Value: loader.ValueOf[uint32](uint32(v.Depth))},
		{Key: p + ".num_heads", Value: loader.ValueOf[uint32](uint32(v.Heads))},
		{Key: p + ".head_dim", Value: loader.ValueOf[uint32](uint32(v.HeadDim()))},
		{Key: p + ".mlp_hidden", Value: loader.ValueOf[uint32](uint32(v.Hidden))},
		{Key: p + ".ffn_type", Value: loader.ValueOf[string](ffn)},
		{Key: p + ".num_register_tokens", Value: loader.ValueOf[uint32](0)},
		{Key: p + ".init_values", Value: loader.ValueOf[float32](v.InitValues)},
		{Key: p + ".alt_start", Value: loader.ValueOf[int32](int32(v.AltStart))},
		{Key: p + ".rope_start", Value: loader.ValueOf[int32](int32(v.RopeStart))},
		{Key: p + ".qknorm_start", Value: loader.ValueOf[int32](int32(v.QKNormStart))},
		{Key: p + ".rope_freq", Value: loader.ValueOf[float32](v.RopeFreq)},
		{Key: p + ".cat_token", Value: loader.ValueOf[bool](v.CatToken)},
		{Key: p + ".qkv_bias", Value: loader.ValueOf[bool](true)},
		{Key: p + ".ln_eps", Value: loader.ValueOf[float32](v.LNEps)},
		{Key: p + ".interpolate_offset", Value: loader.ValueOf[float32](v.InterpOffset)},
		{Key: p + ".interpolate_antialias", Value: loader.ValueOf[bool](false)},
		{Key: p + ".pos_embed_grid", Value: loader.ValueOf[uint32](uint32(v.Grid))},
		{Key: p + ".out_layers", Value: loader.ArrayOf[int32](out)},
	}
}

// deriveHead reads the free head widths from the tensors under prefix p
// ("head" or "gs"); D is fixed by the backbone.
func deriveHead(sh shapeMap, p string, kind schema.HeadKind, d int, aux bool) schema.Head {
	h := schema.Head{
		Kind:   kind,
		D:      d,
		F:      sh.dim(p+".scratch.layer1_rn.weight", 0),
		F2:     sh.dim(p+".scratch.out1.weight", 0),
		HF2:    sh.dim(p+".scratch.out2a.weight", 0),
		OutDim: sh.dim(p+".scratch.out2b.weight", 0),
		Aux:    aux,
	}
	for i := range h.OC {
		h.OC[i] = sh.dim(p+".proj."+strconv.Itoa(i)+".weight", 0)
	}
	if aux {
		h.AuxOut = sh.dim(p+".scratch.out2b_aux.weight", 0)
	}
	for i := range h.Merger {
		h.Merger[i] = sh.dim(p+".merger."+strconv.Itoa(i)+".weight", 0)
	}
	return h
}

// outChannels is the head.out_channels KV value.
func outChannels(h schema.Head) []int32 {
	return []int32{int32(h.OC[0]), int32(h.OC[1]), int32(h.OC[2]), int32(h.OC[3])}
}

// deriveCamEnc reads the camera encoder from the tensor shapes; heads is
// the configured head count (16 in every published model). ok is false
// when the checkpoint has no camera encoder.
func deriveCamEnc(sh shapeMap, heads int) (schema.CamEnc, bool, error) {
	c := schema.CamEnc{
		D:          sh.dim("cam_enc.token_norm.weight", 0),
		Hidden:     sh.dim("cam_enc.blk.0.mlp_fc1.weight", 0),
		PoseHidden: sh.dim("cam_enc.pose_fc1.weight", 0),
		Heads:      heads,
	}
	found := false
	for name := range sh {
		rest, ok := strings.CutPrefix(name, "cam_enc.")
		if !ok {
			continue
		}
		found = true
		if b, ok := strings.CutPrefix(rest, "blk."); ok {
			if i, err := strconv.Atoi(b[:strings.IndexByte(b+".", '.')]); err == nil && i < schema.MaxDepth {
				c.Depth = max(c.Depth, i+1)
			}
		}
	}
	if !found {
		return c, false, nil
	}
	if c.Heads <= 0 {
		c.Heads = schema.CamEncHeads
	}
	if c.D > 0 && c.D%c.Heads != 0 {
		return c, true, fmt.Errorf("camera encoder width %d is not divisible by %d heads", c.D, c.Heads)
	}
	return c, true, nil
}

// camEncKVs are the camera encoder's keys (prefix depthanything3.cam_enc).
func camEncKVs(c schema.CamEnc) []loader.KeyValue {
	p := archKey + ".cam_enc"
	return []loader.KeyValue{
		{Key: p + ".embed_dim", Value: loader.ValueOf[uint32](uint32(c.D))},
		{Key: p + ".depth", Value: loader.ValueOf[uint32](uint32(c.Depth))},
		{Key: p + ".num_heads", Value: loader.ValueOf[uint32](uint32(c.Heads))},
		{Key: p + ".mlp_hidden", Value: loader.ValueOf[uint32](uint32(c.Hidden))},
		{Key: p + ".ln_eps", Value: loader.ValueOf[float32](schema.CamEncEps)},
	}
}
