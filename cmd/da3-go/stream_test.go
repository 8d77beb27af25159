package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/stream"
)

// TestMain lets a test run the CLI in a child process (runChild): its peak RSS is then the command's own.
func TestMain(m *testing.M) {
	if args := os.Getenv("DA3_GO_CLI_CHILD"); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		code := run(context.Background(), argv, os.Stdout, os.Stderr)
		if b, err := os.ReadFile("/proc/self/status"); err == nil {
			if m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b); m != nil {
				fmt.Fprintf(os.Stderr, "child-peak-rss-kb %s\n", m[1])
			}
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runChild runs the CLI in a child process and returns its exit code, stderr and peak RSS in bytes (0
// where /proc is missing).
func runChild(t *testing.T, args ...string) (code int, stderr string, peak int64) {
	t.Helper()
	js, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DA3_GO_CLI_CHILD="+string(js))
	var e bytes.Buffer
	cmd.Stderr = &e
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	if m := regexp.MustCompile(`child-peak-rss-kb (\d+)`).FindStringSubmatch(e.String()); m != nil {
		kb, _ := strconv.ParseInt(m[1], 10, 64)
		peak = kb << 10
	}
	return code, e.String(), peak
}

// writeFrames writes n w×h PNG frames of a pattern that moves from frame to frame.
func writeFrames(t testing.TB, dir string, n, w, h int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range n {
		for y := range h {
			for x := range w {
				img.SetNRGBA(x, y, color.NRGBA{uint8(3*x + 2*i), uint8(5*y - i), uint8((x*y)/7 + 3*i), 255})
			}
		}
		var b bytes.Buffer
		require.NoError(t, (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%05d.png", i)), b.Bytes(), 0o644))
	}
}

// TestReconstructStream: a streamed run writes every merged output: one camera per frame under the frame's
// name, a cloud capped by -max-points, NPZ stacking all frames; the windows' files go once it is done.
func TestReconstructStream(t *testing.T) {
	m := tinyDA3(t)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 23, 64, 48)
	out := filepath.Join(t.TempDir(), "scene")
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "8", "-overlap", "2",
		"-format", "glb,ply,colmap,npz,mini_npz,depth_vis", "-max-points", "5000", "-o", out, in)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "streaming 23 frames in 4 windows of 8 (overlap 2), head chunks of 8 (-stream)")
	for _, f := range []string{"scene.glb", "scene.ply", "cameras.bin", "images.bin", "points3D.bin", "exports/npz/results.npz",
		"exports/mini_npz/results.npz", "depth_vis/0000.jpg", "depth_vis/0022.jpg"} {
		assert.FileExists(t, filepath.Join(out, f))
		assert.Contains(t, stdout, filepath.Join(out, f))
	}
	assert.NoDirExists(t, filepath.Join(out, "stream"), "windows removed once merged")
	sparse, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.Len(t, sparse.Images, 23)
	for i, im := range sparse.Images {
		assert.Equal(t, fmt.Sprintf("%05d.png", i), im.Name)
	}
	assert.Len(t, sparse.Points, 5000, "COLMAP of a streamed run is capped by -max-points")
	ply, err := os.ReadFile(filepath.Join(out, "scene.ply"))
	require.NoError(t, err)
	assert.Contains(t, string(ply[:200]), "element vertex 5000\n")
	assertNoTempFiles(t, out)

	// -keep-windows keeps them; a second run resumes every window.
	out2 := filepath.Join(t.TempDir(), "scene")
	args := []string{"reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "8", "-overlap", "2",
		"-format", "ply", "-max-points", "5000", "-keep-windows", "-o", out2, in}
	code, _, stderr = runCLI(args...)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, filepath.Join(out2, "stream", "window-00003.npz"))
	code, _, stderr = runCLI(args...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "resumed 4 of 4 windows")
	again, err := os.ReadFile(filepath.Join(out2, "scene.ply"))
	require.NoError(t, err)
	assert.Equal(t, ply, again, "the same merged cloud from resumed windows")

	// Other settings in the same directory are refused until -restart.
	other := append(append([]string{}, args[:len(args)-1]...), "-process-res", "70", in)
	code, _, stderr = runCLI(other...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "holds the windows of another run")
	assert.Contains(t, stderr, "process-res=56")
	code, _, stderr = runCLI(append(append([]string{}, other[:len(other)-1]...), "-restart", in)...)
	assert.Equal(t, exitOK, code, stderr)
}

