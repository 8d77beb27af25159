// Package server is da3-go's HTTP service: the models stay loaded and
// POST /v1/depth runs them on uploaded images, with a bounded queue, request
// limits, per-request timeouts and cancellation, Prometheus metrics, an
// OpenAPI description and a web page with a 3D viewer.
//
// Routes:
//
//	POST /v1/depth      depth, confidence, sky, cameras, point cloud, scene exports
//	GET  /v1/models     the loaded models
//	GET  /healthz       200 while serving, 503 while shutting down (readiness)
//	GET  /metrics       Prometheus text format
//	GET  /openapi.json  the API description
//	GET  /              the web page (static files under /static/)
//
// Every error is answered with a JSON body {"error": {"code", "type",
// "message"}}: 400 malformed request or options, 413 body or images over the
// limits, 415 other content types, 422 input the model cannot run (undecodable
// image, output the model lacks), 503 queue full, timeout or shutting down.
package server

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// Options configure New. Zero values take the defaults in brackets.
type Options struct {
	Models []ModelSpec
	// Device: auto, cpu or a device name [auto].
	Device string
	// Parallel is the number of concurrent runs per model; each is a loaded
	// instance (on the CPU the weights are memory-mapped, so instances share
	// them) [1].
	Parallel int
	// Threads per instance [all cores / Parallel].
	Threads int
	// MaxQueue is the number of requests that may wait for an instance of a
	// model; more are refused with 503 [16].
	MaxQueue int
	// MaxBodyBytes bounds a request body [64 MiB].
	MaxBodyBytes int64
	// MaxPixels bounds the pixels of a request's images, all views together [40 Mpx].
	MaxPixels int64
	// MaxViews bounds the images of one request [16].
	MaxViews int
	// MaxProcessRes bounds process_res [2048].
	MaxProcessRes int
	// MaxRequestMemory bounds the memory one request may need, estimated
	// before it runs (decoded images, the model's buffers, the output maps
	// in every format asked for and the encoded response); more is refused
	// with 413 [1 GiB].
	MaxRequestMemory int64
	// Timeout bounds one request, queue included [2 min].
	Timeout time.Duration
	// Logger receives the access log and errors; nil discards them.
	Logger *slog.Logger
	// Load holds the other model-loading options: the kernel policy, the
	// precision, narrow convolutions and the device memory budget. Its
	// Device, Threads and Logger are those above; Progress is not used.
	Load model.Options
}

