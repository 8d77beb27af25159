package main

import (
	"context"
	"image"
	"log/slog"
	"os"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

// runOptions are one call's options.
type runOptions struct {
	opt         model.RunOptions
	independent bool
}

// scene is a loaded model or nested pair.
type scene interface {
	run(imgs []image.Image, o runOptions) ([]model.Result, error)
	config() model.Config
	nested() bool
	Close() error
}

// logger keeps the library quiet: warnings and errors only, on stderr.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// ggml's warnings and errors (and the backend libraries' messages) go there too.
func init() { ggml.SetLogger(logger) }

func load(path, metricPath, device string, threads int) (scene, error) {
	opts := model.Options{Device: device, Threads: threads, Logger: logger}
	if metricPath == "" {
		m, err := model.Load(context.Background(), path, opts)
		if err != nil {
			return nil, err
		}
		return single{m}, nil
	}
	n, err := nested.Load(context.Background(), path, metricPath, opts)
	if err != nil {
		return nil, err
	}
	return pair{nested.Scene{Model: n}}, nil
}

type single struct{ *model.Model }

func (s single) config() model.Config { return s.Config() }
func (s single) nested() bool         { return false }

func (s single) run(imgs []image.Image, o runOptions) ([]model.Result, error) {
	if !o.independent {
		return s.MultiView(context.Background(), imgs, o.opt)
	}
	return oneByOne(imgs, o.opt, s.Depth)
}

// oneByOne runs each image alone.
func oneByOne(imgs []image.Image, opt model.RunOptions, depth func(context.Context, model.Image, model.RunOptions) (*model.Result, error)) ([]model.Result, error) {
	out := make([]model.Result, 0, len(imgs))
	for _, im := range imgs {
		r, err := depth(context.Background(), im, opt)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

type pair struct{ nested.Scene }

func (p pair) config() model.Config { return p.AnyView().Config() }
func (p pair) nested() bool         { return true }

func (p pair) run(imgs []image.Image, o runOptions) ([]model.Result, error) {
	if !o.independent {
		return p.MultiView(context.Background(), imgs, o.opt)
	}
	return oneByOne(imgs, o.opt, p.Depth)
}

// modelInfo is da3go_info_json's document.
type modelInfo struct {
	Name       string `json:"name"`
	Arch       string `json:"arch"`
	Nested     bool   `json:"nested"`
	Metric     bool   `json:"metric"`
	Camera     bool   `json:"camera"`
	Confidence bool   `json:"confidence"`
	MultiView  bool   `json:"multi_view"`
	PatchSize  int    `json:"patch_size"`
	ProcessRes int    `json:"process_res"`
	ABI        int    `json:"abi_version"`
}

func info(s scene) modelInfo {
	c := s.config()
	return modelInfo{Name: c.Name, Arch: c.Arch.String(), Nested: s.nested(), Metric: s.nested() || c.Metric,
		Camera: c.HasCamera, Confidence: c.Arch == model.DA3, MultiView: c.Arch == model.DA3,
		PatchSize: c.ViT.PatchSize, ProcessRes: c.ResizeTarget, ABI: abiVersion}
}

// rgbImage wraps interleaved 8-bit RGB pixels (w·h·3, row-major).
func rgbImage(pix []byte, w, h int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = pix[3*i], pix[3*i+1], pix[3*i+2], 255
	}
	return img
}

// checkSize applies the decoders' image size limits to raw pixels.
func checkSize(w, h int) error { return imgproc.CheckSize(w, h) }