// TestReconstructStreamResumesAfterInterrupt: a run cancelled after its second window keeps its finished
// windows; the same command then runs only the rest, and writes the outputs an uninterrupted run writes.
func TestReconstructStreamResumesAfterInterrupt(t *testing.T) {
	m := tinyDA3(t)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 30, 64, 48)
	out := filepath.Join(t.TempDir(), "scene")
	args := []string{"reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "6", "-overlap", "2",
		"-format", "ply,npz", "-o", out, in}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		var o, e bytes.Buffer
		done <- run(ctx, args, &o, &e)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(out, "stream", "window-00001.npz")); err == nil {
			cancel()
			break
		}
		require.True(t, time.Now().Before(deadline), "no window written")
		time.Sleep(time.Millisecond)
	}
	code := <-done
	if code == exitOK {
		t.Skip("the run finished before it could be interrupted")
	}
	assert.Equal(t, exitInterrupted, code)
	kept, _ := filepath.Glob(filepath.Join(out, "stream", "window-*.npz"))
	require.GreaterOrEqual(t, len(kept), 2)
	require.Less(t, len(kept), 7)
	code, _, stderr := runCLI(args...)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, fmt.Sprintf("resumed %d of 7 windows", len(kept)))

	whole := filepath.Join(t.TempDir(), "scene")
	code, _, stderr = runCLI(append(args[:len(args)-3:len(args)-3], "-o", whole, in)...)
	require.Equal(t, exitOK, code, stderr)
	for _, f := range []string{"scene.ply", "exports/npz/results.npz"} {
		a, err := os.ReadFile(filepath.Join(out, f))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(whole, f))
		require.NoError(t, err)
		assert.Equal(t, b, a, "%s: interrupted and resumed = uninterrupted", f)
	}
}

// TestDepthStream: depth -stream writes every frame's maps, in one scale across windows.
func TestDepthStream(t *testing.T) {
	m := tinyDA3(t)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 13, 64, 48)
	out := t.TempDir()
	code, stdout, stderr := runCLI("depth", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "6", "-overlap", "2",
		"-format", "npy", "-conf", "-o", out, in)
	require.Equal(t, 0, code, stderr)
	for i := range 13 {
		for _, k := range []string{"depth", "conf"} {
			p := filepath.Join(out, fmt.Sprintf("%05d_%s.npy", i, k))
			assert.FileExists(t, p)
			assert.Contains(t, stdout, p)
		}
	}
	d := readNPYFloats(t, filepath.Join(out, "00012_depth.npy"))
	assert.Len(t, d, 64*48, "maps at the image size")
	assert.NoDirExists(t, filepath.Join(out, "stream"))

	// Seams refined by ICP, no loop closure: the maps are written as the windows finish, the same frames.
	out2 := t.TempDir()
	code, stdout, stderr = runCLI("depth", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "6", "-overlap", "2",
		"-icp", "-loop-closure=false", "-format", "npy", "-o", out2, in)
	require.Equal(t, 0, code, stderr)
	for i := range 13 {
		assert.Contains(t, stdout, filepath.Join(out2, fmt.Sprintf("%05d_depth.npy", i)))
	}

	// Errors: flags that exclude each other, models that cannot stream.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-stream", "-no-stream"}, "exclude each other"},
		{[]string{"-stream", "-independent"}, "drop -independent"},
		{[]string{"-window", "4", "-overlap", "4"}, "must be less than -window"},
		{[]string{"-window", "1"}, "2 or more"},
	} {
		code, _, stderr := runCLI(append(append([]string{"depth", "-model", m}, tc.args...), in)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want)
	}
	code, _, stderr = runCLI("depth", "-model", tinyDA2(t), "-stream", "-o", out, in)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "-stream needs several images run as one scene")
}

