package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/tsdf"
	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

func init() {
	register(command{
		name:    "reconstruct",
		usage:   "da3-go reconstruct -model M.gguf [flags] IMAGE|DIR... [-list FILE] [-video FILE -fps N]",
		summary: "3D scene outputs of images taken as views of one scene: point cloud (PLY), GLB, fused mesh, COLMAP, NPZ, depth visualisation, 3D Gaussians (PLY, video)",
		run:     runReconstruct,
	})
}

// reconstructFormats are the outputs of reconstruct, in the order they are written, with the file or
// directory each one writes under -o.
var reconstructFormats = []struct{ name, path string }{
	{"glb", "scene.glb"},
	{"ply", "scene.ply"},
	{"colmap", "cameras, images, points3D (.bin, or .txt with -colmap-txt)"},
	{"colmap_tracks", "the same, each point observed by every view that sees it (for bundle adjustment)"},
	{"npz", "exports/npz/results.npz"},
	{"mini_npz", "exports/mini_npz/results.npz"},
	{"depth_vis", "depth_vis/0000.jpg, …"},
	{"gs_ply", "gs_ply/0000.ply: 3D Gaussians, DA3-GIANT"},
	{"gs_video", "gs_video/0000_<path>.mp4: a video flying through the 3D Gaussians (DA3-GIANT; ffmpeg)"},
	{"mesh_ply", "mesh.ply: the views' depth fused into one triangle mesh (TSDF)"},
	{"mesh_glb", "mesh.glb: the fused mesh as GLB"},
	{"mesh_points", "mesh_points.ply: the fused mesh's vertices as a point cloud, one surface where the views' clouds double it"},
}

// needsCamera reports the formats that place points in 3D.
func needsCamera(format string) bool {
	switch format {
	case "glb", "ply", "colmap", "colmap_tracks", "mesh_ply", "mesh_glb", "mesh_points":
		return true
	}
	return false
}

type reconstructFlags struct {
	modelFlags
	inputFlags
	streamFlags
	out                          string
	formats                      string
	colmapTxt                    bool
	independent                  bool
	confThresh                   float64
	confPercentile, ensurePct    float64
	maxPoints                    int
	seed                         uint64
	noCameras                    bool
	cameraSize                   float64
	keepSky                      bool
	filterBlackBG, filterWhiteBG bool
	intrinsics                   string
	overwrite                    bool
	alignDepth                   string
	alignScale                   float64 // -align-depth-scale
	voxel, maxDepth              float64
	maxBlocks                    int
	gsVideo                      gsVideoFlags
}

