package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/model"
)

// Scene runs images as the views of one scene: *model.Model, and the nested model, satisfy it.
type Scene interface {
	MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error)
}

// Frame is one image of a sequence, decoded only when a window that holds it runs.
type Frame struct {
	// Name names the frame in outputs (COLMAP image name); names must be unique.
	Name string
	// Key identifies the frame's content for resuming (Files: the SHA-256 of the file); "" uses Name. A
	// window is resumed only when its frames' keys are those it was computed from.
	Key string
	// Open decodes the image.
	Open func() (model.Image, error)
}

// Files returns frames that decode image files; names nil names them by the files' base names. Each
// frame's Key is the SHA-256 of its file's bytes (read once here), so a frame replaced by another file,
// whatever its size and name, is seen as changed.
func Files(paths, names []string) []Frame {
	out := make([]Frame, len(paths))
	for i, p := range paths {
		name := filepath.Base(p)
		if names != nil {
			name = names[i]
		}
		key := "path:" + p // unreadable now: decoding it fails when its window runs
		if sum, err := fileDigest(p); err == nil {
			key = "sha256:" + sum
		}
		out[i] = Frame{Name: name, Key: key, Open: func() (model.Image, error) { return imgio.Decode(p) }}
	}
	return out
}

// fileDigest is the SHA-256 (hex) of a file's bytes.
func fileDigest(path string) (string, error) {
	f, _, err := safeio.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Options configure Run.
type Options struct {
	// Window is the number of frames run as one scene, Overlap the frames consecutive windows share.
	Window, Overlap int
	// Run are the options of every window's run; maps always come at the processed size.
	Run model.RunOptions
	// Align tunes the alignment of each window to the one before it (by default a similarity, or a rigid
	// transform for windows whose depth is in metres).
	Align AlignOptions
	// ICP tunes the point-to-plane refinement of the alignments: of the seams when ICP.Seams, of the loop
	// closures always.
	ICP ICPOptions
	// Loop tunes loop closure (on unless Loop.Off): the merged outputs (Reconstruction) use the windows'
	// transforms optimised over the seams and the loops found; OnWindow, called as the windows finish,
	// sees them chained.
	Loop LoopOptions
	// Metric tunes runs whose windows are in metres (the nested model): by default the seams are
	// similarities and the run's scale comes from all the windows' metric scales (see MetricOptions).
	Metric MetricOptions
	// Dir receives the windows' results (window-NNNNN.npz) and the run's manifest (stream.json).
	Dir string
	// Fingerprint identifies the model and settings (the model file's identity, process resolution,
	// precision, …: everything that changes the results): a run in a Dir that holds windows of a run with
	// the same fingerprint, frame names and windows resumes it, keeping each finished window whose frames
	// still have the keys it was computed from (the others run again, and the windows after them are
	// aligned again); one with another fingerprint is refused unless Restart.
	Fingerprint string
	// Restart discards the windows of a previous run in Dir.
	Restart bool
	// OnWindow, when set, is called in order with every window and its views in the run's world frame as
	// chained so far (frames [Start, End); the merged outputs take [OwnStart, OwnEnd) from it), also for
	// windows a resumed run read back from Dir. Loop closure and, for windows in metres, the run's scale,
	// after the last window, move the windows again: read the final views from the Reconstruction.
	OnWindow func(w Window, views []model.Result) error
	// Progress, when set, is called with the frames finished so far and the total.
	Progress func(done, total int)
	// Logger receives a line per window; nil discards them.
	Logger *slog.Logger
}

// Stats say what a Run did.
type Stats struct {
	Windows, Ran, Resumed int
}

// manifest is <Dir>/stream.json: what a run's windows belong to, and the files of Dir the run owns (its
// window files): only those are ever replaced or removed.
type manifest struct {
	Version     int      `json:"version"`
	Fingerprint string   `json:"fingerprint"`
	Window      int      `json:"window"`
	Overlap     int      `json:"overlap"`
	Frames      []string `json:"frames"`
	Keys        []string `json:"keys"`
	Windows     []Window `json:"windows"`
	Files       []string `json:"files"`
	// Graph holds the windows' transforms after loop closure and, for a run in metres, the windows'
	// metric scales (none without loops or metres).
	Graph *graphRecord `json:"graph,omitempty"`
	// Metric says how a run whose windows are in metres got its scale (none for other runs, and with
	// Metric.Rigid).
	Metric *MetricReport `json:"metric,omitempty"`
}

// graphRecord is the outcome of loop closure: the windows' transforms it was computed from (chained, as
// their files hold them: it applies only while they are unchanged), the optimised ones, and the loops.
type graphRecord struct {
	Chained []sim3JSON   `json:"chained"`
	ToWorld []sim3JSON   `json:"to_world"`
	Loops   []loopRecord `json:"loops"`
}

type loopRecord struct {
	Windows  [2]int   `json:"windows"`
	Frames   [][2]int `json:"frames"`
	Inliers  float64  `json:"inliers"`
	Points   int      `json:"points"`
	Accepted bool     `json:"accepted"`
	Weight   float64  `json:"weight,omitempty"`
}

const manifestName = "stream.json"

// Run runs the frames in overlapping windows: each window as one scene, aligned to the one before it on
// the frames they share (see Align), its results written to Dir as it finishes. Memory holds one window's
// images and results and the shared frames of the one before, whatever the number of frames. A run that
// is interrupted (an error, ctx cancelled, the process killed) keeps its finished windows, and the same
// Run again resumes after them. The finished run is read back with Open.
func Run(ctx context.Context, scene Scene, frames []Frame, opt Options) (*Reconstruction, Stats, error) {
	var st Stats
	plan, err := Plan(len(frames), opt.Window, opt.Overlap)
	if err != nil {
		return nil, st, err
	}
	st.Windows = len(plan)
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.Dir == "" {
		return nil, st, errors.New("stream: no directory for the windows' results")
	}
	// The seams' transforms depend on the ICP settings: a run with others aligns every window again.
	// So do the seams of windows in metres: similarities, or rigid.
	opt.Fingerprint += fmt.Sprintf(" icp=%+v metric-rigid=%v", opt.ICP, opt.Metric.Rigid)
	man, err := newManifest(frames, plan, opt)
	if err != nil {
		return nil, st, err
	}
	if err := prepareDir(opt.Dir, man, opt.Restart, log); err != nil {
		return nil, st, err
	}
	r := &runner{scene: scene, frames: frames, opt: opt, ropt: opt.Run, log: log, plan: plan, man: man, st: st, prevG: Identity()}
	r.ropt.ProcessedSize = true
	for _, w := range plan {
		if err := r.window(ctx, w); err != nil {
			return nil, r.st, err
		}
	}
	if err := r.closeLoops(); err != nil {
		return nil, r.st, err
	}
	rec, err := Open(opt.Dir)
	return rec, r.st, err
}

// newManifest is the manifest of a run of frames in the windows of plan; frames without a name or an
// image, and frames of the same name, are refused.
func newManifest(frames []Frame, plan []Window, opt Options) (manifest, error) {
	man := manifest{Version: storeVersion, Fingerprint: opt.Fingerprint, Window: opt.Window, Overlap: opt.Overlap, Windows: plan}
	for _, w := range plan {
		man.Files = append(man.Files, filepath.Base(windowPath("", w.Index)))
	}
	seen := map[string]int{}
	for i, f := range frames {
		if f.Name == "" || f.Open == nil {
			return manifest{}, fmt.Errorf("stream: frame %d has no name or no image", i)
		}
		if j, dup := seen[f.Name]; dup {
			return manifest{}, fmt.Errorf("stream: frames %d and %d have the same name %q", j, i, f.Name)
		}
		seen[f.Name] = i
		key := f.Key
		if key == "" {
			key = f.Name
		}
		man.Frames = append(man.Frames, f.Name)
		man.Keys = append(man.Keys, key)
	}
	return man, nil
}

// runner is the state of a Run from one window to the next.
type runner struct {
	scene  Scene
	frames []Frame
	opt    Options
	ropt   model.RunOptions // the windows' run options: maps at the processed size
	log    *slog.Logger
	plan   []Window
	man    manifest
	st     Stats

	prev     []model.Result // the previous window's raw results (only the frames the next window shares)
	prevFrom int            // frame index of prev[0]
	prevG    Sim3           // the previous window's transform to the run's frame
	size     [2]int         // the maps' size (the first window's)
	realign  bool           // a window before ran again: the resumed ones after it are aligned again
	toWorld  []Sim3         // the windows' chained transforms so far
	cams     []frameCam     // their frames' cameras, chained
	fixed    bool           // windows aligned rigidly
	metres   bool           // windows in metres
	mscales  []float64      // the windows' metric scales (MetricScene; 0 when unknown)
}

// closeLoops runs loop closure over the finished windows (unless it is off), brings a run whose windows
// are in metres to metres (unless they were aligned rigidly) and records the outcome in the manifest,
// where Open finds it.
func (r *runner) closeLoops() error {
	r.man.Graph, r.man.Metric = nil, nil
	metric := r.metres && !r.fixed
	var priors []ScalePrior
	if metric {
		priors = metricPriors(r.toWorld, r.opt.Metric)
	}
	nodes, loops, weights, err := closeLoops(r.opt.Dir, r.toWorld, r.cams, r.fixed, r.opt.ICP, r.opt.Loop, priors, r.log)
	if err != nil {
		return err
	}
	if metric {
		var rep MetricReport
		nodes, rep = toMetres(r.toWorld, nodes, r.mscales, weights)
		r.man.Metric = &rep
		logMetric(r.log, rep)
	}
	if len(loops) > 0 || metric {
		g := &graphRecord{}
		for i := range nodes {
			a, b := r.toWorld[i], nodes[i]
			g.Chained = append(g.Chained, sim3JSON{a.S, a.R, a.T})
			g.ToWorld = append(g.ToWorld, sim3JSON{b.S, b.R, b.T})
		}
		for _, l := range loops {
			g.Loops = append(g.Loops, loopRecord{Windows: [2]int{l.I, l.J}, Frames: l.Frames, Inliers: l.Inliers, Points: l.Points, Accepted: l.Accepted, Weight: l.Weight})
		}
		r.man.Graph = g
	}
	return writeManifest(r.opt.Dir, r.man)
}

// writeManifest writes <dir>/stream.json.
func writeManifest(dir string, man manifest) error {
	js, err := json.MarshalIndent(man, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, manifestName), js)
}

