package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/model"
)

// Reconstruction is a finished streamed run read back from its directory: every frame's result in the
// run's world frame (that of window 0) and scale, each taken from the window that owns it
// (Window.OwnStart–OwnEnd). It reads one window file at a time and keeps the last one read, so reading
// the frames in order reads each file once; the next window is decoded into the same buffers, so the
// maps of a Result or View are valid until a call reads another window (copy them to keep them). It is
// an export.ViewSource: the export writers' ...From functions write the merged scene from it. Not safe for
// concurrent use.
type Reconstruction struct {
	dir     string
	man     manifest
	toWorld []Sim3
	owner   []int // window of each frame
	views   []export.View
	cached  *storedWindow
}

// Open reads a finished run's manifest and its windows' metadata. A run with missing windows is an error
// (run it again to resume).
func Open(dir string) (*Reconstruction, error) {
	b, err := safeio.ReadFile(filepath.Join(dir, manifestName), safeio.MaxJSONBytes)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	r := &Reconstruction{dir: dir}
	if err := json.Unmarshal(b, &r.man); err != nil {
		return nil, fmt.Errorf("stream: %s: %w", filepath.Join(dir, manifestName), err)
	}
	m := &r.man
	if m.Version != storeVersion || len(m.Frames) == 0 || len(m.Keys) != len(m.Frames) {
		return nil, fmt.Errorf("stream: %s: not a version %d manifest of a run", filepath.Join(dir, manifestName), storeVersion)
	}
	plan, err := Plan(len(m.Frames), m.Window, m.Overlap)
	if err != nil || !slices.Equal(plan, m.Windows) {
		return nil, fmt.Errorf("stream: %s: its windows are not the plan of %d frames in windows of %d with overlap %d", dir, len(m.Frames), m.Window, m.Overlap)
	}
	r.owner = make([]int, len(m.Frames))
	for _, w := range plan {
		path := windowPath(dir, w.Index)
		meta, err := readWindowMeta(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("stream: window %d of %d (frames %d–%d) is missing in %s: the run did not finish; run it again to resume", w.Index, len(plan), w.Start, w.End-1, dir)
		}
		if err != nil {
			return nil, err
		}
		if meta.Window != w || !slices.Equal(meta.Frames, m.Frames[w.Start:w.End]) {
			return nil, fmt.Errorf("stream: %s belongs to another run", path)
		}
		s, _ := meta.ToWorld.sim3() // checked by readWindowMeta
		r.toWorld = append(r.toWorld, s)
		for f := w.OwnStart; f < w.OwnEnd; f++ {
			r.owner[f] = w.Index
		}
	}
	if opt, ok := m.Graph.optimised(r.toWorld); ok {
		r.toWorld = opt
	}
	return r, nil
}

// optimised returns the transforms loop closure gave the windows, when there are some and the windows'
// chained transforms are still those they were computed from.
func (g *graphRecord) optimised(chained []Sim3) ([]Sim3, bool) {
	if g == nil || len(g.Chained) != len(chained) || len(g.ToWorld) != len(chained) {
		return nil, false
	}
	out := make([]Sim3, len(chained))
	for i := range chained {
		if c := g.Chained[i]; (Sim3{S: c.Scale, R: c.Rotation, T: c.Translation}) != chained[i] {
			return nil, false
		}
		s, err := g.ToWorld[i].sim3()
		if err != nil {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// Metric says how a run whose windows are in metres got its scale: each window's metric scale, chained
// and final scale, their spreads (nil for a run of relative depth, or of windows aligned rigidly).
func (r *Reconstruction) Metric() *MetricReport {
	if r.man.Metric == nil {
		return nil
	}
	rep := *r.man.Metric
	rep.Windows = slices.Clone(rep.Windows)
	return &rep
}

// Dir is the run's directory.
func (r *Reconstruction) Dir() string { return r.dir }

// Len is the number of frames.
func (r *Reconstruction) Len() int { return len(r.man.Frames) }

// Names are the frames' names.
func (r *Reconstruction) Names() []string { return slices.Clone(r.man.Frames) }

// Windows is the run's plan.
func (r *Reconstruction) Windows() []Window { return slices.Clone(r.man.Windows) }

// ToWorld is the transform from window w's frame to the run's (after loop closure, when it found loops).
func (r *Reconstruction) ToWorld(w int) Sim3 { return r.toWorld[w] }

// window returns window w's stored results, reading its file unless it is the one read last.
func (r *Reconstruction) window(w int) (*storedWindow, error) {
	if r.cached != nil && r.cached.meta.Window.Index == w {
		return r.cached, nil
	}
	var reuse map[string]any
	if r.cached != nil {
		reuse = r.cached.arrays
	}
	r.cached = nil
	sw, err := readWindow(windowPath(r.dir, w), reuse)
	if err != nil {
		return nil, err
	}
	// Into the run's frame once, in place.
	for i := range sw.results {
		sw.results[i] = alignInPlace(sw.results[i], r.toWorld[w])
	}
	r.cached = sw
	return sw, nil
}

// Result returns frame i's result in the run's world frame: its owning window's result with the depth
// scaled and the camera moved by the window's transform (Camera.PoseEncoding stays the window's raw
// output). Maps are at the processed size, valid until a call reads another window.
func (r *Reconstruction) Result(i int) (model.Result, error) {
	if i < 0 || i >= r.Len() {
		return model.Result{}, fmt.Errorf("stream: frame %d of %d", i, r.Len())
	}
	w := r.owner[i]
	sw, err := r.window(w)
	if err != nil {
		return model.Result{}, err
	}
	return sw.results[i-sw.meta.Window.Start], nil
}

// View returns frame i as an export view (see Result).
func (r *Reconstruction) View(i int) (export.View, error) {
	res, err := r.Result(i)
	if err != nil {
		return export.View{}, err
	}
	return res.View(r.man.Frames[i])
}

// Cameras returns every frame's view without its maps (name, sizes, camera): what WriteGLB and
// NewCOLMAPModel need besides the cloud. One pass over the window files, the first time.
func (r *Reconstruction) Cameras() ([]export.View, error) {
	if r.views != nil {
		return r.views, nil
	}
	out := make([]export.View, r.Len())
	for i := range out {
		v, err := r.View(i)
		if err != nil {
			return nil, err
		}
		v.Depth, v.Conf, v.Sky, v.RGB = nil, nil, nil, nil
		out[i] = v
	}
	r.views = out
	return out, nil
}

// Remove deletes the run's files (manifest and window files) from its directory, and the directory when
// nothing else is left in it.
func (r *Reconstruction) Remove() error {
	r.cached = nil
	if err := removeRun(r.dir); err != nil {
		return err
	}
	os.Remove(r.dir) // only when empty
	return nil
}