// TestStreamMemoryFlat measures the peak RSS of streamed runs of 20 and 200 frames (320×240 PNGs, the tiny
// model at 224 px, windows of 8, clouds capped at 20000 points) in child processes. Holding the 180 more
// frames would add 59 MiB of decoded images (a one-scene run decodes them all) or 74 MiB of maps (depth,
// confidence, colour at 224×168); the streamed run may add at most 16 MiB. Loop closure is measured apart:
// the frames' pattern repeats every 128 frames, so the 200-frame run has dozens of loop candidates, whose
// verification reads windows back (at most three held) and aligns them, a cost that does not grow with
// the frames. Measured on the dev machine (peak RSS, MiB): 20 → 200 frames 162 → 166 without loop
// closure; 200 frames with it 179, and 600 frames 181.
func TestStreamMemoryFlat(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("peak RSS is read from /proc")
	}
	m := tinyDA3(t)
	peak := func(n int, loops bool) int64 {
		in := filepath.Join(t.TempDir(), "frames")
		writeFrames(t, in, n, 320, 240)
		out := filepath.Join(t.TempDir(), "scene")
		code, stderr, peak := runChild(t, "reconstruct", "-model", m, "-threads", "1", "-process-res", "224", "-stream", "-window", "8", "-overlap", "2",
			"-loop-closure="+strconv.FormatBool(loops), "-format", "glb,ply,colmap,npz", "-max-points", "20000", "-quiet", "-o", out, in)
		require.Equal(t, 0, code, stderr)
		require.Positive(t, peak)
		return peak
	}
	few, many, loops := peak(20, false), peak(200, false), peak(200, true)
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("peak RSS: 20 frames %.1f MiB, 200 frames %.1f MiB, with loop closure %.1f MiB", mib(few), mib(many), mib(loops))
	assert.Less(t, many-few, int64(16<<20), "peak RSS grows with the number of frames")
	assert.Less(t, loops-many, int64(32<<20), "loop closure holds more than a few windows")
}

// TestStream1000Frames: a 1000-frame sequence through the tiny model, streamed, every merged output. One
// thread: on a loaded 2-core machine the tiny graphs' many small ops make two threads wait on each other
// at every op (ggml's barrier), 20 times slower than one thread.
func TestStream1000Frames(t *testing.T) {
	m := tinyDA3(t)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 1000, 64, 48)
	out := filepath.Join(t.TempDir(), "scene")
	start := time.Now()
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "16", "-overlap", "4",
		"-format", "glb,colmap,npz", "-max-points", "100000", "-o", out, in)
	require.Equal(t, 0, code, stderr)
	t.Logf("1000 frames: %.1f s (%s)", time.Since(start).Seconds(), strings.TrimSpace(strings.Split(stderr, "\n")[0]))
	assert.Contains(t, stdout, "scene.glb")
	sparse, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	assert.Len(t, sparse.Images, 1000)
	assert.Len(t, sparse.Points, 100000)
}

