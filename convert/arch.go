package convert

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/loader"
)

// tensorSpec is one tensor of the GGUF schema: its name and PyTorch shape
// (the GGUF ne is the reverse).
type tensorSpec struct {
	name  string
	shape []int64
}

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

// vitHP are the backbone hyper-parameters (the vit.* KVs).
type vitHP struct {
	C, Depth, Heads, Hidden, Patch, Rows, Grid int
	SwiGLU                                     bool
	AltStart, RopeStart, QKNormStart           int
	CatToken                                   bool
	InitValues, RopeFreq, InterpOffset, LNEps  float32
	OutLayers                                  []int
}

func (h vitHP) headDim() int {
	if h.Heads == 0 {
		return 0
	}
	return h.C / h.Heads
}

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
func deriveViT(sh shapeMap, h vitHints, table map[int]stdViT, defInit float32) (vitHP, error) {
	v := vitHP{
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
		return v, fmt.Errorf("cannot infer the number of heads for embed dim %d (not a multiple of 64): set Heads", v.C)
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
			return v, fmt.Errorf("cannot infer out_layers for embed dim %d with %d blocks (not a standard configuration): set OutLayers", v.C, v.Depth)
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

// Standard out_layers by embed dim (MODEL-SPEC §1.2).
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

// specs returns the backbone tensors in named_parameters order.
func (v vitHP) specs(p string) []tensorSpec {
	C, H := int64(v.C), int64(v.Hidden)
	var s []tensorSpec
	add := func(name string, shape ...int64) { s = append(s, tensorSpec{p + "." + name, shape}) }
	add("cls_token", 1, 1, C)
	if v.CatToken {
		add("camera_token", 1, 2, C)
	}
	add("pos_embed", 1, int64(v.Rows), C)
	add("patch_embed.weight", C, 3, int64(v.Patch), int64(v.Patch))
	add("patch_embed.bias", C)
	hd := int64(v.headDim())
	for i := range v.Depth {
		b := "blk." + strconv.Itoa(i) + "."
		add(b+"norm1.weight", C)
		add(b+"norm1.bias", C)
		add(b+"attn_qkv.weight", 3*C, C)
		add(b+"attn_qkv.bias", 3*C)
		if v.QKNormStart >= 0 && i >= v.QKNormStart {
			add(b+"attn_qnorm.weight", hd)
			add(b+"attn_qnorm.bias", hd)
			add(b+"attn_knorm.weight", hd)
			add(b+"attn_knorm.bias", hd)
		}
		add(b+"attn_proj.weight", C, C)
		add(b+"attn_proj.bias", C)
		add(b+"ls1", C)
		add(b+"norm2.weight", C)
		add(b+"norm2.bias", C)
		if v.SwiGLU {
			add(b+"mlp_w12.weight", 2*H, C)
			add(b+"mlp_w12.bias", 2*H)
			add(b+"mlp_w3.weight", C, H)
			add(b+"mlp_w3.bias", C)
		} else {
			add(b+"mlp_fc1.weight", H, C)
			add(b+"mlp_fc1.bias", H)
			add(b+"mlp_fc2.weight", C, H)
			add(b+"mlp_fc2.bias", C)
		}
		add(b+"ls2", C)
	}
	add("norm.weight", C)
	add("norm.bias", C)
	return s
}

// kvs returns the 19 backbone KVs under key prefix p
// ("depthanything3.vit" or "depthanything3.m_vit").
func (v vitHP) kvs(p string) []loader.KeyValue {
	ffn := "mlp"
	if v.SwiGLU {
		ffn = "swiglu"
	}
	out := make([]int32, len(v.OutLayers))
	for i, l := range v.OutLayers {
		out[i] = int32(l)
	}
	return []loader.KeyValue{
		{Key: p + ".embed_dim", Value: loader.Uint32Value(uint32(v.C))},
		{Key: p + ".depth", Value: loader.Uint32Value(uint32(v.Depth))},
		{Key: p + ".num_heads", Value: loader.Uint32Value(uint32(v.Heads))},
		{Key: p + ".head_dim", Value: loader.Uint32Value(uint32(v.headDim()))},
		{Key: p + ".mlp_hidden", Value: loader.Uint32Value(uint32(v.Hidden))},
		{Key: p + ".ffn_type", Value: loader.StringValue(ffn)},
		{Key: p + ".num_register_tokens", Value: loader.Uint32Value(0)},
		{Key: p + ".init_values", Value: loader.Float32Value(v.InitValues)},
		{Key: p + ".alt_start", Value: loader.Int32Value(int32(v.AltStart))},
		{Key: p + ".rope_start", Value: loader.Int32Value(int32(v.RopeStart))},
		{Key: p + ".qknorm_start", Value: loader.Int32Value(int32(v.QKNormStart))},
		{Key: p + ".rope_freq", Value: loader.Float32Value(v.RopeFreq)},
		{Key: p + ".cat_token", Value: loader.BoolValue(v.CatToken)},
		{Key: p + ".qkv_bias", Value: loader.BoolValue(true)},
		{Key: p + ".ln_eps", Value: loader.Float32Value(v.LNEps)},
		{Key: p + ".interpolate_offset", Value: loader.Float32Value(v.InterpOffset)},
		{Key: p + ".interpolate_antialias", Value: loader.BoolValue(false)},
		{Key: p + ".pos_embed_grid", Value: loader.Uint32Value(uint32(v.Grid))},
		{Key: p + ".out_layers", Value: loader.Int32sValue(out)},
	}
}

// headKind is the variant of a DPT head.
type headKind int

const (
	headDA2     headKind = iota + 1 // DA2 DPT: no LN, no UV, refinenet4 keeps its unused resConfUnit1
	headDualDPT                     // DA3 any-view: LN on tokens, UV, optional aux ray head
	headMono                        // DA3 mono/metric DPT: sky head
	headGS                          // DA3-GIANT GSDPT: UV, images_merger
)

// headHP are the DPT head hyper-parameters.
type headHP struct {
	Kind   headKind
	D      int    // token width entering the head (C, or 2C with the camera token)
	F      int    // features
	OC     [4]int // out_channels
	F2     int    // output_conv1 width (features/2)
	HF2    int    // output_conv2 hidden width (32)
	OutDim int
	Aux    bool
	AuxOut int    // aux output channels (6 ray + 1 confidence)
	Merger [3]int // GSDPT images_merger widths
}

// deriveHead reads the free head widths from the tensors under prefix p
// ("head" or "gs"); D is fixed by the backbone.
func deriveHead(sh shapeMap, p string, kind headKind, d int, aux bool) headHP {
	h := headHP{
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

// specs returns the head tensors in named_parameters order.
func (h headHP) specs(p string) []tensorSpec {
	D, F, F2, HF2 := int64(h.D), int64(h.F), int64(h.F2), int64(h.HF2)
	var s []tensorSpec
	add := func(name string, shape ...int64) { s = append(s, tensorSpec{p + "." + name, shape}) }
	conv := func(name string, oc, ic, k int64) {
		add(name+".weight", oc, ic, k, k)
		add(name+".bias", oc)
	}
	if h.Kind == headDualDPT {
		add("norm.weight", D)
		add("norm.bias", D)
	}
	oc := [4]int64{int64(h.OC[0]), int64(h.OC[1]), int64(h.OC[2]), int64(h.OC[3])}
	for i := range 4 {
		conv("proj."+strconv.Itoa(i), oc[i], D, 1)
	}
	// ConvTranspose2d weights are (in, out, k, k); both equal oc here.
	conv("resize.0", oc[0], oc[0], 4)
	conv("resize.1", oc[1], oc[1], 2)
	conv("resize.3", oc[3], oc[3], 3)
	for i := range 4 {
		add(fmt.Sprintf("scratch.layer%d_rn.weight", i+1), F, oc[i], 3, 3)
	}
	fusion := func(suffix string) {
		for k := 1; k <= 4; k++ {
			rn := fmt.Sprintf("scratch.rn%d%s", k, suffix)
			for u := 1; u <= 2; u++ {
				if u == 1 && k == 4 && h.Kind != headDA2 {
					continue // refinenet4 has no resConfUnit1 outside DA2
				}
				for c := 1; c <= 2; c++ {
					conv(fmt.Sprintf("%s.rc%d.c%d", rn, u, c), F, F, 3)
				}
			}
			conv(rn+".out", F, F, 1)
		}
	}
	fusion("")
	conv("scratch.out1", F2, F, 3)
	conv("scratch.out2a", HF2, F2, 3)
	conv("scratch.out2b", int64(h.OutDim), HF2, 1)
	if h.Kind == headMono {
		conv("scratch.sky_out2a", HF2, F2, 3)
		conv("scratch.sky_out2b", 1, HF2, 1)
	}
	if h.Aux {
		fusion("_aux")
		for i, io := range [][2]int64{{F2, F}, {F, F2}, {F2, F}, {F, F2}, {F2, F}} {
			conv("scratch.out1_aux."+strconv.Itoa(i), io[0], io[1], 3)
		}
		conv("scratch.out2a_aux", HF2, F2, 3)
		add("scratch.out2_aux_ln.weight", HF2)
		add("scratch.out2_aux_ln.bias", HF2)
		conv("scratch.out2b_aux", int64(h.AuxOut), HF2, 1)
	}
	if h.Kind == headGS {
		m0, m1 := int64(h.Merger[0]), int64(h.Merger[1])
		conv("merger.0", m0, 3, 3)
		conv("merger.1", m1, m0, 3)
		conv("merger.2", F2, m1, 3) // added to output_conv1's output
	}
	return s
}

func (h headHP) outChannels() []int32 {
	return []int32{int32(h.OC[0]), int32(h.OC[1]), int32(h.OC[2]), int32(h.OC[3])}
}

// camSpecs returns the camera decoder tensors (CameraDec, width d = 2C).
func camSpecs(d int) []tensorSpec {
	D := int64(d)
	var s []tensorSpec
	lin := func(name string, out int64) {
		s = append(s, tensorSpec{"cam." + name + ".weight", []int64{out, D}}, tensorSpec{"cam." + name + ".bias", []int64{out}})
	}
	lin("bb0", D)
	lin("bb2", D)
	lin("fc_t", 3)
	lin("fc_q", 4)
	lin("fc_fov", 2)
	return s
}
