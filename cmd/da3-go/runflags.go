package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// modelFlags are the flags shared by the commands that run a model.
type modelFlags struct {
	model, device, kernels string
	precision              string
	narrowConvs            convsFlag
	metricModel            string
	threads                int
	processRes             int
	method                 string
	refView                string
	chunkSize              int
	verbose, quiet         bool
	strict                 bool
	maxMemory              string
	maxDeviceMemory        string
	exifRotate             optionalBool
	rayPose                bool
	raySeed                uint64
	cameras                string
	// given are the cameras read from -cameras by open.
	given *givenCameras
	// lens are the camera-model flags (depth and reconstruct register them).
	lens lensFlags
}

// optionalBool is a boolean flag that remembers whether it was given.
type optionalBool struct{ set, value bool }

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return "auto"
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.value = true, v
	return nil
}

func (b *optionalBool) IsBoolFlag() bool { return true }

// register registers the flags of the commands that run a model: the
// model-loading flags (registerLoad) and those of the run.
func (f *modelFlags) register(fs *flag.FlagSet) {
	f.registerLoad(fs, "CPU threads (0 = all cores)")
	fs.StringVar(&f.model, "model", "", "model GGUF file or published name (see 'da3-go models')")
	fs.StringVar(&f.metricModel, "metric-model", "", "the metric half of the nested model (NAME-metric.gguf from convert, or da3-nested-metric); -model is then its any-view half, and depth and camera translations come out in metres")
	fs.IntVar(&f.processRes, "process-res", 0, "processed resolution (default: 504 for DA3, 518 for DA2)")
	fs.StringVar(&f.method, "process-res-method", "upper_bound_resize", "DA3 resize policy: upper_bound_resize, lower_bound_resize, upper_bound_crop, lower_bound_crop")
	fs.StringVar(&f.refView, "ref-view", "saddle_balanced", "reference view for 3+ views: saddle_balanced, saddle_sim_range, first, middle")
	fs.IntVar(&f.chunkSize, "chunk-size", 8, "views per head chunk in multi-view runs, images per batch with -independent (lower it to save memory)")
	fs.BoolVar(&f.verbose, "v", false, "verbose log on stderr")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bars or informational output")
	fs.BoolVar(&f.strict, "strict", false, "fail when an output holds NaN or Inf values (default: warn)")
	fs.Var(&f.exifRotate, "exif-rotate", "turn JPEGs upright by their Exif orientation (phone photos); -exif-rotate=false keeps the stored pixels. "+
		"Default: as the model's reference code reads files: applied for DA2 (cv2.imread), not for DA3 (PIL)")
	fs.BoolVar(&f.rayPose, "ray-pose", false, "DA3: cameras from the auxiliary ray head instead of the camera decoder (a file converted with -with-aux)")
	fs.Uint64Var(&f.raySeed, "ray-seed", 0, "seed of -ray-pose's RANSAC (the same poses as the official package after torch.manual_seed(seed), on the CPU)")
	fs.StringVar(&f.cameras, "cameras", "", "known cameras of the images (pose-conditioned depth, results in their frame and scale): a pose JSON as 'da3-go pose' writes, or a COLMAP sparse model directory")
	fs.StringVar(&f.maxMemory, "max-memory", "", "refuse requests estimated to need more memory than this (e.g. 4G, 512M); requests that would not fit in the memory left are always refused")
	fs.Func("max-image-pixels", fmt.Sprintf("refuse input images whose header declares more pixels than this, before decoding them (default %d; each side at most 16384)", imgio.DefaultMaxPixels),
		func(s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 {
				return errors.New("want a positive number of pixels")
			}
			imgio.SetMaxPixels(n)
			return nil
		})
}

