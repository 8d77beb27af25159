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
	chunk := opt.ChunkSize
	if chunk <= 0 {
		chunk = 8
	}
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
	graphs, graph := 0, 0 // for Progress
	for _, idx := range groups {
		graphs += (len(idx) + chunk - 1) / chunk
	}
	for _, k := range order {
		idx := groups[k]
		for a := 0; a < len(idx); a += chunk {
			graph++
			part := idx[a:min(a+chunk, len(idx))]
			batch := make([]*preprocess.View, len(part))
			for j, i := range part {
				batch[j] = views[i]
			}
			// The estimate of the same views run as one scene bounds the batch's graph (whose
			// attention is per image, and whose head takes the whole batch, at most a chunk).
			if err := m.checkMemory(opt, len(batch), k.w, k.h, nil); err != nil {
				return nil, err
			}
			exec := func(o RunOptions) ([]Result, error) { return m.batch(ctx, batch, o, graph, graphs) }
			rs, err := exec(opt)
			if err != nil {
				return nil, err
			}
			if rs, err = checkOutputs(rs, exec, opt); err != nil {
				return nil, err
			}
			for j, i := range part {
				out[i] = rs[j]
				if !opt.ProcessedSize {
					out[i].ToOriginalSize()
				}
			}
		}
	}
	return out, nil
}

// batch runs same-size independent views as one graph (the part-th of parts): backbone (global
// blocks per image), head and camera decoder.
func (m *Model) batch(ctx context.Context, views []*preprocess.View, opt RunOptions, part, parts int) ([]Result, error) {
	B := len(views)
	W, H := views[0].Width, views[0].Height
	out, err := m.graph(ctx, backend.RunOptions{MaxNodes: m.nodeBudget(B)}, opt, "batch", part, parts, func(b *backend.Builder) error {
		g := b.G
		px := b.Input("pixels", stackPixels(views), W, H, 3, B)
		x, grid := m.vit.Embed(g, b, px)
		f := m.vit.ForwardIndependent(g, b, x, grid)
		for k, ft := range f.Feats {
			b.Check(probeNames[k], ft)
		}
		hout := m.head.Forward(g, b, f.Feats, grid.PH, grid.PW)
		b.Output("depth", hout.Depth)
		if hout.Conf != nil {
			b.Output("conf", hout.Conf)
		}
		if hout.Sky != nil {
			b.Output("sky", hout.Sky)
		}
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
		res[i] = m.result(out, v, i, B, opt)
		res[i].probe = probe
	}
	return res, nil
}