func (f *reconstructFlags) register(fs *flag.FlagSet) {
	f.modelFlags.register(fs)
	f.modelFlags.lens.register(fs)
	f.inputFlags.register(fs)
	f.streamFlags.register(fs)
	f.gsVideo.register(fs)
	names := make([]string, len(reconstructFormats))
	for i, x := range reconstructFormats {
		names[i] = x.name + " (" + x.path + ")"
	}
	fs.StringVar(&f.out, "o", "da3-scene", "output directory")
	fs.StringVar(&f.formats, "format", "glb", "comma-separated outputs: "+strings.Join(names, ", "))
	fs.BoolVar(&f.colmapTxt, "colmap-txt", false, "write the COLMAP model as text instead of binary")
	fs.BoolVar(&f.independent, "independent", false, "treat each image as its own scene (outputs in -o/<image name>/)")
	fs.Float64Var(&f.confThresh, "conf-thresh", 1.05, "GLB/PLY: base confidence threshold, clamped to [P(conf-percentile), P(ensure-percentile)]")
	fs.Float64Var(&f.confPercentile, "conf-percentile", 40, "confidence percentile below which points are dropped (GLB, PLY, COLMAP)")
	fs.Float64Var(&f.ensurePct, "ensure-percentile", 90, "GLB/PLY: upper percentile the threshold is clamped to")
	fs.IntVar(&f.maxPoints, "max-points", 1_000_000, "GLB/PLY (and COLMAP of a streamed run): at most this many points, uniformly subsampled (0 = all)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the -max-points subsample")
	fs.BoolVar(&f.noCameras, "no-cameras", false, "GLB: leave out the camera frusta")
	fs.Float64Var(&f.cameraSize, "camera-size", 0.03, "GLB: camera frustum depth as a fraction of the scene size")
	fs.BoolVar(&f.keepSky, "keep-sky", false, "keep sky pixels (sky map ≥ 0.3) in point clouds")
	fs.BoolVar(&f.filterBlackBG, "filter-black-bg", false, "drop near-black pixels (all channels < 16)")
	fs.BoolVar(&f.filterWhiteBG, "filter-white-bg", false, "drop near-white pixels (all channels ≥ 240)")
	fs.Float64Var(&f.voxel, "voxel", 0, fmt.Sprintf("mesh_ply/mesh_glb: voxel size in the depth's unit (0: the median depth / %d, doubled while the volume exceeds -max-blocks)", tsdf.AutoVoxelDivisor))
	fs.IntVar(&f.maxBlocks, "max-blocks", 0, fmt.Sprintf("mesh_ply/mesh_glb: at most this many blocks of %d³ voxels, %d KiB each (0: %d, %d MiB)",
		tsdf.BlockSize, tsdf.BlockBytes>>10, tsdf.DefaultMaxBlocks, tsdf.DefaultMaxBlocks*tsdf.BlockBytes>>20))
	fs.Float64Var(&f.maxDepth, "max-depth", 0, "mesh_ply/mesh_glb: ignore depths beyond this (0: none)")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace files at the output paths that no earlier run into -o wrote (refused without it)")
	fs.StringVar(&f.alignDepth, "align-depth", "", alignDepthUsage+" (and the cameras' translations scale with it)")
	fs.Float64Var(&f.alignScale, "align-depth-scale", 1000, alignScaleUsage)
	fs.StringVar(&f.intrinsics, "intrinsics", "", "fx,fy,cx,cy of the input images' camera, in their pixels, for models without a camera head: "+
		"the camera placed at the world origin for 3D outputs (and metres from the DA3 metric model)")
}

// parse validates the flags; it returns the formats.
func (f *reconstructFlags) parse() ([]string, error) {
	formats := splitList(f.formats)
	if len(formats) == 0 {
		return nil, errors.New("-format is empty")
	}
	for _, fm := range formats {
		known := false
		for _, x := range reconstructFormats {
			known = known || x.name == fm
		}
		if !known {
			return nil, fmt.Errorf("unknown -format %q (glb, ply, colmap, colmap_tracks, npz, mini_npz, depth_vis, gs_ply, gs_video, mesh_ply, mesh_glb, mesh_points)", fm)
		}
	}
	if slices.Contains(formats, "colmap") && slices.Contains(formats, "colmap_tracks") {
		return nil, errors.New("-format colmap and colmap_tracks write the same files: pick one")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"-conf-percentile", f.confPercentile}, {"-ensure-percentile", f.ensurePct}} {
		if !(p.v >= 0 && p.v <= 100) {
			return nil, fmt.Errorf("%s %g out of range 0–100", p.name, p.v)
		}
	}
	if math.IsNaN(f.confThresh) {
		return nil, errors.New("-conf-thresh is NaN")
	}
	if f.maxPoints < 0 {
		return nil, errors.New("-max-points must be 0 (all) or positive")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"-voxel", f.voxel}, {"-max-depth", f.maxDepth}} {
		if !(p.v >= 0) || math.IsInf(p.v, 0) {
			return nil, fmt.Errorf("%s %g must be a non-negative number (0: %s)", p.name, p.v, map[string]string{"-voxel": "automatic", "-max-depth": "none"}[p.name])
		}
	}
	if f.maxBlocks < 0 {
		return nil, errors.New("-max-blocks must be 0 (the default) or positive")
	}
	if !(f.cameraSize >= 0) || math.IsInf(f.cameraSize, 0) {
		return nil, fmt.Errorf("-camera-size %g must be a non-negative number", f.cameraSize)
	}
	if strings.TrimSpace(f.out) == "" {
		return nil, errors.New("-o is empty")
	}
	if err := f.streamFlags.check(f.independent); err != nil {
		return nil, err
	}
	if f.alignDepth != "" {
		switch {
		case slices.Contains(formats, "gs_ply"), slices.Contains(formats, "gs_video"):
			return nil, errors.New("-align-depth does not rescale the 3D Gaussians: it does not go with -format gs_ply or gs_video")
		case f.cameras != "":
			return nil, errors.New("-align-depth and -cameras both set the scene's scale: give one")
		}
	}
	if slices.Contains(formats, "gs_video") {
		if f.cameras != "" {
			return nil, errGSVideoCameras
		}
		if err := f.gsVideo.check(); err != nil {
			return nil, err
		}
	}
	return formats, nil
}

