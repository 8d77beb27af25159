// Package nested runs Depth Anything 3's nested model (DA3NESTED-GIANT-LARGE):
// an any-view branch (depth, confidence, cameras) and a metric branch
// (focal-normalised depth and sky) on the same input, combined into depth in
// metres, confidence, sky and cameras whose translations are in metres, as
// depth_anything_3's NestedDepthAnything3Net does.
//
// The two branches are two GGUF files: those `da3-go convert` writes for a
// nested checkpoint (NAME-anyview.gguf, NAME-metric.gguf), or the published
// pair da3-nested-anyview + da3-nested-metric.
package nested

import (
	"context"
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/model"
)

// Model is a loaded nested model. Its methods are safe for concurrent use;
// runs are serialised by the branches.
type Model struct {
	anyView, metric *model.Model
}

// Load loads the any-view branch and the metric branch (two GGUF files) on
// the device opts chooses. opts.Progress is called for each file in turn.
func Load(ctx context.Context, anyViewPath, metricPath string, opts model.Options) (*Model, error) {
	a, err := model.Load(ctx, anyViewPath, opts)
	if err != nil {
		return nil, fmt.Errorf("nested any-view branch: %w", err)
	}
	m, err := model.Load(ctx, metricPath, opts)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("nested metric branch: %w", err)
	}
	n, err := New(a, m)
	if err != nil {
		return nil, errors.Join(err, a.Close(), m.Close())
	}
	return n, nil
}

// New combines two loaded models: anyView a DA3 any-view model (with a
// camera head), metric a DA3 metric model (the nested metric file, or
// DA3METRIC-LARGE). The nested model owns them from then on: Close closes
// both.
func New(anyView, metric *model.Model) (*Model, error) {
	ac, mc := anyView.Config(), metric.Config()
	if ac.Arch != model.DA3 || !ac.HasCamera {
		return nil, fmt.Errorf("nested: any-view branch %q is a %s model; want a DA3 any-view model with a camera head (a nested pair's *-anyview.gguf, or da3-giant)", ac.Name, ac.Arch)
	}
	if mc.Arch != model.DA3Mono || !(mc.Metric || mc.NestedMetric) {
		return nil, fmt.Errorf("nested: metric branch %q is a %s model; want a nested pair's *-metric.gguf or DA3 metric-large", mc.Name, mc.Arch)
	}
	return &Model{anyView: anyView, metric: metric}, nil
}

// AnyView is the any-view branch.
func (m *Model) AnyView() *model.Model { return m.anyView }

// Metric is the metric branch.
func (m *Model) Metric() *model.Model { return m.metric }

// Close closes both branches. Idempotent.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	return errors.Join(m.anyView.Close(), m.metric.Close())
}

// Output is one nested run.
type Output struct {
	// Views are the results in input order: Depth in metres (Unit
	// model.Metres), Conf (1 on sky pixels), Sky (the metric branch's sky
	// map) and Camera with translations in metres (PoseEncoding stays the
	// any-view decoder's raw output).
	Views []model.Result
	Alignment
}

// Depth runs one image.
func (m *Model) Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error) {
	out, err := m.MultiView(ctx, []model.Image{img}, opt)
	if err != nil {
		return nil, err
	}
	return &out.Views[0], nil
}

// MultiView runs the images as views of one scene: the any-view branch sees
// all views together (shared world frame), the metric branch each view on
// its own, and one scale puts the whole scene into metres. The options are
// those of the any-view model's MultiView; Intrinsics is refused (the
// focal length comes from the any-view branch's cameras, as upstream) and
// Taps are not collected (run the branches themselves for that).
func (m *Model) MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) (*Output, error) {
	if err := checkOptions(opt); err != nil {
		return nil, err
	}
	processedSize := opt.ProcessedSize
	opt.ProcessedSize, opt.Taps = true, nil // the branches are aligned at the processed size
	res, err := m.anyView.MultiView(ctx, imgs, opt)
	if err != nil {
		return nil, err
	}
	cfg := m.anyView.Config()
	// Both branches take the same network input: the any-view branch's
	// processed (and, for several views, cropped) image.
	input := func(i int) ([]float32, error) {
		r := &res[i]
		if len(r.RGB) != 3*r.Width*r.Height {
			return nil, fmt.Errorf("nested: any-view result %d lacks its processed image", i)
		}
		return normalise(r.RGB, r.Width, r.Height, cfg.Mean, cfg.Std), nil
	}
	return m.align(ctx, res, input, processedSize, opt.Progress)
}

// Scene is a nested pair seen as one model: Config, Depth, MultiView and
// Close with model.Model's signatures, so that code written for a model
// (a command, a server, a C ABI) serves a nested pair unchanged. Aligned,
// when set, receives each run's alignment (scale, pixels used, sky depth).
type Scene struct {
	*Model
	Aligned func(Alignment)
}

// Config is the any-view branch's configuration: the pair's inputs,
// outputs and cameras are that branch's.
func (s Scene) Config() model.Config { return s.anyView.Config() }

// MultiView runs the views as one scene (Model.MultiView) and returns the
// per-view results.
func (s Scene) MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
	views, _, err := s.MetricMultiView(ctx, imgs, opt)
	return views, err
}

