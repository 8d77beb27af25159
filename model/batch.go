package model

import (
	"context"
	"errors"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/preprocess"
)

// Independent runs each image as a scene of its own, as Depth would one by
// one, but computes the images that preprocess to the same size together:
// one graph over a batch of up to opt.ChunkSize images (default 8), whose
// attention stays within each image (no cross-view attention) and where each
// image is its own reference view. Results are in input order. Runs that
// need per-image extras (ray poses, Gaussians, given cameras, taps) and
// the nested model go one image at a time.
func (m *Model) Independent(ctx context.Context, imgs []Image, opt RunOptions) ([]Result, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.runs.Done()
	if len(imgs) == 0 {
		return nil, invalid(errors.New("no images"))
	}
	if err := m.checkIntrinsics(opt.Intrinsics); err != nil {
		return nil, err
	}
	if opt.RayPose || opt.Gaussians || opt.Extrinsics != nil || opt.ViewIntrinsics != nil || opt.Taps != nil || m.cfg.NestedMetric {
		out := make([]Result, len(imgs))
		for i, im := range imgs {
			r, err := m.multiView(ctx, []Image{im}, opt)
			if err != nil {
				return nil, err
			}
			out[i] = r[0]
		}
		return out, nil
	}
	// Preprocess one by one (no cropping to a common size), then batch by size.
	views := make([]*preprocess.View, len(imgs))
	for i, im := range imgs {
		v, err := m.preprocess(ctx, []Image{im}, opt)
		if err != nil {
			return nil, err
		}
		views[i] = v[0]
	}
	return m.batches(ctx, views, opt)
}

// ForwardIndependent is Forward for px.Views independent images (a batch,
// not the views of one scene), computed as Independent computes them.
func (m *Model) ForwardIndependent(ctx context.Context, px Pixels, opt RunOptions) ([]Result, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.runs.Done()
	pixels, w, h, n := px.Data, px.Width, px.Height, px.Views
	if err := m.checkPixels(px, "images"); err != nil {
		return nil, err
	}
	if m.cfg.NestedMetric {
		return nil, errors.New("forward: the nested model's halves run through package nested")
	}
	vs := make([]*preprocess.View, n)
	per := 3 * w * h
	for i := range vs {
		vs[i] = &preprocess.View{Pixels: pixels[i*per : (i+1)*per], Width: w, Height: h, OrigWidth: w, OrigHeight: h, ScaleX: 1, ScaleY: 1}
	}
	opt.ProcessedSize = true
	return m.batches(ctx, vs, opt)
}

// batches runs the views in batches of equal size, up to opt.ChunkSize
// (default 8) a batch; results in the views' order.
func (m *Model) batches(ctx context.Context, views []*preprocess.View, opt RunOptions) ([]Result, error) {
	out := make([]Result, len(views))
	batches := sameSizeBatches(views, chunkSize(opt))
	for n, idx := range batches {
		batch := make([]*preprocess.View, len(idx))
		for j, i := range idx {
			batch[j] = views[i]
		}
		rs, err := m.checkedBatch(ctx, batch, opt, n+1, len(batches))
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = rs[j]
			if !opt.ProcessedSize {
				out[i].ToOriginalSize()
			}
		}
	}
	return out, nil
}

// sameSizeBatches are the indices of the views grouped by size (the sizes in
// the order they first appear), in batches of at most chunk.
func sameSizeBatches(views []*preprocess.View, chunk int) [][]int {
	type size struct{ w, h int }
	groups := map[size][]int{}
	var order []size
	for i, v := range views {
		k := size{v.Width, v.Height}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var batches [][]int
	for _, k := range order {
		idx := groups[k]
		for a := 0; a < len(idx); a += chunk {
			batches = append(batches, idx[a:min(a+chunk, len(idx))])
		}
	}
	return batches
}

// checkedBatch is batch (the part-th of parts) after its memory check, with
// its outputs checked for NaN and Inf.
func (m *Model) checkedBatch(ctx context.Context, views []*preprocess.View, opt RunOptions, part, parts int) ([]Result, error) {
	// The estimate of the same views run as one scene bounds the batch's graph (whose
	// attention is per image, and whose head takes the whole batch, at most a chunk).
	if err := m.checkMemory(opt, len(views), views[0].Width, views[0].Height, nil); err != nil {
		return nil, err
	}
	exec := func(o RunOptions) ([]Result, error) { return m.batch(ctx, views, o, part, parts) }
	rs, err := exec(opt)
	if err != nil {
		return nil, err
	}
	return checkOutputs(rs, exec, opt)
}

// batch runs same-size independent views as one graph (the part-th of parts): backbone (global
// blocks per image), head and camera decoder.
func (m *Model) batch(ctx context.Context, views []*preprocess.View, opt RunOptions, part, parts int) ([]Result, error) {
	B := len(views)
	W, H := views[0].Width, views[0].Height
	out, err := m.graph(ctx, backend.RunOptions{MaxNodes: m.nodeBudget(B)}, opt, Progress{Stage: "batch", Part: part, Parts: parts}, func(b *backend.Builder) error {
		g := b.G
		px := b.Input("pixels", stackPixels(views), W, H, 3, B)
		x, grid := m.vit.Embed(g, b, px)
		f := m.vit.ForwardIndependent(g, b, x, grid)
		for k, ft := range f.Feats {
			b.Check(probeNames[k], ft)
		}
		outputMaps(b, m.head.Forward(g, b, f.Feats, grid.PH, grid.PW))
		if m.cam != nil {
			b.Output("pose_enc", m.cam.Forward(g, f.CamTokens[3]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	probe := firstProbe(out)
	res := make([]Result, B)
	for i, v := range views {
		res[i] = m.result(out, v, i, opt)
		res[i].probe = probe
	}
	return res, nil
}
