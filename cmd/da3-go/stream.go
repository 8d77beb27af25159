package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/sysmem"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/stream"
)

// streamFlags choose how the frames of depth and reconstruct go through a DA3 any-view model: as one
// scene, or in overlapping windows aligned into one world frame and scale (package model/stream).
type streamFlags struct {
	stream, noStream bool
	window, overlap  int
	dir              string
	keep, restart    bool
	icp, loop        bool
	rigid            bool
}

// maxAutoWindow caps the window chosen from the memory available: past it a window costs more per frame
// (global attention over all its views) than the overlap it saves. defaultWindow is the window when
// there is no memory estimate.
const (
	maxAutoWindow = 32
	defaultWindow = 16
)

func (f *streamFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.stream, "stream", false, "run the frames in overlapping windows, each window one scene, aligned into one world frame and scale (Sim(3) on the shared frames); "+
		"each window's results are written as it finishes, so an interrupted run resumes. Default: only when the frames do not fit in memory as one scene")
	fs.BoolVar(&f.noStream, "no-stream", false, "never switch to windows: refuse, with the memory figures, when the frames do not fit in memory as one scene")
	fs.IntVar(&f.window, "window", 0, fmt.Sprintf("frames per window when streaming (0: the most that fit in memory, at most %d)", maxAutoWindow))
	fs.IntVar(&f.overlap, "overlap", 0, "frames consecutive windows share (0: a quarter of the window, at least 1)")
	fs.StringVar(&f.dir, "stream-dir", "", "directory of the windows' results (default: <output directory>/stream)")
	fs.BoolVar(&f.keep, "keep-windows", false, "keep the windows' results when the run is done (removed by default once the outputs are written)")
	fs.BoolVar(&f.restart, "restart", false, "discard the windows of an earlier run in the stream directory instead of resuming it")
	fs.BoolVar(&f.icp, "icp", false, "refine each seam's Sim(3) by point-to-plane ICP between the shared frames (off: on the synthetic tests the same-pixel fit is the more accurate; loops are refined by ICP regardless)")
	fs.BoolVar(&f.rigid, "rigid-windows", false, "with the nested pair (-metric-model), align the windows rigidly, each keeping the scale its own metric branch gave it; "+
		"by default the seams are similarities and the run's scale comes from all the windows' metric scales (each a measurement in the pose graph, then the median window's metre is one metre)")
	fs.BoolVar(&f.loop, "loop-closure", true, "when the camera comes back to a place seen windows before, align those windows directly and spread the drift over the chain (Sim(3) pose graph); -loop-closure=false keeps the chained windows")
}

// check validates the flags against the command's others.
func (f *streamFlags) check(independent bool) error {
	switch {
	case f.stream && f.noStream:
		return errors.New("-stream and -no-stream exclude each other")
	case independent && (f.stream || f.window > 0):
		return errors.New("-stream runs the frames as one scene: drop -independent")
	case f.window < 0 || f.overlap < 0:
		return errors.New("-window and -overlap must not be negative")
	case f.window == 1:
		return errors.New("-window 1: a window needs 2 or more frames")
	case f.window > 0 && f.overlap >= f.window:
		return fmt.Errorf("-overlap %d must be less than -window %d", f.overlap, f.window)
	}
	return nil
}

// layout is how a run's frames go through the model.
type layout struct {
	stream                 bool
	window, overlap, chunk int
	// why says what chose it (logged).
	why string
}

// fitFunc reports whether views frames with head chunks of chunk views fit in memory: nil when they do,
// an error that wraps model.ErrNotEnoughMemory and names the figures when they do not, another error
// when the estimate failed.
type fitFunc func(views, chunk int) error

// choose picks the layout of n frames: one scene when they fit (the largest head chunk up to chunk that
// fits, unless chunkSet fixes it), else windows of the most frames that fit (at most maxAutoWindow), unless
// the flags fix the window or forbid streaming. fit nil means no estimate: one scene unless -stream, and
// windows of 16 then.
func (f *streamFlags) choose(n, chunk int, chunkSet bool, fit fitFunc) (layout, error) {
	// bestChunk is the largest head chunk that fits views frames (only chunk when it is set).
	bestChunk := func(views int) (int, error) {
		c := min(chunk, views)
		if fit == nil {
			return c, nil
		}
		var err error
		for ; c >= 1; c-- {
			if err = fit(views, c); err == nil || !errors.Is(err, model.ErrNotEnoughMemory) || chunkSet {
				return c, err
			}
		}
		return 0, err
	}
	overlap := func(w int) int {
		if f.overlap > 0 {
			return f.overlap
		}
		return max(1, w/4)
	}
	if !f.stream {
		c, err := bestChunk(n)
		if err == nil {
			why := "fits in memory"
			if fit == nil {
				why = "no memory estimate"
			}
			return layout{chunk: c, why: why}, nil
		}
		if !errors.Is(err, model.ErrNotEnoughMemory) || f.noStream || n <= 2 {
			if f.noStream && errors.Is(err, model.ErrNotEnoughMemory) {
				err = fmt.Errorf("-no-stream: %w", err)
			}
			return layout{}, err
		}
		// Too large for one scene: windows.
		lay, err2 := f.windows(n, fit != nil, bestChunk, overlap)
		lay.why = err.Error()
		return lay, err2
	}
	lay, err := f.windows(n, fit != nil, bestChunk, overlap)
	lay.why = "-stream"
	return lay, err
}