// registerLoad registers the flags that options reads, those of loading a
// model (serve shares them): -device, -threads (described by threadsUsage),
// -kernels, -precision, -narrow-convs and -max-device-memory.
func (f *modelFlags) registerLoad(fs *flag.FlagSet, threadsUsage string) {
	fs.StringVar(&f.device, "device", "", "device: auto (first GPU, else CPU), cpu (loads no GPU library), or a name from 'da3-go devices' (default $DA3_DEVICE or auto)")
	fs.IntVar(&f.threads, "threads", 0, threadsUsage)
	fs.StringVar(&f.kernels, "kernels", "auto", kernelsUsage)
	fs.StringVar(&f.precision, "precision", "f32", precisionUsage)
	fs.Var(&f.narrowConvs, "narrow-convs", "with -precision bf16, int8 or int8c: the convolutions narrower too, in bf16 (int8c on AVX512_VNNI: its 3x3 convolutions in int8) (a few % faster, less accurate: DA2-Small depth correlation with f32 0.99985 instead of 0.99996 in bf16, 0.9982 instead of 0.9994 in int8c, on random weights); auto: DA3's any-view models under int8c (DA3-BASE 7 % faster, depth correlation with f32 0.99915 instead of 0.99967), and in every other narrow run the heads' stride-2 resize only, in bf16 (DA2-Small 1 % faster, depth correlation 0.99995 instead of 0.99996 in bf16); -narrow-convs=false keeps every convolution f32")
	fs.StringVar(&f.maxDeviceMemory, "max-device-memory", "", "on a GPU: the device memory the model may use, weights and compute buffers (e.g. 6G; default what the device has free); multi-view runs lower their head chunk to fit it, requests that cannot fit are refused")
}

func (f *modelFlags) runOptions() (model.RunOptions, error) {
	m, err := model.ParseResizeMethod(f.method)
	if err != nil {
		return model.RunOptions{}, err
	}
	switch model.RefView(f.refView) {
	case model.RefSaddleBalanced, model.RefSaddleSimRange, model.RefFirst, model.RefMiddle:
	default:
		return model.RunOptions{}, fmt.Errorf("unknown -ref-view %q (saddle_balanced, saddle_sim_range, first, middle)", f.refView)
	}
	if f.processRes < 0 || f.processRes > 4096 { // below the patch size: the model refuses it (the patch comes from the file)
		return model.RunOptions{}, fmt.Errorf("-process-res %d out of range (0..4096)", f.processRes)
	}
	if f.chunkSize < 1 {
		return model.RunOptions{}, fmt.Errorf("-chunk-size must be at least 1")
	}
	maxMem, err := parseBytes(f.maxMemory)
	if err != nil {
		return model.RunOptions{}, fmt.Errorf("-max-memory: %w", err)
	}
	return model.RunOptions{ProcessRes: f.processRes, Method: m, RefView: model.RefView(f.refView), ChunkSize: f.chunkSize, Strict: f.strict,
		RayPose: f.rayPose, RaySeed: f.raySeed, MaxMemory: maxMem}, nil
}

// load resolves the model's files (downloading published names) and opens
// the model, or the nested pair, with a progress bar.
func (f *modelFlags) load(ctx context.Context, stderr io.Writer) (da3.Runner, error) {
	if strings.TrimSpace(f.model) == "" {
		return nil, errUsage("-model is required")
	}
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	var spec da3.Spec
	if spec.Path, err = resolveModel(ctx, f.model, f.quiet, stderr); err != nil {
		return nil, err
	}
	if f.metricModel != "" {
		if spec.MetricPath, err = resolveModel(ctx, f.metricModel, f.quiet, stderr); err != nil {
			return nil, fmt.Errorf("-metric-model: %w", err)
		}
	}
	update, finish := newBar(0, "loading", true, f.quiet, stderr)
	defer finish()
	opts.Progress, opts.Logger = update, slog.Default()
	return da3.Open(ctx, spec, opts)
}

// options are the model.Options of the flags (device, threads, kernels,
// precision); a bad -kernels or -precision is a usage error.
func (f *modelFlags) options() (model.Options, error) {
	policy, err := parseKernels(f.kernels)
	if err != nil {
		return model.Options{}, errUsage(err.Error())
	}
	prec, err := kernels.ParsePrecision(f.precision)
	if err != nil {
		return model.Options{}, errUsage("-" + err.Error())
	}
	if f.threads < 0 || f.threads > backend.MaxThreads {
		return model.Options{}, errUsage(fmt.Sprintf("-threads %d: want 0 (all cores) to %d", f.threads, backend.MaxThreads))
	}
	maxDev, err := parseBytes(f.maxDeviceMemory)
	if err != nil {
		return model.Options{}, errUsage("-max-device-memory: " + err.Error())
	}
	policy.Precision, policy.Convs = prec, kernels.Convs(f.narrowConvs)
	if err := policy.Validate(); err != nil { // the rest is checked against the device when the model loads
		return model.Options{}, errUsage("-narrow-convs needs -precision bf16 or int8 (" + err.Error() + ")")
	}
	return model.Options{Options: backend.Options{Device: deviceOr(f.device), Threads: f.threads, BackendDirs: backendDirs(),
		Kernels: policy}, MaxDeviceMemory: maxDev}, nil
}

