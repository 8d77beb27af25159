// Package schema is the GGUF tensor schema of the Depth Anything networks:
// every tensor's name, shape and role, derived from the hyper-parameters
// alone. The converter writes files in this schema; the model loader checks
// every tensor of a file against it before anything is uploaded.
//
// Shapes are PyTorch shapes (GGUF ne is the reverse): Linear (out, in),
// Conv2d (OC, IC, KH, KW), ConvTranspose2d (IC, OC, KH, KW), cls_token
// (1, 1, C), pos_embed (1, rows, C).
package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/loader"
)

// Arch is the general.architecture of every Depth Anything GGUF, and the
// prefix of its metadata keys ("depthanything3.vit.embed_dim", …).
const Arch = "depthanything3"

// Class is a tensor's role; it decides the storage types the tensor may have.
type Class int

const (
	// Vector: norm weights and biases, biases, LayerScale.
	Vector Class = iota
	// Token: the cls and camera tokens.
	Token
	// PosEmbed: the position embedding table (interpolated on the host).
	PosEmbed
	// Matrix: the 2-D weights of matrix products (transformer blocks,
	// camera decoder), the tensors the quantizer converts.
	Matrix
	// Conv: convolution kernels, the patch embedding included.
	Conv
	// ConvTranspose: transposed-convolution kernels.
	ConvTranspose
)

