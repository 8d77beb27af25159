// Package quantize converts Depth Anything GGUF files to smaller tensor
// types: a pure policy (Plan) decides each tensor's type, and Run streams the
// file tensor by tensor, dequantizing and requantizing rows in parallel.
//
// # Policy
//
// Only the 2-D weight matrices of the transformer blocks and of the camera
// decoder take the requested type (the first blocks a more accurate one,
// see below):
//
//	{vit,m_vit}.blk.N.{attn_qkv,attn_proj,mlp_fc1,mlp_fc2,mlp_w12,mlp_w3}.weight
//	cam.{bb0,bb2,fc_t,fc_q,fc_fov}.weight
//
// Norms, biases, LayerScale, position embeddings and tokens stay f32 (the
// position embedding is interpolated on the host). Convolution kernels (4-D
// weights under head., m_head., gs. and the patch embedding) stay f32, or
// become f16 with Options.Conv = f16; transposed-convolution kernels
// (resize.0, resize.1) always stay f32.
//
// # Block fallback and the accuracy ladder
//
// A block-quantized type needs the row width (ne0) to be a multiple of its
// block: 256 for the k-quants, 32 for q4_0…q8_0. ViT-S has width 384, so
// its qkv, proj and fc1 matrices cannot hold a k-quant. The C++ engine then
// silently used q8_0; Plan instead picks the nearest type on this ladder,
// ordered from least to most accurate, that is at least as accurate as the
// requested type and whose block fits the row, and says so in the decision:
//
//	q4_0 < q4_K < q4_1 < q5_0 < q5_K < q5_1 < q6_K < q8_0 < bf16 < f16 < f32
//
// The order is the relative RMS error of the round trip through ggml's
// quantizers as Run calls them (with a uniform importance matrix, which
// makes ggml search each block's scale instead of rounding with its max),
// on Gaussian, Laplacian, uniform and outlier-laden weights, as measured
// by TestLadderOrder. On N(0, 0.02²) rows: q4_0 8.2 %, q4_K 7.1 %, q4_1
// 7.0 %, q5_0 4.0 %, q5_K 3.5 %, q5_1 3.4 %, q6_K 1.7 %, q8_0 0.53 %. A 32-block
// type with a min (q4_1, q5_1) beats the k-quant of the same bit width by a
// little, at 0.5 more bits per weight. So a width-384 matrix gets q4_1 for
// q4_K, q5_1 for q5_K and q8_0 for q6_K. bf16 is never a fallback: f16 has
// the same size and three more mantissa bits, and weights are far from its
// range limit.
//
// # The first blocks
//
// An error made in an early block passes through every later one, so the
// blocks are not equally sensitive. Quantizing one block at a time
// (weights rounded through the type and back, depth correlation with f32
// on the oracle image) gives, for DA3-SMALL (12 blocks, seeded random
// weights), 1 − corr at q4_1 of 2.2e-3 for block 0, 0.6–0.7e-3 for blocks
// 1–3, 0.3–0.5e-3 for blocks 4–8 and 0.02–0.2e-3 for blocks 9–11 (5.5e-3
// for all twelve); on the da3-tiny fixture (8 blocks) blocks 0 and 1 alone
// cost 60 % of the q8_0 error. So by default the matrices of the first
// quarter of the blocks of each backbone (EarlyBlocks: 3 of 12, 6 of 24,
// 10 of 40) get q8_0 when a type below q8_0 is requested, and f16 when q8_0
// is requested (llama.cpp's _M mixes do the same for the first layers).
// The plan lists them as their own group; Options.Pure (-pure) turns this
// off and gives every matrix the requested type.
package quantize

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
)

// ErrUnknownType is returned (wrapped, naming the type and listing the
// known ones) for a type that cannot be requested.
var ErrUnknownType = errors.New("unknown quantization type")

// ladder lists the types that can be requested, from least to most accurate
// (see the package comment).
var ladder = []ggml.Type{
	ggml.TypeQ4_0, ggml.TypeQ4K, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5K, ggml.TypeQ5_1,
	ggml.TypeQ6K, ggml.TypeQ8_0, ggml.TypeBF16, ggml.TypeF16, ggml.TypeF32,
}

// rank returns t's position on the ladder, or -1.
func rank(t ggml.Type) int { return slices.Index(ladder, t) }

// Types returns the types that can be requested, most accurate first.
func Types() []ggml.Type {
	out := slices.Clone(ladder)
	slices.Reverse(out)
	return out
}

