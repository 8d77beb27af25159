package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

func init() {
	register(command{
		name: "bench",
		usage: "da3-go bench -model M.gguf [-image I[,I2...] | -size WxH | -pixels X.npy] [-views N] [-repeat N] " +
			"[-independent] [-threads T] [-process-res R] [-device D] [-kernels auto|none|LIST] [-precision f32|bf16|int8] [-json] [-cpuprofile F]",
		summary: "time a model: load, first run, median/p90/min per run, peak resident memory, device and buffers",
		run:     runBench,
	})
}

// benchReport is what bench prints; its JSON form is the -json output.
// Times are milliseconds, sizes MiB.
type benchReport struct {
	Model   string `json:"model"`
	Arch    string `json:"arch"`
	Name    string `json:"name"`
	Device  string `json:"device"`
	Threads int    `json:"threads"`
	Kernels string `json:"kernels"`
	// CPUKernels is what the graphs ran: the kernel variant and precision,
	// e.g. "avx512 (bf16)", or "off (ggml's ops)".
	CPUKernels string `json:"cpu_kernels"`
	Precision  string `json:"precision"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`

	// Input: "image", "synthetic" (no -image: a generated image of -size)
	// or "pixels" (-pixels: preprocessed input, network only).
	Input           string `json:"input"`
	Views           int    `json:"views"`
	InputWidth      int    `json:"input_width"`
	InputHeight     int    `json:"input_height"`
	ProcessedWidth  int    `json:"processed_width"`
	ProcessedHeight int    `json:"processed_height"`
	ProcessRes      int    `json:"process_res,omitempty"`

	LoadMS   float64   `json:"load_ms"`
	FirstMS  float64   `json:"first_ms"`
	RunsMS   []float64 `json:"runs_ms"`
	MedianMS float64   `json:"median_ms"`
	P90MS    float64   `json:"p90_ms"`
	MinMS    float64   `json:"min_ms"`
	MeanMS   float64   `json:"mean_ms"`
	// PerViewMS is MedianMS divided by the number of views.
	PerViewMS float64 `json:"per_view_ms"`
	// Independent: the views ran as independent images in one batch
	// (-independent); ImagesPerSec is views per second at the median.
	Independent  bool    `json:"independent"`
	ImagesPerSec float64 `json:"images_per_s"`

	WeightsMiB float64 `json:"weights_mib"`
	// RSS (VmRSS) after Load, and the peak (VmHWM) at the end; 0 where
	// /proc/self/status is unavailable.
	LoadRSSMiB float64 `json:"load_rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// ComputeBuffersMiB per backend, graph nodes and splits of the last run.
	ComputeBuffersMiB map[string]float64 `json:"compute_buffers_mib"`
	Nodes             int                `json:"nodes"`
	Splits            int                `json:"splits"`
	// On a GPU: the weights and the compute buffers held on the device
	// after the runs, the planned device compute buffer of the request (the
	// estimate every run is checked against), the device's memory, and the
	// ops that ran on the CPU instead (none expected).
	DeviceWeightsMiB  float64        `json:"device_weights_mib,omitempty"`
	DeviceComputeMiB  float64        `json:"device_compute_mib,omitempty"`
	EstimateDeviceMiB float64        `json:"estimate_device_mib,omitempty"`
	DeviceFreeMiB     float64        `json:"device_free_mib,omitempty"`
	DeviceTotalMiB    float64        `json:"device_total_mib,omitempty"`
	Fallbacks         map[string]int `json:"fallbacks,omitempty"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["bench"], stdout, stderr)
	var mf modelFlags // -model, -device, -threads, -kernels, -precision, -process-res, … as depth and pose take them
	mf.register(fs)
	imageArg := fs.String("image", "", "input image(s), comma-separated (default: a synthetic image of -size)")
	sizeArg := fs.String("size", "640x427", "size WxH of the synthetic image used without -image (640x427 processes at 504x336 for DA3)")
	pixelsArg := fs.String("pixels", "", "preprocessed input: a float32 .npy of shape (3,H,W), (S,3,H,W) or (1,S,3,H,W); times the network only (its forward pass, without pre- and post-processing)")
	views := fs.Int("views", 0, "views per run (multi-view timing); default: the number of images, else 1")
	independent := fs.Bool("independent", false, "run the views as independent images, batched as one graph without cross-view attention (throughput: images/s)")
	repeat := fs.Int("repeat", 5, "timed runs after the first (warm-up) run")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile (pprof) of the whole command to this file")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() != 0:
		return usageError(fs, stderr, "bench takes no arguments, got %q", fs.Args())
	case mf.model == "":
		return usageError(fs, stderr, "-model is required")
	case mf.metricModel != "":
		return usageError(fs, stderr, "bench times one model: -metric-model is not supported")
	case *repeat < 1:
		return usageError(fs, stderr, "-repeat %d: want at least 1", *repeat)
	case *views < 0:
		return usageError(fs, stderr, "-views %d: must not be negative", *views)
	case *pixelsArg != "" && *imageArg != "":
		return usageError(fs, stderr, "-pixels and -image exclude each other")
	}
	opts, err := mf.options()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	ropt, err := mf.runOptions()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	synthW, synthH, err := parseSize(*sizeArg)
	if err != nil {
		return usageError(fs, stderr, "-size: %v", err)
	}
	setupLog(stderr, mf.verbose, mf.quiet)
	progress := func(format string, args ...any) {
		if !mf.quiet {
			fmt.Fprintf(stderr, "da3-go bench: "+format+"\n", args...)
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fail(stderr, fmt.Errorf("cpu profile: %w", err))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(stderr, fmt.Errorf("cpu profile: %w", err))
		}
		defer pprof.StopCPUProfile()
	}

	rep := benchReport{Threads: mf.threads, Kernels: strings.ToLower(mf.kernels), ProcessRes: mf.processRes,
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if rep.Threads == 0 {
		rep.Threads = runtime.NumCPU()
	}

	// Inputs are prepared before the model is loaded so that decoding does
	// not count towards the load time.
	var imgs []model.Image
	var pixels []float32
	var pw, ph int
	switch {
	case *pixelsArg != "":
		var shape []int
		pixels, shape, err = imgio.ReadNPY(*pixelsArg)
		if err != nil {
			return fail(stderr, err)
		}
		S, err := pixelViews(shape)
		if err != nil {
			return fail(stderr, fmt.Errorf("%s: %w", *pixelsArg, err))
		}
		pw, ph = shape[len(shape)-1], shape[len(shape)-2]
		if *views != 0 && *views != S {
			if S != 1 {
				return usageError(fs, stderr, "-views %d: %s holds %d views", *views, *pixelsArg, S)
			}
			one := pixels
			pixels = make([]float32, 0, len(one)**views)
			for range *views {
				pixels = append(pixels, one...)
			}
			S = *views
		}
		rep.Input, rep.Views = "pixels", S
		rep.InputWidth, rep.InputHeight, rep.ProcessedWidth, rep.ProcessedHeight = pw, ph, pw, ph
	case *imageArg != "":
		paths := splitList(*imageArg)
		for _, p := range paths {
			im, err := imgio.Decode(p)
			if err != nil {
				return fail(stderr, err)
			}
			imgs = append(imgs, im)
		}
		if *views != 0 {
			// Cycle through the images to make -views of them.
			for len(imgs) < *views {
				imgs = append(imgs, imgs[len(imgs)%len(paths)])
			}
			imgs = imgs[:*views]
		}
		b := imgs[0].Bounds()
		rep.Input, rep.Views, rep.InputWidth, rep.InputHeight = "image", len(imgs), b.Dx(), b.Dy()
	default:
		n := max(*views, 1)
		for v := range n {
			imgs = append(imgs, syntheticImage(synthW, synthH, v))
		}
		rep.Input, rep.Views, rep.InputWidth, rep.InputHeight = "synthetic", n, synthW, synthH
	}

	path, err := resolveModel(ctx, mf.model, mf.quiet, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	rep.Model = path
	update, finish := newBar(-1, "loading", true, mf.quiet, stderr)
	opts.Progress, opts.Logger = update, slog.Default() // the command's log (setupLog)
	t0 := time.Now()
	m, err := model.Load(ctx, path, opts)
	load := time.Since(t0)
	finish()
	if err != nil {
		return fail(stderr, err)
	}
	defer m.Close()
	cfg := m.Config()
	rep.Arch, rep.Name, rep.Device = cfg.Arch.String(), cfg.Name, m.Device()
	rep.CPUKernels, rep.Precision = kernels.Describe(m.Kernels()), opts.Precision.String()
	rep.LoadMS = millis(load)
	rep.WeightsMiB = float64(m.WeightBytes()) / (1 << 20)
	rep.LoadRSSMiB = procStatusMiB("VmRSS")
	progress("loaded %s (%s, %.1f MiB of weights) on %s in %.0f ms", filepath.Base(path), rep.Arch, rep.WeightsMiB, rep.Device, rep.LoadMS)

	opt := ropt
	once := func() (time.Duration, error) {
		start := time.Now()
		var rs []model.Result
		var err error
		switch {
		case pixels != nil && *independent:
			rs, err = m.ForwardIndependent(ctx, model.Pixels{Data: pixels, Width: pw, Height: ph, Views: rep.Views}, opt)
		case pixels != nil:
			rs, err = m.Forward(ctx, model.Pixels{Data: pixels, Width: pw, Height: ph, Views: rep.Views}, opt)
		case *independent:
			rs, err = m.Independent(ctx, imgs, opt)
		default:
			rs, err = m.MultiView(ctx, imgs, opt)
		}
		d := time.Since(start)
		if err == nil && len(rs) > 0 {
			rep.ProcessedWidth, rep.ProcessedHeight = rs[0].ProcessedWidth, rs[0].ProcessedHeight
		}
		return d, err
	}
	d, err := once()
	if err != nil {
		return fail(stderr, err)
	}
	rep.FirstMS = millis(d)
	progress("first run (%dx%d, %d view(s)): %.1f ms", rep.ProcessedWidth, rep.ProcessedHeight, rep.Views, rep.FirstMS)
	for i := range *repeat {
		d, err := once()
		if err != nil {
			return fail(stderr, err)
		}
		rep.RunsMS = append(rep.RunsMS, millis(d))
		progress("run %d/%d: %.1f ms", i+1, *repeat, millis(d))
	}
	st := m.Stats()
	rep.Nodes, rep.Splits = st.Nodes, st.Splits
	rep.ComputeBuffersMiB = map[string]float64{}
	for name, b := range st.ComputeBuffers {
		rep.ComputeBuffersMiB[name] = float64(b) / (1 << 20)
	}
	if dev := m.DeviceMemory(); dev.Device {
		rep.DeviceWeightsMiB = float64(dev.Weights) / (1 << 20)
		rep.DeviceComputeMiB = float64(dev.Compute) / (1 << 20)
		rep.DeviceFreeMiB, rep.DeviceTotalMiB = float64(dev.Free)/(1<<20), float64(dev.Total)/(1<<20)
		rep.Fallbacks = st.Fallbacks
		if rep.Input != "pixels" && len(imgs) > 0 {
			b := imgs[0].Bounds()
			if e, err := m.EstimateMemory(opt, rep.Views, b.Dx(), b.Dy()); err == nil {
				rep.EstimateDeviceMiB = float64(e.DeviceCompute) / (1 << 20)
			}
		} else if e, err := m.EstimateMemory(model.RunOptions{ProcessRes: opt.ProcessRes, ChunkSize: opt.ChunkSize, ProcessedSize: true}, rep.Views, pw, ph); err == nil {
			rep.EstimateDeviceMiB = float64(e.DeviceCompute) / (1 << 20)
		}
	}
	rep.MedianMS, rep.P90MS, rep.MinMS, rep.MeanMS = summarize(rep.RunsMS)
	rep.PerViewMS = rep.MedianMS / float64(rep.Views)
	rep.Independent = *independent
	rep.ImagesPerSec = float64(rep.Views) / (rep.MedianMS / 1000)
	rep.PeakRSSMiB = procStatusMiB("VmHWM")

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail(stderr, fmt.Errorf("write output: %w", err))
		}
		return exitOK
	}
	if err := writeBench(stdout, &rep); err != nil {
		return fail(stderr, fmt.Errorf("write output: %w", err))
	}
	return exitOK
}

