package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// tinyDA3 converts the committed tiny DA3 fixture into a temp dir.
func tinyDA3(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "tests", "fixtures", "da3-tiny")
	if _, err := os.Stat(filepath.Join(src, "model.safetensors")); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	dst := filepath.Join(t.TempDir(), "da3-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, convert.Options{}))
	return dst
}

func writePixels(t *testing.T, shape ...int) string {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	px := make([]float32, n)
	for i := range px {
		px[i] = float32(math.Sin(float64(i) * 0.37))
	}
	p := filepath.Join(t.TempDir(), "pixels.npy")
	require.NoError(t, imgio.WriteNPY(p, px, shape...))
	return p
}

func runBenchJSON(t *testing.T, args ...string) benchReport {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"bench", "-json", "-threads", "1"}, args...), &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	var rep benchReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	return rep
}

func TestBenchPixels(t *testing.T) {
	gguf := tinyDA3(t)
	rep := runBenchJSON(t, "-model", gguf, "-pixels", writePixels(t, 1, 1, 3, 42, 56), "-repeat", "3", "-quiet")
	assert.Equal(t, "pixels", rep.Input)
	assert.Equal(t, "depthanything3", rep.Arch)
	assert.Equal(t, "CPU", rep.Device)
	assert.Equal(t, 1, rep.Threads)
	assert.Equal(t, 1, rep.Views)
	assert.Equal(t, [2]int{56, 42}, [2]int{rep.ProcessedWidth, rep.ProcessedHeight})
	require.Len(t, rep.RunsMS, 3)
	assert.Positive(t, rep.LoadMS)
	assert.Positive(t, rep.FirstMS)
	assert.Positive(t, rep.MinMS)
	assert.LessOrEqual(t, rep.MinMS, rep.MedianMS)
	assert.LessOrEqual(t, rep.MedianMS, rep.P90MS)
	assert.InDelta(t, rep.MedianMS, rep.PerViewMS, 1e-9)
	assert.Positive(t, rep.WeightsMiB)
	assert.Positive(t, rep.Nodes)
	assert.Positive(t, rep.ComputeBuffersMiB["CPU"])
	if _, err := os.Stat("/proc/self/status"); err == nil {
		assert.Positive(t, rep.LoadRSSMiB)
		assert.GreaterOrEqual(t, rep.PeakRSSMiB, rep.LoadRSSMiB)
	}
}

func TestBenchPixelsViews(t *testing.T) {
	gguf := tinyDA3(t)
	// One view repeated to two by -views, and a file holding two views.
	for _, tc := range []struct {
		name  string
		shape []int
		args  []string
	}{
		{"repeated", []int{3, 42, 56}, []string{"-views", "2"}},
		{"from file", []int{2, 3, 42, 56}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-model", gguf, "-pixels", writePixels(t, tc.shape...), "-repeat", "2", "-quiet"}, tc.args...)
			rep := runBenchJSON(t, args...)
			assert.Equal(t, 2, rep.Views)
			require.Len(t, rep.RunsMS, 2)
			assert.InDelta(t, rep.MedianMS/2, rep.PerViewMS, 1e-9)
		})
	}
}

// TestBenchOpProfile: -op-profile runs N more runs with every node timed
// and reports where their time went by op: the CPU kernels by name, every
// node of a run counted (the profile's nodes per run add up to the graph's
// nodes less the views), shares adding up to 100 %, longest first; the
// timed runs stay as many as -repeat. The text report prints the table.
func TestBenchOpProfile(t *testing.T) {
	gguf := tinyDA3(t)
	px := writePixels(t, 1, 3, 42, 56)
	rep := runBenchJSON(t, "-model", gguf, "-pixels", px, "-repeat", "2", "-quiet", "-op-profile", "2")
	require.Len(t, rep.RunsMS, 2)
	require.NotEmpty(t, rep.OpProfile)
	var pct, nodes float64
	ops := map[string]bool{}
	for i, o := range rep.OpProfile {
		pct += o.Percent
		nodes += o.Nodes
		ops[o.Op] = true
		assert.GreaterOrEqual(t, o.MS, 0.0, o.Op)
		if i > 0 {
			assert.LessOrEqual(t, o.MS, rep.OpProfile[i-1].MS, "longest first")
		}
	}
	assert.InDelta(t, 100, pct, 0.01)
	assert.Positive(t, rep.OpProfile[0].MS)
	assert.True(t, ops["kernel gemm"] && ops["kernel layer_norm"], "the CPU kernels by name: %v", ops)
	assert.LessOrEqual(t, nodes, float64(rep.Nodes))
	assert.Greater(t, nodes, float64(rep.Nodes)/3, "most nodes compute something")

	assert.Empty(t, rep.OpNodes, "no node list without -op-nodes")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "-model", gguf, "-pixels", px, "-repeat", "1", "-quiet", "-op-profile", "1"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stdout.String(), "op profile")
	assert.Contains(t, stdout.String(), "kernel gemm")
	assert.NotContains(t, stdout.String(), "slowest nodes")
}