func knownTypes() string {
	var names []string
	for _, t := range Types() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

// ParseType returns the requestable type named s, case-insensitively
// ("q4_k", "Q8_0", "f16"). Other names return an error wrapping
// ErrUnknownType that lists the known types.
func ParseType(s string) (ggml.Type, error) {
	t, ok := ggml.ParseType(s)
	if !ok || rank(t) < 0 {
		return 0, fmt.Errorf("%w %q: known types are %s", ErrUnknownType, s, knownTypes())
	}
	return t, nil
}

// Decision is the policy's verdict for one tensor.
type Decision struct {
	Name     string
	Shape    []uint64 // ggml ne order
	From, To ggml.Type
	// Reason says why To was chosen, in words fit for the dry-run plan.
	Reason string
	// Group names the tensors that share a role, for the plan summary
	// ("vit.blk.*.attn_qkv.weight", "head conv kernels").
	Group string
	// Matrix is set for the weight matrices that take the requested type.
	Matrix bool
	// Fallback is set for a matrix whose row width does not fit the
	// requested type's block, so that another type was chosen.
	Fallback bool
	// Raised is set for a matrix of one of the first blocks, which gets a
	// more accurate type than requested (see the package comment).
	Raised bool
}

var (
	blockMatrix = regexp.MustCompile(`^(vit|m_vit)\.blk\.([0-9]+)\.(attn_qkv|attn_proj|mlp_fc1|mlp_fc2|mlp_w12|mlp_w3)\.weight$`)
	camMatrix   = regexp.MustCompile(`^cam\.(bb0|bb2|fc_t|fc_q|fc_fov)\.weight$`)
	convTrans   = regexp.MustCompile(`^(head|m_head|gs)\.resize\.[01]\.weight$`)
	patchEmbed  = regexp.MustCompile(`^(vit|m_vit)\.patch_embed\.weight$`)
	posEmbed    = regexp.MustCompile(`^(vit|m_vit)\.pos_embed$`)
	token       = regexp.MustCompile(`^(vit|m_vit)\.[a-z_]+_tokens?$`)
	blockIndex  = regexp.MustCompile(`\.blk\.[0-9]+\.`)
)

// Plan decides the type of every tensor when quantizing to req with
// opts.Conv (f32 or f16) for convolution kernels and opts.Pure; the rest
// of opts is ignored. It is a pure function of the tensor names, shapes and types.
//
// It fails for a req that is not one of Types (wrapping ErrUnknownType), a
// conv type other than f32 or f16, a tensor of an unknown type, and a
// tensor list without any weight matrix (not a Depth Anything file).
func Plan(tensors []loader.TensorInfo, req ggml.Type, opts Options) ([]Decision, error) {
	if rank(req) < 0 {
		return nil, fmt.Errorf("%w %q: known types are %s", ErrUnknownType, req, knownTypes())
	}
	conv := opts.Conv
	if conv != ggml.TypeF32 && conv != ggml.TypeF16 {
		return nil, fmt.Errorf("convolution kernels can be f32 or f16, not %s", conv)
	}
	depth := depths(tensors)
	early := map[string]int{} // backbone prefix → number of early blocks
	if !opts.Pure {
		for prefix, n := range depth {
			early[prefix] = EarlyBlocks(n)
		}
	}
	out := make([]Decision, 0, len(tensors))
	matrices := 0
	for _, ti := range tensors {
		from := ggml.Type(ti.Type)
		if !from.Valid() {
			return nil, fmt.Errorf("tensor %q: unknown type %s", ti.Name, ti.Type)
		}
		d := decide(ti.Name, ti.Shape, from, req, conv)
		if m := blockMatrix.FindStringSubmatch(ti.Name); m != nil && d.Matrix {
			if blk, _ := strconv.Atoi(m[2]); blk < early[m[1]] && raise(req) != req {
				blocks := "0"
				if early[m[1]] > 1 {
					blocks = fmt.Sprintf("0-%d", early[m[1]]-1)
				}
				d = decide(ti.Name, ti.Shape, from, raise(req), conv)
				d.Raised = true
				d.Group = fmt.Sprintf("%s.blk.%s.%s.weight", m[1], blocks, m[3])
				d.Reason = fmt.Sprintf("matrix of an early block (blocks %s of %d), where errors grow the most: %s instead of %s",
					blocks, depth[m[1]], d.To, req)
			}
		}
		if d.Matrix {
			matrices++
		}
		out = append(out, d)
	}
	if matrices == 0 {
		return nil, errors.New("no weight matrix to quantize (vit.blk.N.*, m_vit.blk.N.*, cam.*): not a Depth Anything model file")
	}
	return out, nil
}

// EarlyBlocks returns how many of the first blocks of a backbone of depth
// blocks get a more accurate type than requested: a quarter, rounded up.
func EarlyBlocks(depth int) int { return (depth + 3) / 4 }

// raise returns the type of the early blocks' matrices for a request: q8_0
// for every type below it, f16 for q8_0, the request itself above.
func raise(req ggml.Type) ggml.Type {
	switch {
	case rank(req) < rank(ggml.TypeQ8_0):
		return ggml.TypeQ8_0
	case req == ggml.TypeQ8_0:
		return ggml.TypeF16
	}
	return req
}

// depths returns the number of blocks of each backbone (vit, m_vit): one
// more than the largest block index of its weight matrices.
func depths(tensors []loader.TensorInfo) map[string]int {
	out := map[string]int{}
	for _, ti := range tensors {
		if m := blockMatrix.FindStringSubmatch(ti.Name); m != nil {
			if blk, err := strconv.Atoi(m[2]); err == nil && blk+1 > out[m[1]] {
				out[m[1]] = blk + 1
			}
		}
	}
	return out
}

// convertible reports whether t holds floating-point values that ggml can
// dequantize.
func convertible(t ggml.Type) bool {
	return t == ggml.TypeF32 || t == ggml.TypeF16 || t == ggml.TypeBF16 || t.IsQuantized()
}

func decide(name string, shape []uint64, from, req, conv ggml.Type) Decision {
	d := Decision{Name: name, Shape: slices.Clone(shape), From: from, To: ggml.TypeF32}
	top, _, _ := strings.Cut(name, ".")
	switch {
	case !convertible(from):
		d.To, d.Group, d.Reason = from, top+" non-float tensors", "not a floating-point tensor: copied"
	case blockMatrix.MatchString(name), camMatrix.MatchString(name):
		d.Group = blockIndex.ReplaceAllString(name, ".blk.*.")
		if top == "cam" {
			d.Group = "cam.*.weight"
		}
		if len(shape) != 2 {
			d.Reason = fmt.Sprintf("named like a weight matrix but has %d dimensions: kept f32", len(shape))
			return d
		}
		d.Matrix = true
		d.To, d.Fallback = fit(req, shape[0])
		if d.Fallback {
			d.Reason = fmt.Sprintf("matrix: rows of %d do not fit the %s block of %d; %s is the nearest type at least as accurate that fits",
				shape[0], req, req.BlockSize(), d.To)
		} else {
			d.Reason = fmt.Sprintf("matrix: %s as requested", req)
		}
	case posEmbed.MatchString(name):
		d.Group, d.Reason = name, "position embedding, interpolated on the host: kept f32"
	case token.MatchString(name):
		d.Group, d.Reason = top+" tokens", "token: kept f32"
	case len(shape) == 4 && convTrans.MatchString(name):
		d.Group, d.Reason = top+" transposed-conv kernels", "transposed-convolution kernel: kept f32"
	case len(shape) == 4 && strings.HasSuffix(name, ".weight") &&
		(top == "head" || top == "m_head" || top == "gs" || patchEmbed.MatchString(name)):
		d.Group = top + " conv kernels"
		d.To = conv
		if conv == ggml.TypeF16 {
			d.Reason = "convolution kernel: f16 as requested"
		} else {
			d.Reason = "convolution kernel: kept f32 (f16 on request)"
		}
	case len(shape) <= 1 || isVector(shape):
		d.Group, d.Reason = top+" norms, biases, LayerScale", "vector (norm, bias, LayerScale): kept f32"
	default:
		d.Group, d.Reason = top+" other", "not a weight matrix: kept f32"
	}
	return d
}

// isVector reports a shape with at most one dimension above 1.
func isVector(shape []uint64) bool {
	n := 0
	for _, s := range shape {
		if s > 1 {
			n++
		}
	}
	return n <= 1
}

// fit returns req when its block divides ne0, else the first type above req
// on the ladder (skipping bf16) whose block does; f32 always fits.
func fit(req ggml.Type, ne0 uint64) (ggml.Type, bool) {
	if ne0%uint64(req.BlockSize()) == 0 {
		return req, false
	}
	for _, t := range ladder[rank(req)+1:] {
		if t != ggml.TypeBF16 && ne0%uint64(t.BlockSize()) == 0 {
			return t, true
		}
	}
	return ggml.TypeF32, true // unreachable: f32 has block 1
}
