package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"strings"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// modelFlags are the flags shared by the commands that run a model.
type modelFlags struct {
	model, device, attention string
	threads                  int
	processRes               int
	method                   string
	refView                  string
	chunkSize                int
	verbose, quiet           bool
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "model GGUF file or published name (see 'da3-go models')")
	fs.StringVar(&f.device, "device", "", "device: auto (first GPU, else CPU), cpu, or a name from 'da3-go devices' (default $DA3_DEVICE or auto)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0 = all cores)")
	fs.StringVar(&f.attention, "attention", "auto", "attention kernel: auto, flash or naive")
	fs.IntVar(&f.processRes, "process-res", 0, "processed resolution (default: 504 for DA3, 518 for DA2)")
	fs.StringVar(&f.method, "process-res-method", "upper_bound_resize", "DA3 resize policy: upper_bound_resize, lower_bound_resize, upper_bound_crop, lower_bound_crop")
	fs.StringVar(&f.refView, "ref-view", "saddle_balanced", "reference view for 3+ views: saddle_balanced, first, middle")
	fs.IntVar(&f.chunkSize, "chunk-size", 8, "views per head chunk in multi-view runs (lower it to save memory)")
	fs.BoolVar(&f.verbose, "v", false, "verbose log on stderr")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bars or informational output")
}

func (f *modelFlags) runOptions() (model.RunOptions, error) {
	m, err := model.ParseResizeMethod(f.method)
	if err != nil {
		return model.RunOptions{}, err
	}
	switch model.RefView(f.refView) {
	case model.RefSaddleBalanced, model.RefFirst, model.RefMiddle:
	default:
		return model.RunOptions{}, fmt.Errorf("unknown -ref-view %q (saddle_balanced, first, middle)", f.refView)
	}
	if f.processRes < 0 || f.processRes > 4096 {
		return model.RunOptions{}, fmt.Errorf("-process-res %d out of range (14..4096)", f.processRes)
	}
	if f.chunkSize < 1 {
		return model.RunOptions{}, fmt.Errorf("-chunk-size must be at least 1")
	}
	return model.RunOptions{ProcessRes: f.processRes, Method: m, RefView: model.RefView(f.refView), ChunkSize: f.chunkSize}, nil
}

// load resolves and loads the model with a progress bar.
func (f *modelFlags) load(ctx context.Context, stderr io.Writer) (*model.Model, error) {
	if strings.TrimSpace(f.model) == "" {
		return nil, errUsage("-model is required")
	}
	path, err := resolveModel(ctx, f.model, f.quiet, stderr)
	if err != nil {
		return nil, err
	}
	update, finish := newBar(0, "loading", true, f.quiet, stderr)
	defer finish()
	return model.Load(ctx, path, model.Options{Device: f.device, Threads: f.threads, Attention: f.attention, Progress: update})
}

type usageErr string

func (e usageErr) Error() string { return string(e) }

func errUsage(msg string) error { return usageErr(msg) }

// open decodes every input image first (a bad image fails before any model
// work), then loads the model. On failure m is nil and code is the exit code.
func (f *modelFlags) open(ctx context.Context, fs *flag.FlagSet, inputs []string, stderr io.Writer) (imgs []image.Image, m *model.Model, code int) {
	imgs = make([]image.Image, len(inputs))
	for i, p := range inputs {
		var err error
		if imgs[i], err = imgio.Decode(p); err != nil {
			return nil, nil, fail(stderr, err)
		}
	}
	m, err := f.load(ctx, stderr)
	if err != nil {
		var ue usageErr
		if errors.As(err, &ue) {
			return nil, nil, usageError(fs, stderr, "%v", err)
		}
		return nil, nil, fail(stderr, err)
	}
	return imgs, m, 0
}