// TestBenchOpNodes: -op-nodes K lists the K nodes of the profiled runs
// that took longest, longest first, each a distinct node of the graph
// (computed once a run) with its op and shapes; the times of the nodes of an op add up to at most
// that op's time in the profile. The text report prints them.
func TestBenchOpNodes(t *testing.T) {
	gguf := tinyDA3(t)
	px := writePixels(t, 1, 3, 42, 56)
	rep := runBenchJSON(t, "-model", gguf, "-pixels", px, "-repeat", "1", "-quiet", "-op-profile", "2", "-op-nodes", "6")
	require.Len(t, rep.OpNodes, 6)
	byOp := map[string]float64{}
	for _, o := range rep.OpProfile {
		byOp[o.Op] = o.MS
	}
	sum := map[string]float64{}
	seen := map[int]bool{}
	for i, n := range rep.OpNodes {
		assert.False(t, seen[n.Index], "node #%d listed twice", n.Index)
		seen[n.Index] = true
		assert.Less(t, n.Index, rep.Nodes)
		assert.Positive(t, n.Shape[0], "node #%d has its shape", n.Index)
		assert.Equal(t, 1.0, n.Computed, "node #%d: once a run (one graph)", n.Index)
		assert.Contains(t, byOp, n.Op)
		if i > 0 {
			assert.LessOrEqual(t, n.MS, rep.OpNodes[i-1].MS, "longest first")
		}
		sum[n.Op] += n.MS
	}
	for op, ms := range sum {
		assert.LessOrEqual(t, ms, byOp[op]*1.000001, "the nodes of %s within its time in the profile", op)
	}
	assert.Positive(t, rep.OpNodes[0].MS)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "-model", gguf, "-pixels", px, "-repeat", "1", "-quiet", "-op-profile", "1", "-op-nodes", "3"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stdout.String(), "slowest nodes")
	assert.Equal(t, 3, strings.Count(stdout.String(), "  #"), stdout.String())
}

// TestBenchSaveDepth: -save-depth writes the last run's depth of every view,
// the same numbers a direct Forward of the same pixels gives.
func TestBenchSaveDepth(t *testing.T) {
	gguf := tinyDA3(t)
	px := writePixels(t, 2, 3, 42, 56)
	out := filepath.Join(t.TempDir(), "depth.npy")
	runBenchJSON(t, "-model", gguf, "-pixels", px, "-repeat", "1", "-quiet", "-save-depth", out)
	got, shape, err := imgio.ReadNPY(out)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 42, 56}, shape)

	data, _, err := imgio.ReadNPY(px)
	require.NoError(t, err)
	m, err := model.Load(context.Background(), gguf, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	rs, err := m.Forward(context.Background(), model.Pixels{Data: data, Width: 56, Height: 42, Views: 2}, model.RunOptions{})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, append(append([]float32{}, rs[0].Depth...), rs[1].Depth...), got)
}

func TestBenchSyntheticImage(t *testing.T) {
	gguf := tinyDA3(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "-model", gguf, "-size", "61x45", "-process-res", "56",
		"-repeat", "2", "-threads", "1"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "input      synthetic 61x45, 1 view(s), processed 56x42\n")
	assert.Contains(t, out, "runs       2: median ")
	assert.Contains(t, out, "device     CPU, 1 threads, kernels auto: "+kernels.DefaultVariant().String()+" (f32)\n")
	// Progress goes to stderr, one line per run.
	assert.Contains(t, stderr.String(), "da3-go bench: run 2/2: ")
	assert.NotContains(t, out, "da3-go bench:")
}