// TestChooseLayout: the layout from a memory model need = 100 + 10·views + 30·chunk (MiB) against a
// budget.
func TestChooseLayout(t *testing.T) {
	fitUnder := func(budget int) fitFunc {
		return func(views, chunk int) error {
			if need := 100 + 10*views + 30*chunk; need > budget {
				return fmt.Errorf("%d views need %d MiB, %d free: %w", views, need, budget, model.ErrNotEnoughMemory)
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name     string
		flags    streamFlags
		n, chunk int
		chunkSet bool
		fit      fitFunc
		want     layout
		err      string
	}{
		{"fits whole", streamFlags{}, 20, 8, false, fitUnder(1000), layout{chunk: 8}, ""},
		{"smaller head chunk", streamFlags{}, 20, 8, false, fitUnder(400), layout{chunk: 3}, ""},
		{"fixed chunk does not fit: windows", streamFlags{}, 20, 8, true, fitUnder(400), layout{stream: true, window: 7, overlap: 1, chunk: 7}, ""},
		{"windows", streamFlags{}, 100, 8, false, fitUnder(600), layout{stream: true, window: 32, overlap: 8, chunk: 6}, ""},
		{"largest window that fits", streamFlags{}, 100, 8, false, fitUnder(350), layout{stream: true, window: 22, overlap: 5, chunk: 1}, ""},
		{"no-stream refuses", streamFlags{noStream: true}, 100, 8, false, fitUnder(350), layout{}, "-no-stream: 100 views need 1130 MiB, 350 free"},
		{"-stream fits whole", streamFlags{stream: true}, 20, 8, false, fitUnder(1000), layout{stream: true, window: 20, overlap: 5, chunk: 8}, ""},
		{"-window", streamFlags{stream: true, window: 10, overlap: 3}, 100, 8, false, fitUnder(1000), layout{stream: true, window: 10, overlap: 3, chunk: 8}, ""},
		{"-window too large", streamFlags{stream: true, window: 40}, 100, 8, true, fitUnder(500), layout{}, "-window 40: 40 views need 740 MiB"},
		{"nothing fits", streamFlags{}, 100, 8, false, fitUnder(100), layout{}, "even windows of 2 frames do not fit"},
		{"no estimate: whole", streamFlags{}, 300, 8, false, nil, layout{chunk: 8}, ""},
		{"no estimate: -stream", streamFlags{stream: true}, 300, 8, false, nil, layout{stream: true, window: 16, overlap: 4, chunk: 8}, ""},
		{"estimate fails", streamFlags{}, 30, 8, false, func(int, int) error { return errors.New("planning failed") }, layout{}, "planning failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.choose(tc.n, tc.chunk, tc.chunkSet, tc.fit)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			got.why = ""
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestStreamChosenFromMemory: under -max-memory that one scene of 40 frames exceeds, reconstruct switches
// to windows of the most frames that fit (the head chunk fixed by -chunk-size) and says so; -no-stream
// refuses with the figures; without -chunk-size a smaller head chunk lets larger windows fit.
func TestStreamChosenFromMemory(t *testing.T) {
	path := tinyDA3(t)
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	opt := model.RunOptions{ProcessRes: 56, ProcessedSize: true, ChunkSize: 8}
	total := func(views int) int64 {
		e, err := m.EstimateMemory(opt, views, 64, 48)
		require.NoError(t, err)
		return e.Total()
	}
	whole, ten, eleven := total(40), total(10), total(11)
	require.Less(t, eleven, whole)
	limit := (ten + eleven) / 2
	// The window the CLI should choose: the most views that pass the model's own check under the limit.
	opt.MaxMemory = limit
	want := 0
	for v := 2; v < 40 && m.CheckMemory(opt, v, 64, 48) == nil; v++ {
		want = v
	}
	require.NoError(t, m.Close())
	require.GreaterOrEqual(t, want, 10)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 40, 64, 48)
	cli := func(extra ...string) (int, string) {
		args := []string{"reconstruct", "-model", path, "-threads", "1", "-process-res", "56", "-format", "ply",
			"-max-memory", strconv.FormatInt(limit, 10), "-o", filepath.Join(t.TempDir(), "scene")}
		code, _, stderr := runCLI(append(append(args, extra...), in)...)
		return code, stderr
	}
	code, stderr := cli("-chunk-size", "8")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, fmt.Sprintf("windows of %d (overlap %d), head chunks of 8 (not enough memory for 40 view(s) at 56x42", want, want/4))
	code, stderr = cli()
	require.Equal(t, exitOK, code, stderr)
	var w, c int
	_, err = fmt.Sscanf(stderr[strings.Index(stderr, "windows of "):], "windows of %d (overlap %d), head chunks of %d", &w, new(int), &c)
	require.NoError(t, err, stderr)
	assert.Greater(t, w, want, "a smaller head chunk leaves room for more views")
	assert.Less(t, c, 8)
	code, stderr = cli("-no-stream")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "-no-stream: not enough memory for 40 view(s) at 56x42")
	assert.Contains(t, stderr, "-max-memory")
	// Enough memory: one scene, and the estimate is said.
	code, stderr = cli("-max-memory", strconv.FormatInt(whole, 10))
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "running 40 images as views of one scene (fits in memory: about")
}

// TestStreamNestedMetres: the nested pair streamed in small windows: every window's metric scale is
// recorded, the run is scaled from them (said on stderr, kept in stream.json), the depth maps are metric
// (16-bit PNGs in millimetres, unit metres); with
// -rigid-windows every window keeps its own scale (no report).
func TestStreamNestedMetres(t *testing.T) {
	pair := convertFixture(t, "da3-tiny-nested", convert.Options{})
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 9, 64, 48)
	out := t.TempDir()
	code, stdout, stderr := runCLI("depth", "-model", pair[0], "-metric-model", pair[1], "-threads", "1", "-process-res", "42",
		"-stream", "-window", "4", "-overlap", "2", "-keep-windows", "-format", "png16", "-o", out, in)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "streaming 9 frames in 4 windows of 4 (overlap 2)")
	assert.Contains(t, stderr, "streamed run in metres: the chain scaled by")
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "in metres") {
			t.Log(l)
		}
	}
	for i := range 9 {
		p := filepath.Join(out, fmt.Sprintf("%05d_depth_16.png", i))
		require.Contains(t, stdout, p)
		dm, err := export.ReadDepthPNG16(p)
		require.NoError(t, err)
		assert.Equal(t, export.UnitMetres, dm.Unit, "frame %d", i)
	}
	var man struct {
		Metric *stream.MetricReport `json:"metric"`
		Graph  *struct {
			ToWorld []struct {
				Scale float64 `json:"scale"`
			} `json:"to_world"`
		} `json:"graph"`
	}
	b, err := os.ReadFile(filepath.Join(out, "stream", "stream.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &man))
	require.NotNil(t, man.Metric)
	require.NotNil(t, man.Graph)
	require.Len(t, man.Metric.Windows, 4)
	for k, w := range man.Metric.Windows {
		assert.Positive(t, w.MetricScale, "window %d's metric scale, from the nested alignment", k)
		assert.Positive(t, w.Chained)
		assert.Equal(t, man.Graph.ToWorld[k].Scale, w.Final, "window %d: the final scale is its transform's", k)
	}
	assert.Equal(t, 1.0, man.Metric.Windows[0].Chained, "window 0 is the chain's frame")
	assert.Positive(t, man.Metric.Scale)

	// Rigid windows: each keeps its metric branch's scale, nothing to report.
	out2 := t.TempDir()
	code, _, stderr = runCLI("depth", "-model", pair[0], "-metric-model", pair[1], "-threads", "1", "-process-res", "42",
		"-stream", "-window", "4", "-overlap", "2", "-rigid-windows", "-loop-closure=false", "-keep-windows", "-format", "png16", "-o", out2, in)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "streamed run in metres")
	r, err := stream.Open(filepath.Join(out2, "stream"))
	require.NoError(t, err)
	assert.Nil(t, r.Metric())
	for w := range r.Windows() {
		assert.Equal(t, 1.0, r.ToWorld(w).S)
	}
	dm, err := export.ReadDepthPNG16(filepath.Join(out2, "00008_depth_16.png"))
	require.NoError(t, err)
	assert.Equal(t, export.UnitMetres, dm.Unit)
}