// window resumes window w from its file, or runs it when there is none usable, then hands it on.
func (r *runner) window(ctx context.Context, w Window) error {
	sw, err := readWindow(windowPath(r.opt.Dir, w.Index), nil)
	if err == nil {
		err = sameWindow(sw.meta, w, r.man, r.opt.Fingerprint)
	}
	var raw []model.Result
	var g Sim3
	var mscale float64
	if err == nil {
		mscale = sw.meta.MetricScale
		raw, g, err = r.resume(w, sw)
	} else {
		raw, g, mscale, err = r.rerun(ctx, w, err)
	}
	if err != nil {
		return err
	}
	r.mscales = append(r.mscales, mscale)
	return r.finish(w, raw, g)
}

// record is window w's record in the run, with its transform to the run's frame and its metric scale.
func (r *runner) record(w Window, g Sim3, as *AlignStats, mscale float64) windowRecord {
	return windowRecord{Window: w, Names: r.man.Frames[w.Start:w.End], Keys: r.man.Keys[w.Start:w.End], Fingerprint: r.opt.Fingerprint, ToWorld: g, Align: as,
		MetricScale: mscale}
}

// resume takes window w's results from its file; after a window that ran again it is aligned again.
func (r *runner) resume(w Window, sw *storedWindow) ([]model.Result, Sim3, error) {
	raw, g := sw.results, sw.toWorld
	r.st.Resumed++
	r.log.Info("stream: window resumed from disk", "window", w.Index, "frames", fmt.Sprintf("%d-%d", w.Start, w.End-1))
	if !r.realign || w.Index == 0 {
		return raw, g, nil
	}
	s, as, _, err := r.alignToPrev(w, raw)
	if err != nil {
		return nil, g, err
	}
	g = r.prevG.Compose(s)
	if err := writeWindow(r.opt.Dir, r.record(w, g, &as, sw.meta.MetricScale), raw); err != nil {
		return nil, g, err
	}
	r.log.Info("stream: resumed window aligned again (a window before it ran again)", "window", w.Index, "scale", s.S, "rms", as.RMS)
	return raw, g, nil
}

