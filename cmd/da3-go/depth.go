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
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/stream"
	"github.com/da3-go/da3-go/model/tile"
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
	tile          tileFlags
	out           string
	formats       string
	cmap          string
	png16Step     float64 // metres per level of metric png16 maps (0: millimetres)
	conf, sky     bool
	independent   bool
	processedSize bool
	intrinsics    string
	metric        bool
	gaussians     string
	overwrite     bool
	shard         string
	skipExisting  bool
	alignDepth    string
	alignScale    float64 // -align-depth-scale
}

func (f *depthFlags) register(fs *flag.FlagSet) {
	f.modelFlags.register(fs)
	f.modelFlags.lens.register(fs)
	f.inputFlags.register(fs)
	f.streamFlags.register(fs)
	f.tile.register(fs)
	fs.StringVar(&f.out, "o", "", "output directory (created if missing; default: next to each image), or, with a .png/.pfm/.npy extension, the one output file (its extension sets the format)")
	fs.StringVar(&f.formats, "format", "png", "comma-separated outputs: png (colourised), png16 (16-bit), pfm, npy")
	fs.StringVar(&f.cmap, "cmap", "turbo", "colour map for png: turbo or gray")
	fs.Func("png16-step", "metres per level of metric depth in png16 maps: mm (default: millimetres, as NYU's PNGs, up to 65.535 m), kitti (1/256 m, as KITTI's, up to 256 m) or a number",
		func(s string) error {
			switch s {
			case "mm":
				f.png16Step = export.MetricStepMM
				return nil
			case "kitti":
				f.png16Step = export.MetricStepKITTI
				return nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return errors.New("want mm, kitti or a positive number of metres")
			}
			f.png16Step = v
			return nil
		})
	fs.BoolVar(&f.conf, "conf", false, "also write the confidence map (DA3 any-view models)")
	fs.BoolVar(&f.sky, "sky", false, "also write the sky map (DA3 mono/metric models)")
	fs.BoolVar(&f.independent, "independent", false, "run each image as its own scene instead of as views of one scene (same-size images are batched, -chunk-size at a time)")
	fs.BoolVar(&f.processedSize, "processed-size", false, "write maps at the network's processed size instead of the image size")
	fs.StringVar(&f.intrinsics, "intrinsics", "", "fx,fy,cx,cy of the camera of the input images, in their pixels: the DA3 metric model (metric-large) then gives depth in metres")
	fs.StringVar(&f.gaussians, "gaussians", "", "also write the scene's 3D Gaussians (DA3-GIANT) to this gs_ply file, as the official gs_ply export")
	fs.BoolVar(&f.overwrite, "overwrite", false, "with -o DIR: replace files at the output paths that no earlier run into DIR wrote (refused without it)")
	fs.StringVar(&f.shard, "shard", "", "i/n: run only the images in shard i of n (0 ≤ i < n; the shard of an image is a hash of its path relative to the directory of all inputs, so n jobs given the same inputs, e.g. a Slurm array, share them out, each image to one); needs -independent")
	fs.BoolVar(&f.skipExisting, "skip-existing", false, "leave out the images whose every output exists (a non-empty file), to resume an interrupted run; without -independent the images are one scene, left out only when every image's outputs exist")
	fs.StringVar(&f.alignDepth, "align-depth", "", alignDepthUsage)
	fs.Float64Var(&f.alignScale, "align-depth-scale", 1000, alignScaleUsage)
	fs.BoolVar(&f.metric, "metric", false, "require depth in metres: fail before running unless the model gives metres (DA2 metric models, the DA3 metric model with -intrinsics, the nested pair)")
}

// runDepth validates the flags, plans every output (before any image is
// decoded or the model loaded), loads the model and runs: a scene, images
// a group at a time, or windows.
func runDepth(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	fs := newFlags(commands["depth"], stdout, stderr)
	d := &depthRun{fs: fs, stdout: stdout, stderr: stderr}
	d.f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	setupLog(stderr, d.f.verbose, d.f.quiet)
	return runStages(ctx, fs, &d.f.modelFlags, &d.f.inputFlags, d, stderr)
}