// TestFingerprintConvs: a streamed run's fingerprint names the convolutions' precision as the model
// resolves it, so a resumed run with -narrow-convs saying what auto chose finds its windows, and one that
// changes it does not.
func TestFingerprintConvs(t *testing.T) {
	fp := func(kind dpt.Kind, prec string, c kernels.Convs) string {
		f := modelFlags{precision: prec, narrowConvs: convsFlag(c)}
		return f.fingerprint(model.Config{Head: dpt.Config{Kind: kind}})
	}
	auto, narrow, wide := kernels.ConvsAuto, kernels.ConvsNarrow, kernels.ConvsF32
	assert.Equal(t, fp(dpt.DualDPT, "int8c", auto), fp(dpt.DualDPT, "int8c", narrow), "DA3 under int8c: auto narrows")
	assert.NotEqual(t, fp(dpt.DualDPT, "int8c", auto), fp(dpt.DualDPT, "int8c", wide))
	// elsewhere auto narrows the strided convolutions only: neither flag says that
	assert.NotEqual(t, fp(dpt.DA2, "int8c", auto), fp(dpt.DA2, "int8c", wide), "DA2 under int8c")
	assert.NotEqual(t, fp(dpt.DA2, "int8c", auto), fp(dpt.DA2, "int8c", narrow), "DA2 under int8c")
	assert.NotEqual(t, fp(dpt.DualDPT, "bf16", auto), fp(dpt.DualDPT, "bf16", wide), "bf16")
	assert.NotEqual(t, fp(dpt.DualDPT, "bf16", auto), fp(dpt.DualDPT, "bf16", narrow), "bf16")
}

// TestEstimateCountsKernelTransforms: before the first run the memory
// estimate counts the Winograd kernel transforms the runtime will keep (a
// bound on them); after it, only what is still to be stored, so the
// estimate falls and stays.
func TestEstimateCountsKernelTransforms(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	path := tinyDA3(t)
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	opt := model.RunOptions{ProcessRes: 56, ProcessedSize: true}
	scratch := func() int64 {
		e, err := m.EstimateMemory(opt, 1, 56, 42)
		require.NoError(t, err)
		return e.Scratch
	}
	before := scratch()
	px := model.Pixels{Data: make([]float32, 3*42*56), Width: 56, Height: 42, Views: 1}
	_, err = m.Forward(context.Background(), px, opt)
	require.NoError(t, err)
	after := scratch()
	assert.Less(t, after, before, "the transforms the first run stored are no longer to come")
	_, err = m.Forward(context.Background(), px, opt)
	require.NoError(t, err)
	assert.Equal(t, after, scratch(), "later runs store nothing more")
}