// rerun runs window w (why: the reason its file, if any, was not used), aligns it to the window before
// and writes its file: its results, transform and metric scale (0 when the scene gives none).
func (r *runner) rerun(ctx context.Context, w Window, why error) ([]model.Result, Sim3, float64, error) {
	g := Identity()
	if !errors.Is(why, os.ErrNotExist) {
		r.log.Warn("stream: window file unusable, running the window again", "window", w.Index, "err", why)
	}
	r.realign = true
	if err := ctx.Err(); err != nil {
		return nil, g, 0, err
	}
	raw, mscale, err := r.runScene(ctx, w)
	if err != nil {
		return nil, g, 0, err
	}
	var ast *AlignStats
	if w.Index > 0 {
		if g, ast, err = r.alignRan(w, raw); err != nil {
			return nil, g, 0, err
		}
	}
	if err := writeWindow(r.opt.Dir, r.record(w, g, ast, mscale), raw); err != nil {
		return nil, g, 0, err
	}
	r.st.Ran++
	return raw, g, mscale, nil
}

// runScene decodes window w's frames and runs them as one scene: the results, and the scale that brought
// them to metres when the scene is a MetricScene (else 0).
func (r *runner) runScene(ctx context.Context, w Window) ([]model.Result, float64, error) {
	imgs := make([]model.Image, 0, w.Len())
	for _, f := range r.frames[w.Start:w.End] {
		im, err := f.Open()
		if err != nil {
			return nil, 0, fmt.Errorf("frame %s: %w", f.Name, err)
		}
		imgs = append(imgs, im)
	}
	var raw []model.Result
	var mscale float64
	var err error
	if ms, ok := r.scene.(MetricScene); ok {
		raw, mscale, err = ms.MetricMultiView(ctx, imgs, r.ropt)
	} else {
		raw, err = r.scene.MultiView(ctx, imgs, r.ropt)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("window %d (frames %d–%d): %w", w.Index, w.Start, w.End-1, err)
	}
	if len(raw) != w.Len() {
		return nil, 0, fmt.Errorf("window %d: %d results for %d frames", w.Index, len(raw), w.Len())
	}
	return raw, mscale, nil
}