// depthRun is one depth command: its flags, then what validate, plan and
// run find.
type depthRun struct {
	f              depthFlags
	fs             *flag.FlagSet
	stdout, stderr io.Writer

	formats []string
	shard   shard
	cmap    imgio.Colormap
	opt     model.RunOptions
	tileOpt tile.Options // with -tile
	in      *inputs
	sizes   []imgio.Header // of the inputs, read before the model loads
	outputs [][]mapOutput  // planned: per input, per map
	align   *depthAligner  // -align-depth, or nil
	out     runOutputs
}

// validate checks the flags and turns them into the run's options; the
// problems are usage errors.
func (d *depthRun) validate() error {
	f := &d.f
	if f.model == "" {
		return errUsage("-model is required")
	}
	if d.formats = splitList(f.formats); len(d.formats) == 0 {
		return errUsage("-format is empty")
	}
	for _, fm := range d.formats {
		switch fm {
		case "png", "png16", "pfm", "npy":
		default:
			return errUsage(fmt.Sprintf("unknown -format %q (png, png16, pfm, npy)", fm))
		}
	}
	var err error
	if d.cmap, err = imgio.ParseColormap(f.cmap); err != nil {
		return asUsage(err)
	}
	if d.opt, err = f.runOptions(); err != nil {
		return asUsage(err)
	}
	// The run returns the maps at the processed size; the writer resizes
	// each to the image size as it writes it, so one map at that size is
	// held at a time.
	d.opt.ProcessedSize = true
	d.opt.Gaussians = f.gaussians != ""
	if d.opt.Gaussians && f.independent {
		return errUsage("-gaussians writes one scene: it does not go with -independent")
	}
	if err := f.streamFlags.check(f.independent); err != nil {
		return asUsage(err)
	}
	if f.intrinsics != "" {
		k, err := parseIntrinsics(f.intrinsics)
		if err != nil {
			return errUsage("-intrinsics: " + err.Error())
		}
		d.opt.Intrinsics = k
	}
	if err := f.lens.parse(f.cameras, f.intrinsics); err != nil {
		return asUsage(err)
	}
	if d.tileOpt, err = f.tile.options(f); err != nil {
		return asUsage(err)
	}
	if f.tile.mode != tileOff && f.lens.active() {
		return errUsage("-tile with -camera-model: tiles of the undistorted view are not supported; undistort the image first, or drop -tile")
	}
	if d.shard, err = parseShard(f.shard); err != nil {
		return asUsage(err)
	}
	if f.alignDepth != "" {
		switch {
		case f.gaussians != "":
			return errUsage("-align-depth does not rescale the 3D Gaussians: it does not go with -gaussians")
		case f.cameras != "":
			return errUsage("-align-depth and -cameras both set the depth's scale: give one")
		}
	}
	if d.shard.n > 0 {
		switch {
		case !f.independent:
			return errUsage("-shard splits the images between runs, so each must be its own scene: give -independent")
		case f.cameras != "":
			return errUsage("-cameras holds the cameras of every image: it does not go with -shard")
		}
	}
	return nil
}

