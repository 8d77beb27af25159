package main

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model"
)

// TestItemBar: an item bar places each graph's progress between the items
// its runs cover, so one bar spans the whole job.
func TestItemBar(t *testing.T) {
	t.Setenv("DA3_PROGRESS", "1")
	var w bytes.Buffer
	bar := newItemBar(4, "depth", false, &w)
	bar.cover(2, 2) // a batch of images 2 and 3, run as two graphs
	bar.tell(model.Progress{Stage: "batch", Part: 1, Parts: 2, Done: 50, Total: 100})
	assert.EqualValues(t, 2.5*barSteps, bar.bar.State().CurrentNum, "half of the first graph of two over two images: 2.5 items")
	bar.tell(model.Progress{Stage: "batch", Part: 2, Parts: 2, Done: 100, Total: 100})
	assert.EqualValues(t, 4*barSteps, bar.bar.State().CurrentNum)
	bar.finish()
	assert.Contains(t, w.String(), "depth")
}

// TestSceneBar: a scene bar shows the graph computing, named after its
// stage, restarted for each stage.
func TestSceneBar(t *testing.T) {
	t.Setenv("DA3_PROGRESS", "1")
	var w bytes.Buffer
	bar := newSceneBar(viewCount(12), false, &w)
	bar.tell(model.Progress{Stage: "backbone", Part: 1, Parts: 1, Done: 300, Total: 1000})
	s := bar.bar.State()
	assert.Equal(t, "12 views: backbone", s.Description)
	assert.EqualValues(t, 300, s.CurrentNum)
	assert.EqualValues(t, 1000, s.Max)
	bar.tell(model.Progress{Stage: "heads", Part: 2, Parts: 3, Done: 10, Total: 200})
	s = bar.bar.State()
	assert.Equal(t, "12 views: heads 2/3", s.Description)
	assert.EqualValues(t, 10, s.CurrentNum)
	assert.EqualValues(t, 200, s.Max)
	bar.finish()
	assert.Contains(t, w.String(), "12 views: backbone")
}

// TestBarsOnlyOnATerminal: bars go to stderr when it is a terminal or
// DA3_PROGRESS=1 forces them, never with -quiet.
func TestBarsOnlyOnATerminal(t *testing.T) {
	var w bytes.Buffer
	t.Setenv("DA3_PROGRESS", "")
	assert.Equal(t, io.Discard, barWriter(false, &w), "a buffer is not a terminal")
	t.Setenv("DA3_PROGRESS", "1")
	assert.Same(t, &w, barWriter(false, &w))
	assert.Equal(t, io.Discard, barWriter(true, &w), "-quiet wins")
}

// TestRunsShowProgress: a scene (reconstruct, and its exports) and images
// one by one (depth -independent) draw their bars; without a terminal
// nothing is drawn.
func TestRunsShowProgress(t *testing.T) {
	m := tinyDA3(t)
	views := []string{fixtureImage(t, "da3-tiny/two/images/view0.png"), fixtureImage(t, "da3-tiny/two/images/view1.png")}
	t.Setenv("DA3_PROGRESS", "1")
	code, _, stderr := runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "56", "-format", "npz", "-o", filepath.Join(t.TempDir(), "s")}, views...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 views: network")
	assert.Contains(t, stderr, "writing", "the exports have a bar too")
	code, _, stderr = runCLI(append([]string{"depth", "-model", m, "-process-res", "56", "-independent", "-o", t.TempDir()}, views...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "depth ")
	t.Setenv("DA3_PROGRESS", "")
	code, _, stderr = runCLI(append([]string{"depth", "-model", m, "-process-res", "56", "-independent", "-o", t.TempDir()}, views...)...)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "%|")
}