func (f *reconstructFlags) pointOptions() export.Options {
	o := export.DefaultOptions()
	o.ConfThreshold, o.ConfPercentile, o.EnsurePercentile = f.confThresh, f.confPercentile, f.ensurePct
	o.KeepSky, o.FilterBlackBG, o.FilterWhiteBG = f.keepSky, f.filterBlackBG, f.filterWhiteBG
	return o
}

// meshOptions are the fusion's options: the point cloud's pixel selection, -voxel, -max-blocks, -max-depth.
func (f *reconstructFlags) meshOptions() export.MeshOptions {
	return export.MeshOptions{Points: f.pointOptions(), Volume: tsdf.Options{VoxelSize: f.voxel, MaxBlocks: f.maxBlocks, MaxDepth: f.maxDepth}}
}

func (f *reconstructFlags) colmapOptions() export.Options {
	o := export.COLMAPOptions()
	o.ConfPercentile = f.confPercentile
	o.KeepSky, o.FilterBlackBG, o.FilterWhiteBG = f.keepSky, f.filterBlackBG, f.filterWhiteBG
	return o
}

// runReconstruct validates the flags, plans every output (before the
// model loads), loads the model and writes the scene: one, one per image
// (-independent), or in windows.
func runReconstruct(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	fs := newFlags(commands["reconstruct"], stdout, stderr)
	r := &reconstructRun{fs: fs, stdout: stdout, stderr: stderr}
	f := &r.f
	f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	setupLog(stderr, f.verbose, f.quiet)
	return runStages(ctx, fs, &f.modelFlags, &f.inputFlags, r, stderr)
}

// reconstructRun is one reconstruct command: its flags, then what
// validate, plan and run find.
type reconstructRun struct {
	f              reconstructFlags
	fs             *flag.FlagSet
	stdout, stderr io.Writer

	formats []string
	opt     model.RunOptions
	k       *model.Intrinsics // -intrinsics
	in      *inputs
	names   []string    // the images' unique base names
	size    image.Point // of the first image
	// orientation is the first image's Exif orientation.
	orientation imgio.Orientation
	align       *depthAligner
	out         runOutputs
}

// validate checks the flags and turns them into the run's options; the
// problems are usage errors.
func (r *reconstructRun) validate() error {
	f := &r.f
	if f.model == "" {
		return errUsage("-model is required")
	}
	var err error
	if r.formats, err = f.parse(); err != nil {
		return asUsage(err)
	}
	if r.opt, err = f.runOptions(); err != nil {
		return asUsage(err)
	}
	// The official exporters work on the network's maps, at the processed size.
	r.opt.ProcessedSize = true
	if f.intrinsics != "" {
		if r.k, err = parseIntrinsics(f.intrinsics); err != nil {
			return errUsage("-intrinsics: " + err.Error())
		}
	}
	if err := f.lens.parse(f.cameras, f.intrinsics); err != nil {
		return asUsage(err)
	}
	return nil
}