func (o *Options) defaults() {
	o.Parallel = max(o.Parallel, 1)
	if o.Threads <= 0 {
		o.Threads = max(1, runtime.NumCPU()/o.Parallel)
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = 16
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.MaxPixels <= 0 {
		o.MaxPixels = 40_000_000
	}
	if o.MaxViews <= 0 {
		o.MaxViews = 16
	}
	if o.MaxProcessRes <= 0 {
		o.MaxProcessRes = 2048
	}
	if o.MaxRequestMemory <= 0 {
		o.MaxRequestMemory = 1 << 30
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// loadOptions are the model.Options every instance is loaded with.
func (o *Options) loadOptions() model.Options {
	lo := o.Load
	lo.Device, lo.Threads, lo.Logger, lo.Progress = o.Device, o.Threads, o.Logger, nil
	return lo
}

// Server serves loaded models over HTTP. Create it with New, serve it with
// Serve (or mount Handler), and Close it to free the models.
type Server struct {
	opts     Options
	pools    []*pool
	byName   map[string]*pool
	metrics  *metrics
	log      *slog.Logger
	draining atomic.Bool
	handler  http.Handler
	// noViewer serves the page as a binary without the viewer bundle would
	// (tests of the page's fallback).
	noViewer bool
}

// New loads every model (Parallel instances each).
func New(ctx context.Context, opts Options) (s *Server, err error) {
	opts.defaults()
	if len(opts.Models) == 0 {
		return nil, errors.New("no model to serve")
	}
	s = &Server{opts: opts, byName: map[string]*pool{}, metrics: newMetrics(), log: opts.Logger}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for _, spec := range opts.Models {
		var insts []*instance
		for range opts.Parallel {
			in, err := loadInstance(ctx, spec, opts.loadOptions())
			if err != nil {
				for _, in := range insts {
					in.close()
				}
				return nil, err
			}
			insts = append(insts, in)
		}
		info := insts[0].info(spec)
		if _, dup := s.byName[info.Name]; dup {
			for _, in := range insts {
				in.close()
			}
			return nil, fmt.Errorf("two models are named %q: name them with -model NAME=PATH", info.Name)
		}
		p := newPool(info, insts, opts.MaxQueue)
		s.pools = append(s.pools, p)
		s.byName[info.Name] = p
		s.log.Info("model ready", "name", info.Name, "arch", info.Arch, "device", info.Device, "instances", len(insts), "threads", opts.Threads)
	}
	s.handler = s.routes()
	return s, nil
}

// Models describes the loaded models.
func (s *Server) Models() []ModelInfo {
	out := make([]ModelInfo, len(s.pools))
	for i, p := range s.pools {
		out[i] = p.info
	}
	return out
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close waits for the runs in flight and frees the models.
func (s *Server) Close() error {
	var errs []error
	for _, p := range s.pools {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// /healthz turns 503, the listener closes, and the requests in flight finish
// (up to the request timeout) before Serve returns. Runs are not cancelled by
// ctx: only a client going away or the request timeout stops them.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.opts.Timeout,
		WriteTimeout:      s.opts.Timeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down: finishing the requests in flight", "timeout", s.opts.Timeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout+5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shutdown: %w", err), hs.Close())
	}
	<-errc // http.ErrServerClosed
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/depth", s.handleDepth)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /openapi.json", handleOpenAPI)
	mux.Handle("GET /static/", staticHandler(!s.noViewer))
	mux.HandleFunc("GET /{$}", handleIndex)
	return s.instrument(mux)
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// instrument counts and logs every request and turns a panic into a 500.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				s.metrics.error(kindInternal)
				if sw.status == 0 {
					writeError(sw, errorf(http.StatusInternalServerError, kindInternal, "internal error"))
				}
			}
			handler := routeLabel(r.URL.Path)
			status := sw.status
			if status == 0 {
				status = 499 // the client went away before an answer
			}
			d := time.Since(start)
			s.metrics.request(handler, status, d)
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", status, "ms", float64(d.Microseconds())/1000, "remote", r.RemoteAddr)
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeLabel bounds the metrics' handler label to the known routes.
func routeLabel(path string) string {
	switch {
	case path == "/v1/depth", path == "/v1/models", path == "/healthz", path == "/metrics", path == "/openapi.json", path == "/":
		return path
	case strings.HasPrefix(path, "/static/"):
		return "/static/"
	}
	return "other"
}

func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	s.metrics.error(e.Kind)
	if e.Kind == kindCanceled {
		return // nobody is listening
	}
	if e.Status >= 500 {
		s.log.Warn("request failed", "status", e.Status, "error", e.Msg)
	}
	writeError(w, e)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting_down"})
		return
	}
	names := make([]string, len(s.pools))
	for i, p := range s.pools {
		names[i] = p.info.Name
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "models": names})
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string      `json:"object"` // "list"
	Data   []ModelInfo `json:"data"`
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ModelList{Object: "list", Data: s.Models()})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, s.pools)
}

func (s *Server) pool(name string) (*pool, *apiError) {
	if name == "" {
		return s.pools[0], nil
	}
	if p, ok := s.byName[name]; ok {
		return p, nil
	}
	names := make([]string, len(s.pools))
	for i, p := range s.pools {
		names[i] = p.info.Name
	}
	return nil, errorf(http.StatusNotFound, kindNotFound, "unknown model %q (loaded: %s)", name, strings.Join(names, ", "))
}