// windows picks the window: -window, else the largest that fits (binary search; memory grows with the
// window), at most maxAutoWindow and n; without an estimate (estimated false) defaultWindow.
func (f *streamFlags) windows(n int, estimated bool, bestChunk func(int) (int, error), overlap func(int) int) (layout, error) {
	if f.window > 0 {
		w := min(f.window, n)
		c, err := bestChunk(w)
		if err != nil {
			return layout{}, fmt.Errorf("-window %d: %w", f.window, err)
		}
		return layout{stream: true, window: w, overlap: min(overlap(w), w-1), chunk: c}, nil
	}
	hi := max(2, min(n, maxAutoWindow))
	if !estimated {
		hi = max(2, min(n, defaultWindow))
	}
	c, err := bestChunk(hi)
	if err == nil {
		return layout{stream: true, window: hi, overlap: min(overlap(hi), hi-1), chunk: c}, nil
	}
	if !errors.Is(err, model.ErrNotEnoughMemory) {
		return layout{}, err
	}
	lo := 2
	if c, err = bestChunk(lo); err != nil {
		return layout{}, fmt.Errorf("even windows of 2 frames do not fit: %w", err)
	}
	best, bestC := lo, c
	for lo < hi-1 {
		mid := (lo + hi) / 2
		c, err := bestChunk(mid)
		switch {
		case err == nil:
			lo, best, bestC = mid, mid, c
		case errors.Is(err, model.ErrNotEnoughMemory):
			hi = mid
		default:
			return layout{}, err
		}
	}
	return layout{stream: true, window: best, overlap: min(overlap(best), best-1), chunk: bestC}, nil
}

// layoutFor chooses how a command runs its n inputs (asScene: several images of one scene for a DA3
// any-view or nested model) and sets the head chunk size on opt. -stream on inputs that are not one
// scene is an error.
func (f *streamFlags) layoutFor(fs *flag.FlagSet, m da3.Runner, n int, asScene bool, size image.Point, opt *model.RunOptions) (layout, error) {
	if !asScene || n < 2 {
		if f.stream {
			return layout{}, fmt.Errorf("-stream needs several images run as one scene by a DA3 any-view or nested model (%s is a %s model)", fs.Lookup("model").Value, m.Config().Arch)
		}
		return layout{chunk: opt.ChunkSize}, nil
	}
	lay, err := f.choose(n, opt.ChunkSize, flagGiven(fs, "chunk-size"), memoryFit(m, *opt, size.X, size.Y))
	if err != nil {
		return lay, err
	}
	opt.ChunkSize = lay.chunk
	if !lay.stream {
		if e, err := m.EstimateMemory(*opt, n, size.X, size.Y); err == nil {
			lay.why = fmt.Sprintf("%s: about %s, head chunks of %d", lay.why, sysmem.Bytes(uint64(e.Total())), lay.chunk)
		}
	}
	return lay, nil
}

// describe is the log line of a streaming layout.
func (l layout) describe(n int) string {
	ws, _ := stream.Plan(n, l.window, l.overlap)
	return fmt.Sprintf("streaming %d frames in %d windows of %d (overlap %d), head chunks of %d (%s)", n, len(ws), l.window, l.overlap, l.chunk, l.why)
}

// memoryFit is the memory estimate the layout is chosen from: the model package's check of a request
// (Model.CheckMemory: its estimate against the memory left and -max-memory) for views images of w×h
// pixels with head chunks of chunk views; both branches of the nested pair must fit. nil for a scene
// that cannot be checked.
func memoryFit(m da3.Runner, opt model.RunOptions, w, h int) fitFunc {
	return func(views, chunk int) error {
		o := opt
		o.ChunkSize = chunk
		return m.CheckMemory(o, views, w, h)
	}
}

// checkImages reads every input's header (a file that is not an image fails before the model loads) and
// returns the first image's size.
func checkImages(paths []string) (image.Point, error) {
	var size image.Point
	for i, p := range paths {
		hd, err := imgio.DecodeHeader(p)
		if err != nil {
			return size, err
		}
		if i == 0 {
			size = image.Pt(hd.Width, hd.Height)
		}
	}
	return size, nil
}

// frames are the inputs as stream frames, decoded (and turned by their Exif orientation as -exif-rotate
// says) when their window runs.
func (f *modelFlags) frames(paths, names []string, rotate bool) []stream.Frame {
	out := stream.Files(paths, names)
	for i := range out {
		p := paths[i]
		out[i].Open = func() (model.Image, error) {
			img, o, err := imgio.DecodeWithOrientation(p)
			if err != nil || !rotate {
				return img, err
			}
			return imgio.Orient(img, o), nil
		}
	}
	return out
}

