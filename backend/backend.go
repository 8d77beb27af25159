// Package backend is da3-go's runtime over ggml: it picks the device, uploads
// weights once, and runs graphs through the ggml scheduler, feeding host
// inputs and reading outputs back.
package backend

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// ErrClosed reports use of a Runtime after Close. A device name that
// matches no device gives an error wrapping ggml.ErrNoDevice.
var ErrClosed = errors.New("runtime is closed")

// discard drops the messages of a caller that gave no logger.
var discard = slog.New(slog.DiscardHandler)

// Options configure a Runtime.
type Options struct {
	// Device is "auto" or "" (the first GPU, else the CPU), "cpu" or a
	// device name such as "CUDA0". With "cpu" the device libraries of
	// DefaultBackendDirs are not loaded (only BackendDirs' are).
	Device string
	// Threads for the CPU backend; 0 means all cores, at most MaxThreads.
	Threads int
	// BackendDirs are searched for dynamic ggml backends (libggml-*.so) in
	// addition to DefaultBackendDirs.
	BackendDirs []string
	// Logger receives the device choice and op fallbacks; nil discards them
	// (a library prints nothing unless given a logger).
	Logger *slog.Logger
	// Kernels is the kernel policy of the graphs (which fused kernels the
	// layers use, in which precision; see ggml/kernels). The zero value
	// means auto: the fastest kernels for the device (DevicePolicy), in
	// Kernels.Precision (default f32; bf16 and int8 on CPUs that have them)
	// with Kernels.Convs (ConvsAuto: f32). An Explicit policy replaces the kernels, for
	// A/B runs and research: kernels this build lacks are dropped, and on
	// devices other than the CPU the CPU kernels are. Open validates it.
	Kernels kernels.Policy
}

// MaxThreads is the most CPU threads a runtime takes (ggml's
// GGML_MAX_N_THREADS; beyond a few thousand, starting them fails and ggml
// aborts).
const MaxThreads = 512

// DefaultBackendDirs are the directories searched for dynamic backends, all
// absolute (a library is never looked for relative to the working directory,
// where anyone who can write a file would get code run):
//
//   - the folder of the executable (symbolic links resolved; for the C ABI,
//     the folder of the shared library, see SetExecutable) and its lib/;
//   - SourceLibDir, the ggml/vendor/lib of the checkout this binary was built
//     from, when known.
//
// Programs add folders through Options.BackendDirs or LoadBackends (the
// command and the C ABI read DA3_BACKEND_PATH, see SplitBackendPath).
func DefaultBackendDirs() []string { return defaultBackendDirs(ggml.Logger()) }

func defaultBackendDirs(log *slog.Logger) []string {
	var dirs []string
	if exe, err := executable(); err == nil {
		d := filepath.Dir(exe)
		dirs = append(dirs, d, filepath.Join(d, "lib"))
	} else {
		log.Warn("backend libraries: cannot find the executable's folder", "err", err)
	}
	if d := SourceLibDir(); d != "" {
		dirs = append(dirs, d)
	}
	return dirs
}

// SplitBackendPath splits a list of folders in the system's list syntax
// (DA3_BACKEND_PATH's) into the absolute ones, cleaned, and the relative
// ones, which are refused: a backend library is never looked for relative
// to the working directory, where anyone who can write a file would get
// code run. Empty entries are dropped.
func SplitBackendPath(list string) (dirs, refused []string) {
	for _, d := range filepath.SplitList(list) {
		switch {
		case d == "":
		case !filepath.IsAbs(d):
			refused = append(refused, d)
		default:
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs, refused
}

var exeOverride struct {
	sync.Mutex
	path string
}

// SetExecutable names the file whose folder DefaultBackendDirs searches
// instead of the executable's: the C ABI's shared library, which is loaded by
// programs that live elsewhere. It must be an absolute path; call it before
// the first Open.
func SetExecutable(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("backend: executable path %q is not absolute", path)
	}
	exeOverride.Lock()
	defer exeOverride.Unlock()
	exeOverride.path = path
	return nil
}

// executable is the absolute path of the executable (or SetExecutable's
// file), symbolic links resolved.
func executable() (string, error) {
	exeOverride.Lock()
	exe := exeOverride.path
	exeOverride.Unlock()
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", err
		}
	}
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(exe) {
		return "", fmt.Errorf("executable path %q is not absolute", exe)
	}
	return exe, nil
}

// sourceLibDir is set at link time by the Makefile:
// -ldflags "-X github.com/da3-go/da3-go/backend.sourceLibDir=$(CURDIR)/ggml/vendor/lib".
var sourceLibDir string