// plan names every output, checks it and makes its directory, and reads
// the images' headers (a bad image fails before any model work).
func (d *depthRun) plan(in *inputs) error {
	d.in = in
	f, inputs := &d.f, in.names
	kinds := []string{"depth"}
	if f.conf {
		kinds = append(kinds, "conf")
	}
	if f.sky {
		kinds = append(kinds, "sky")
	}
	var err error
	// The outputs are named from every input (two images sharing a base
	// name keep their directories), so shards name them alike.
	if d.outputs, d.formats, err = outputPlan(f.out, inputs, kinds, d.formats, flagGiven(d.fs, "format")); err != nil {
		if isSystemError(err) {
			return err
		}
		return asUsage(err)
	}
	// Measurement files are matched to every input, before -shard and
	// -skip-existing choose some.
	if d.align, err = planAlign(f.alignDepth, f.alignScale, in.paths, f.quiet, d.stderr); err != nil {
		return asUsage(err)
	}
	if d.align != nil && f.lens.base != nil && !f.lens.keep {
		return errUsage("-align-depth with -camera-model: the measurements are in the original image's pixels, the model's maps in the undistorted view's; add -keep-undistorted and give the measurements in that view")
	}
	if err := d.selectInputs(); err != nil {
		return err
	}
	for _, dir := range f.outputDirs(d.outputs) {
		if err := d.out.made.prepare(dir); err != nil {
			return err
		}
	}
	if err := checkOverwrite(d.outputs, inputs); err != nil {
		return asUsage(err)
	}
	if f.gaussians != "" {
		if err := atomicfile.Check(f.gaussians, d.in.paths...); err != nil {
			return errUsage("-gaussians: " + err.Error())
		}
	}
	if f.out != "" && !outputIsFile(f.out) {
		if d.out.set, err = depthOutputSet(f.out, d.outputs, d.in.names, f.overwrite); err != nil {
			return asUsage(err)
		}
		if !f.quiet {
			d.out.set.stderr = d.stderr
		}
	}
	d.sizes = make([]imgio.Header, len(d.in.paths))
	for i, p := range d.in.paths {
		if d.sizes[i], err = imgio.DecodeHeader(p); err != nil {
			return err
		}
	}
	return nil
}

// selectInputs keeps the inputs of -shard and leaves out, with
// -skip-existing, those whose outputs exist; it returns errNothingToRun
// when none is left.
func (d *depthRun) selectInputs() error {
	f, in := &d.f, d.in
	keep := selectShard(in.names, d.shard)
	if d.shard.n > 0 && !f.quiet {
		fmt.Fprintf(d.stderr, "da3-go: shard %s: %d of %d images\n", d.shard, len(keep), len(in.names))
	}
	if f.skipExisting {
		// Without -independent the images are one scene: all run or none.
		perImage := f.independent && f.cameras == ""
		var left []int
		for _, i := range keep {
			if !outputsExist(d.outputs[i]) {
				left = append(left, i)
			}
		}
		if !perImage && len(left) > 0 || f.gaussians != "" && !outputsExist([]mapOutput{{path: f.gaussians}}) {
			left = keep
		}
		if !f.quiet {
			fmt.Fprintf(d.stderr, "da3-go: skipped %d of %d images: their outputs exist\n", len(keep)-len(left), len(keep))
		}
		keep = left
	}
	if len(keep) == 0 {
		return errNothingToRun
	}
	if len(keep) == len(in.names) {
		return nil
	}
	sub := &inputs{cleanup: in.cleanup}
	outputs := make([][]mapOutput, 0, len(keep))
	for _, i := range keep {
		sub.paths = append(sub.paths, in.paths[i])
		sub.names = append(sub.names, in.names[i])
		outputs = append(outputs, d.outputs[i])
	}
	d.in, d.outputs = sub, outputs
	return nil
}

func (d *depthRun) written() *runOutputs { return &d.out }

