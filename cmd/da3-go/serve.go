package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/server"
)

func init() {
	register(command{
		name:    "serve",
		usage:   "da3-go serve -model M [-metric-model M2] [-model NAME=M3 ...] [-addr 127.0.0.1:8080] [flags]",
		summary: "serve loaded models over HTTP: POST /v1/depth, GET /v1/models, /healthz, /metrics, /openapi.json and a web page at /",
		run:     runServe,
	})
}

// serveModel is one -model (PATH, a published name, or NAME=PATH) and the
// -metric-model that follows it, if any (a nested pair).
type serveModel struct{ model, metric string }

// modelList is the repeatable -model flag.
type modelList []serveModel

func (l *modelList) String() string { return fmt.Sprint(*l) }
func (l *modelList) Set(s string) error {
	*l = append(*l, serveModel{model: s})
	return nil
}

// metricFlag is -metric-model: the metric half of the -model before it.
type metricFlag struct{ models *modelList }

func (f metricFlag) String() string { return "" }
func (f metricFlag) Set(s string) error {
	l := *f.models
	switch {
	case len(l) == 0:
		return errors.New("-metric-model pairs with the -model before it: give -model first")
	case l[len(l)-1].metric != "":
		return errors.New("two -metric-model for one -model")
	}
	l[len(l)-1].metric = s
	return nil
}

// newServer is server.New; tests replace it to see the options serve gives.
var newServer = server.New

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["serve"], stdout, stderr)
	var models modelList
	fs.Var(&models, "model", "model GGUF file or published name, or NAME=FILE to choose the name requests use (repeatable; the first is the default)")
	fs.Var(metricFlag{&models}, "metric-model", "metric half of a nested model (DA3NESTED-GIANT-LARGE: depth in metres), paired with the -model before it")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	var load modelFlags // -device, -threads, -kernels, -precision, -narrow-convs, -max-device-memory as depth takes them
	load.registerLoad(fs, "CPU threads per run (0 = all cores divided among -parallel runs)")
	parallel := fs.Int("parallel", 1, "concurrent runs per model (each a loaded instance; on the CPU instances share the memory-mapped weights)")
	maxQueue := fs.Int("max-queue", 16, "requests that may wait for a model; more get 503")
	maxBody := fs.Int64("max-body", 64, "largest request body in MiB (413 above)")
	maxPixels := fs.Int64("max-pixels", 40_000_000, "most pixels of a request's images, all views together (413 above)")
	maxImagePixels := fs.Int64("max-image-pixels", 0, fmt.Sprintf("most pixels of one image, read from its header before decoding (413 above; each side at most 16384); 0: the larger of %d and -max-pixels", imgio.DefaultMaxPixels))
	maxMem := fs.Int64("max-request-memory", 1024, "most memory in MiB one request may need, estimated before it runs: decoded images, model buffers, maps in every format, response (413 above)")
	maxViews := fs.Int("max-views", 16, "most images per request (413 above)")
	maxRes := fs.Int("max-process-res", 2048, "largest process_res a request may ask for")
	timeout := fs.Duration("timeout", 2*time.Minute, "per-request time limit, queue included (503 past it); also how long shutdown waits for runs in flight")
	verbose := fs.Bool("v", false, "debug log on stderr")
	quiet := fs.Bool("quiet", false, "no access log")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "serve takes no arguments, got %q", fs.Args())
	}
	if len(models) == 0 {
		return usageError(fs, stderr, "-model is required")
	}
	lo, err := load.options()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *maxBody <= 0 || *maxBody > 4096 {
		return usageError(fs, stderr, "-max-body %d out of range (1..4096 MiB)", *maxBody)
	}
	if *maxPixels <= 0 || *maxImagePixels < 0 {
		return usageError(fs, stderr, "-max-pixels and -max-image-pixels must be positive")
	}
	// The decoder's budget per image: a request's bound above the default
	// raises it, so that -max-pixels alone governs unless this is given.
	if *maxImagePixels == 0 {
		*maxImagePixels = max(imgio.DefaultMaxPixels, *maxPixels)
	}
	imgio.SetMaxPixels(*maxImagePixels)
	setupServeLog(stderr, *verbose, *quiet)

	opts := server.Options{Device: lo.Device, Threads: lo.Threads, Load: lo, Parallel: *parallel, MaxQueue: *maxQueue,
		MaxBodyBytes: *maxBody << 20, MaxPixels: *maxPixels, MaxRequestMemory: *maxMem << 20, MaxViews: *maxViews, MaxProcessRes: *maxRes, Timeout: *timeout,
		Logger: slog.Default()} // setupServeLog's
	noticed := map[string]bool{} // one licence notice per checkpoint (the two files of a nested pair share one)
	for _, m := range models {
		name, src, ok := strings.Cut(m.model, "=")
		if !ok {
			name, src = "", m.model
		}
		spec := server.ModelSpec{Name: name}
		r, err := resolveModelInfo(ctx, src, *quiet, stderr)
		if err != nil {
			return fail(stderr, fmt.Errorf("-model %s: %w", m.model, err))
		}
		spec.Path = r.path
		spec.Licence, spec.Source = fileLicence(r)
		served := []resolvedModel{r}
		if m.metric != "" {
			rm, err := resolveModelInfo(ctx, m.metric, *quiet, stderr)
			if err != nil {
				return fail(stderr, fmt.Errorf("-metric-model %s: %w", m.metric, err))
			}
			spec.MetricPath = rm.path
			if lic, src := fileLicence(rm); spec.Licence == "" || licence.NonCommercial(lic) {
				spec.Licence, spec.Source = lic, src // the stricter licence of the pair
			}
			served = append(served, rm)
		}
		for _, r := range served {
			lic, src := fileLicence(r)
			if key := src + " " + lic; r.noticed || !noticed[key] {
				noticed[key] = r.noticed || licenceNotice(stderr, filepath.Base(r.path), lic, src)
			}
		}
		opts.Models = append(opts.Models, spec)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(stderr, err)
	}
	s, err := newServer(ctx, opts)
	if err != nil {
		ln.Close()
		return fail(stderr, err)
	}
	defer s.Close()
	if !server.ViewerBundled() {
		slog.Warn("the web page's 3D viewer is not bundled in this binary (build with npm available: make web)")
	}
	fmt.Fprintf(stderr, "da3-go serve: listening on http://%s\n", ln.Addr())

	// SIGTERM (and the SIGINT that cancels ctx) starts a graceful shutdown:
	// the requests in flight finish, new ones are refused.
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	if err := s.Serve(sctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, err)
	}
	fmt.Fprintln(stderr, "da3-go serve: stopped")
	return exitOK
}

// setupServeLog logs at Info (the access log) unless quiet.
func setupServeLog(stderr io.Writer, verbose, quiet bool) {
	setupLog(stderr, verbose, false)
	if !verbose && !quiet {
		setLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
}