// SourceLibDir is the ggml/vendor/lib folder of the source checkout this
// binary was built from (where make cuda and make cpu-dl install), an
// absolute path: the one the Makefile sets at link time, else the one this
// source file's path gives when the build kept it (go build and go test
// without -trimpath); "" when neither is known.
func SourceLibDir() string {
	if sourceLibDir != "" {
		if filepath.IsAbs(sourceLibDir) {
			return filepath.Clean(sourceLibDir)
		}
		return ""
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Join(filepath.Dir(filepath.Dir(file)), "ggml", "vendor", "lib")
}

var loadOnce sync.Once

// cudaTF32Env is the switch of ggml/patches/cuda/0001-tf32-opt-out.patch.
const cudaTF32Env = "GGML_CUDA_DISABLE_TF32"

// Runtime owns the backends and the scheduler. It is safe for concurrent use;
// calls to Run are serialised.
type Runtime struct {
	mu         sync.Mutex
	dev        ggml.Device
	primary    *ggml.Backend // the chosen device's backend
	cpu        *ggml.Backend // CPU fallback (same as primary on CPU)
	sched      *ggml.Scheduler
	threads    int
	log        *slog.Logger
	closed     bool
	stats      Stats
	schedNodes int
	kernels    kernels.Policy
	packed     map[*ggml.Tensor]*kernels.PackedWeight // weights packed once (UsePacked)
	wino       *kernels.WinogradCache                 // the Winograd kernels' transforms, from run to run (CPU)
	winoBound  int                                    // the most wino can come to hold (kernels.WinogradTransformBound)
	// abortEvery is the scheduler's abort interval in nodes
	// (ggml.Scheduler.EnableAbort; 0: between splits only); schedAbortOnly
	// leaves the backends' own abort flags unset on a cancel. Both are for
	// the tests, which stop a CPU graph through the scheduler alone as a
	// device graph is stopped.
	abortEvery     int
	schedAbortOnly bool
	// profiling times every node of the runs (ProfileOps), gathered by op
	// in opTimes and by node in nodeTimes.
	profiling bool
	opTimes   map[string]*OpTime
	nodeTimes map[nodeKey]*NodeTime
}

// UsePacked makes the graphs of later runs multiply by the packed forms of
// weights (kernels.SetPacked; Weights.Pack makes them) where their kernel
// variant and precision match; nil stops it.
func (rt *Runtime) UsePacked(ws map[*ggml.Tensor]*kernels.PackedWeight) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.packed = ws
}

// Stats describe the last graph run.
type Stats struct {
	Nodes          int
	Splits         int
	ComputeBuffers map[string]uint64 // bytes per backend name
	Fallbacks      map[string]int    // op name -> nodes that ran on the CPU instead of the device
	// Ops counts the graph's nodes by op name (views, reshapes and
	// permutations left out): which ops the layers chose, e.g. CUSTOM for
	// the CPU kernels (ggml/kernels) or FLASH_ATTN_EXT.
	Ops map[string]int
}

