package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
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
			"[-independent] [-threads T] [-process-res R] [-device D] [-kernels auto|none|LIST] [-precision f32|bf16|int8|int8c] [-json] [-save-depth F.npy] [-op-profile N [-op-nodes K]] [-cpuprofile F]",
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
	// OpProfile (-op-profile): where the time of the profiled runs went,
	// by op, longest first.
	OpProfile []benchOp `json:"op_profile,omitempty"`
	// OpNodes (-op-nodes K): the K nodes of the profiled runs that took
	// longest, longest first.
	OpNodes []benchNode `json:"op_nodes,omitempty"`
}

// benchNode is one node's part of the profiled runs: its place in its
// graph, op, output and first source's shapes, and milliseconds per run.
type benchNode struct {
	Index int     `json:"index"`
	Op    string  `json:"op"`
	Shape [4]int  `json:"shape"`
	Src   [4]int  `json:"src"`
	MS    float64 `json:"ms_per_run"`
	// Computed is how often a run computed it (1 unless a run of several
	// graphs has nodes alike in place, op and shapes).
	Computed float64 `json:"computed_per_run"`
}

// benchOp is one op's part of the profiled runs: its nodes and
// milliseconds per run, and its share of their total.
type benchOp struct {
	Op      string  `json:"op"`
	Nodes   float64 `json:"nodes_per_run"`
	MS      float64 `json:"ms_per_run"`
	Percent float64 `json:"percent"`
}

// benchFlags are bench's flags: the model's, as depth and pose take them,
// and what to time.
type benchFlags struct {
	modelFlags
	image, size, pixels string
	views, repeat       int
	independent, json   bool
	cpuProfile          string
	saveDepth           string
	opProfile, opNodes  int
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	f.modelFlags.register(fs)
	fs.StringVar(&f.image, "image", "", "input image(s), comma-separated (default: a synthetic image of -size)")
	fs.StringVar(&f.size, "size", "640x427", "size WxH of the synthetic image used without -image (640x427 processes at 504x336 for DA3)")
	fs.StringVar(&f.pixels, "pixels", "", "preprocessed input: a float32 .npy of shape (3,H,W), (S,3,H,W) or (1,S,3,H,W); times the network only (its forward pass, without pre- and post-processing)")
	fs.IntVar(&f.views, "views", 0, "views per run (multi-view timing); default: the number of images, else 1")
	fs.BoolVar(&f.independent, "independent", false, "run the views as independent images, batched as one graph without cross-view attention (throughput: images/s)")
	fs.IntVar(&f.repeat, "repeat", 5, "timed runs after the first (warm-up) run")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile (pprof) of the whole command to this file")
	fs.IntVar(&f.opProfile, "op-profile", 0, "after the timed runs, N more with every node timed, and print where their time went by op (ggml's ops and the CPU kernels); nodes then run one at a time, so these runs are slower and not in the timings")
	fs.IntVar(&f.opNodes, "op-nodes", 0, "with -op-profile: also print the K nodes that took longest (place in the graph, op, output and first source's shapes, ms per run)")
	fs.StringVar(&f.saveDepth, "save-depth", "", "write the depth of the last run to this file: float32 .npy of shape (views, H, W), for accuracy checks against other engines (after the timings and the peak RSS are taken)")
}

// runBench prepares the input, loads the model, times a first run and
// -repeat more, and reports them with the memory the runs took.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["bench"], stdout, stderr)
	var f benchFlags
	f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	b := &bench{f: &f, stderr: stderr}
	if err := b.validate(fs); err != nil {
		return exitFor(fs, stderr, err)
	}
	setupLog(stderr, f.verbose, f.quiet)
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return fail(stderr, err)
		}
		defer stop()
	}
	// Inputs are prepared before the model is loaded so that decoding does
	// not count towards the load time.
	if err := b.input(); err != nil {
		return exitFor(fs, stderr, err)
	}
	m, err := b.load(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	defer m.Close()
	if err := b.time(ctx, m); err != nil {
		return fail(stderr, err)
	}
	b.measure(m)
	if err := b.profileOps(ctx, m); err != nil {
		return fail(stderr, err)
	}
	if err := b.writeDepth(); err != nil {
		return fail(stderr, err)
	}
	if err := b.write(stdout); err != nil {
		return fail(stderr, fmt.Errorf("write output: %w", err))
	}
	return exitOK
}