// checkModel refuses the outputs and units the model cannot give, and
// notes a depth that is not metres where one might expect it.
func (d *depthRun) checkModel(m da3.Runner) error {
	f, opt := &d.f, d.opt
	cfg, caps := m.Config(), m.Capabilities()
	if f.conf && !caps.Confidence {
		return fmt.Errorf("-conf: model %s (%s) has no confidence output", f.model, cfg.Arch)
	}
	if f.sky && !caps.Sky {
		return fmt.Errorf("-sky: model %s (%s) has no sky output", f.model, cfg.Arch)
	}
	focalNormalised := caps.NeedsIntrinsics
	if focalNormalised && opt.Intrinsics == nil && f.lens.base != nil && !caps.Nested {
		// -camera-model: the model's view is the undistorted pinhole view of the first image.
		k, err := f.lens.pinholeIntrinsics(d.firstSize(m))
		if err != nil {
			return err
		}
		d.opt.Intrinsics, opt.Intrinsics = k, k
	}
	aligned := d.align != nil // metres whatever the model gives
	switch {
	case opt.Intrinsics != nil && caps.Nested:
		return errors.New("-intrinsics: the nested model takes its focal length from its any-view half's predicted cameras; drop -intrinsics")
	case opt.Intrinsics != nil && !focalNormalised:
		return fmt.Errorf("-intrinsics: model %s (%s) does not use them; only the DA3 metric model (metric-large) turns its output into metres with the focal length", f.model, cfg.Arch)
	case aligned:
	case f.metric && focalNormalised && opt.Intrinsics == nil:
		return fmt.Errorf("-metric: %w: model %s predicts focal-normalised depth (metres = focal · depth / 300); pass -intrinsics fx,fy,cx,cy in pixels of the input images", model.ErrNeedsFocal, f.model)
	case f.metric && caps.Unit != model.Metres && !focalNormalised:
		return fmt.Errorf("-metric: model %s (%s) predicts relative depth, not metres; use a metric model: da2-metric-indoor-*/outdoor-*, da3-metric-large with -intrinsics, or the nested pair (-model da3-nested-anyview -metric-model da3-nested-metric)", f.model, cfg.Arch)
	case focalNormalised && opt.Intrinsics == nil:
		fmt.Fprintf(d.stderr, "da3-go: note: %s predicts focal-normalised depth, NOT metres (metres = focal · depth / 300, focal in pixels of the processed image); pass -intrinsics fx,fy,cx,cy to get metres\n", f.model)
	}
	return nil
}

// firstSize is the first image's size as the model sees it (turned by its Exif orientation when the
// run turns images).
func (d *depthRun) firstSize(m da3.Runner) image.Point {
	h := d.sizes[0]
	if d.f.rotates(m.Capabilities()) && h.Orientation >= 5 && h.Orientation <= 8 {
		return image.Pt(h.Height, h.Width)
	}
	return image.Pt(h.Width, h.Height)
}

// run checks the model against the flags, chooses how the images run (one
// scene, windows, or groups of images) within the memory there is, and
// runs them, writing each map as its result comes.
func (d *depthRun) run(ctx context.Context, m da3.Runner) error {
	f, caps, n := &d.f, m.Capabilities(), len(d.in.names)
	if err := d.checkModel(m); err != nil {
		return err
	}
	w := &mapWriter{plan: d.outputs, set: d.out.set, cmap: d.cmap, png16: export.PNG16Options{MetricStep: f.png16Step}, original: !f.processedSize,
		quiet: f.quiet, stdout: d.stdout, stderr: d.stderr, inputs: d.in.names, paths: d.in.paths, align: d.align,
		lens: &f.lens}
	if f.tile.mode != tileOff {
		return d.tiled(ctx, m, w)
	}
	asScene := caps.MultiView && !f.independent
	lay, err := f.streamFlags.layoutFor(d.fs, m, n, asScene, image.Pt(d.sizes[0].Width, d.sizes[0].Height), &d.opt)
	if err != nil {
		return err
	}
	// Images decoded and run at once: the scene's, a batch's, or none here
	// for streamed windows (their memory is the layout's).
	batch := 1
	if !caps.Nested { // the nested pair runs images one by one
		batch = d.opt.ChunkSize
		if batch < 1 {
			batch = 8
		}
	}
	oneScene := asScene && n > 1 || f.cameras != "" || f.gaussians != ""
	views := min(batch, n)
	switch {
	case lay.stream:
		views = 0
	case oneScene:
		views = n
	}
	if err := checkDepthMemory(estimateDepthMemory(m, d.opt, d.in.names, d.sizes, views, d.formats, f.processedSize), d.opt, d.formats, f.processedSize); err != nil {
		return err
	}
	switch {
	case lay.stream && d.align != nil:
		return errors.New("-align-depth: the images run in windows (streamed), which is not supported with -align-depth; run fewer images at once, or -independent")
	case lay.stream:
		if err := f.lens.noStream(); err != nil {
			return err
		}
		return f.depthStreamed(ctx, m, d.in, lay, d.opt, d.stderr, w.write)
	case oneScene:
		// One scene (or the inputs of -cameras, -gaussians): every view is
		// needed at once.
		if asScene && n > 1 && f.out != "" && !f.quiet {
			fmt.Fprintf(d.stderr, "da3-go: running %d images as views of one scene (%s; -stream to run them in windows, -independent one by one)\n", n, lay.why)
		}
		return d.scene(ctx, m, asScene, w)
	}
	return d.groups(ctx, m, batch, w)
}