// MetricMultiView is MultiView with the scale that brought the views to
// metres (Alignment.Scale: metres per unit of the any-view depth), which a
// streamed run records for each window (model/stream.MetricScene).
func (s Scene) MetricMultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, float64, error) {
	out, err := s.Model.MultiView(ctx, imgs, opt)
	if err != nil {
		return nil, 0, err
	}
	if s.Aligned != nil {
		s.Aligned(out.Alignment)
	}
	return out.Views, float64(out.Scale), nil
}

// Depth runs one image.
func (s Scene) Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error) {
	rs, err := s.MultiView(ctx, []model.Image{img}, opt)
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// Independent runs each image as a scene of its own, one after another.
func (s Scene) Independent(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
	out := make([]model.Result, 0, len(imgs))
	for _, im := range imgs {
		r, err := s.Depth(ctx, im, opt)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

// Capabilities are the any-view branch's, with depth and camera
// translations in metres and the metric branch's sky.
func (s Scene) Capabilities() model.Capabilities {
	c := s.anyView.Capabilities()
	c.Unit, c.NeedsIntrinsics, c.Sky, c.Nested = model.Metres, false, true, true
	return c
}

// EstimateMemory is the pair's: both branches' estimates for the request,
// added (an upper bound: the branches run one after the other, the metric
// one a view at a time).
func (s Scene) EstimateMemory(opt model.RunOptions, views, w, h int) (model.MemoryEstimate, error) {
	e, err := s.anyView.EstimateMemory(opt, views, w, h)
	if err != nil {
		return e, err
	}
	m, err := s.metric.EstimateMemory(opt, views, w, h)
	if err != nil {
		return e, err
	}
	e.Weights += m.Weights
	e.Compute += m.Compute
	e.DeviceCompute += m.DeviceCompute
	e.Host += m.Host
	e.Scratch += m.Scratch
	return e, nil
}

// CheckMemory refuses a run that either branch could not hold.
func (s Scene) CheckMemory(opt model.RunOptions, views, w, h int) error {
	if err := s.anyView.CheckMemory(opt, views, w, h); err != nil {
		return err
	}
	return s.metric.CheckMemory(opt, views, w, h)
}

// WeightBytes are both branches' weights.
func (s Scene) WeightBytes() uint64 { return s.anyView.WeightBytes() + s.metric.WeightBytes() }

// Device is the device the branches run on.
func (s Scene) Device() string { return s.anyView.Device() }

// Forward runs already preprocessed input (see model.Model.Forward); maps
// are returned at the processed size.
func (m *Model) Forward(ctx context.Context, px model.Pixels, opt model.RunOptions) (*Output, error) {
	if err := checkOptions(opt); err != nil {
		return nil, err
	}
	opt.Taps = nil
	res, err := m.anyView.Forward(ctx, px, opt)
	if err != nil {
		return nil, err
	}
	n := 3 * px.Width * px.Height
	return m.align(ctx, res, func(i int) ([]float32, error) { return px.Data[i*n : (i+1)*n], nil }, true, opt.Progress)
}

func checkOptions(opt model.RunOptions) error {
	if opt.Intrinsics != nil {
		return fmt.Errorf("nested: %w: intrinsics are not an input of the nested model: its focal length comes from the any-view branch's predicted cameras", model.ErrInvalidInput)
	}
	return nil
}

// align runs the metric branch on each view's network input and aligns the
// any-view results res (processed size) in place.
func (m *Model) align(ctx context.Context, res []model.Result, input func(i int) ([]float32, error), processedSize bool,
	progress func(model.Progress)) (*Output, error) {
	views := make([]View, len(res))
	for i := range res {
		var mo model.RunOptions
		if progress != nil {
			mo.Progress = func(p model.Progress) {
				p.Stage, p.Part, p.Parts = "metric", i+1, len(res)
				progress(p)
			}
		}
		r := &res[i]
		if r.Camera == nil {
			return nil, fmt.Errorf("nested: any-view result %d has no camera", i)
		}
		px, err := input(i)
		if err != nil {
			return nil, err
		}
		mr, err := m.metric.Forward(ctx, model.Pixels{Data: px, Width: r.Width, Height: r.Height, Views: 1}, mo)
		if err != nil {
			return nil, fmt.Errorf("nested metric branch, view %d: %w", i, err)
		}
		k := r.Camera.Intrinsics
		views[i] = View{Depth: r.Depth, Conf: r.Conf, MetricDepth: mr[0].Depth, Sky: mr[0].Sky, Focal: (k[0][0] + k[1][1]) / 2}
	}
	al, err := Align(views)
	if err != nil {
		return nil, fmt.Errorf("nested: %w", err)
	}
	for i := range res {
		r := &res[i]
		r.Sky, r.Unit = views[i].Sky, model.Metres
		for row := 0; row < 3; row++ {
			r.Camera.Extrinsics[row][3] *= float64(al.Scale)
		}
		if !processedSize {
			r.ToOriginalSize()
		}
	}
	return &Output{Views: res, Alignment: al}, nil
}

// normalise is the network input of a processed 8-bit RGB image (HWC):
// ToTensor (u8/255) and Normalize ((x−mean)/std) in float32, CHW, as the
// model's own preprocessing computes it.
func normalise(rgb []uint8, w, h int, mean, std [3]float32) []float32 {
	n := w * h
	out := make([]float32, 3*n)
	for c := range 3 {
		plane := out[c*n : (c+1)*n]
		for i := range plane {
			plane[i] = (float32(rgb[3*i+c])/255 - mean[c]) / std[c]
		}
	}
	return out
}