// fingerprint identifies what a streamed run's windows depend on, so that a run resumes only windows
// computed with the same model files (their size and the SHA-256 of their first MiB: header, metadata
// and tensor table) and the settings that change results (resolution, method, reference view, ray pose,
// precision, kernels, device, Exif rotation).
func (f *modelFlags) fingerprint(cfg model.Config) string {
	// the convolutions' precision as the model resolves it: auto and the flag that says the same agree
	prec, _ := kernels.ParsePrecision(f.precision)
	convs := cfg.Convs(kernels.Policy{Precision: prec, Convs: kernels.Convs(f.narrowConvs)})
	return fmt.Sprintf("model=%s (%s) metric=%s (%s) name=%s process-res=%d method=%s ref-view=%s ray-pose=%v/%d exif-rotate=%v precision=%s kernels=%s narrow-convs=%s device=%s",
		f.model, fileIdentity(f.model), f.metricModel, fileIdentity(f.metricModel), cfg.Name, f.processRes, f.method, f.refView,
		f.rayPose, f.raySeed, f.exifRotate.String(), f.precision, f.kernels, convs, f.device)
}

// fileIdentity is a file's size and the SHA-256 of its first MiB, or "" for no file.
func fileIdentity(path string) string {
	if path == "" {
		return ""
	}
	fh, err := os.Open(path)
	if err != nil {
		return "unreadable"
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(fh, 1<<20))
	if err != nil {
		return "unreadable"
	}
	size := n
	if fi, err := fh.Stat(); err == nil {
		size = fi.Size()
	}
	return fmt.Sprintf("%d bytes, sha256 of the first MiB %x", size, h.Sum(nil))
}

// runStreamed runs the frames in windows; onWindow gets each window's views (in the run's frame) as it
// finishes (or is read back when resuming). threads is -threads (0: every core): loop closure, which runs
// after the last window, uses as many.
func runStreamed(ctx context.Context, m da3.Runner, frames []stream.Frame, lay layout, sf *streamFlags, threads int, dir, fingerprint string,
	opt model.RunOptions, quiet bool, stderr io.Writer, onWindow func(w stream.Window, views []model.Result) error) (*stream.Reconstruction, error) {
	opt.ChunkSize = lay.chunk
	update, finish := newBar(int64(len(frames)), "windows", false, quiet, stderr)
	defer finish()
	r, st, err := stream.Run(ctx, m, frames, stream.Options{Window: lay.window, Overlap: lay.overlap, Run: opt, Dir: dir,
		Fingerprint: fingerprint, Restart: sf.restart, OnWindow: onWindow, Logger: slog.Default(),
		ICP: stream.ICPOptions{Seams: sf.icp}, Loop: stream.LoopOptions{Off: !sf.loop, Workers: cmp.Or(threads, runtime.NumCPU())}, Metric: stream.MetricOptions{Rigid: sf.rigid},
		Progress: func(done, total int) {
			collect() // between windows: the finished window's buffers are garbage (see collect)
			update(int64(done), int64(total))
		}})
	if err != nil {
		if st.Ran+st.Resumed > 0 && ctx.Err() == nil || errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (the finished windows are kept in %s: run the same command again to resume)", err, dir)
		}
		return nil, err
	}
	if !quiet && st.Resumed > 0 {
		fmt.Fprintf(stderr, "da3-go: resumed %d of %d windows from %s\n", st.Resumed, st.Windows, dir)
	}
	if rep := r.Metric(); rep != nil && !quiet {
		where := "-keep-windows keeps each window's in stream.json"
		if sf.keep {
			where = "each window's in " + filepath.Join(dir, "stream.json")
		}
		fmt.Fprintf(stderr, "da3-go: streamed run in metres: the chain scaled by %.4g from %d windows' metric scales (their spread %.1f %% as chained, %.1f %% final; %s)\n",
			rep.Scale, len(rep.Windows), 100*rep.ChainedSpread, 100*rep.Spread, where)
	}
	return r, nil
}

// windowsMove says whether a streamed run moves its windows after the last one (loop closure, or the
// scale of a run in metres taken from all its windows), so that each frame's maps are final only then.
func (f *streamFlags) windowsMove(caps model.Capabilities) bool {
	return f.loop || caps.Unit == model.Metres && !f.rigid
}

// finishStream removes the windows' results unless -keep-windows.
func finishStream(r *stream.Reconstruction, sf *streamFlags, stderr io.Writer) {
	if sf.keep {
		return
	}
	if err := r.Remove(); err != nil {
		fmt.Fprintf(stderr, "da3-go: warning: removing the windows' results: %v\n", err)
	}
}

// streamDir is the directory of a run's windows: -stream-dir, else <out>/stream.
func (f *streamFlags) streamDir(out string) string {
	if f.dir != "" {
		return f.dir
	}
	return filepath.Join(out, "stream")
}

// isDir reports whether path is an existing directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// flagGiven reports whether the flag was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}