// plan names and checks every output, looks at the previous run's outputs
// and makes the directories, then reads the images' headers: all before
// the model loads.
func (r *reconstructRun) plan(in *inputs) error {
	r.in, r.names = in, imageNames(in.names)
	f, o := &r.f, &r.out
	if err := o.made.prepare(f.out); err != nil {
		return err
	}
	paths := f.scenePaths(r.formats, r.names)
	for _, p := range paths {
		if err := atomicfile.Check(p, r.in.paths...); err != nil {
			return err
		}
	}
	var err error
	if o.set, err = planOutputSet(f.out, paths, r.in.paths, func(string) bool { return true }, f.overwrite); err != nil {
		return err
	}
	if !f.quiet {
		o.set.stderr = r.stderr
	}
	var dirs []string
	if f.streamFlags.dir != "" {
		dirs = append(dirs, f.streamFlags.dir)
	}
	for _, p := range paths {
		if d := filepath.Dir(p); d != filepath.Clean(f.out) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := o.made.prepare(d); err != nil {
			return err
		}
	}
	if r.align, err = planAlign(f.alignDepth, f.alignScale, r.in.paths, f.quiet, r.stderr); err != nil {
		return asUsage(err)
	}
	if r.align != nil && f.lens.base != nil && !f.lens.keep {
		return errUsage("-align-depth with -camera-model: the measurements are in the original image's pixels, the model's maps in the undistorted view's; add -keep-undistorted and give the measurements in that view")
	}
	if r.size, err = checkImages(r.in.paths); err != nil {
		return err
	}
	hd, err := imgio.DecodeHeader(r.in.paths[0])
	r.orientation = hd.Orientation
	return err
}

func (r *reconstructRun) written() *runOutputs { return &r.out }

// checkModel refuses formats and -intrinsics the model cannot serve, and
// notes a depth that is not metres.
func (r *reconstructRun) checkModel(m da3.Runner) error {
	f := &r.f
	cfg, caps := m.Config(), m.Capabilities()
	if r.k == nil && f.lens.base != nil && (!caps.Camera || caps.NeedsIntrinsics) {
		// -camera-model: the camera of a model without a camera head is the undistorted pinhole view's.
		size := r.size
		if f.rotates(caps) && r.orientation >= 5 && r.orientation <= 8 {
			size = image.Pt(size.Y, size.X)
		}
		var err error
		if r.k, err = f.lens.pinholeIntrinsics(size); err != nil {
			return err
		}
	}
	k := r.k
	switch {
	case k != nil && caps.Camera:
		return fmt.Errorf("-intrinsics: model %s predicts its own cameras; -intrinsics is for models without a camera head", f.model)
	case k != nil && caps.NeedsIntrinsics:
		r.opt.Intrinsics = k // focal-normalised output: metres with the focal length
	case k == nil && caps.NeedsIntrinsics && !f.quiet && r.align == nil:
		fmt.Fprintf(r.stderr, "da3-go: note: %s predicts focal-normalised depth, NOT metres; pass -intrinsics fx,fy,cx,cy to get metres\n", f.model)
	}
	for _, fm := range r.formats {
		if needsCamera(fm) && !caps.Camera && k == nil {
			return fmt.Errorf("-format %s: %w: %s is a %s model; 3D outputs need a DA3 any-view or nested model (da3-small, -base, -large, -giant), or -intrinsics fx,fy,cx,cy",
				fm, model.ErrNoCamera, f.model, cfg.Arch)
		}
	}
	if !f.independent && !caps.MultiView && len(r.in.paths) > 1 {
		return fmt.Errorf("%s is a %s model, which runs each image alone: use -independent to write one scene per image", f.model, cfg.Arch)
	}
	return nil
}

// run writes the scene: in windows when the images do not fit as one, as
// one scene, or one scene per image.
func (r *reconstructRun) run(ctx context.Context, m da3.Runner) error {
	f := &r.f
	r.opt.Gaussians = slices.Contains(r.formats, "gs_ply") || slices.Contains(r.formats, "gs_video")
	if err := r.checkModel(m); err != nil {
		return err
	}
	w := &sceneWriter{ctx: ctx, f: f, set: r.out.set, formats: r.formats, stdout: r.stdout, stderr: r.stderr, intrinsics: r.k, lens: &f.lens}
	asScene := !f.independent && m.Capabilities().MultiView
	lay, err := f.streamFlags.layoutFor(r.fs, m, len(r.in.paths), asScene, r.size, &r.opt)
	if err != nil {
		return err
	}
	if lay.stream {
		if err := f.lens.noStream(); err != nil {
			return err
		}
		if r.align != nil {
			return errors.New("-align-depth: the images run in windows (streamed), which is not supported with -align-depth; run fewer images at once")
		}
		return f.reconstructStreamed(ctx, m, w, r.in.paths, r.names, lay, r.opt, r.stderr)
	}
	imgs, err := f.modelFlags.decode(r.in.paths, m, r.stderr)
	if err != nil {
		return err
	}
	opt := r.opt
	f.given.apply(&opt)
	if !asScene {
		return r.each(ctx, m, imgs, opt, w)
	}
	if len(imgs) > 1 && !f.quiet {
		fmt.Fprintf(r.stderr, "da3-go: running %d images as views of one scene (%s; -stream to run them in windows, -independent one by one)\n", len(imgs), lay.why)
	}
	bar := newSceneBar(viewCount(len(imgs)), f.quiet, r.stderr)
	opt.Progress = bar.tell
	res, err := m.MultiView(ctx, imgs, opt)
	bar.finish()
	if err != nil {
		return err
	}
	collect()
	if r.align != nil {
		if err := r.align.alignScene(r.in.paths, res); err != nil {
			return err
		}
	}
	return w.writeResults(f.out, res, r.names, 0)
}

