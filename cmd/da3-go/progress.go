package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"

	"github.com/da3-go/da3-go/model"
)

// barWriter is where progress bars go: stderr when it is a terminal (or
// DA3_PROGRESS=1 forces bars onto any stderr), nowhere when quiet.
func barWriter(quiet bool, stderr io.Writer) io.Writer {
	if quiet || !isTerminal(stderr) && os.Getenv(envProgress) != "1" {
		return io.Discard
	}
	return stderr
}

func newProgressBar(total int64, desc string, bytes bool, w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(bytes),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionSetWidth(30),
	)
}

// newBar returns a progress callback drawing a bar on stderr (see
// barWriter). Call the returned finish when done.
func newBar(total int64, desc string, bytes, quiet bool, stderr io.Writer) (update func(done, total int64), finish func()) {
	bar := newProgressBar(total, desc, bytes, barWriter(quiet, stderr))
	update = func(done, total int64) {
		if total > 0 && total != bar.GetMax64() {
			bar.ChangeMax64(total)
		}
		_ = bar.Set64(done)
	}
	finish = func() { _ = bar.Finish() }
	return update, finish
}

// runBar draws the progress of model runs (model.Progress) on stderr, in
// one of two ways. Over items (images, each a run or a part of a batch),
// the bar counts items, the graph computing moving it between the items it
// covers (see cover), so elapsed time and the estimate span the whole job.
// Over one scene, whose stages differ in cost, the bar is the graph
// computing, a new bar for each stage, named after it.
type runBar struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar // nil until a scene's first graph
	desc  string
	items bool
	// The items the runs reported now cover, [from, from+n), for an item bar;
	// the graph shown, for a scene bar.
	from, n int
	graph   string
}

// resolution of an item bar: steps per item.
const barSteps = 100

// newItemBar is a bar over total items.
func newItemBar(total int, desc string, quiet bool, stderr io.Writer) *runBar {
	w := barWriter(quiet, stderr)
	return &runBar{w: w, bar: newProgressBar(int64(total*barSteps), desc, false, w), desc: desc, items: true, n: 1}
}

// newSceneBar is a bar over the stages of one scene.
func newSceneBar(desc string, quiet bool, stderr io.Writer) *runBar {
	return &runBar{w: barWriter(quiet, stderr), desc: desc}
}

// cover says that the runs reported next compute items [from, from+n).
func (r *runBar) cover(from, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from, r.n = from, n
	_ = r.bar.Set64(int64(from * barSteps))
}

// tell is a model.RunOptions.Progress.
func (r *runBar) tell(p model.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Total <= 0 {
		return
	}
	frac := float64(p.Done) / float64(p.Total)
	if r.items {
		parts := max(p.Parts, 1)
		at := float64(r.from) + float64(r.n)*(float64(p.Part-1)+frac)/float64(parts)
		_ = r.bar.Set64(int64(at * barSteps))
		return
	}
	graph := p.Stage
	if p.Parts > 1 {
		graph = fmt.Sprintf("%s %d/%d", p.Stage, p.Part, p.Parts)
	}
	if graph != r.graph {
		r.graph = graph
		if r.bar != nil {
			_ = r.bar.Finish()
		}
		r.bar = newProgressBar(int64(p.Total), r.desc+": "+graph, false, r.w)
		_ = r.bar.RenderBlank() // the stage is named at once, however short
	}
	_ = r.bar.Set(p.Done)
}

// viewCount is "1 view" or "n views".
func viewCount(n int) string {
	if n == 1 {
		return "1 view"
	}
	return fmt.Sprintf("%d views", n)
}

// finish clears the bar.
func (r *runBar) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		_ = r.bar.Finish()
	}
}