// resolvePolicy is the policy of the graphs on dev for the one the options
// give (see Options.Kernels): the one place it is validated.
func resolvePolicy(given kernels.Policy, dev ggml.Device) (kernels.Policy, error) {
	cpu := dev.Type() == ggml.DeviceCPU
	routing := DevicePolicy(dev)
	p := routing
	if given.Explicit {
		if err := given.Check(); err != nil && given.Variant != kernels.VariantAuto {
			return p, err
		}
		p = given.Mask()
		if !cpu { // the custom ops run on the CPU backend only; norms are routed as the device needs
			p = p.CPUOnlyOff()
			p.ContiguousNorm = routing.ContiguousNorm
		}
	}
	p.StripBytes, p.ScoreBytes = given.StripBytes, given.ScoreBytes
	p.Precision, p.Convs = kernels.PrecisionF32, kernels.ConvsF32
	if err := given.Validate(); err != nil {
		return p, err
	}
	if given.Precision != kernels.PrecisionF32 {
		if !cpu {
			return p, fmt.Errorf("%w: %s products are computed by the CPU kernels, not on %s", kernels.ErrPrecision, given.Precision, dev.Name())
		}
		p.Precision = given.Precision
		if given.Convs == kernels.ConvsNarrow || given.Convs == kernels.ConvsStrided {
			p.Convs = given.Convs
		}
		if err := p.Check(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Open chooses the device and creates its backend and a CPU fallback.
func Open(opts Options) (*Runtime, error) {
	if err := ggml.CheckVersion(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = discard
	}
	// Refused or failing folders are logged; the devices of the others are used. A CPU runtime
	// loads none of the default folders' device libraries: probing for a device it will not use
	// (a Vulkan loader and its drivers) cost 17 MiB of resident memory.
	if !strings.EqualFold(opts.Device, "cpu") {
		loadOnce.Do(func() { loadBackends(defaultBackendDirs(log), log) })
	}
	loadBackends(opts.BackendDirs, log)

	dev, err := pickDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	if dev.Backend() == "CUDA" && os.Getenv(cudaTF32Env) == "" {
		// ggml-cuda multiplies f32 matrices with TF32 (10-bit mantissas:
		// DA3-BASE depth 2-3e-3 of its maximum away from the CPU's); with the
		// patch in ggml/patches/cuda this keeps them f32, as PyTorch does by
		// default. Read when the first cuBLAS handle is made; setting the
		// variable to 0 before that allows TF32 (docs/gpu.md).
		os.Setenv(cudaTF32Env, "1")
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if opts.Threads > MaxThreads {
		return nil, fmt.Errorf("threads %d: at most %d", opts.Threads, MaxThreads)
	}
	threads = min(threads, MaxThreads)
	cpu := dev.Type() == ggml.DeviceCPU
	rt := &Runtime{dev: dev, threads: threads, log: log}
	if rt.kernels, err = resolvePolicy(opts.Kernels, dev); err != nil {
		return nil, err
	}
	if rt.primary, err = dev.NewBackend(); err != nil {
		return nil, err
	}
	if cpu {
		rt.cpu = rt.primary
	} else if rt.cpu, err = ggml.CPUDevice().NewBackend(); err != nil {
		rt.primary.Close()
		return nil, err
	}
	for _, b := range rt.backends() {
		if _, err := b.SetThreads(threads); err != nil {
			rt.Close()
			return nil, err
		}
		// Where a backend supports it, a cancelled Run stops its graph
		// after the node in flight (see Run).
		if _, err := b.EnableAbort(); err != nil {
			rt.Close()
			return nil, err
		}
	}
	if cpu && runtime.GOARCH == "amd64" && !ggml.HasAVX2() {
		log.Warn("ggml's CPU backend was compiled without AVX2 (CGO_CFLAGS without -march): it runs about 35x slower; build with CGO_CFLAGS=\"-O3 -march=native\" (see the README's Library section)")
	}
	free, total := dev.Memory()
	log.Info("device", "name", dev.Name(), "description", dev.Description(), "type", dev.Type().String(),
		"free_MiB", free>>20, "total_MiB", total>>20, "threads", threads)
	if !cpu {
		log.Debug("device routing", "flash_attention", rt.kernels.Flash, "direct_conv", rt.kernels.DirectConv,
			"contiguous_norm", rt.kernels.ContiguousNorm)
	}
	return rt, nil
}

func pickDevice(name string) (ggml.Device, error) {
	switch strings.ToLower(name) {
	case "", "auto":
		for _, d := range ggml.Devices() {
			if d.Type() == ggml.DeviceGPU {
				return d, nil
			}
		}
		for _, d := range ggml.Devices() {
			if d.Type() == ggml.DeviceIGPU {
				return d, nil
			}
		}
		return ggml.CPUDevice(), nil
	case "cpu":
		return ggml.CPUDevice(), nil
	}
	d, err := ggml.DeviceByName(name)
	if err != nil {
		if refused := BackendErrors(); len(refused) > 0 {
			return ggml.Device{}, fmt.Errorf("%w; %w", err, errors.Join(refused...))
		}
		return ggml.Device{}, err
	}
	return d, nil
}

func (rt *Runtime) backends() []*ggml.Backend {
	if rt.primary == rt.cpu {
		return []*ggml.Backend{rt.cpu}
	}
	return []*ggml.Backend{rt.primary, rt.cpu}
}

// Device is the chosen device.
func (rt *Runtime) Device() ggml.Device { return rt.dev }

// IsCPU reports whether the chosen device is the CPU.
func (rt *Runtime) IsCPU() bool { return rt.dev.Type() == ggml.DeviceCPU }

// Kernels is the kernel policy set on every graph the runtime builds.
func (rt *Runtime) Kernels() kernels.Policy { return rt.kernels }

// Threads is the CPU thread count.
func (rt *Runtime) Threads() int { return rt.threads }

// LastStats describes the last Run.
func (rt *Runtime) LastStats() Stats {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.stats
}

// Close frees the scheduler and the backends. Idempotent.
func (rt *Runtime) Close() error {
	if rt == nil {
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil
	}
	rt.closed = true
	var errs []error
	errs = append(errs, rt.sched.Close())
	if rt.cpu != rt.primary {
		errs = append(errs, rt.cpu.Close())
	}
	errs = append(errs, rt.primary.Close(), rt.wino.Close())
	rt.sched, rt.cpu, rt.primary, rt.wino = nil, nil, nil, nil
	return errors.Join(errs...)
}
