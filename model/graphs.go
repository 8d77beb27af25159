package model

import (
	"fmt"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/vit"
)

// network is the shape of a run's graphs: S views of W×H pixels on a patch
// grid, the head in chunks of chunk views, and what the run's parts add to
// the graphs (the ray and Gaussian heads, the camera encoder of given
// cameras). A run builds its graphs from it with their data; EstimateMemory
// builds them with none, to plan their memory.
type network struct {
	m       *Model
	S, W, H int
	grid    vit.Grid
	chunk   int
	ray, gs bool
	// given: the camera tokens come from given cameras, whose pose
	// encodings ([9·S]; empty when planning) poseEnc holds.
	given   bool
	poseEnc []float32
}

// network is the shape of a run of S views of W×H under opt; poseEnc holds
// the given cameras' encodings, if any.
func (m *Model) network(S, W, H int, opt RunOptions, poseEnc []float32) network {
	ps := m.cfg.ViT.PatchSize
	return network{m: m, S: S, W: W, H: H, grid: vit.Grid{PH: H / ps, PW: W / ps}, chunk: chunkSize(opt),
		ray: opt.RayPose, gs: opt.Gaussians, given: opt.Extrinsics != nil, poseEnc: poseEnc}
}

// chunkSize is the number of views per head graph (RunOptions.ChunkSize,
// default 8).
func chunkSize(opt RunOptions) int {
	if opt.ChunkSize <= 0 {
		return 8
	}
	return opt.ChunkSize
}

// fused reports whether the views fit one head chunk: backbone, camera
// decoder and heads are then one graph, and the features never leave the
// device.
func (n network) fused() bool { return n.S <= n.chunk }

// tokens is the number of tokens per view (the camera or cls token and the
// patches).
func (n network) tokens() int { return 1 + n.grid.PH*n.grid.PW }

// referenceStop is the block before which the reference view is chosen
// (alt_start−1), and whether it is: for three or more views of a model with
// a camera token, unless the cameras are given (as the package skips it
// when given camera tokens).
func (n network) referenceStop() (int, bool) {
	cfg := n.m.cfg.ViT
	if n.S >= 3 && cfg.AltStart >= 1 && n.m.vit.CameraToken != nil && !n.given {
		return cfg.AltStart - 1, true
	}
	return 0, false
}

// referenceGraph runs the views' blocks before block stop, where the
// reference view is chosen, on their pixels and outputs their tokens "x".
func (n network) referenceGraph(pixels []float32, stop int) func(b *backend.Builder) error {
	return func(b *backend.Builder) error {
		x, _ := n.m.vit.Embed(b.G, b, b.Input("pixels", pixels, n.W, n.H, 3, n.S))
		b.Tap("vit.embed", x)
		p := &vit.Pass{B: b, Grid: n.grid}
		for _, blk := range n.m.vit.Blocks[:stop] {
			x = blk.Forward(b.G, x, p)
		}
		b.Output("x", x)
		return nil
	}
}

// backboneInput is what the backbone graph starts from: the views' pixels
// (position order), embedded, or when fromTokens the tokens entering block
// from (the reference-view graph's, reordered).
type backboneInput struct {
	pixels, tokens []float32
	fromTokens     bool
	from           int
}

// backboneGraph runs the backbone and the camera decoder; fused, the heads
// too, else it outputs the features "feat.K".
func (n network) backboneGraph(in backboneInput) func(b *backend.Builder) error {
	return func(b *backend.Builder) error {
		var px *ggml.Tensor
		if !in.fromTokens || (n.fused() && n.gs) {
			px = b.Input("pixels", in.pixels, n.W, n.H, 3, n.S)
		}
		var x *ggml.Tensor
		if in.fromTokens {
			x = b.Input("tokens", in.tokens, n.m.cfg.ViT.EmbedDim, n.tokens(), n.S)
		} else {
			x, _ = n.m.vit.Embed(b.G, b, px)
			b.Tap("vit.embed", x)
		}
		f := n.m.vit.ForwardWith(b.G, b, x, n.grid, in.from, n.cameraTokens(b))
		if n.m.cam != nil {
			b.Output("pose_enc", n.m.cam.Forward(b.G, f.CamTokens[3]))
		}
		if !n.fused() {
			for k, ft := range f.Feats {
				b.Output(fmt.Sprintf("feat.%d", k), ft)
			}
			return nil
		}
		for k, ft := range f.Feats {
			b.Check(probeNames[k], ft)
		}
		n.heads(b, f.Feats, px)
		return nil
	}
}

// cameraTokens adds the camera encoder of the given cameras to the graph
// and returns their camera tokens [C, S]; nil without given cameras.
func (n network) cameraTokens(b *backend.Builder) *ggml.Tensor {
	if !n.given {
		return nil
	}
	enc := b.Input("cam_enc.pose_enc", n.poseEnc, 9, n.S)
	b.Tap("cam_enc.pose_enc", enc)
	return n.m.camEnc.Forward(b.G, b, enc)
}

// headInput is one head chunk's input: the features of its views
// ([D, Np, views] each) and their pixels (for the Gaussian head).
type headInput struct {
	feats  [4][]float32
	views  int
	pixels []float32
}

// headGraph runs the heads on one chunk of views.
func (n network) headGraph(in headInput) func(b *backend.Builder) error {
	return func(b *backend.Builder) error {
		var fs [4]*ggml.Tensor
		for k := range fs {
			fs[k] = b.Input(fmt.Sprintf("feat.%d", k), in.feats[k], n.m.cfg.ViT.FeatureDim(), n.grid.PH*n.grid.PW, in.views)
		}
		var px *ggml.Tensor
		if n.gs {
			px = b.Input("pixels", in.pixels, n.W, n.H, 3, in.views)
		}
		n.heads(b, fs, px)
		return nil
	}
}

// headOutputs are the outputs of the head graphs, one slice per view in
// position order: named once, in heads.
var headOutputs = []string{"depth", "conf", "sky", "aux", "gs"}

// heads adds the head, and the ray and Gaussian heads the run asks for, on
// the features fs of the graph's views (px: their pixels, for the Gaussian
// head) and names their outputs.
func (n network) heads(b *backend.Builder, fs [4]*ggml.Tensor, px *ggml.Tensor) {
	h := n.m.head.Forward(b.G, b, fs, n.grid.PH, n.grid.PW)
	outputMaps(b, h)
	if n.ray {
		b.Output("aux", n.m.head.Ray(b.G, b, h.Levels, n.grid.PH, n.grid.PW))
	}
	if n.gs {
		b.Output("gs", n.m.gsHead.ForwardGS(b.G, b, fs, px, n.grid.PH, n.grid.PW))
	}
}

// outputMaps names the head's maps: depth, and confidence or sky where the
// head has them.
func outputMaps(b *backend.Builder, h dpt.Outputs) {
	b.Output("depth", h.Depth)
	if h.Conf != nil {
		b.Output("conf", h.Conf)
	}
	if h.Sky != nil {
		b.Output("sky", h.Sky)
	}
}
