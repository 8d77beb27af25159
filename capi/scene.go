package main

import (
	"context"
	"fmt"
	"image"
	"log/slog"
	"os"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/lensopt"
	"github.com/da3-go/da3-go/internal/progenv"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// runOptions are one call's options.
type runOptions struct {
	opt         model.RunOptions
	independent bool
	// lens undistorts the images (camera_model), nil for pinhole images.
	lens    *lens.Undistorters
	lensOpt lensopt.Options
}

// scene is a loaded model or nested pair, run as the C calls ask.
type scene struct{ da3.Runner }

// logger keeps the library quiet: warnings and errors only, on stderr.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// ggml's warnings and errors (and the backend libraries' messages) go there too.
func init() { ggml.SetLogger(logger) }

// loadOptions are da3go_load_with's options in Go.
type loadOptions struct {
	model, metricModel, device, precision, cacheDir string
	threads                                         int
	narrowConvs                                     kernels.Convs
	noDownload                                      bool
	files                                           bool // model and metricModel are files (da3go_load): no name lookup
}

// convsOf is the convolutions' precision of narrow_convs: 0 the model's
// choice, positive narrow, negative f32.
func convsOf(n int) kernels.Convs {
	switch {
	case n > 0:
		return kernels.ConvsNarrow
	case n < 0:
		return kernels.ConvsF32
	}
	return kernels.ConvsAuto
}

// loadWith opens a model. The C ABI is a program's entry, so, like the
// command, it reads the environment: DA3_DEVICE when device is empty, the
// absolute folders of DA3_BACKEND_PATH (relative ones are refused with a
// warning), the CPU kernels' variant DA3_KERNELS. Published names are found
// in the cache (downloaded there first unless o.noDownload; DA3_CACHE_DIR
// and DA3_MODEL_BASE_URL apply).
func loadWith(o loadOptions) (scene, error) {
	if err := progenv.ApplyKernels(); err != nil {
		logger.Warn("kernel variant not applied", "err", err)
	}
	if o.precision == "" {
		o.precision = "f32"
	}
	prec, err := kernels.ParsePrecision(o.precision)
	if err != nil {
		return scene{}, err
	}
	if o.threads < 0 {
		return scene{}, fmt.Errorf("threads %d: must not be negative", o.threads)
	}
	policy := kernels.Policy{Precision: prec, Convs: o.narrowConvs}
	if err := policy.Validate(); err != nil {
		return scene{}, err
	}
	spec := da3.Spec{Path: o.model, MetricPath: o.metricModel}
	if !o.files {
		if spec.Path, err = resolve(o.model, o); err != nil {
			return scene{}, err
		}
		if o.metricModel != "" {
			if spec.MetricPath, err = resolve(o.metricModel, o); err != nil {
				return scene{}, err
			}
		}
	}
	opts := model.Options{Options: backend.Options{Device: progenv.DeviceOr(o.device), Threads: o.threads,
		BackendDirs: progenv.BackendDirs(logger), Logger: logger, Kernels: policy}}
	r, err := da3.Open(context.Background(), spec, opts)
	if err != nil {
		return scene{}, err
	}
	return scene{r}, nil
}

// resolve is the file of nameOrPath: a file as is, a published name from the
// cache, downloaded there first unless o.noDownload.
func resolve(nameOrPath string, o loadOptions) (string, error) {
	fo := progenv.FetchOptions(o.cacheDir)
	if _, err := os.Stat(nameOrPath); err != nil && o.noDownload {
		if m, ok := fo.Lookup(nameOrPath); ok {
			if p, ok := fetch.Cached(m, fo); ok {
				return p, nil
			}
			dir, _ := fetch.CacheDir(fo)
			return "", fmt.Errorf("model %s (%s) is not in the cache %s and downloads are off", m.Name, m.File, dir)
		}
	}
	return fetch.Resolve(context.Background(), nameOrPath, fo)
}

// run runs the images as views of one scene, or each alone. With a lens
// the images are undistorted first, and back holds, per image, the
// undistorter its outputs are to be mapped back with (mapBack, sceneViews;
// nil without a lens or with keep_undistorted).
func (s scene) run(imgs []image.Image, o runOptions) (res []model.Result, back []*lens.Undistorter, err error) {
	imgs, ks, back, err := s.undistort(imgs, o)
	if err != nil {
		return nil, nil, err
	}
	if !o.independent {
		opt := o.opt
		if ks != nil {
			opt.Intrinsics = ks[0] // as the command: the first image's pinhole view
		}
		res, err := s.MultiView(context.Background(), imgs, opt)
		return res, back, err
	}
	out := make([]model.Result, 0, len(imgs))
	for i, im := range imgs {
		opt := o.opt
		if ks != nil {
			opt.Intrinsics = ks[i]
		}
		r, err := s.Depth(context.Background(), im, opt)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, *r)
	}
	return out, back, nil
}

// batch runs same-size images alone in the model's batched graph
// (da3go_depth_batch), undistorted first with a lens.
func (s scene) batch(imgs []image.Image, o runOptions) ([]model.Result, []*lens.Undistorter, error) {
	imgs, ks, back, err := s.undistort(imgs, o)
	if err != nil {
		return nil, nil, err
	}
	opt := o.opt
	if ks != nil {
		opt.Intrinsics = ks[0] // one size: one pinhole view
	}
	res, err := s.Independent(context.Background(), imgs, opt)
	return res, back, err
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
	c, caps := s.Config(), s.Capabilities()
	return modelInfo{Name: c.Name, Arch: c.Arch.String(), Nested: caps.Nested, Metric: caps.Unit == model.Metres || caps.NeedsIntrinsics,
		Camera: caps.Camera, Confidence: caps.Confidence, MultiView: caps.MultiView,
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