// scene runs every image at once: as the views of one scene, or (for
// -cameras and -gaussians with models that run images alone) one by one.
func (d *depthRun) scene(ctx context.Context, m da3.Runner, asScene bool, w *mapWriter) error {
	f, opt := &d.f, d.opt
	if err := checkDecodeMemory(d.sizes); err != nil {
		return err
	}
	imgs, err := f.modelFlags.decode(d.in.paths, m, d.stderr)
	if err != nil {
		return err
	}
	f.given.apply(&opt)
	var results []model.Result
	if asScene && len(imgs) > 1 {
		bar := newSceneBar(viewCount(len(imgs)), f.quiet, d.stderr)
		opt.Progress = bar.tell
		results, err = m.MultiView(ctx, imgs, opt)
		bar.finish()
		collect()
	} else {
		results, err = oneByOne(ctx, m, imgs, opt, newItemBar(len(imgs), "depth", f.quiet, d.stderr))
	}
	if err != nil {
		return err
	}
	imgs = nil
	noteCropped(d.stderr, d.in.names, results, f.processedSize, f.quiet)
	if f.gaussians != "" {
		if err := writeGaussians(f.gaussians, results); err != nil {
			return err
		}
		if !f.quiet {
			fmt.Fprintf(d.stdout, "wrote %s\n", f.gaussians)
		}
	}
	if d.align != nil && asScene && len(results) > 1 {
		// The views of one scene share a scale: one fit for all.
		if err := d.align.alignScene(d.in.paths, results); err != nil {
			return err
		}
		w.align = nil
	}
	for i := range results {
		if err := w.write(i, &results[i]); err != nil {
			return err
		}
	}
	return nil
}

// oneByOne runs each image alone, the bar counting them.
func oneByOne(ctx context.Context, m da3.Runner, imgs []image.Image, opt model.RunOptions, bar *runBar) ([]model.Result, error) {
	defer bar.finish()
	opt.Progress = bar.tell
	var results []model.Result
	for i, im := range imgs {
		bar.cover(i, 1)
		r, err := m.Depth(ctx, im, opt)
		if err != nil {
			return nil, err
		}
		results = append(results, *r)
	}
	return results, nil
}

// groups runs the images a group at a time: decode, run, write, forget, so
// memory stays flat over any number of images and an interruption keeps
// what is done. Groups are consecutive same-size images, up to batch (one
// image for models that do not batch), run as a batch (no cross-view
// attention).
func (d *depthRun) groups(ctx context.Context, m da3.Runner, batch int, w *mapWriter) error {
	sizes, n := d.sizes, len(d.in.names)
	bar := newItemBar(n, "depth", d.f.quiet, d.stderr)
	defer bar.finish()
	opt := d.opt
	opt.Progress = bar.tell
	orient := d.f.rotates(m.Capabilities())
	for start := 0; start < n; {
		end := start + 1
		for end < n && end-start < batch && sizes[end].Width == sizes[start].Width && sizes[end].Height == sizes[start].Height && sizes[end].Orientation == sizes[start].Orientation {
			end++
		}
		results, err := d.group(ctx, m, start, end, orient, opt, bar)
		if err != nil {
			return err
		}
		for j := range results {
			if err := w.write(start+j, &results[j]); err != nil {
				return err
			}
		}
		start = end
	}
	return nil
}

