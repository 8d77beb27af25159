package server

// engine.go is the server's only contact with the model package: loading,
// capabilities and one run. Everything else works on the plain types below.

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/model"
)

// ModelSpec names one model to serve.
type ModelSpec struct {
	// Name is how requests select the model; empty means the name in the
	// file's metadata, else the file's base name.
	Name string
	// Path of the GGUF file (names of published models are resolved by the
	// caller).
	Path string
}

// ModelInfo describes a loaded model (GET /v1/models).
type ModelInfo struct {
	Name        string   `json:"id"`
	File        string   `json:"file"`
	Arch        string   `json:"arch"`
	Metric      bool     `json:"metric"`
	Camera      bool     `json:"camera"`
	Confidence  bool     `json:"confidence"`
	Sky         bool     `json:"sky"`
	MultiView   bool     `json:"multi_view"`
	WeightBytes uint64   `json:"weight_bytes"`
	Device      string   `json:"device"`
	Instances   int      `json:"instances"`
	DepthKind   string   `json:"depth_kind"` // "depth" or "disparity" (DA2 relative: larger = nearer)
	Exports     []string `json:"exports"`    // scene export names
}

// runOptions are the model options of one request.
type runOptions struct {
	processRes    int
	method        string
	refView       string
	processedSize bool
}

// camera is one view's camera: world-to-camera extrinsics (3×4, OpenCV axes)
// and intrinsics for the processed and the original image.
type camera struct {
	Extrinsics         [3][4]float64
	Intrinsics         [3][3]float64
	IntrinsicsOriginal [3][3]float64
}

// view is one view's output.
type view struct {
	Depth, Conf, Sky       []float32
	Width, Height          int // of the maps
	ProcessedW, ProcessedH int
	OrigW, OrigH           int
	Camera                 *camera
	RGB                    []uint8 // processed image, HWC
}

// instance is one loaded copy of a model; an engine holds one per
// concurrent run.
type instance struct{ m *model.Model }

func loadInstance(ctx context.Context, path, device string, threads int, log *slog.Logger) (*instance, error) {
	m, err := model.Load(ctx, path, model.Options{Device: device, Threads: threads, Logger: log})
	if err != nil {
		return nil, err
	}
	return &instance{m: m}, nil
}

func (in *instance) close() error { return in.m.Close() }

// info describes the model; name and file come from the caller.
func (in *instance) info(name, path string) ModelInfo {
	cfg := in.m.Config()
	if name == "" {
		name = cfg.Name
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	kind := "depth"
	if cfg.Arch == model.DA2 && !cfg.Metric {
		kind = "disparity"
	}
	return ModelInfo{
		Name: name, File: filepath.Base(path), Arch: cfg.Arch.String(), Metric: cfg.Metric,
		Camera: cfg.HasCamera, Confidence: cfg.Arch == model.DA3, Sky: cfg.Arch == model.DA3Mono,
		MultiView: cfg.Arch == model.DA3, WeightBytes: in.m.WeightBytes(), Device: in.m.Device(), DepthKind: kind,
	}
}

// validate checks the options that do not depend on the images.
func (o runOptions) validate() error {
	if _, err := o.modelOptions(); err != nil {
		return err
	}
	return nil
}

func (o runOptions) modelOptions() (model.RunOptions, error) {
	opt := model.RunOptions{ProcessRes: o.processRes, ProcessedSize: o.processedSize}
	if o.method != "" {
		m, err := model.ParseResizeMethod(o.method)
		if err != nil {
			return opt, err
		}
		opt.Method = m
	}
	switch rv := model.RefView(o.refView); rv {
	case "":
	case model.RefSaddleBalanced, model.RefFirst, model.RefMiddle:
		opt.RefView = rv
	default:
		return opt, fmt.Errorf("unknown ref_view %q (saddle_balanced, first, middle)", o.refView)
	}
	return opt, nil
}

// run runs the images as views of one scene (DA3 any-view models), or one by
// one when independent is set or the model takes one view at a time.
func (in *instance) run(ctx context.Context, imgs []image.Image, o runOptions, independent bool) ([]view, error) {
	opt, err := o.modelOptions()
	if err != nil {
		return nil, err
	}
	var res []model.Result
	if independent {
		for _, im := range imgs {
			r, err := in.m.Depth(ctx, im, opt)
			if err != nil {
				return nil, err
			}
			res = append(res, *r)
		}
	} else if res, err = in.m.MultiView(ctx, imgs, opt); err != nil {
		return nil, err
	}
	out := make([]view, len(res))
	for i, r := range res {
		v := view{Depth: r.Depth, Conf: r.Conf, Sky: r.Sky, Width: r.Width, Height: r.Height,
			ProcessedW: r.ProcessedWidth, ProcessedH: r.ProcessedHeight, OrigW: r.OrigWidth, OrigH: r.OrigHeight, RGB: r.RGB}
		if c := r.Camera; c != nil {
			v.Camera = &camera{Extrinsics: c.Extrinsics, Intrinsics: c.Intrinsics, IntrinsicsOriginal: c.IntrinsicsOriginal}
		}
		out[i] = v
	}
	return out, nil
}

// isInputError reports errors caused by the request's images or options
// (answered 422) rather than by the server.
func isInputError(err error) bool {
	return errors.Is(err, model.ErrNoCamera) || strings.Contains(err.Error(), "aspect ratio") ||
		strings.Contains(err.Error(), "preprocesses to")
}