// each writes one scene per image (-independent, or a single image of a
// model that runs images alone).
func (r *reconstructRun) each(ctx context.Context, m da3.Runner, imgs []image.Image, opt model.RunOptions, w *sceneWriter) error {
	f, names := &r.f, r.names
	bar := newItemBar(len(imgs), "reconstruct", f.quiet, r.stderr)
	defer bar.finish()
	opt.Progress = bar.tell
	for i, im := range imgs {
		bar.cover(i, 1)
		res, err := m.Depth(ctx, im, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", r.in.names[i], err)
		}
		rs := []model.Result{*res}
		if r.align != nil {
			if err := r.align.alignEach(r.in.names[i:i+1], r.in.paths[i:i+1], rs); err != nil {
				return err
			}
		}
		dir := f.out
		if f.independent {
			dir = filepath.Join(f.out, strings.TrimSuffix(names[i], filepath.Ext(names[i])))
		}
		if err := w.writeResults(dir, rs, names[i:i+1], i); err != nil {
			return err
		}
	}
	return nil
}

// imageNames returns the images' base names, made unique by a _<k> suffix where two inputs share one
// (COLMAP identifies images by name).
func imageNames(paths []string) []string {
	names := make([]string, len(paths))
	seen := map[string]int{}
	for i, p := range paths {
		n := filepath.Base(p)
		seen[n]++
		if k := seen[n]; k > 1 {
			ext := filepath.Ext(n)
			n = strings.TrimSuffix(n, ext) + "_" + strconv.Itoa(k) + ext
		}
		names[i] = n
	}
	return names
}

// scenePaths are the files the scene outputs will write, in the order they are written.
func (f *reconstructFlags) scenePaths(formats, names []string) []string {
	var paths []string
	dirs, views := []string{f.out}, len(names)
	if f.independent {
		dirs, views = nil, 1
		for _, n := range names {
			dirs = append(dirs, filepath.Join(f.out, strings.TrimSuffix(n, filepath.Ext(n))))
		}
	}
	for _, dir := range dirs {
		for _, fm := range formats {
			switch fm {
			case "glb", "ply":
				paths = append(paths, filepath.Join(dir, "scene."+fm))
			case "mesh_ply", "mesh_glb", "mesh_points":
				paths = append(paths, filepath.Join(dir, meshFile(fm)))
			case "colmap", "colmap_tracks":
				ext := map[bool]string{false: ".bin", true: ".txt"}[f.colmapTxt]
				for _, n := range []string{"cameras", "images", "points3D"} {
					paths = append(paths, filepath.Join(dir, n+ext))
				}
			case "npz", "mini_npz":
				paths = append(paths, filepath.Join(dir, "exports", fm, "results.npz"))
			case "gs_ply":
				paths = append(paths, filepath.Join(dir, "gs_ply", "0000.ply"))
			case "gs_video":
				paths = append(paths, filepath.Join(dir, "gs_video", f.gsVideo.file(views)))
			case "depth_vis":
				for i := range views {
					paths = append(paths, filepath.Join(dir, "depth_vis", fmt.Sprintf("%04d.jpg", i)))
				}
			}
		}
	}
	return paths
}