func writeBench(w io.Writer, r *benchReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "model      %s (%s %s)\n", r.Model, r.Arch, r.Name)
	fmt.Fprintf(&b, "device     %s, %d threads, kernels %s: %s\n", r.Device, r.Threads, r.Kernels, r.CPUKernels)
	fmt.Fprintf(&b, "input      %s %dx%d, %d view(s), processed %dx%d\n", r.Input, r.InputWidth, r.InputHeight, r.Views, r.ProcessedWidth, r.ProcessedHeight)
	fmt.Fprintf(&b, "load       %.1f ms\n", r.LoadMS)
	fmt.Fprintf(&b, "first run  %.1f ms\n", r.FirstMS)
	fmt.Fprintf(&b, "runs       %d: median %.1f ms, p90 %.1f ms, min %.1f ms, mean %.1f ms", len(r.RunsMS), r.MedianMS, r.P90MS, r.MinMS, r.MeanMS)
	if r.Views > 1 {
		kind := "view"
		if r.Independent {
			kind = "image"
		}
		fmt.Fprintf(&b, " (%.1f ms per %s, %.2f images/s)", r.PerViewMS, kind, r.ImagesPerSec)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "memory     weights %.1f MiB, RSS after load %.1f MiB, peak RSS %.1f MiB\n", r.WeightsMiB, r.LoadRSSMiB, r.PeakRSSMiB)
	names := make([]string, 0, len(r.ComputeBuffersMiB))
	for n := range r.ComputeBuffersMiB {
		names = append(names, n)
	}
	slices.Sort(names)
	var bufs []string
	for _, n := range names {
		bufs = append(bufs, fmt.Sprintf("%s %.1f MiB", n, r.ComputeBuffersMiB[n]))
	}
	fmt.Fprintf(&b, "graph      %d nodes, %d splits, compute buffers: %s\n", r.Nodes, r.Splits, strings.Join(bufs, ", "))
	if r.DeviceTotalMiB > 0 {
		fb := "none"
		if len(r.Fallbacks) > 0 {
			ops := make([]string, 0, len(r.Fallbacks))
			for op, n := range r.Fallbacks {
				ops = append(ops, fmt.Sprintf("%s×%d", op, n))
			}
			sort.Strings(ops)
			fb = strings.Join(ops, " ")
		}
		fmt.Fprintf(&b, "on device  weights %.1f MiB, compute %.1f MiB (planned %.1f MiB); %.0f of %.0f MiB free; CPU fallbacks: %s\n",
			r.DeviceWeightsMiB, r.DeviceComputeMiB, r.EstimateDeviceMiB, r.DeviceFreeMiB, r.DeviceTotalMiB, fb)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarize returns the median, the 90th percentile (nearest rank), the
// minimum and the mean of xs (not empty).
func summarize(xs []float64) (median, p90, lo, mean float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		median = s[n/2]
	} else {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	p90 = s[int(math.Ceil(0.9*float64(n)))-1]
	for _, x := range s {
		mean += x
	}
	return median, p90, s[0], mean / float64(n)
}

// procStatusMiB reads a kB field (VmRSS, VmHWM) of /proc/self/status in MiB;
// 0 when unavailable.
func procStatusMiB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
}

func parseSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || w < 1 || h < 1 || w > 16384 || h > 16384 {
		return 0, 0, fmt.Errorf("%q: want WxH with sides 1 to 16384", s)
	}
	return w, h, nil
}

// syntheticImage is a deterministic test scene (smooth gradients, a disc and
// a stripe pattern, varied per view) so that runs are reproducible without
// an image file.
func syntheticImage(w, h, view int) *image.NRGBA {
	im := image.NewNRGBA(image.Rect(0, 0, w, h))
	shift := float64(view) * 0.07
	cx, cy, r := (0.45+shift)*float64(w), 0.55*float64(h), 0.2*float64(min(w, h))
	for y := range h {
		for x := range w {
			u, v := float64(x)/float64(w), float64(y)/float64(h)
			rr := 0.5 + 0.5*math.Sin(6*u+3*v+shift*10)
			gg := v
			bb := 0.5 + 0.5*math.Cos(11*u*v+shift)
			if math.Hypot(float64(x)-cx, float64(y)-cy) < r {
				rr, gg, bb = 0.9, 0.3, 0.2
			}
			if (x/16+y/16)%7 == 0 {
				gg = 1 - gg
			}
			im.SetNRGBA(x, y, color.NRGBA{uint8(255 * rr), uint8(255 * gg), uint8(255 * bb), 255})
		}
	}
	return im
}

// pixelViews checks a preprocessed input's shape, (3,H,W), (S,3,H,W) or
// (1,S,3,H,W), and returns S.
func pixelViews(shape []int) (int, error) {
	switch {
	case len(shape) == 3 && shape[0] == 3:
		return 1, nil
	case len(shape) == 4 && shape[1] == 3 && shape[0] >= 1:
		return shape[0], nil
	case len(shape) == 5 && shape[0] == 1 && shape[2] == 3 && shape[1] >= 1:
		return shape[1], nil
	}
	return 0, fmt.Errorf("shape %v is not (3,H,W), (S,3,H,W) or (1,S,3,H,W)", shape)
}