func TestBenchCPUProfile(t *testing.T) {
	gguf := tinyDA3(t)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	runBenchJSON(t, "-model", gguf, "-pixels", writePixels(t, 3, 42, 56), "-repeat", "1", "-quiet", "-cpuprofile", prof)
	b, err := os.ReadFile(prof)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "pprof profiles are gzipped protobufs")
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{}, "-model is required"},
		{"positional", []string{"-model", "m.gguf", "extra"}, "takes no arguments"},
		{"zero repeat", []string{"-model", "m.gguf", "-repeat", "0"}, "want at least 1"},
		{"negative threads", []string{"-model", "m.gguf", "-threads", "-1"}, "-threads -1: want 0 (all cores) to 512"},
		{"absurd threads", []string{"-model", "m.gguf", "-threads", "40000"}, "-threads 40000: want 0 (all cores) to 512"},
		{"process-res too large", []string{"-model", "m.gguf", "-process-res", "5000"}, "-process-res 5000 out of range (0..4096)"},
		{"negative views", []string{"-model", "m.gguf", "-views", "-2"}, "must not be negative"},
		{"bad kernels", []string{"-model", "m.gguf", "-kernels", "fast"}, "want auto, none or a comma list"},
		{"narrow convs in f32", []string{"-model", "m.gguf", "-narrow-convs"}, "-narrow-convs needs -precision bf16 or int8"},
		{"bad size", []string{"-model", "m.gguf", "-size", "640"}, "want WxH"},
		{"negative op-profile", []string{"-model", "m.gguf", "-op-profile", "-1"}, "-op-profile -1: want a number of runs"},
		{"negative op-nodes", []string{"-model", "m.gguf", "-op-profile", "1", "-op-nodes", "-3"}, "-op-nodes -3: want a number of nodes"},
		{"op-nodes without op-profile", []string{"-model", "m.gguf", "-op-nodes", "5"}, "give -op-profile N too"},
		{"pixels and image", []string{"-model", "m.gguf", "-pixels", "a.npy", "-image", "b.png"}, "exclude each other"},
		{"unknown flag", []string{"-bogus"}, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"bench"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestBenchRuntimeErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.npy")
	require.NoError(t, os.WriteFile(bad, []byte("not numpy"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing model", []string{"-model", filepath.Join(dir, "none.gguf")}, "none.gguf"},
		{"missing image", []string{"-model", "m.gguf", "-image", filepath.Join(dir, "none.png")}, "open image"},
		{"bad pixels", []string{"-model", "m.gguf", "-pixels", bad}, "not a .npy file"},
		{"pixels shape", []string{"-model", "m.gguf", "-pixels", writePixels(t, 4, 5, 6)}, "is not (3,H,W)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"bench", "-quiet"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, exitFailure, code)
			assert.Contains(t, stderr.String(), "da3-go: ")
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		xs                    []float64
		median, p90, lo, mean float64
	}{
		{"one", []float64{5}, 5, 5, 5, 5},
		{"odd", []float64{3, 1, 2}, 2, 3, 1, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5, 4, 1, 2.5},
		{"ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5.5, 9, 1, 5.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]float64(nil), tc.xs...)
			median, p90, lo, mean := summarize(tc.xs)
			assert.Equal(t, tc.median, median, "median")
			assert.Equal(t, tc.p90, p90, "p90")
			assert.Equal(t, tc.lo, lo, "min")
			assert.InDelta(t, tc.mean, mean, 1e-12, "mean")
			assert.Equal(t, orig, tc.xs, "input left unsorted")
		})
	}
}

func TestPixelViews(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		views int
		ok    bool
	}{
		{[]int{3, 42, 56}, 1, true},
		{[]int{4, 3, 42, 56}, 4, true},
		{[]int{1, 2, 3, 42, 56}, 2, true},
		{[]int{2, 2, 3, 42, 56}, 0, false},
		{[]int{1, 42, 56}, 0, false},
		{[]int{42, 56}, 0, false},
	} {
		v, err := pixelViews(tc.shape)
		if tc.ok {
			require.NoError(t, err, "%v", tc.shape)
			assert.Equal(t, tc.views, v, "%v", tc.shape)
		} else {
			assert.Error(t, err, "%v", tc.shape)
		}
	}
}

func TestSyntheticImageDeterministic(t *testing.T) {
	a, b := syntheticImage(64, 48, 0), syntheticImage(64, 48, 0)
	assert.Equal(t, a.Pix, b.Pix)
	assert.NotEqual(t, a.Pix, syntheticImage(64, 48, 1).Pix, "views differ")
	assert.Equal(t, 64, a.Bounds().Dx())
	assert.Equal(t, 48, a.Bounds().Dy())
}