func (s *Server) handleDepth(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, errorf(http.StatusMethodNotAllowed, kindMethod, "%s /v1/depth: use POST", r.Method))
		return
	}
	if s.draining.Load() {
		s.fail(w, errorf(http.StatusServiceUnavailable, kindDraining, "the server is shutting down"))
		return
	}
	resp, aerr := s.depth(r.Context(), w, r, start)
	if aerr != nil {
		s.fail(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, resp)
	if resp.need >= bigRequest {
		resp = nil
		debug.FreeOSMemory() // hand a large request's buffers back to the system now, not minutes later
	}
}

func (s *Server) depth(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time) (*DepthResponse, *apiError) {
	p, aerr := readRequest(w, r, s.opts.MaxBodyBytes)
	if aerr != nil {
		return nil, aerr
	}
	pl, aerr := s.pool(p.req.Model)
	if aerr != nil {
		return nil, aerr
	}
	lim := limits{maxViews: s.opts.MaxViews, maxPixels: s.opts.MaxPixels, maxProcessRes: s.opts.MaxProcessRes}
	if aerr := p.validate(lim, pl.info, canExport); aerr != nil {
		return nil, aerr
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()

	in, err := pl.acquire(ctx)
	if err != nil {
		return nil, s.runError(ctx, err)
	}
	queued := time.Now()
	need, aerr := s.checkBudget(in, p, pl.info)
	if aerr != nil {
		pl.release(in)
		return nil, aerr
	}
	views, sc, decoded, err := s.run(ctx, in, p, pl.info)
	pl.release(in)
	if err != nil {
		return nil, s.runError(ctx, err)
	}
	ran := time.Now()
	s.metrics.run(pl.info.Name, len(views), ran.Sub(decoded))

	resp, aerr := s.encode(p, pl.info, views, sc)
	if aerr != nil {
		return nil, aerr
	}
	end := time.Now()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	resp.Timing = Timing{Queue: ms(queued.Sub(start)), Decode: ms(decoded.Sub(queued)), Run: ms(ran.Sub(decoded)),
		Encode: ms(end.Sub(ran)), Total: ms(end.Sub(start))}
	resp.need = need
	return resp, nil
}

// run decodes the images and runs the model; decoded is when decoding ended.
func (s *Server) run(ctx context.Context, in *instance, p *parsed, m ModelInfo) (views []view, sc *scene, decoded time.Time, err error) {
	rotate := m.ExifRotate
	if p.req.ExifRotate != nil {
		rotate = *p.req.ExifRotate
	}
	imgs := make([]image.Image, len(p.images))
	for i, b := range p.images {
		if err := ctx.Err(); err != nil { // the client went away: stop between images
			return nil, nil, decoded, err
		}
		img, orient, err := imgio.DecodeBytes(b, p.names[i])
		if err != nil {
			return nil, nil, decoded, unprocessable("%v", err)
		}
		if rotate {
			img = imgio.Orient(img, orient)
		}
		imgs[i] = img
	}
	decoded = time.Now()
	q := p.req
	out, err := in.run(ctx, imgs, p.names, p.runOptions(), q.Independent || q.tiling()) // tiles run each image alone
	if err != nil {
		return nil, nil, decoded, err
	}
	return out.views, &scene{ctx: ctx, views: out.scene, gaussians: out.gaussians, splats: out.splats, cams: out.cams, confThresh: q.PointsConfThresh}, decoded, nil
}

// runError maps an error of the queue or the run to the answer.
func (s *Server) runError(ctx context.Context, err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errQueueFull):
		return errorf(http.StatusServiceUnavailable, kindQueueFull, "server busy: %d requests already wait for this model (-max-queue); retry later", s.opts.MaxQueue)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, kindTimeout, "request timed out after %s (-timeout)", s.opts.Timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return &apiError{Status: 499, Kind: kindCanceled, Msg: "client closed the request"}
	case isInputError(err):
		return unprocessable("%v", err)
	}
	return errorf(http.StatusInternalServerError, kindInternal, "run failed: %v", err)
}