type sceneWriter struct {
	ctx        context.Context // cancels the long outputs (gs_video)
	f          *reconstructFlags
	set        *outputSet
	formats    []string
	stdout     io.Writer
	stderr     io.Writer         // for the progress bar
	intrinsics *model.Intrinsics // camera of results without one (-intrinsics)
	lens       *lensFlags        // maps the views of undistorted inputs back to their original pixels
}

// pinholeCamera is the camera given by -intrinsics for a result of a model without a camera head: at the
// world origin, intrinsics scaled from the original image to the maps.
func pinholeCamera(r *model.Result, k *model.Intrinsics) (*model.Camera, error) {
	if r.Cropped {
		return nil, errors.New("-intrinsics: the crop resize methods are not supported with given intrinsics; use upper_bound_resize or lower_bound_resize")
	}
	ko := [3][3]float64{{k.Fx, 0, k.Cx}, {0, k.Fy, k.Cy}, {0, 0, 1}}
	sx, sy := float64(r.Width)/float64(r.OrigWidth), float64(r.Height)/float64(r.OrigHeight)
	kp := [3][3]float64{{k.Fx * sx, 0, k.Cx * sx}, {0, k.Fy * sy, k.Cy * sy}, {0, 0, 1}}
	return &model.Camera{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: kp, IntrinsicsOriginal: ko}, nil
}

// reconstructStreamed runs the frames in windows and writes the merged scene.
func (f *reconstructFlags) reconstructStreamed(ctx context.Context, m da3.Runner, w *sceneWriter, paths, names []string, lay layout,
	opt model.RunOptions, stderr io.Writer) error {
	if msg := f.streamUnsupported(w.formats); msg != "" {
		return errors.New(msg)
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "da3-go: %s\n", lay.describe(len(paths)))
	}
	cfg := m.Config()
	rec, err := runStreamed(ctx, m, f.modelFlags.frames(paths, names, f.rotates(m.Capabilities())), lay, &f.streamFlags, f.modelFlags.threads,
		f.streamDir(f.out), f.fingerprint(cfg), opt, f.quiet, stderr, nil)
	if err != nil {
		return err
	}
	cams, err := rec.Cameras()
	if err != nil {
		return err
	}
	if err := w.write(f.out, sceneSource{views: rec, cams: cams, sampled: true}); err != nil {
		return err
	}
	finishStream(rec, &f.streamFlags, stderr)
	return nil
}

// streamUnsupported names the reason a streamed run cannot write the outputs asked for, "" when it can.
func (f *reconstructFlags) streamUnsupported(formats []string) string {
	switch {
	case slices.Contains(formats, "gs_ply"), slices.Contains(formats, "gs_video"):
		fm := "gs_ply"
		if !slices.Contains(formats, fm) {
			fm = "gs_video"
		}
		return "-format " + fm + ": the 3D Gaussians are not merged across windows; drop " + fm + " or -stream"
	case f.cameras != "":
		return "-cameras: streaming with known cameras is not supported; run the frames as one scene (-no-stream)"
	}
	return ""
}

// sceneSource is a scene to write: its views (with their maps) and their cameras.
type sceneSource struct {
	views export.ViewSource
	// cams are the views for their cameras (the views themselves in memory, maps left out when streamed).
	cams []export.View
	// sampled: the clouds are subsampled to -max-points while they are built (NewPointCloudFrom), COLMAP's
	// too, so memory does not grow with the frames (a streamed scene).
	sampled bool
	// res are the model's results (gs_ply), in memory only.
	res []model.Result
}

// writeResults writes the formats of one scene run in memory into dir; res are the results of inputs
// first, first+1, ….
func (w *sceneWriter) writeResults(dir string, res []model.Result, names []string, first int) error {
	for i := range res {
		if res[i].Camera == nil && w.intrinsics != nil {
			c, err := pinholeCamera(&res[i], w.intrinsics)
			if err != nil {
				return err
			}
			res[i].Camera = c
		}
	}
	views, err := model.Views(res, names)
	if err != nil {
		return err
	}
	if err := w.lens.mapBackViews(views, res, first); err != nil {
		return err
	}
	return w.write(dir, sceneSource{views: export.ViewSlice(views), cams: views, res: res})
}