// convsFlag is -narrow-convs: auto (the model's choice), or a boolean (alone: true).
type convsFlag kernels.Convs

func (c *convsFlag) String() string {
	switch kernels.Convs(*c) {
	case kernels.ConvsNarrow:
		return "true"
	case kernels.ConvsF32:
		return "false"
	}
	return "auto"
}

func (c *convsFlag) Set(s string) error {
	if s == "auto" {
		*c = convsFlag(kernels.ConvsAuto)
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*c = convsFlag(kernels.ConvsF32)
	if b {
		*c = convsFlag(kernels.ConvsNarrow)
	}
	return nil
}

func (c *convsFlag) IsBoolFlag() bool { return true }

const kernelsUsage = "kernel policy: auto (the fastest for the device), none (ggml's own ops), or a comma list of gemm, winograd, attention, resize, norm, strips, flash, directconv (GPU: ggml_conv_2d_direct) and a CPU variant avx512, avx2 or portable (alone: every kernel in that variant; default $DA3_KERNELS, else the best for the CPU)"

const precisionUsage = "precision of the CPU products: f32, bf16 (linear layers and attention; AVX512_BF16 CPUs), int8 (q8_0 weight matrices in int8, the other products bf16; AVX512_VNNI CPUs) or int8c (the weight matrices quantized to int8 per output channel at load, the activations per row, int32 sums over the whole depth, and the attention too where the CPU has VNNI; AVX512_VNNI CPUs, or any AVX2 CPU in the avx2 kernels, with vpdpbusd where it has AVX-VNNI or AVX512_VNNI: DA3_AVX2_INT8); convolutions f32, but int8 for DA3's any-view models under int8c and the heads' stride-2 resize in bf16 otherwise (see -narrow-convs)"

// parseKernels parses -kernels: the zero policy for auto.
func parseKernels(s string) (kernels.Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return kernels.Policy{}, nil
	case "none":
		return kernels.Policy{Explicit: true, Variant: kernels.VariantOff}, nil
	}
	p := kernels.Policy{Explicit: true}
	named := false
	for _, k := range strings.Split(strings.ToLower(s), ",") {
		k = strings.TrimSpace(k)
		switch k {
		case "gemm":
			p.GEMM, named = true, true
		case "attention":
			p.Attention, named = true, true
		case "resize":
			p.Resize, named = true, true
		case "norm":
			p.Norm, named = true, true
		case "strips":
			p.Strips, named = true, true
		case "flash":
			p.Flash, named = true, true
		case "directconv":
			p.DirectConv, named = true, true
		case "winograd":
			p.Winograd, named = true, true
		case "avx512", "avx2", "portable":
			p.Variant, _ = kernels.ParseVariant(k)
		default:
			return kernels.Policy{}, fmt.Errorf("-kernels %q: want auto, none or a comma list of gemm, winograd, attention, resize, norm, strips, flash, directconv, avx512, avx2, portable", s)
		}
	}
	if !named { // a variant alone: every CPU kernel, in that variant
		p = kernels.CPUKernels(p.Variant)
		p.Explicit = true
	}
	return p, nil
}

type usageErr string

func (e usageErr) Error() string { return string(e) }

func errUsage(msg string) error { return usageErr(msg) }

// asUsage marks err as a usage problem (exit 2), keeping its message.
func asUsage(err error) error { return usageErr(err.Error()) }

// exitFor reports err and returns its exit code: 2 for usage problems
// (errUsage, asUsage), else as fail says.
func exitFor(fs *flag.FlagSet, stderr io.Writer, err error) int {
	var ue usageErr
	if errors.As(err, &ue) {
		return usageError(fs, stderr, "%v", err)
	}
	return fail(stderr, err)
}

// open decodes every input image first (a bad image fails before any model
// work), then loads the model and applies the Exif orientation as -exif-rotate
// says. On failure m is nil and code is the exit code.
func (f *modelFlags) open(ctx context.Context, fs *flag.FlagSet, inputs []string, stderr io.Writer) (imgs []image.Image, m da3.Runner, code int) {
	imgs, orient, err := decodeAll(inputs)
	if err != nil {
		return nil, nil, fail(stderr, err)
	}
	if m, code = f.loadModel(ctx, fs, stderr); m == nil {
		return nil, nil, code
	}
	if err := f.prepare(imgs, orient, inputs, m, stderr); err != nil {
		m.Close()
		return nil, nil, fail(stderr, err)
	}
	return imgs, m, 0
}