// encode builds the response from the views.
func (s *Server) encode(p *parsed, m ModelInfo, views []view, sc *scene) (*DepthResponse, *apiError) {
	q := p.req
	want := p.wants(m)
	formats := q.MapFormats
	if len(formats) == 0 {
		formats = []string{"f32"}
	}
	cmap, _ := imgio.ParseColormap(orDefault(q.Colormap, "turbo"))
	resp := &DepthResponse{Model: m.Name, Views: make([]View, len(views))}
	internal := func(err error) *apiError {
		return errorf(http.StatusInternalServerError, kindInternal, "encoding the response: %v", err)
	}
	for i, v := range views {
		out := View{Width: v.Width, Height: v.Height, ProcessedWidth: v.ProcessedW, ProcessedHeight: v.ProcessedH, AlignScale: v.AlignScale}
		if a := v.Alignment; a != nil {
			out.Alignment = &Alignment{Disparity: a.Disparity, Scale: a.Scale, Shift: a.Shift, Residual: a.Residual,
				InlierShare: a.InlierShare, Samples: a.Samples}
		}
		if u := v.Undistorter; u != nil {
			out.Undistorted = &Undistorted{Width: u.Pinhole.Width, Height: u.Pinhole.Height, Intrinsics: u.Pinhole.K(), MappedBack: v.MappedBack}
		}
		var err error
		if want.depth && v.Depth != nil {
			// Colour maps show near as warm: disparity is already larger when nearer.
			if out.Depth, err = encodeMap(export.DepthMap{Width: v.Width, Height: v.Height, Depth: v.Depth, Unit: v.Unit}, formats, cmap, q.PNG16Step, v.Unit != "disparity"); err != nil {
				return nil, internal(err)
			}
		}
		if want.conf && v.Conf != nil {
			if out.Confidence, err = encodeMap(export.DepthMap{Width: v.Width, Height: v.Height, Depth: v.Conf}, formats, cmap, q.PNG16Step, false); err != nil {
				return nil, internal(err)
			}
		}
		if want.sky && v.Sky != nil {
			if out.Sky, err = encodeMap(export.DepthMap{Width: v.Width, Height: v.Height, Depth: v.Sky}, formats, cmap, q.PNG16Step, false); err != nil {
				return nil, internal(err)
			}
		}
		if want.pose && v.Camera != nil {
			c := *v.Camera
			out.Extrinsics, out.Intrinsics, out.IntrinsicsOriginal = &c.Extrinsics, &c.Intrinsics, &c.IntrinsicsOriginal
		}
		resp.Views[i] = out
	}
	if len(views) > 0 {
		resp.Width, resp.Height, resp.Unit = views[0].Width, views[0].Height, views[0].Unit
		resp.IsMetric = resp.Unit == "metres"
	}
	if q.IncludePoints {
		pc, err := sc.points()
		if err != nil {
			return nil, unprocessable("point cloud: %v", err)
		}
		resp.NumPoints = pc.Len()
		resp.Points = b64.EncodeToString(float32Bytes(pc.Points))
		resp.PointColors = b64.EncodeToString(pc.Colors)
	}
	for _, name := range q.Exports {
		if resp.Exports == nil {
			resp.Exports = map[string]Export{}
		}
		e := exporters[name]
		b, err := e.encode(sc)
		if err != nil {
			if ae := serverFault(err); ae != nil {
				return nil, ae
			}
			if sc.ctx != nil && sc.ctx.Err() != nil { // the client went away or the time ran out
				return nil, s.runError(sc.ctx, err)
			}
			// The exports refuse scenes they cannot hold (views of
			// different sizes in one NPZ, no point passing the threshold).
			return nil, unprocessable("%v", exportError(name, err))
		}
		resp.Exports[name] = Export{MediaType: e.mediaType, Filename: e.filename, Data: b64.EncodeToString(b)}
	}
	return resp, nil
}