func (c Class) String() string {
	switch c {
	case Vector:
		return "vector"
	case Token:
		return "token"
	case PosEmbed:
		return "position embedding"
	case Matrix:
		return "matrix"
	case Conv:
		return "convolution kernel"
	case ConvTranspose:
		return "transposed-convolution kernel"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// MatrixTypes are the storage types of Matrix tensors: the float types and
// the quantizations the quantizer writes (and the C++ engine publishes).
var MatrixTypes = []loader.Type{
	loader.TypeF32, loader.TypeF16, loader.TypeBF16,
	loader.TypeQ8_0, loader.TypeQ6K, loader.TypeQ5_1, loader.TypeQ5K, loader.TypeQ5_0,
	loader.TypeQ4_1, loader.TypeQ4K, loader.TypeQ4_0,
}

// Types lists the storage types a tensor of class c may have. Kernels may
// be F16 (convert -type f16, quantize -conv f16); everything read as a
// vector stays F32.
func (c Class) Types() []loader.Type {
	switch c {
	case Matrix:
		return MatrixTypes
	case Conv, ConvTranspose:
		return []loader.Type{loader.TypeF32, loader.TypeF16}
	}
	return []loader.Type{loader.TypeF32}
}

// Allows reports whether a tensor of class c may be stored as t.
func (c Class) Allows(t loader.Type) bool { return slices.Contains(c.Types(), t) }

// Tensor is one tensor of the schema.
type Tensor struct {
	Name  string
	Shape []int64 // PyTorch order
	Class Class
}

// NE is the tensor's GGUF shape (ne order: the reversed PyTorch shape).
func (t Tensor) NE() []uint64 {
	ne := make([]uint64, len(t.Shape))
	for i, d := range t.Shape {
		ne[len(t.Shape)-1-i] = uint64(d)
	}
	return ne
}

// Sane bounds of the hyper-parameters: generous around the published
// models (ViT-G: width 1536, 40 blocks, 24 heads, MLP 6144; head widths up
// to 1024), tight enough that nothing sized from them can exhaust memory
// before the tensors are checked.
const (
	MaxEmbedDim  = 8192
	MaxDepth     = 256
	MaxHeads     = 256
	MaxMLPHidden = 65536
	MaxPosGrid   = 1024
	MaxFeatures  = 8192
)

// ViT are the backbone hyper-parameters (the vit.* KVs).
type ViT struct {
	C, Depth, Heads, Hidden, Patch, Rows, Grid int
	SwiGLU                                     bool
	AltStart, RopeStart, QKNormStart           int
	CatToken                                   bool
	InitValues, RopeFreq, InterpOffset, LNEps  float32
	OutLayers                                  []int
}

// HeadDim is the width of one attention head (0 without heads).
func (v ViT) HeadDim() int {
	if v.Heads == 0 {
		return 0
	}
	return v.C / v.Heads
}

// Tensors returns the backbone tensors under root p ("vit" or "m_vit") in
// named_parameters order.
func (v ViT) Tensors(p string) []Tensor {
	C, H := int64(v.C), int64(v.Hidden)
	var s []Tensor
	add := func(class Class, name string, shape ...int64) {
		s = append(s, Tensor{p + "." + name, shape, class})
	}
	add(Token, "cls_token", 1, 1, C)
	if v.CatToken {
		add(Token, "camera_token", 1, 2, C)
	}
	add(PosEmbed, "pos_embed", 1, int64(v.Rows), C)
	add(Conv, "patch_embed.weight", C, 3, int64(v.Patch), int64(v.Patch))
	add(Vector, "patch_embed.bias", C)
	for i := range v.Depth {
		qk := v.QKNormStart >= 0 && i >= v.QKNormStart
		s = append(s, blockTensors(p+".blk."+strconv.Itoa(i)+".", C, H, int64(v.HeadDim()), qk, v.SwiGLU)...)
	}
	add(Vector, "norm.weight", C)
	add(Vector, "norm.bias", C)
	return s
}

// blockTensors are the tensors of a pre-norm transformer block under prefix
// b (width C, FFN hidden H, head dim hd), in named_parameters order.
func blockTensors(b string, C, H, hd int64, qkNorm, swiglu bool) []Tensor {
	var s []Tensor
	add := func(class Class, name string, shape ...int64) {
		s = append(s, Tensor{b + name, shape, class})
	}
	add(Vector, "norm1.weight", C)
	add(Vector, "norm1.bias", C)
	add(Matrix, "attn_qkv.weight", 3*C, C)
	add(Vector, "attn_qkv.bias", 3*C)
	if qkNorm {
		add(Vector, "attn_qnorm.weight", hd)
		add(Vector, "attn_qnorm.bias", hd)
		add(Vector, "attn_knorm.weight", hd)
		add(Vector, "attn_knorm.bias", hd)
	}
	add(Matrix, "attn_proj.weight", C, C)
	add(Vector, "attn_proj.bias", C)
	add(Vector, "ls1", C)
	add(Vector, "norm2.weight", C)
	add(Vector, "norm2.bias", C)
	if swiglu {
		add(Matrix, "mlp_w12.weight", 2*H, C)
		add(Vector, "mlp_w12.bias", 2*H)
		add(Matrix, "mlp_w3.weight", C, H)
		add(Vector, "mlp_w3.bias", C)
	} else {
		add(Matrix, "mlp_fc1.weight", H, C)
		add(Vector, "mlp_fc1.bias", H)
		add(Matrix, "mlp_fc2.weight", C, H)
		add(Vector, "mlp_fc2.bias", C)
	}
	add(Vector, "ls2", C)
	return s
}

// HeadKind is the variant of a DPT head.
type HeadKind int

const (
	// HeadDA2 is the DA2 DPT head: no token norm, no UV embedding;
	// refinenet4 keeps its unused resConfUnit1.
	HeadDA2 HeadKind = iota + 1
	// HeadDualDPT is the DA3 any-view head: LayerNorm on the tokens, UV
	// embedding, optional auxiliary ray head.
	HeadDualDPT
	// HeadMono is the DA3 mono/metric DPT head with its sky output.
	HeadMono
	// HeadGS is DA3-GIANT's Gaussian head (GSDPT) with the images merger.
	HeadGS
)

// Head are the DPT head hyper-parameters.
type Head struct {
	Kind   HeadKind
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

// HeadHidden is the output_conv2 hidden width of every Depth Anything head
// (head_features_2 in depth_anything_3's DPT heads, head_hidden_size in
// transformers' DepthAnythingDepthEstimationHead).
const HeadHidden = 32

// Tensors returns the head tensors under root p ("head", "m_head" or "gs")
// in named_parameters order.
func (h Head) Tensors(p string) []Tensor {
	D, F, F2, HF2 := int64(h.D), int64(h.F), int64(h.F2), int64(h.HF2)
	var s []Tensor
	add := func(class Class, name string, shape ...int64) {
		s = append(s, Tensor{p + "." + name, shape, class})
	}
	conv := func(name string, oc, ic, k int64) {
		add(Conv, name+".weight", oc, ic, k, k)
		add(Vector, name+".bias", oc)
	}
	if h.Kind == HeadDualDPT {
		add(Vector, "norm.weight", D)
		add(Vector, "norm.bias", D)
	}
	oc := [4]int64{int64(h.OC[0]), int64(h.OC[1]), int64(h.OC[2]), int64(h.OC[3])}
	for i := range 4 {
		conv("proj."+strconv.Itoa(i), oc[i], D, 1)
	}
	// ConvTranspose2d weights are (in, out, k, k); both equal oc here.
	add(ConvTranspose, "resize.0.weight", oc[0], oc[0], 4, 4)
	add(Vector, "resize.0.bias", oc[0])
	add(ConvTranspose, "resize.1.weight", oc[1], oc[1], 2, 2)
	add(Vector, "resize.1.bias", oc[1])
	conv("resize.3", oc[3], oc[3], 3)
	for i := range 4 {
		add(Conv, fmt.Sprintf("scratch.layer%d_rn.weight", i+1), F, oc[i], 3, 3)
	}
	fusion := func(suffix string) {
		for k := 1; k <= 4; k++ {
			rn := fmt.Sprintf("scratch.rn%d%s", k, suffix)
			for u := 1; u <= 2; u++ {
				if u == 1 && k == 4 && h.Kind != HeadDA2 {
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
	if h.Kind == HeadMono {
		conv("scratch.sky_out2a", HF2, F2, 3)
		conv("scratch.sky_out2b", 1, HF2, 1)
	}
	if h.Aux {
		fusion("_aux")
		for i, io := range [][2]int64{{F2, F}, {F, F2}, {F2, F}, {F, F2}, {F2, F}} {
			conv("scratch.out1_aux."+strconv.Itoa(i), io[0], io[1], 3)
		}
		conv("scratch.out2a_aux", HF2, F2, 3)
		add(Vector, "scratch.out2_aux_ln.weight", HF2)
		add(Vector, "scratch.out2_aux_ln.bias", HF2)
		conv("scratch.out2b_aux", int64(h.AuxOut), HF2, 1)
	}
	if h.Kind == HeadGS {
		m0, m1 := int64(h.Merger[0]), int64(h.Merger[1])
		conv("merger.0", m0, 3, 3)
		conv("merger.1", m1, m0, 3)
		conv("merger.2", F2, m1, 3) // added to output_conv1's output
	}
	return s
}

// Camera returns the camera decoder tensors (CameraDec of width d = 2C).
func Camera(d int) []Tensor {
	D := int64(d)
	var s []Tensor
	lin := func(name string, out int64) {
		s = append(s, Tensor{"cam." + name + ".weight", []int64{out, D}, Matrix}, Tensor{"cam." + name + ".bias", []int64{out}, Vector})
	}
	lin("bb0", D)
	lin("bb2", D)
	lin("fc_t", 3)
	lin("fc_q", 4)
	lin("fc_fov", 2)
	return s
}

// CamEnc are the hyper-parameters of DA3's camera encoder (CameraEnc, the
// pose-conditioned input): a 9 → PoseHidden → D MLP, a LayerNorm, Depth
// pre-norm transformer blocks of width D (Heads heads, MLP Hidden), a
// LayerNorm. The C++ engine has no schema for it; its blocks take the
// backbone's block names under "cam_enc.blk.".
type CamEnc struct {
	D, Depth, Heads, Hidden, PoseHidden int
}

// CamEncHeads is CameraEnc's default head count, that of every published
// model; CamEncEps the eps of all its LayerNorms (torch's default).
const (
	CamEncHeads = 16
	CamEncEps   = 1e-5
)

// Tensors returns the camera encoder tensors in named_parameters order.
func (c CamEnc) Tensors() []Tensor {
	D, H, P := int64(c.D), int64(c.Hidden), int64(c.PoseHidden)
	var s []Tensor
	add := func(class Class, name string, shape ...int64) {
		s = append(s, Tensor{"cam_enc." + name, shape, class})
	}
	for i := range c.Depth {
		s = append(s, blockTensors("cam_enc.blk."+strconv.Itoa(i)+".", D, H, 0, false, false)...)
	}
	add(Vector, "token_norm.weight", D)
	add(Vector, "token_norm.bias", D)
	add(Vector, "trunk_norm.weight", D)
	add(Vector, "trunk_norm.bias", D)
	add(Matrix, "pose_fc1.weight", P, 9)
	add(Vector, "pose_fc1.bias", P)
	add(Matrix, "pose_fc2.weight", D, P)
	add(Vector, "pose_fc2.bias", D)
	return s
}

// Error lists every tensor of a file that does not fit the schema.
type Error struct {
	Problems []string
}

// maxListed bounds the problems Error spells out.
const maxListed = 8

func (e *Error) Error() string {
	n := len(e.Problems)
	list := e.Problems
	more := ""
	if n > maxListed {
		list = list[:maxListed]
		more = fmt.Sprintf("; and %d more", n-maxListed)
	}
	s := "s"
	if n == 1 {
		s = ""
	}
	return fmt.Sprintf("%d tensor problem%s: %s%s", n, s, strings.Join(list, "; "), more)
}

// trim drops trailing dimensions of size 1 (ggml writers store
// ggml_n_dims dimensions, Python writers the full shape).
func trim(ne []uint64) []uint64 {
	for len(ne) > 1 && ne[len(ne)-1] == 1 {
		ne = ne[:len(ne)-1]
	}
	return ne
}

func typeNames(ts []loader.Type) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// Check compares the tensors of a file with the schema want: every tensor
// of want must be present with its shape (trailing dimensions of size 1
// aside) and a type its class allows, and every file tensor must be in
// want unless ignored(name). It returns nil or an *Error listing every
// problem, in schema order then file order.
func Check(have []loader.TensorInfo, want []Tensor, ignored func(name string) bool) error {
	byName := make(map[string]loader.TensorInfo, len(have))
	for _, ti := range have {
		byName[ti.Name] = ti
	}
	wanted := make(map[string]bool, len(want))
	var probs []string
	for _, w := range want {
		wanted[w.Name] = true
		ti, ok := byName[w.Name]
		if !ok {
			probs = append(probs, "missing "+w.Name)
			continue
		}
		if got, exp := trim(ti.Shape), trim(w.NE()); !slices.Equal(got, exp) {
			probs = append(probs, fmt.Sprintf("%s has shape %v, want %v", w.Name, got, exp))
		}
		if !w.Class.Allows(ti.Type) {
			probs = append(probs, fmt.Sprintf("%s is %s, but a %s must be %s", w.Name, ti.Type, w.Class, typeNames(w.Class.Types())))
		}
	}
	for _, ti := range have {
		if !wanted[ti.Name] && (ignored == nil || !ignored(ti.Name)) {
			probs = append(probs, "unexpected tensor "+ti.Name)
		}
	}
	if len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}
