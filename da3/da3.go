// Package da3 is the one way to open a Depth Anything model: Open takes a
// Spec (a GGUF file, or the two files of the nested pair) and returns a
// Runner, which the command, the server, the C ABI and streaming all use.
// A Runner answers what it can do (Capabilities: the unit of depth,
// cameras, ray head, sky, Gaussians, whether it needs intrinsics), so
// callers never derive it from the architecture.
//
//	r, err := da3.Open(ctx, da3.Spec{Path: "da3-small.gguf"}, model.Options{})
//	if err != nil { ... }
//	defer r.Close()
//	res, err := r.Depth(ctx, img, model.RunOptions{})
package da3

import (
	"context"
	"errors"

	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

// Spec names the files of a model: Path alone, or Path (the any-view half)
// with MetricPath (the metric half) for the nested model.
type Spec struct {
	Path, MetricPath string
}

// Runner is an opened model: one network, or the nested pair seen as one.
// *model.Model and nested.Scene implement it. Its methods are safe for
// concurrent use; runs are computed one at a time.
type Runner interface {
	// Config is the network's configuration (the any-view half's for the
	// nested pair).
	Config() model.Config
	// Capabilities say what the model outputs and takes.
	Capabilities() model.Capabilities
	// Depth runs one image.
	Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error)
	// MultiView runs the images as views of one scene (one by one for
	// models without Capabilities().MultiView).
	MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error)
	// Independent runs each image as a scene of its own, in batches where
	// the model can.
	Independent(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error)
	// EstimateMemory and CheckMemory size a request of views images of
	// w×h before it runs (see model.Model.EstimateMemory).
	EstimateMemory(opt model.RunOptions, views, w, h int) (model.MemoryEstimate, error)
	CheckMemory(opt model.RunOptions, views, w, h int) error
	// WeightBytes are the weights' size; Device names the device.
	WeightBytes() uint64
	Device() string
	// Close frees the model; it waits for the runs in flight.
	Close() error
}

var (
	_ Runner = (*model.Model)(nil)
	_ Runner = nested.Scene{}
)

// Open loads the model spec names with opts. opts.Progress, when set, is
// called for each file in turn; opts.Logger, when set, also receives the
// nested pair's alignment of each run.
func Open(ctx context.Context, spec Spec, opts model.Options) (Runner, error) {
	if spec.Path == "" {
		return nil, errors.New("open model: no file given")
	}
	if spec.MetricPath == "" {
		m, err := model.Load(ctx, spec.Path, opts)
		if err != nil {
			return nil, err // not a nil *model.Model in a non-nil Runner
		}
		return m, nil
	}
	n, err := nested.Load(ctx, spec.Path, spec.MetricPath, opts)
	if err != nil {
		return nil, err
	}
	s := nested.Scene{Model: n}
	if log := opts.Logger; log != nil {
		s.Aligned = func(a nested.Alignment) {
			log.Info("nested metric alignment", "scale", a.Scale, "fit_pixels", a.Pixels, "nonsky_pixels", a.NonSky, "sky_depth_m", a.SkyDepth)
		}
	}
	return s, nil
}