// group decodes and runs images [start, end).
func (d *depthRun) group(ctx context.Context, m da3.Runner, start, end int, orient bool, opt model.RunOptions, bar *runBar) ([]model.Result, error) {
	group := make([]image.Image, 0, end-start)
	for _, p := range d.in.paths[start:end] {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := decodeOriented(p, orient)
		if err != nil {
			return nil, err
		}
		if img, err = d.f.lens.undistort(start+len(group), img, d.in.names[start+len(group)], d.f.quiet, d.stderr); err != nil {
			return nil, err
		}
		group = append(group, img)
	}
	bar.cover(start, end-start)
	var results []model.Result
	var err error
	if len(group) > 1 {
		results, err = m.Independent(ctx, group, opt)
	} else {
		var r *model.Result
		if r, err = m.Depth(ctx, group[0], opt); err == nil {
			results = []model.Result{*r}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.in.names[start], err)
	}
	return results, nil
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
	// Each frame's maps as its window finishes; with loop closure, or a run in metres, which move the
	// windows once they are all done, from the merged run at the end.
	var onWindow func(win stream.Window, views []model.Result) error
	if !f.streamFlags.windowsMove(m.Capabilities()) {
		onWindow = func(win stream.Window, views []model.Result) error {
			for i := win.OwnStart; i < win.OwnEnd; i++ {
				r := views[i-win.Start]
				if err := write(i, &r); err != nil {
					return err
				}
			}
			return nil
		}
	}
	rec, err := runStreamed(ctx, m, f.modelFlags.frames(in.paths, imageNames(in.names), f.rotates(m.Capabilities())), lay, &f.streamFlags, f.modelFlags.threads,
		f.streamDir(out), f.fingerprint(cfg), opt, f.quiet, stderr, onWindow)
	if err != nil {
		return err
	}
	if onWindow == nil {
		for i := range rec.Len() {
			r, err := rec.Result(i)
			if err != nil {
				return err
			}
			if err := write(i, &r); err != nil {
				return err
			}
		}
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
	plan   [][]mapOutput
	set    *outputSet // of -o DIR, nil otherwise
	inputs []string
	paths  []string      // the inputs' files
	align  *depthAligner // aligns each result to metres before it is written (-align-depth), or nil
	cmap   imgio.Colormap
	png16  export.PNG16Options
	quiet  bool
	// original: the maps are written at the image size (each resized as
	// it is written, Result.OriginalMap), else as the run returned them.
	original       bool
	stdout, stderr io.Writer
	// lens maps the maps of undistorted inputs back to their original pixels.
	lens *lensFlags
}

func (w *mapWriter) write(i int, r *model.Result) error {
	warnNonFinite(w.stderr, w.inputs[i], r)
	if w.align != nil {
		if err := w.align.alignResults(w.inputs[i], w.paths[i:i+1], []*model.Result{r}); err != nil {
			return err
		}
	}
	if err := w.set.begin(); err != nil {
		return err
	}
	// The plan lists a map's formats together: each map is resized once.
	var kind string
	var data []float32
	var mw, mh int
	var back *lens.BackMapper // maps back to the original pixels of an undistorted input, made once
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
			var err error
			if data, err = w.lens.mapBack(i, r, data, mw, mh, &back); err != nil {
				return fmt.Errorf("%s: %w", w.inputs[i], err)
			}
		}
		// Depth is drawn near-bright; disparity is so already.
		invert := o.kind == "depth" && r.Unit != model.Disparity
		unit := "" // confidence and sky maps have none
		if o.kind == "depth" {
			unit = r.Unit.String()
		}
		if o.format == "png16" && unit == export.UnitMetres {
			warnBeyondRange(w.stderr, w.inputs[i], data, w.png16.MetricRange())
		}
		if err := writeMap(o.path, o.format, export.DepthMap{Width: mw, Height: mh, Depth: data, Unit: unit}, w.cmap, w.png16, invert); err != nil {
			return err
		}
		if !w.quiet {
			fmt.Fprintf(w.stdout, "wrote %s\n", o.path)
		}
	}
	return nil
}

// writeMap writes m in format; png16 keeps the values (metric depth in steps of png16.MetricStep,
// millimetres by default, else the min–max mapping in text chunks: export.EncodeDepthPNG16).
func writeMap(path, format string, m export.DepthMap, cmap imgio.Colormap, png16 export.PNG16Options, invert bool) error {
	data, w, h := m.Depth, m.Width, m.Height
	switch format {
	case "png":
		return imgio.WritePNGColor(path, data, w, h, cmap, invert)
	case "png16":
		png16.Invert = invert
		return export.WriteDepthPNG16(path, m, png16)
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
