package model

import (
	"context"
	"fmt"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/internal/refview"
)

// A run is one inference of the views of a scene (or of one image): the
// preprocessed views in input order, the options, the shape of its graphs
// and the parts the options add. Its stages, in the order results runs
// them: the network (the reference view, the backbone, the heads: a pass),
// the cameras (the parts complete the results) and the outputs (the maps
// at the image size).
type run struct {
	m     *Model
	ctx   context.Context
	opt   RunOptions
	views []*preprocess.View
	net   network
	parts parts
}

// newRun prepares the run of the preprocessed views (input order; the
// images were preprocessed before) under opt.
func (m *Model) newRun(ctx context.Context, views []*preprocess.View, opt RunOptions) *run {
	p := m.newParts(views, opt)
	return &run{m: m, ctx: ctx, opt: opt, views: views, parts: p,
		net: m.network(len(views), views[0].Width, views[0].Height, opt, p.poseEnc())}
}

// results runs the stages and returns the results in input order.
func (r *run) results() ([]Result, error) {
	res, err := r.network(r.opt)
	if err != nil {
		return nil, err
	}
	if res, err = checkOutputs(res, r.network, r.opt); err != nil {
		return nil, err
	}
	if err := r.parts.finish(r.m, res, r.views); err != nil {
		return nil, err
	}
	// Last, as the reference aligns at the processed size and resizing to
	// the image size is da3-go's own step: a result asked at the processed
	// size and resized by ToOriginalSize equals one asked at the image size.
	if !r.opt.ProcessedSize {
		for i := range res {
			res[i].ToOriginalSize()
		}
	}
	return res, nil
}

// network computes the network on the views under opt (the run's, or with
// every tap when checkOutputs looks for the stage that is not finite).
func (r *run) network(opt RunOptions) ([]Result, error) {
	p := &pass{run: r, opt: opt, order: make([]int, r.net.S), taps: map[string]backend.Tensor{}}
	for i := range p.order {
		p.order[i] = i
	}
	for _, stage := range []func() error{p.referenceView, p.backbone, p.heads} {
		if err := stage(); err != nil {
			return nil, err
		}
	}
	return p.results(), nil
}

// pass is one computation of a run's network: the order of the views, and
// what its graphs hand on.
type pass struct {
	*run
	opt   RunOptions
	order []int // order[p] = the input index of the view at position p
	in    backboneInput
	out   map[string]backend.Tensor // the outputs, all views in position order
	taps  map[string]backend.Tensor
	probe string // the first finiteness probe that saw NaN or Inf
}

// graph computes one of the pass's graphs (the part-th of parts of stage).
func (p *pass) graph(stage string, part, parts int, build func(b *backend.Builder) error) (map[string]backend.Tensor, error) {
	ro := backend.RunOptions{MaxNodes: p.m.nodeBudget(p.net.S), Taps: p.opt.Taps}
	return p.m.graph(p.ctx, ro, p.opt, Progress{Stage: stage, Part: part, Parts: parts}, build)
}

// keepTaps keeps the requested taps among a graph's outputs.
func (p *pass) keepTaps(out map[string]backend.Tensor) {
	for name, t := range out {
		if p.opt.Taps != nil && p.opt.Taps(name) {
			p.taps[name] = t
		}
	}
}

// positioned is the views' pixels in position order, stacked.
func (p *pass) positioned() []float32 {
	views := make([]*preprocess.View, len(p.order))
	for pos, src := range p.order {
		views[pos] = p.views[src]
	}
	return stackPixels(views)
}