// write writes the formats of one scene into dir.
func (w *sceneWriter) write(dir string, s sceneSource) error {
	if err := w.set.begin(); err != nil {
		return err
	}
	// A bar over the formats; the files written and the notes are printed
	// once it is gone, so that the two never share a line of the terminal.
	bar := newItemBar(len(w.formats), "writing", w.f.quiet, w.stderr)
	var wrote []string
	sw := &sceneWrite{sceneWriter: w, dir: dir, s: s, bar: bar}
	defer func() {
		bar.finish()
		if !w.f.quiet {
			for _, n := range sw.notes {
				fmt.Fprintf(w.stderr, "da3-go: %s\n", n)
			}
			for _, p := range wrote {
				fmt.Fprintf(w.stdout, "wrote %s\n", p)
			}
		}
	}()
	for i, fm := range w.formats {
		bar.cover(i, 1)
		paths, err := sw.format(fm)
		if err != nil {
			return err
		}
		wrote = append(wrote, paths...)
	}
	return nil
}

// sceneWrite is one scene being written into dir.
type sceneWrite struct {
	*sceneWriter
	dir   string
	s     sceneSource
	pc    *export.PointCloud // GLB and PLY share it
	mesh  *tsdf.Mesh         // mesh_ply and mesh_glb share it
	bar   *runBar            // over the formats; gs_video moves it through its frames
	notes []string           // printed once the scene is written
}

// format writes one format and returns the files it wrote.
func (sw *sceneWrite) format(fm string) ([]string, error) {
	switch fm {
	case "glb", "ply":
		path, err := sw.points(fm)
		return []string{path}, err
	case "mesh_ply", "mesh_glb", "mesh_points":
		path, err := sw.meshFormat(fm)
		return []string{path}, err
	case "colmap", "colmap_tracks":
		return sw.colmap(fm == "colmap_tracks")
	case "npz", "mini_npz":
		path := filepath.Join(sw.dir, "exports", fm, "results.npz")
		if err := mkdirFor(path); err != nil {
			return nil, err
		}
		return []string{path}, export.WriteNPZFrom(path, sw.s.views, fm == "mini_npz")
	case "gs_ply":
		path := filepath.Join(sw.dir, "gs_ply", "0000.ply")
		if err := mkdirFor(path); err != nil {
			return nil, err
		}
		return []string{path}, writeGaussians(path, sw.s.res)
	case "gs_video":
		return sw.gaussianVideo()
	case "depth_vis":
		return sw.depthVis()
	}
	return nil, nil
}

// gaussianVideo writes gs_video/0000_<path>.mp4.
func (sw *sceneWrite) gaussianVideo() ([]string, error) {
	path := filepath.Join(sw.dir, "gs_video", sw.f.gsVideo.file(len(sw.s.res)))
	if err := mkdirFor(path); err != nil {
		return nil, err
	}
	ctx := sw.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	note, err := writeGaussianVideo(ctx, path, sw.s.res, &sw.f.gsVideo, func(done, total int) {
		sw.bar.tell(model.Progress{Stage: "gs_video", Part: 1, Parts: 1, Done: done, Total: total})
	})
	if err != nil {
		return nil, err
	}
	sw.notes = append(sw.notes, note)
	return []string{path}, nil
}

// mkdirFor makes the directory of path.
func mkdirFor(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	return nil
}

// cloud is the scene's point cloud under o.
func (sw *sceneWrite) cloud(o export.Options) (*export.PointCloud, error) {
	if sw.s.sampled {
		return export.NewPointCloudFrom(sw.s.views, o, sw.f.maxPoints, sw.f.seed)
	}
	return export.NewPointCloud(sw.s.cams, o)
}

// points writes scene.glb or scene.ply.
func (sw *sceneWrite) points(fm string) (string, error) {
	f := sw.f
	if sw.pc == nil {
		pc, err := sw.cloud(f.pointOptions())
		if err != nil {
			return "", err
		}
		sw.pc = pc
	}
	path := filepath.Join(sw.dir, "scene."+fm)
	if fm == "glb" {
		return path, export.WriteGLB(path, sw.pc, sw.s.cams, export.GLBOptions{MaxPoints: f.maxPoints, Seed: f.seed,
			ShowCameras: !f.noCameras, CameraSize: f.cameraSize})
	}
	return path, export.WritePLY(path, sw.pc.Subsample(f.maxPoints, f.seed))
}

