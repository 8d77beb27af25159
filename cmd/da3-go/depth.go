package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/stream"
)

func init() {
	register(command{
		name:    "depth",
		usage:   "da3-go depth -model M.gguf [flags] IMAGE|DIR... [-list FILE] [-video FILE -fps N]",
		summary: "estimate depth (and confidence, sky) for images; several images are one scene for DA3 models unless -independent",
		run:     runDepth,
	})
}

type depthFlags struct {
	modelFlags
	inputFlags
	streamFlags
	out           string
	formats       string
	cmap          string
	conf, sky     bool
	independent   bool
	processedSize bool
	intrinsics    string
	metric        bool
	gaussians     string
}

func runDepth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["depth"], stderr)
	var f depthFlags
	f.modelFlags.register(fs)
	f.inputFlags.register(fs)
	f.streamFlags.register(fs)
	fs.StringVar(&f.out, "o", "", "output directory (default: next to each image), or the output file for one image and one format")
	fs.StringVar(&f.formats, "format", "png", "comma-separated outputs: png (colourised), png16 (16-bit), pfm, npy")
	fs.StringVar(&f.cmap, "cmap", "turbo", "colour map for png: turbo or gray")
	fs.BoolVar(&f.conf, "conf", false, "also write the confidence map (DA3 any-view models)")
	fs.BoolVar(&f.sky, "sky", false, "also write the sky map (DA3 mono/metric models)")
	fs.BoolVar(&f.independent, "independent", false, "run each image as its own scene instead of as views of one scene (same-size images are batched, -chunk-size at a time)")
	fs.BoolVar(&f.processedSize, "processed-size", false, "write maps at the network's processed size instead of the image size")
	fs.StringVar(&f.intrinsics, "intrinsics", "", "fx,fy,cx,cy of the camera of the input images, in their pixels: the DA3 metric model (metric-large) then gives depth in metres")
	fs.StringVar(&f.gaussians, "gaussians", "", "also write the scene's 3D Gaussians (DA3-GIANT) to this gs_ply file, as the official gs_ply export")
	fs.BoolVar(&f.metric, "metric", false, "require depth in metres: fail before running unless the model gives metres (DA2 metric models, the DA3 metric model with -intrinsics, the nested pair)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	setupLog(stderr, f.verbose, f.quiet)
	if f.model == "" {
		return usageError(fs, stderr, "-model is required")
	}
	formats := splitList(f.formats)
	if len(formats) == 0 {
		return usageError(fs, stderr, "-format is empty")
	}
	for _, fm := range formats {
		switch fm {
		case "png", "png16", "pfm", "npy":
		default:
			return usageError(fs, stderr, "unknown -format %q (png, png16, pfm, npy)", fm)
		}
	}
	cmap, err := imgio.ParseColormap(f.cmap)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	opt, err := f.runOptions()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	opt.ProcessedSize = f.processedSize
	opt.Gaussians = f.gaussians != ""
	if opt.Gaussians && f.independent {
		return usageError(fs, stderr, "-gaussians writes one scene: it does not go with -independent")
	}
	if err := f.streamFlags.check(f.independent); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if f.intrinsics != "" {
		k, err := parseIntrinsics(f.intrinsics)
		if err != nil {
			return usageError(fs, stderr, "-intrinsics: %v", err)
		}
		opt.Intrinsics = k
	}
	in, code := f.inputFlags.open(ctx, fs, fs.Args(), stderr)
	if in == nil {
		return code
	}
	defer in.cleanup()
	inputs := in.names
	single := len(inputs) == 1 && len(formats) == 1 && !f.conf && !f.sky
	if f.out != "" && !single {
		if fi, err := os.Stat(f.out); err == nil && !fi.IsDir() {
			return usageError(fs, stderr, "-o %s is a file, but several outputs are written: give a directory", f.out)
		}
	}
	size, err := checkImages(in.paths)
	if err != nil {
		return fail(stderr, err)
	}
	m, code := f.modelFlags.loadModel(ctx, fs, stderr)
	if m == nil {
		return code
	}
	defer m.Close()
	cfg := m.Config()
	_, isNested := m.(nestedScene)
	if f.conf && cfg.Arch != model.DA3 {
		return fail(stderr, fmt.Errorf("-conf: model %q (%s) has no confidence output", cfg.Name, cfg.Arch))
	}
	if f.sky && cfg.Arch != model.DA3Mono && !isNested {
		return fail(stderr, fmt.Errorf("-sky: model %q (%s) has no sky output", cfg.Name, cfg.Arch))
	}
	focalNormalised := cfg.Arch == model.DA3Mono && cfg.Metric && !isNested
	switch {
	case opt.Intrinsics != nil && isNested:
		return fail(stderr, errors.New("-intrinsics: the nested model takes its focal length from its any-view half's predicted cameras; drop -intrinsics"))
	case opt.Intrinsics != nil && !focalNormalised:
		return fail(stderr, fmt.Errorf("-intrinsics: model %q (%s) does not use them; only the DA3 metric model (metric-large) turns its output into metres with the focal length", cfg.Name, cfg.Arch))
	case f.metric && focalNormalised && opt.Intrinsics == nil:
		return fail(stderr, fmt.Errorf("-metric: %w: model %q predicts focal-normalised depth (metres = focal · depth / 300); pass -intrinsics fx,fy,cx,cy in pixels of the input images", model.ErrNeedsFocal, cfg.Name))
	case f.metric && !isNested && !focalNormalised && !(cfg.Arch == model.DA2 && cfg.Metric):
		return fail(stderr, fmt.Errorf("-metric: model %q (%s) predicts relative depth, not metres; use a metric model: da2-metric-indoor-*/outdoor-*, da3-metric-large with -intrinsics, or the nested pair (-model da3-nested-anyview -metric-model da3-nested-metric)", cfg.Name, cfg.Arch))
	case focalNormalised && opt.Intrinsics == nil:
		fmt.Fprintf(stderr, "da3-go: note: %q predicts focal-normalised depth, NOT metres (metres = focal · depth / 300, focal in pixels of the processed image); pass -intrinsics fx,fy,cx,cy to get metres\n", cfg.Name)
	}
	// DA2 relative models predict disparity (larger = nearer); all others depth.
	invert := !(cfg.Arch == model.DA2 && !cfg.Metric)

	// write writes a result's maps.
	write := func(input string, r *model.Result) error {
		warnNonFinite(stderr, input, r)
		type outMap struct {
			kind   string
			data   []float32
			invert bool
		}
		maps := []outMap{{"depth", r.Depth, invert}}
		if f.conf {
			maps = append(maps, outMap{"conf", r.Conf, false})
		}
		if f.sky {
			maps = append(maps, outMap{"sky", r.Sky, false})
		}
		for _, mp := range maps {
			for _, fm := range formats {
				path := outputPath(f.out, single, input, mp.kind, fm)
				if err := writeMap(path, fm, mp.data, r.Width, r.Height, cmap, mp.invert); err != nil {
					return err
				}
				if !f.quiet {
					fmt.Fprintf(stdout, "wrote %s\n", path)
				}
			}
		}
		return nil
	}
	asScene := (cfg.Arch == model.DA3 || isNested) && !f.independent
	lay, err := f.streamFlags.layoutFor(fs, m, len(inputs), asScene, size, &opt)
	if err != nil {
		return fail(stderr, err)
	}
	if lay.stream {
		if err := f.depthStreamed(ctx, m, in, lay, opt, stderr, write); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	imgs, err := f.modelFlags.decode(in.paths, m, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	f.given.apply(&opt)
	var results []model.Result
	if asScene && len(imgs) > 1 {
		if f.out != "" && !f.quiet {
			fmt.Fprintf(stderr, "da3-go: running %d images as views of one scene (%s; -stream to run them in windows, -independent one by one)\n", len(imgs), lay.why)
		}
		results, err = m.MultiView(ctx, imgs, opt)
		if err != nil {
			return fail(stderr, err)
		}
	} else if mm, ok := m.(*model.Model); ok && len(imgs) > 1 {
		// Independent images: same-size ones run as batches (no cross-view attention).
		results, err = mm.Independent(ctx, imgs, opt)
		if err != nil {
			return fail(stderr, err)
		}
	} else {
		update, finish := newBar(int64(len(imgs)), "depth", false, f.quiet || len(imgs) == 1, stderr)
		for i, im := range imgs {
			r, err := m.Depth(ctx, im, opt)
			if err != nil {
				finish()
				return fail(stderr, fmt.Errorf("%s: %w", inputs[i], err))
			}
			results = append(results, *r)
			update(int64(i+1), int64(len(imgs)))
		}
		finish()
	}
	if f.gaussians != "" {
		if err := writeGaussians(f.gaussians, results); err != nil {
			return fail(stderr, err)
		}
		if !f.quiet {
			fmt.Fprintf(stdout, "wrote %s\n", f.gaussians)
		}
	}
	for i := range results {
		if err := write(inputs[i], &results[i]); err != nil {
			return fail(stderr, err)
		}
	}
	return exitOK
}

// depthStreamed runs the frames in windows and writes each frame's maps as its window finishes: depth in
// the run's one scale.
func (f *depthFlags) depthStreamed(ctx context.Context, m scene, in *inputs, lay layout, opt model.RunOptions, stderr io.Writer,
	write func(input string, r *model.Result) error) error {
	switch {
	case f.gaussians != "":
		return errors.New("-gaussians: the 3D Gaussians are not merged across windows; drop -gaussians or -stream")
	case f.cameras != "":
		return errors.New("-cameras: streaming with known cameras is not supported; run the frames as one scene (-no-stream)")
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "da3-go: %s\n", lay.describe(len(in.paths)))
	}
	out := f.out
	if out == "" {
		out = filepath.Dir(in.names[0])
	}
	cfg := m.Config()
	rec, err := runStreamed(ctx, m, f.modelFlags.frames(in.paths, imageNames(in.names), cfg.Arch), lay, &f.streamFlags,
		f.streamDir(out), f.fingerprint(cfg), opt, f.quiet, stderr,
		func(w stream.Window, views []model.Result) error {
			for i := w.OwnStart; i < w.OwnEnd; i++ {
				r := views[i-w.Start]
				if !f.processedSize {
					r.ToOriginalSize()
				}
				if err := write(in.names[i], &r); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	finishStream(rec, &f.streamFlags, stderr)
	return nil
}

// outputPath names an output: <dir>/<image base>_<kind>.<ext>, with dir the
// -o directory or the image's own; -o is the file itself for a single output.
func outputPath(out string, single bool, input, kind, format string) string {
	ext := map[string]string{"png": ".png", "png16": "_16.png", "pfm": ".pfm", "npy": ".npy"}[format]
	if single && out != "" {
		if fi, err := os.Stat(out); err != nil || !fi.IsDir() {
			return out
		}
	}
	dir := out
	if dir == "" {
		dir = filepath.Dir(input)
	}
	base := strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))
	return filepath.Join(dir, base+"_"+kind+ext)
}

func writeMap(path, format string, data []float32, w, h int, cmap imgio.Colormap, invert bool) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch format {
	case "png":
		return imgio.WritePNGColor(path, data, w, h, cmap, invert)
	case "png16":
		return imgio.WritePNG16(path, data, w, h, invert)
	case "pfm":
		return imgio.WritePFM(path, data, w, h)
	case "npy":
		return imgio.WriteNPY(path, data, h, w)
	}
	return fmt.Errorf("unknown format %q", format)
}

// parseIntrinsics parses "fx,fy,cx,cy" (pixels).
func parseIntrinsics(s string) (*model.Intrinsics, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return nil, fmt.Errorf("want fx,fy,cx,cy (four numbers, pixels of the input images), got %q", s)
	}
	var v [4]float64
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q is not a number", p)
		}
		v[i] = x
	}
	if v[0] <= 0 || v[1] <= 0 {
		return nil, fmt.Errorf("focal lengths fx %g and fy %g must be positive", v[0], v[1])
	}
	return &model.Intrinsics{Fx: v[0], Fy: v[1], Cx: v[2], Cy: v[3]}, nil
}