// alignRan aligns the results of window w, which just ran, to the window before it (read back from its
// file when this run did not hold it): their transform to the run's frame and the alignment's stats.
func (r *runner) alignRan(w Window, raw []model.Result) (Sim3, *AlignStats, error) {
	if r.prev == nil {
		var err error
		if r.prev, r.prevFrom, r.prevG, err = sharedFromDisk(r.opt.Dir, r.plan[w.Index-1], w); err != nil {
			return Identity(), nil, err
		}
	}
	if err := sameSize(r.size, raw, r.frames[w.Start].Name); err != nil {
		return Identity(), nil, err
	}
	s, as, shared, err := r.alignToPrev(w, raw)
	if err != nil {
		return Identity(), nil, err
	}
	g := r.prevG.Compose(s)
	r.log.Info("stream: window aligned", "window", w.Index, "frames", fmt.Sprintf("%d-%d", w.Start, w.End-1),
		"shared", shared, "points", as.Points, "scale", s.S, "rms", as.RMS)
	return g, &as, nil
}

// alignToPrev aligns window w's raw results to the previous window's on the frames they share (the
// Umeyama fit, refined by ICP unless it is off): the transform from w's frame to the previous window's,
// the alignment's stats and the number of frames shared.
func (r *runner) alignToPrev(w Window, raw []model.Result) (Sim3, AlignStats, int, error) {
	shared := r.prev[w.Start-r.prevFrom:]
	aopt := r.opt.Align
	if aopt.Scale == ScaleAuto { // Align's own rule makes windows in metres rigid
		aopt.Scale = ScaleRMS
		if r.fixedScale(raw) {
			aopt.Scale = ScaleFixed
		}
	}
	s, as, err := Align(shared, raw[:len(shared)], aopt)
	if err != nil {
		return s, as, 0, fmt.Errorf("window %d (frames %d–%d) to window %d: %w", w.Index, w.Start, w.End-1, w.Index-1, err)
	}
	if !r.opt.ICP.Seams {
		return s, as, len(shared), nil
	}
	refined, ist, err := RefineSeam(shared, raw[:len(shared)], s, r.fixedScale(raw), r.opt.ICP)
	if err != nil {
		return s, as, 0, fmt.Errorf("window %d (frames %d–%d) to window %d: %w", w.Index, w.Start, w.End-1, w.Index-1, err)
	}
	as.ICP = &ist
	if !ist.Kept {
		r.log.Info("stream: seam kept at the Umeyama fit", "window", w.Index, "reason", ist.Reason)
		return s, as, len(shared), nil
	}
	r.log.Debug("stream: seam refined by ICP", "window", w.Index, "steps", ist.Iterations, "pairs", ist.Points,
		"seam_error_before", ist.Before, "seam_error_after", ist.After)
	return refined, as, len(shared), nil
}