// meshFile is the file a mesh format writes.
func meshFile(fm string) string {
	return map[string]string{"mesh_ply": "mesh.ply", "mesh_glb": "mesh.glb", "mesh_points": "mesh_points.ply"}[fm]
}

// meshFormat writes mesh.ply or mesh.glb, fusing the views once for both.
func (sw *sceneWrite) meshFormat(fm string) (string, error) {
	f := sw.f
	if sw.mesh == nil {
		m, st, err := export.NewMesh(sw.s.views, f.meshOptions())
		if err != nil {
			return "", fmt.Errorf("mesh: %w", err)
		}
		sw.mesh = m
		sw.notes = append(sw.notes, meshNote(st, m))
	}
	path := filepath.Join(sw.dir, meshFile(fm))
	switch fm {
	case "mesh_glb":
		return path, export.WriteMeshGLB(path, sw.mesh, sw.s.cams, export.GLBOptions{ShowCameras: !f.noCameras, CameraSize: f.cameraSize})
	case "mesh_points":
		return path, export.WritePLY(path, export.MeshCloud(sw.mesh))
	}
	var inputs []string
	for _, v := range sw.s.cams {
		if v.Source != "" {
			inputs = append(inputs, v.Source)
		}
	}
	return path, export.WriteMeshPLY(path, sw.mesh, inputs...)
}

// meshNote describes a fusion: the voxel and how it was chosen, the volume's size, the mesh's.
func meshNote(st export.MeshStats, m *tsdf.Mesh) string {
	voxel := fmt.Sprintf("voxel %.4g (-voxel)", st.VoxelSize)
	if st.AutoVoxel {
		voxel = fmt.Sprintf("voxel %.4g (the median depth %.4g / %d", st.VoxelSize, st.MedianDepth, tsdf.AutoVoxelDivisor)
		if st.Coarsened > 0 {
			voxel += fmt.Sprintf(", doubled %d times to stay within %d blocks", st.Coarsened, st.MaxBlocks)
		}
		voxel += ")"
	}
	return fmt.Sprintf("mesh: %d views fused at %s, truncation %.4g; %d blocks (%d MiB of at most %d MiB); %d vertices, %d triangles",
		st.Frames, voxel, st.Truncation, st.Blocks, st.Bytes>>20, int64(st.MaxBlocks)*tsdf.BlockBytes>>20, m.Len(), m.Triangles())
}

// colmap writes the COLMAP model's three files, with multi-view tracks when tracks is set.
func (sw *sceneWrite) colmap(tracks bool) ([]string, error) {
	cpc, err := sw.cloud(sw.f.colmapOptions())
	if err != nil {
		return nil, err
	}
	switch {
	case !tracks:
		err = export.WriteCOLMAP(sw.dir, cpc, sw.s.cams, sw.f.colmapTxt)
	case len(sw.s.cams) > 0 && sw.s.cams[0].Depth == nil:
		err = errors.New("-format colmap_tracks needs every view's depth in memory: not available for runs in windows (use -format colmap)")
	default:
		err = export.WriteCOLMAPTracks(sw.dir, cpc, sw.s.cams, sw.f.colmapTxt, export.TrackOptions{})
	}
	if err != nil {
		return nil, err
	}
	ext := map[bool]string{false: ".bin", true: ".txt"}[sw.f.colmapTxt]
	var paths []string
	for _, n := range []string{"cameras", "images", "points3D"} {
		paths = append(paths, filepath.Join(sw.dir, n+ext))
	}
	return paths, nil
}

// depthVis writes each view's depth visualisation.
func (sw *sceneWrite) depthVis() ([]string, error) {
	var paths []string
	for i := range sw.s.views.Len() {
		v, err := sw.s.views.View(i)
		if err != nil {
			return paths, err
		}
		path := filepath.Join(sw.dir, "depth_vis", fmt.Sprintf("%04d.jpg", i))
		if i == 0 {
			if err := mkdirFor(path); err != nil {
				return nil, err
			}
		}
		if err := export.WriteDepthVis(path, &v); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
