package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/sysmem"
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
	overwrite     bool
}

func runDepth(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	fs := newFlags(commands["depth"], stdout, stderr)
	var f depthFlags
	f.modelFlags.register(fs)
	f.inputFlags.register(fs)
	f.streamFlags.register(fs)
	fs.StringVar(&f.out, "o", "", "output directory (created if missing; default: next to each image), or, with a .png/.pfm/.npy extension, the one output file (its extension sets the format)")
	fs.StringVar(&f.formats, "format", "png", "comma-separated outputs: png (colourised), png16 (16-bit), pfm, npy")
	fs.StringVar(&f.cmap, "cmap", "turbo", "colour map for png: turbo or gray")
	fs.BoolVar(&f.conf, "conf", false, "also write the confidence map (DA3 any-view models)")
	fs.BoolVar(&f.sky, "sky", false, "also write the sky map (DA3 mono/metric models)")
	fs.BoolVar(&f.independent, "independent", false, "run each image as its own scene instead of as views of one scene (same-size images are batched, -chunk-size at a time)")
	fs.BoolVar(&f.processedSize, "processed-size", false, "write maps at the network's processed size instead of the image size")
	fs.StringVar(&f.intrinsics, "intrinsics", "", "fx,fy,cx,cy of the camera of the input images, in their pixels: the DA3 metric model (metric-large) then gives depth in metres")
	fs.StringVar(&f.gaussians, "gaussians", "", "also write the scene's 3D Gaussians (DA3-GIANT) to this gs_ply file, as the official gs_ply export")
	fs.BoolVar(&f.overwrite, "overwrite", false, "with -o DIR: replace files at the output paths that no earlier run into DIR wrote (refused without it)")
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
	// The run returns the maps at the processed size; the writer resizes
	// each to the image size as it writes it, so one map at that size is
	// held at a time.
	opt.ProcessedSize = true
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
	kinds := []string{"depth"}
	if f.conf {
		kinds = append(kinds, "conf")
	}
	if f.sky {
		kinds = append(kinds, "sky")
	}
	formatSet := false
	fs.Visit(func(fl *flag.Flag) { formatSet = formatSet || fl.Name == "format" })
	// Every output is named, checked and its directory made before any
	// image is decoded or the model loaded.
	plan, formats, err := outputPlan(f.out, inputs, kinds, formats, formatSet)
	if err != nil {
		return argError(fs, stderr, err)
	}
	var set *outputSet
	var made madeDirs
	defer func() {
		if code == exitOK {
			if err := set.commit(); err != nil {
				code = fail(stderr, err)
			}
		}
		made.removeEmpty()
	}()
	for _, d := range f.outputDirs(plan) {
		if err := made.prepare(d); err != nil {
			return fail(stderr, err)
		}
	}
	if err := checkOverwrite(plan, inputs); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if f.gaussians != "" {
		if err := atomicfile.Check(f.gaussians, in.paths...); err != nil {
			return usageError(fs, stderr, "-gaussians: %v", err)
		}
	}
	if f.out != "" && !outputIsFile(f.out) {
		if set, err = depthOutputSet(f.out, plan, inputs, f.overwrite); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		if !f.quiet {
			set.stderr = stderr
		}
	}
	// Headers first: a bad image fails before any model work.
	sizes := make([]imgio.Header, len(in.paths))
	for i, p := range in.paths {
		if sizes[i], err = imgio.DecodeHeader(p); err != nil {
			return fail(stderr, err)
		}
	}
	m, code := f.modelFlags.loadModel(ctx, fs, stderr)
	if m == nil {
		return code
	}
	defer m.Close()
	cfg, caps := m.Config(), m.Capabilities()
	if f.conf && !caps.Confidence {
		return fail(stderr, fmt.Errorf("-conf: model %s (%s) has no confidence output", f.model, cfg.Arch))
	}
	if f.sky && !caps.Sky {
		return fail(stderr, fmt.Errorf("-sky: model %s (%s) has no sky output", f.model, cfg.Arch))
	}
	focalNormalised := caps.NeedsIntrinsics
	switch {
	case opt.Intrinsics != nil && caps.Nested:
		return fail(stderr, errors.New("-intrinsics: the nested model takes its focal length from its any-view half's predicted cameras; drop -intrinsics"))
	case opt.Intrinsics != nil && !focalNormalised:
		return fail(stderr, fmt.Errorf("-intrinsics: model %s (%s) does not use them; only the DA3 metric model (metric-large) turns its output into metres with the focal length", f.model, cfg.Arch))
	case f.metric && focalNormalised && opt.Intrinsics == nil:
		return fail(stderr, fmt.Errorf("-metric: %w: model %s predicts focal-normalised depth (metres = focal · depth / 300); pass -intrinsics fx,fy,cx,cy in pixels of the input images", model.ErrNeedsFocal, f.model))
	case f.metric && caps.Unit != model.Metres && !focalNormalised:
		return fail(stderr, fmt.Errorf("-metric: model %s (%s) predicts relative depth, not metres; use a metric model: da2-metric-indoor-*/outdoor-*, da3-metric-large with -intrinsics, or the nested pair (-model da3-nested-anyview -metric-model da3-nested-metric)", f.model, cfg.Arch))
	case focalNormalised && opt.Intrinsics == nil:
		fmt.Fprintf(stderr, "da3-go: note: %s predicts focal-normalised depth, NOT metres (metres = focal · depth / 300, focal in pixels of the processed image); pass -intrinsics fx,fy,cx,cy to get metres\n", f.model)
	}
	w := &mapWriter{plan: plan, set: set, cmap: cmap, invert: caps.Unit != model.Disparity, original: !f.processedSize,
		quiet: f.quiet, stdout: stdout, stderr: stderr, inputs: inputs}
	orient := f.exifRotate.set && f.exifRotate.value || !f.exifRotate.set && caps.ExifRotate

	asScene := caps.MultiView && !f.independent
	size := image.Pt(sizes[0].Width, sizes[0].Height)
	lay, err := f.streamFlags.layoutFor(fs, m, len(inputs), asScene, size, &opt)
	if err != nil {
		return fail(stderr, err)
	}
	// Images decoded and run at once: the scene's, a batch's, or none here
	// for streamed windows (their memory is the layout's).
	batch := 1
	if !caps.Nested { // the nested pair runs images one by one
		batch = opt.ChunkSize
		if batch < 1 {
			batch = 8
		}
	}
	views := min(batch, len(inputs))
	switch {
	case lay.stream:
		views = 0
	case asScene && len(inputs) > 1 || f.cameras != "" || f.gaussians != "":
		views = len(inputs)
	}
	if err := checkDepthMemory(estimateDepthMemory(m, opt, inputs, sizes, views, formats, f.processedSize), opt, formats, f.processedSize); err != nil {
		return fail(stderr, err)
	}
	if lay.stream {
		if err := f.depthStreamed(ctx, m, in, lay, opt, stderr, w.write); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	if asScene && len(inputs) > 1 || f.cameras != "" || f.gaussians != "" {
		// One scene (or the inputs of -cameras, -gaussians): every view is
		// needed at once.
		if asScene && len(inputs) > 1 && f.out != "" && !f.quiet {
			fmt.Fprintf(stderr, "da3-go: running %d images as views of one scene (%s; -stream to run them in windows, -independent one by one)\n", len(inputs), lay.why)
		}
		if err := checkDecodeMemory(sizes); err != nil {
			return fail(stderr, err)
		}
		imgs, err := f.modelFlags.decode(in.paths, m, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		f.given.apply(&opt)
		var results []model.Result
		if asScene && len(imgs) > 1 {
			bar := newSceneBar(viewCount(len(imgs)), f.quiet, stderr)
			opt.Progress = bar.tell
			results, err = m.MultiView(ctx, imgs, opt)
			bar.finish()
			collect()
		} else {
			bar := newItemBar(len(imgs), "depth", f.quiet, stderr)
			opt.Progress = bar.tell
			for i, im := range imgs {
				bar.cover(i, 1)
				var r *model.Result
				if r, err = m.Depth(ctx, im, opt); err != nil {
					break
				}
				results = append(results, *r)
			}
			bar.finish()
		}
		if err != nil {
			return fail(stderr, err)
		}
		imgs = nil
		noteCropped(stderr, inputs, results, f.processedSize, f.quiet)
		if f.gaussians != "" {
			if err := writeGaussians(f.gaussians, results); err != nil {
				return fail(stderr, err)
			}
			if !f.quiet {
				fmt.Fprintf(stdout, "wrote %s\n", f.gaussians)
			}
		}
		for i := range results {
			if err := w.write(i, &results[i]); err != nil {
				return fail(stderr, err)
			}
		}
		return exitOK
	}
	// A group at a time: decode, run, write, forget, so memory stays flat
	// over any number of images and an interruption keeps what is done.
	// Groups are consecutive same-size images, up to the batch size (one
	// image for models that do not batch).
	bar := newItemBar(len(inputs), "depth", f.quiet, stderr)
	defer bar.finish()
	opt.Progress = bar.tell
	for start := 0; start < len(inputs); {
		end := start + 1
		for end < len(inputs) && end-start < batch && sizes[end].Width == sizes[start].Width && sizes[end].Height == sizes[start].Height && sizes[end].Orientation == sizes[start].Orientation {
			end++
		}
		group := make([]image.Image, 0, end-start)
		for _, p := range in.paths[start:end] {
			if err := ctx.Err(); err != nil {
				bar.finish()
				return fail(stderr, err)
			}
			img, err := decodeOriented(p, orient)
			if err != nil {
				bar.finish()
				return fail(stderr, err)
			}
			group = append(group, img)
		}
		bar.cover(start, end-start)
		var err error
		var results []model.Result
		if len(group) > 1 {
			// Same-size images run as batches (no cross-view attention).
			results, err = m.Independent(ctx, group, opt)
		} else {
			var r *model.Result
			if r, err = m.Depth(ctx, group[0], opt); err == nil {
				results = []model.Result{*r}
			}
		}
		group = nil // the decoded images are not needed to write the maps
		if err != nil {
			bar.finish()
			return fail(stderr, fmt.Errorf("%s: %w", inputs[start], err))
		}
		for j := range results {
			if err := w.write(start+j, &results[j]); err != nil {
				bar.finish()
				return fail(stderr, err)
			}
		}
		start = end
	}
	return exitOK
}

// depthStreamed runs the frames in windows and writes each frame's maps as its window finishes: depth in
// the run's one scale.
func (f *depthFlags) depthStreamed(ctx context.Context, m da3.Runner, in *inputs, lay layout, opt model.RunOptions, stderr io.Writer,
	write func(i int, r *model.Result) error) error {
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
	rec, err := runStreamed(ctx, m, f.modelFlags.frames(in.paths, imageNames(in.names), f.rotates(m.Capabilities())), lay, &f.streamFlags,
		f.streamDir(out), f.fingerprint(cfg), opt, f.quiet, stderr,
		func(win stream.Window, views []model.Result) error {
			for i := win.OwnStart; i < win.OwnEnd; i++ {
				r := views[i-win.Start]
				if err := write(i, &r); err != nil {
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

// checkDecodeMemory refuses to decode images that would not fit in the
// memory left (a Go allocation that fails is fatal, not an error).
func checkDecodeMemory(hs []imgio.Header) error {
	var need uint64
	for _, h := range hs {
		need += uint64(h.Width) * uint64(h.Height) * 4
	}
	for _, l := range sysmem.Limits() {
		if need+256<<20 > l.Free {
			return fmt.Errorf("%w: decoding the %d images takes about %s, but only %s is free (%s): run fewer images at once or -independent",
				model.ErrNotEnoughMemory, len(hs), sysmem.Bytes(need), sysmem.Bytes(l.Free), l)
		}
	}
	return nil
}

// decodeOriented decodes an image, turned upright by its Exif orientation
// when orient is set.
func decodeOriented(path string, orient bool) (image.Image, error) {
	img, o, err := imgio.DecodeWithOrientation(path)
	if err != nil {
		return nil, err
	}
	if orient {
		img = imgio.Orient(img, o)
	}
	return img, nil
}

// noteCropped says when views of different sizes were centre-cropped to the
// smallest (as the reference does), so their maps cover the crop only.
func noteCropped(stderr io.Writer, inputs []string, results []model.Result, processed, quiet bool) {
	if quiet || processed {
		return
	}
	var cropped []string
	for i, r := range results {
		if r.Cropped {
			cropped = append(cropped, fmt.Sprintf("%s (%dx%d)", inputs[i], r.OrigWidth, r.OrigHeight))
		}
	}
	if len(cropped) > 0 {
		r := results[0]
		fmt.Fprintf(stderr, "da3-go: note: the views differ in size, so as in the reference each was centre-cropped to the smallest (%dx%d processed); the maps of %s cover only that centre, at %dx%d\n",
			r.ProcessedWidth, r.ProcessedHeight, strings.Join(cropped, ", "), r.Width, r.Height)
	}
}

// outputDirs are the directories depth writes into: the maps', -gaussians'
// and -stream-dir.
func (f *depthFlags) outputDirs(plan [][]mapOutput) []string {
	var dirs []string
	add := func(d string) {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, p := range mapPaths(plan) {
		add(filepath.Dir(p))
	}
	if f.gaussians != "" {
		add(filepath.Dir(f.gaussians))
	}
	if f.streamFlags.dir != "" {
		add(f.streamFlags.dir)
	}
	return dirs
}

// mapWriter writes each result's planned maps.
type mapWriter struct {
	plan          [][]mapOutput
	set           *outputSet // of -o DIR, nil otherwise
	inputs        []string
	cmap          imgio.Colormap
	invert, quiet bool
	// original: the maps are written at the image size (each resized as
	// it is written, Result.OriginalMap), else as the run returned them.
	original       bool
	stdout, stderr io.Writer
}

func (w *mapWriter) write(i int, r *model.Result) error {
	warnNonFinite(w.stderr, w.inputs[i], r)
	if err := w.set.begin(); err != nil {
		return err
	}
	// The plan lists a map's formats together: each map is resized once.
	var kind string
	var data []float32
	var mw, mh int
	for _, o := range w.plan[i] {
		if o.kind != kind || data == nil {
			kind, data, mw, mh = o.kind, r.Depth, r.Width, r.Height
			switch o.kind {
			case "conf":
				data = r.Conf
			case "sky":
				data = r.Sky
			}
			if w.original {
				data, mw, mh = r.OriginalMap(data)
			}
		}
		invert := w.invert && o.kind == "depth"
		unit := "" // confidence and sky maps have none
		if o.kind == "depth" {
			unit = r.Unit.String()
		}
		if err := writeMap(o.path, o.format, export.DepthMap{Width: mw, Height: mh, Depth: data, Unit: unit}, w.cmap, invert); err != nil {
			return err
		}
		if !w.quiet {
			fmt.Fprintf(w.stdout, "wrote %s\n", o.path)
		}
	}
	return nil
}

// writeMap writes m in format; png16 keeps the values (millimetres for metric depth, else the min–max
// mapping in text chunks: export.EncodeDepthPNG16).
func writeMap(path, format string, m export.DepthMap, cmap imgio.Colormap, invert bool) error {
	data, w, h := m.Depth, m.Width, m.Height
	switch format {
	case "png":
		return imgio.WritePNGColor(path, data, w, h, cmap, invert)
	case "png16":
		return export.WriteDepthPNG16(path, m, export.PNG16Options{Invert: invert})
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