// bench is one bench command: its flags, options, input and report.
type bench struct {
	f      *benchFlags
	stderr io.Writer
	opts   model.Options
	opt    model.RunOptions
	w, h   int // of the synthetic image
	imgs   []model.Image
	pixels []float32 // -pixels, pw×ph each view
	pw, ph int
	rep    benchReport
	last   []model.Result // the last run's results, kept for -save-depth
}

// validate checks the flags and turns them into options; the problems are
// usage errors.
func (b *bench) validate(fs *flag.FlagSet) error {
	f := b.f
	switch {
	case fs.NArg() != 0:
		return errUsage(fmt.Sprintf("bench takes no arguments, got %q", fs.Args()))
	case f.model == "":
		return errUsage("-model is required")
	case f.metricModel != "":
		return errUsage("bench times one model: -metric-model is not supported")
	case f.repeat < 1:
		return errUsage(fmt.Sprintf("-repeat %d: want at least 1", f.repeat))
	case f.opProfile < 0:
		return errUsage(fmt.Sprintf("-op-profile %d: want a number of runs, 0 for none", f.opProfile))
	case f.opNodes < 0:
		return errUsage(fmt.Sprintf("-op-nodes %d: want a number of nodes, 0 for none", f.opNodes))
	case f.opNodes > 0 && f.opProfile == 0:
		return errUsage("-op-nodes lists the nodes of the profiled runs: give -op-profile N too")
	case f.views < 0:
		return errUsage(fmt.Sprintf("-views %d: must not be negative", f.views))
	case f.pixels != "" && f.image != "":
		return errUsage("-pixels and -image exclude each other")
	}
	var err error
	if b.opts, err = f.options(); err != nil {
		return asUsage(err)
	}
	if b.opt, err = f.runOptions(); err != nil {
		return asUsage(err)
	}
	if b.w, b.h, err = parseSize(f.size); err != nil {
		return errUsage("-size: " + err.Error())
	}
	b.rep = benchReport{Threads: f.threads, Kernels: strings.ToLower(f.kernels), ProcessRes: f.processRes,
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b.rep.Threads == 0 {
		b.rep.Threads = runtime.NumCPU()
	}
	return nil
}

// startCPUProfile profiles the command into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// progress logs a step on stderr unless -quiet.
func (b *bench) progress(format string, args ...any) {
	if !b.f.quiet {
		fmt.Fprintf(b.stderr, "da3-go bench: "+format+"\n", args...)
	}
}

// input prepares what every run takes: preprocessed pixels, images, or a
// synthetic image, -views of them.
func (b *bench) input() error {
	f, rep := b.f, &b.rep
	switch {
	case f.pixels != "":
		return b.pixelInput()
	case f.image != "":
		paths := splitList(f.image)
		for _, p := range paths {
			im, err := imgio.Decode(p)
			if err != nil {
				return err
			}
			b.imgs = append(b.imgs, im)
		}
		if f.views != 0 {
			// Cycle through the images to make -views of them.
			for len(b.imgs) < f.views {
				b.imgs = append(b.imgs, b.imgs[len(b.imgs)%len(paths)])
			}
			b.imgs = b.imgs[:f.views]
		}
		bd := b.imgs[0].Bounds()
		rep.Input, rep.Views, rep.InputWidth, rep.InputHeight = "image", len(b.imgs), bd.Dx(), bd.Dy()
	default:
		n := max(f.views, 1)
		for v := range n {
			b.imgs = append(b.imgs, syntheticImage(b.w, b.h, v))
		}
		rep.Input, rep.Views, rep.InputWidth, rep.InputHeight = "synthetic", n, b.w, b.h
	}
	return nil
}

// pixelInput reads -pixels, repeating a single view -views times.
func (b *bench) pixelInput() error {
	f, rep := b.f, &b.rep
	pixels, shape, err := imgio.ReadNPY(f.pixels)
	if err != nil {
		return err
	}
	S, err := pixelViews(shape)
	if err != nil {
		return fmt.Errorf("%s: %w", f.pixels, err)
	}
	b.pw, b.ph = shape[len(shape)-1], shape[len(shape)-2]
	if f.views != 0 && f.views != S {
		if S != 1 {
			return errUsage(fmt.Sprintf("-views %d: %s holds %d views", f.views, f.pixels, S))
		}
		one := pixels
		pixels = make([]float32, 0, len(one)*f.views)
		for range f.views {
			pixels = append(pixels, one...)
		}
		S = f.views
	}
	b.pixels = pixels
	rep.Input, rep.Views = "pixels", S
	rep.InputWidth, rep.InputHeight, rep.ProcessedWidth, rep.ProcessedHeight = b.pw, b.ph, b.pw, b.ph
	return nil
}

// load resolves and loads the model, timing the load.
func (b *bench) load(ctx context.Context) (*model.Model, error) {
	f, rep := b.f, &b.rep
	path, err := resolveModel(ctx, f.model, f.quiet, b.stderr)
	if err != nil {
		return nil, err
	}
	rep.Model = path
	update, finish := newBar(-1, "loading", true, f.quiet, b.stderr)
	opts := b.opts
	opts.Progress, opts.Logger = update, slog.Default() // the command's log (setupLog)
	t0 := time.Now()
	m, err := model.Load(ctx, path, opts)
	load := time.Since(t0)
	finish()
	if err != nil {
		return nil, err
	}
	cfg := m.Config()
	rep.Arch, rep.Name, rep.Device = cfg.Arch.String(), cfg.Name, m.Device()
	rep.CPUKernels, rep.Precision = kernels.Describe(m.Kernels()), opts.Kernels.Precision.String()
	rep.LoadMS = millis(load)
	rep.WeightsMiB = float64(m.WeightBytes()) / (1 << 20)
	rep.LoadRSSMiB = procStatusMiB("VmRSS")
	b.progress("loaded %s (%s, %.1f MiB of weights) on %s in %.0f ms", filepath.Base(path), rep.Arch, rep.WeightsMiB, rep.Device, rep.LoadMS)
	return m, nil
}

// once runs the input once and returns how long it took.
func (b *bench) once(ctx context.Context, m *model.Model) (time.Duration, error) {
	px := model.Pixels{Data: b.pixels, Width: b.pw, Height: b.ph, Views: b.rep.Views}
	start := time.Now()
	var rs []model.Result
	var err error
	switch {
	case b.pixels != nil && b.f.independent:
		rs, err = m.ForwardIndependent(ctx, px, b.opt)
	case b.pixels != nil:
		rs, err = m.Forward(ctx, px, b.opt)
	case b.f.independent:
		rs, err = m.Independent(ctx, b.imgs, b.opt)
	default:
		rs, err = m.MultiView(ctx, b.imgs, b.opt)
	}
	d := time.Since(start)
	if err == nil && len(rs) > 0 {
		b.rep.ProcessedWidth, b.rep.ProcessedHeight = rs[0].ProcessedWidth, rs[0].ProcessedHeight
	}
	if b.f.saveDepth != "" {
		b.last = rs
	}
	return d, err
}

// writeDepth writes the depth maps of the last run to -save-depth as one
// float32 .npy of shape (views, H, W).
func (b *bench) writeDepth() error {
	if b.f.saveDepth == "" {
		return nil
	}
	if len(b.last) == 0 {
		return fmt.Errorf("-save-depth %s: the last run returned no results", b.f.saveDepth)
	}
	w, h := b.last[0].Width, b.last[0].Height
	depth := make([]float32, 0, len(b.last)*w*h)
	for i, r := range b.last {
		if r.Width != w || r.Height != h || len(r.Depth) != w*h {
			return fmt.Errorf("-save-depth %s: view %d is %dx%d (%d values), view 0 %dx%d", b.f.saveDepth, i, r.Width, r.Height, len(r.Depth), w, h)
		}
		depth = append(depth, r.Depth...)
	}
	if err := imgio.WriteNPY(b.f.saveDepth, depth, len(b.last), h, w); err != nil {
		return fmt.Errorf("-save-depth: %w", err)
	}
	return nil
}

// time times a first run and -repeat more.
func (b *bench) time(ctx context.Context, m *model.Model) error {
	rep := &b.rep
	d, err := b.once(ctx, m)
	if err != nil {
		return err
	}
	rep.FirstMS = millis(d)
	b.progress("first run (%dx%d, %d view(s)): %.1f ms", rep.ProcessedWidth, rep.ProcessedHeight, rep.Views, rep.FirstMS)
	for i := range b.f.repeat {
		d, err := b.once(ctx, m)
		if err != nil {
			return err
		}
		rep.RunsMS = append(rep.RunsMS, millis(d))
		b.progress("run %d/%d: %.1f ms", i+1, b.f.repeat, millis(d))
	}
	rep.MedianMS, rep.P90MS, rep.MinMS, rep.MeanMS = summarize(rep.RunsMS)
	rep.PerViewMS = rep.MedianMS / float64(rep.Views)
	rep.Independent = b.f.independent
	rep.ImagesPerSec = float64(rep.Views) / (rep.MedianMS / 1000)
	return nil
}

// profileOps runs -op-profile more runs with every node timed and adds
// where their time went to the report.
func (b *bench) profileOps(ctx context.Context, m *model.Model) error {
	n := b.f.opProfile
	if n == 0 {
		return nil
	}
	if err := m.ProfileOps(true); err != nil {
		return err
	}
	for i := range n {
		d, err := b.once(ctx, m)
		if err != nil {
			return err
		}
		b.progress("profiled run %d/%d: %.1f ms", i+1, n, millis(d))
	}
	ops, nodes := m.OpProfile(), m.NodeProfile()
	if err := m.ProfileOps(false); err != nil {
		return err
	}
	var total float64
	for _, o := range ops {
		total += o.Time.Seconds() * 1000
	}
	for _, o := range ops {
		ms := o.Time.Seconds() * 1000
		b.rep.OpProfile = append(b.rep.OpProfile, benchOp{Op: o.Op, Nodes: float64(o.Nodes) / float64(n),
			MS: ms / float64(n), Percent: 100 * ms / max(total, 1e-9)})
	}
	for _, t := range nodes[:min(b.f.opNodes, len(nodes))] {
		b.rep.OpNodes = append(b.rep.OpNodes, benchNode{Index: t.Index, Op: t.Op, Shape: t.Shape, Src: t.Src,
			MS: t.Time.Seconds() * 1000 / float64(n), Computed: float64(t.Count) / float64(n)})
	}
	return nil
}

// measure adds the graphs' and the device's memory to the report.
func (b *bench) measure(m *model.Model) {
	rep, opt := &b.rep, b.opt
	st := m.Stats()
	rep.Nodes, rep.Splits = st.Nodes, st.Splits
	rep.ComputeBuffersMiB = map[string]float64{}
	for name, by := range st.ComputeBuffers {
		rep.ComputeBuffersMiB[name] = float64(by) / (1 << 20)
	}
	if dev := m.DeviceMemory(); dev.Device {
		rep.DeviceWeightsMiB = float64(dev.Weights) / (1 << 20)
		rep.DeviceComputeMiB = float64(dev.Compute) / (1 << 20)
		rep.DeviceFreeMiB, rep.DeviceTotalMiB = float64(dev.Free)/(1<<20), float64(dev.Total)/(1<<20)
		rep.Fallbacks = st.Fallbacks
		if rep.Input != "pixels" && len(b.imgs) > 0 {
			bd := b.imgs[0].Bounds()
			if e, err := m.EstimateMemory(opt, rep.Views, bd.Dx(), bd.Dy()); err == nil {
				rep.EstimateDeviceMiB = float64(e.DeviceCompute) / (1 << 20)
			}
		} else if e, err := m.EstimateMemory(model.RunOptions{ProcessRes: opt.ProcessRes, ChunkSize: opt.ChunkSize, ProcessedSize: true}, rep.Views, b.pw, b.ph); err == nil {
			rep.EstimateDeviceMiB = float64(e.DeviceCompute) / (1 << 20)
		}
	}
	rep.PeakRSSMiB = procStatusMiB("VmHWM")
}

// write prints the report, as JSON with -json.
func (b *bench) write(w io.Writer) error {
	if b.f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b.rep)
	}
	return writeBench(w, &b.rep)
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
	if len(r.OpProfile) > 0 {
		var total float64
		for _, o := range r.OpProfile {
			total += o.MS
		}
		fmt.Fprintf(&b, "op profile %.1f ms per profiled run (nodes one at a time):\n", total)
		for _, o := range r.OpProfile {
			fmt.Fprintf(&b, "  %-24s %6.1f nodes %8.2f ms %5.1f %%\n", o.Op, o.Nodes, o.MS, o.Percent)
		}
	}
	if len(r.OpNodes) > 0 {
		fmt.Fprintf(&b, "slowest nodes (ms per profiled run; place in the graph, op, output ← first source):\n")
		for _, t := range r.OpNodes {
			fmt.Fprintf(&b, "  #%-5d %-24s %8.3f ms  %v ← %v\n", t.Index, t.Op, t.MS, t.Shape, t.Src)
		}
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