// fixedScale says whether windows are aligned rigidly: ScaleFixed, or ScaleAuto for depth in metres with
// Metric.Rigid.
func (r *runner) fixedScale(raw []model.Result) bool {
	sc := r.opt.Align.Scale
	return sc == ScaleFixed || sc == ScaleAuto && r.opt.Metric.Rigid && len(raw) > 0 && raw[0].Unit == model.Metres
}

// finish hands window w on (OnWindow, Progress) and keeps the frames the next window shares.
func (r *runner) finish(w Window, raw []model.Result, g Sim3) error {
	if len(raw) > 0 && r.size == [2]int{} {
		r.size = [2]int{raw[0].Width, raw[0].Height}
		r.fixed = r.fixedScale(raw)
		r.metres = raw[0].Unit == model.Metres
	}
	r.toWorld = append(r.toWorld, g)
	r.cams = append(r.cams, camerasOf(w, raw, g)...)
	if r.opt.OnWindow != nil {
		views := make([]model.Result, len(raw))
		for i := range raw {
			views[i] = aligned(raw[i], g)
		}
		if err := r.opt.OnWindow(w, views); err != nil {
			return err
		}
	}
	// Keep the frames the next window shares.
	r.prev, r.prevG = nil, g
	if w.Index+1 < len(r.plan) {
		next := r.plan[w.Index+1]
		r.prevFrom = next.Start
		r.prev = slices.Clone(raw[next.Start-w.Start:]) // not a subslice: raw's other views must go
	}
	if r.opt.Progress != nil {
		r.opt.Progress(w.OwnEnd, len(r.frames))
	}
	return nil
}

// sameWindow says why a stored window is not window w of this run (nil when it is): another window,
// other frames, frames whose content changed, or other model or settings.
func sameWindow(m windowMeta, w Window, man manifest, fingerprint string) error {
	switch {
	case m.Window != w:
		return fmt.Errorf("it holds window [%d, %d), not [%d, %d)", m.Window.Start, m.Window.End, w.Start, w.End)
	case !slices.Equal(m.Frames, man.Frames[w.Start:w.End]):
		return errors.New("it holds other frames")
	case m.Fingerprint != fingerprint:
		return fmt.Errorf("it was computed with other model or settings (%q, not %q)", m.Fingerprint, fingerprint)
	}
	for i, k := range m.Keys {
		if k != man.Keys[w.Start+i] {
			return fmt.Errorf("frame %s changed since it was computed (%s, now %s)", m.Frames[i], k, man.Keys[w.Start+i])
		}
	}
	return nil
}

// sameSize checks that a window's maps have the size of the first window's.
func sameSize(size [2]int, raw []model.Result, name string) error {
	if size != [2]int{} && (raw[0].Width != size[0] || raw[0].Height != size[1]) {
		return fmt.Errorf("frame %s processes to %dx%d, the first window's frames to %dx%d: streaming needs frames that process to one size",
			name, raw[0].Width, raw[0].Height, size[0], size[1])
	}
	return nil
}