// loadModel loads the model; on failure m is nil and code is the exit code.
func (f *modelFlags) loadModel(ctx context.Context, fs *flag.FlagSet, stderr io.Writer) (m da3.Runner, code int) {
	m, err := f.load(ctx, stderr)
	if err != nil {
		return nil, exitFor(fs, stderr, err)
	}
	return m, 0
}

// decode decodes every input image for the loaded model m (see open), for commands that load the model
// before they decide how to read the images (checkImages has read their headers).
func (f *modelFlags) decode(inputs []string, m da3.Runner, stderr io.Writer) ([]image.Image, error) {
	imgs, orient, err := decodeAll(inputs)
	if err != nil {
		return nil, err
	}
	return imgs, f.prepare(imgs, orient, inputs, m, stderr)
}

// decodeAll decodes the images as stored, with their Exif orientations.
func decodeAll(inputs []string) ([]image.Image, []imgio.Orientation, error) {
	imgs := make([]image.Image, len(inputs))
	orient := make([]imgio.Orientation, len(inputs))
	for i, p := range inputs {
		var err error
		if imgs[i], orient[i], err = imgio.DecodeWithOrientation(p); err != nil {
			return nil, nil, err
		}
	}
	return imgs, orient, nil
}

// prepare turns the images by their Exif orientation as -exif-rotate says and reads -cameras.
func (f *modelFlags) prepare(imgs []image.Image, orient []imgio.Orientation, inputs []string, m da3.Runner, stderr io.Writer) error {
	if f.rotates(m.Capabilities()) {
		for i := range imgs {
			imgs[i] = imgio.Orient(imgs[i], orient[i])
		}
	}
	// The cameras must fit the images as the model sees them (after Exif
	// rotation); a bad file fails before anything runs.
	if f.cameras != "" {
		var err error
		if f.given, err = loadCameras(f.cameras, inputs, imgs); err != nil {
			return err
		}
		if f.lens.on {
			f.lens.given = f.given.lenses
		}
		for i, d := range f.given.distorted {
			switch {
			case d && !f.lens.on:
				fmt.Fprintf(stderr, "da3-go: warning: -cameras: %s: the COLMAP camera has lens distortion, which this command ignores (pinhole part used)\n", inputs[i])
			case d && f.given.lenses[i] == nil:
				fmt.Fprintf(stderr, "da3-go: warning: -cameras: %s: the COLMAP camera's model is not one da3-go undistorts (%s); its distortion is ignored (pinhole part used)\n", inputs[i], lens.ModelNames())
			}
		}
	}
	for i := range imgs {
		var err error
		if imgs[i], err = f.lens.undistort(i, imgs[i], inputs[i], f.quiet, stderr); err != nil {
			return err
		}
		if u := f.lens.used[i]; u != nil && f.given != nil {
			k := u.Pinhole.K()
			f.given.intrinsics[i] = model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]}
		}
	}
	return nil
}

// warnNonFinite tells the user that a result holds NaN or Inf values.
func warnNonFinite(stderr io.Writer, input string, r *model.Result) {
	if r.NonFinite != "" {
		fmt.Fprintf(stderr, "da3-go: warning: %s: the outputs hold NaN or Inf values, first at stage %s (the model file or the input is broken; -strict makes this an error)\n", input, r.NonFinite)
	}
}

// warnBeyondRange warns when a metric map holds depths past what its png16 file keeps (they are stored
// as the largest).
func warnBeyondRange(stderr io.Writer, input string, depth []float32, limit float64) {
	n := 0
	for _, v := range depth {
		if float64(v) > limit {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(stderr, "da3-go: warning: %s: %d depths beyond %.6g m are stored as %.6g m in the png16 map (-png16-step kitti keeps up to 256 m)\n", input, n, limit, limit)
	}
}

// rotates reports whether the inputs are turned by their Exif orientation:
// as -exif-rotate says, else as the model's reference pipeline does
// (Capabilities.ExifRotate).
func (f *modelFlags) rotates(caps model.Capabilities) bool {
	if f.exifRotate.set {
		return f.exifRotate.value
	}
	return caps.ExifRotate
}

// parseBytes reads a size such as 4G, 1.5GiB, 512M, 800MB or a byte count
// (binary units; "" is 0).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num := strings.TrimRight(strings.ToUpper(s), "IB")
	mult := int64(1)
	if n := len(num); n > 0 {
		switch num[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			num = num[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 4G, 512M or a byte count)", s)
	}
	return int64(v * float64(mult)), nil
}