// referenceView chooses the reference view where the network does (see
// network.referenceStop): the blocks before alt_start−1 run per view in a
// graph of their own, the strategy picks a view on their output (token 0
// of each), and the views are reordered with it first; the backbone goes on
// from their tokens.
func (p *pass) referenceView() error {
	stop, ok := p.net.referenceStop()
	if !ok {
		return nil
	}
	out, err := p.graph("reference view", 1, 1, p.net.referenceGraph(stackPixels(p.views), stop))
	if err != nil {
		return err
	}
	p.keepTaps(out)
	x, C, T, S := out["x"].Data, p.m.cfg.ViT.EmbedDim, p.net.tokens(), p.net.S
	ref, err := chooseReference(p.opt.RefView, x, C, T, S)
	if err != nil {
		return err
	}
	// position 0 ← ref, positions 1..ref ← views 0..ref−1, the rest unchanged.
	p.order[0] = ref
	for pos := 1; pos <= ref; pos++ {
		p.order[pos] = pos - 1
	}
	p.in = backboneInput{tokens: reorder(x, p.order, C*T), fromTokens: true, from: stop}
	return nil
}

// chooseReference is the reference view of S views by strategy, from their
// tokens x ([C, T, S]).
func chooseReference(strategy RefView, x []float32, C, T, S int) (int, error) {
	switch strategy {
	case "", RefSaddleBalanced:
		return refview.SaddleBalanced(x, C, T, S), nil
	case RefSaddleSimRange:
		return refview.SaddleSimRange(x, C, T, S), nil
	case RefFirst:
		return 0, nil
	case RefMiddle:
		return S / 2, nil
	}
	return 0, invalid(fmt.Errorf("unknown reference view strategy %q (saddle_balanced, saddle_sim_range, first, middle)", strategy))
}

// reorder returns the views of x (per values each) in the order order.
func reorder(x []float32, order []int, per int) []float32 {
	out := make([]float32, len(x))
	for p, src := range order {
		copy(out[p*per:(p+1)*per], x[src*per:(src+1)*per])
	}
	return out
}

// backbone computes the backbone and the camera decoder over all views,
// with the heads when the views fit one chunk.
func (p *pass) backbone() error {
	stage := "network"
	if !p.net.fused() {
		stage = "backbone"
	}
	p.in.pixels = p.positioned()
	out, err := p.graph(stage, 1, 1, p.net.backboneGraph(p.in))
	if err != nil {
		return err
	}
	p.keepTaps(out)
	p.out, p.probe = out, firstProbe(out)
	return nil
}

// heads computes the heads in chunks of views from the backbone's
// features, unless the backbone's graph had them, so that memory stays
// bounded as the number of views grows.
func (p *pass) heads() error {
	if p.net.fused() {
		return nil
	}
	all := map[string]backend.Tensor{}
	if pe, ok := p.out["pose_enc"]; ok {
		all["pose_enc"] = pe
	}
	var feats [4][]float32
	for k := range feats {
		feats[k] = p.out[fmt.Sprintf("feat.%d", k)].Data
		if p.probe == "" && nonFinite(feats[k]) {
			p.probe = probeNames[k]
		}
	}
	S, chunk, pixels := p.net.S, p.net.chunk, p.positioned()
	perFeat, perPixels := len(feats[0])/S, 3*p.net.W*p.net.H
	for a := 0; a < S; a += chunk {
		e := min(a+chunk, S)
		in := headInput{views: e - a, pixels: pixels[a*perPixels : e*perPixels]}
		for k := range in.feats {
			in.feats[k] = feats[k][a*perFeat : e*perFeat]
		}
		out, err := p.graph("heads", a/chunk+1, (S+chunk-1)/chunk, p.net.headGraph(in))
		if err != nil {
			return err
		}
		if probe := firstProbe(out); p.probe == "" {
			p.probe = probe
		}
		for _, k := range headOutputs {
			if t, ok := out[k]; ok {
				all[k] = backend.Tensor{Data: append(all[k].Data, t.Data...)}
			}
		}
	}
	p.out = all
	return nil
}

// results are the views' results, in input order, from the outputs.
func (p *pass) results() []Result {
	res := make([]Result, p.net.S)
	for pos, src := range p.order {
		r := &res[src]
		*r = p.m.result(p.out, p.views[src], pos, p.opt)
		r.Position, r.probe = pos, p.probe
		p.parts.keep(r, p.out, pos, p.net.S)
	}
	if p.opt.Taps != nil {
		res[0].Taps = p.taps
	}
	return res
}