// sharedFromDisk reads the finished window prev's results for the frames window next shares with it.
func sharedFromDisk(dir string, prev, next Window) ([]model.Result, int, Sim3, error) {
	sw, err := readWindow(windowPath(dir, prev.Index), nil)
	if err != nil {
		return nil, 0, Sim3{}, err
	}
	return sw.results[next.Start-prev.Start:], next.Start, sw.toWorld, nil
}

// prepareDir creates dir and its manifest, or checks that the manifest there is this run's (a resume);
// restart removes a previous run's windows. The temporary files an interrupted run left in dir are
// removed; a file of the plan's names that no manifest lists (the user's) is never touched: the run is
// refused instead.
func prepareDir(dir string, man manifest, restart bool, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if removed, err := atomicfile.RemoveStale(dir); err != nil {
		return fmt.Errorf("stream: removing the temporary files of an interrupted run: %w", err)
	} else if len(removed) > 0 {
		log.Info("stream: removed the temporary files of an interrupted run", "files", removed)
	}
	path := filepath.Join(dir, manifestName)
	b, err := safeio.ReadFile(path, safeio.MaxJSONBytes)
	switch {
	case err == nil && !restart:
		var old manifest
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("stream: %s is not a run's manifest (%v): remove the directory or restart", path, err)
		}
		if diff := manifestDiff(old, man); diff != "" {
			return fmt.Errorf("stream: %s holds the windows of another run (%s): restart to discard them, or choose another directory", dir, diff)
		}
		log.Info("stream: resuming the run in " + dir)
		if slices.Equal(old.Keys, man.Keys) {
			return nil
		}
	case err == nil && restart:
		if err := removeRun(dir); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("stream: %w", err)
	default:
		for _, f := range man.Files {
			p := filepath.Join(dir, f)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("stream: %s is not a window of a run here (no %s lists it): move it, or choose another directory for the windows", p, manifestName)
			}
		}
	}
	return writeManifest(dir, man)
}

// manifestDiff names the first difference between two runs' manifests, "" when they are the same run.
func manifestDiff(a, b manifest) string {
	switch {
	case a.Version != b.Version:
		return fmt.Sprintf("format version %d, not %d", a.Version, b.Version)
	case a.Fingerprint != b.Fingerprint:
		return fmt.Sprintf("model or settings %q, not %q", a.Fingerprint, b.Fingerprint)
	case a.Window != b.Window || a.Overlap != b.Overlap:
		return fmt.Sprintf("windows of %d with overlap %d, not %d with %d", a.Window, a.Overlap, b.Window, b.Overlap)
	case len(a.Frames) != len(b.Frames):
		return fmt.Sprintf("%d frames, not %d", len(a.Frames), len(b.Frames))
	}
	for i := range a.Frames {
		if a.Frames[i] != b.Frames[i] {
			return fmt.Sprintf("frame %d is %s, not %s", i, a.Frames[i], b.Frames[i])
		}
	}
	if !slices.Equal(a.Windows, b.Windows) || !slices.Equal(a.Files, b.Files) {
		return "another window plan"
	}
	return "" // frames whose content changed: their windows run again
}

// removeRun deletes a run's files from dir: the window files its manifest lists, and the manifest;
// nothing else.
func removeRun(dir string) error {
	path := filepath.Join(dir, manifestName)
	b, err := safeio.ReadFile(path, safeio.MaxJSONBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	var man manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return fmt.Errorf("stream: %s is not a run's manifest (%v): its files are left alone", path, err)
	}
	var errs []error
	for _, f := range man.Files {
		if f != filepath.Base(f) || !strings.HasPrefix(f, "window-") { // a manifest names files of dir only
			errs = append(errs, fmt.Errorf("stream: %s lists %q, not a window file: left alone", path, f))
			continue
		}
		errs = append(errs, removeFile(filepath.Join(dir, f)))
	}
	errs = append(errs, removeFile(path))
	return errors.Join(errs...)
}
