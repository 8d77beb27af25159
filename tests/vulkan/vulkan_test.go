// Package vulkan tests da3-go's GPU path on ggml's Vulkan backend: every
// model family's tiny fixture (tests/fixtures) runs on the device Vulkan0
// and on the CPU from the same GGUF, and the outputs must agree (depth,
// confidence, sky, cameras, Gaussians; multi-view, independent batches,
// streaming windows, the HTTP server); the graphs must run whole on the
// device (weights in device buffers, no op falling back to the CPU, no CPU
// kernel in a device graph, the expected number of scheduler splits); host
// inputs (position embeddings, RoPE positions, camera tokens, UV maps) must
// be fed per call; and the device bugs fixed so far must stay fixed (RoPE
// over views, ggml-vulkan's small-tile race, graphs that grow in one
// process). The real architectures DA3-SMALL and Depth Anything V2 Small run
// too, at a small input size, on weights drawn from the specs in
// tests/fixtures/specs (small_test.go).
//
// Without a GPU it runs on Mesa's software Vulkan driver (lavapipe), which
// ggml skips unless GGML_VK_VISIBLE_DEVICES names it; TestMain sets that,
// keeps the matrix products in f32 (GGML_VK_DISABLE_F16=1: the parity gates
// are f32's; TestF16Products re-runs some cases with ggml's default f16
// products in a child process) and points DA3_BACKEND_PATH at the
// repository's ggml/vendor/lib unless it is set. It needs the Vulkan backend
// built there and a Vulkan device:
//
//	make vulkan   # Debian: apt-get install glslc libvulkan-dev mesa-vulkan-drivers
//	go test ./tests/vulkan -v -count=1
//
// Without them, and in -short mode, every test skips and says why. The
// first process after a cold Mesa shader cache spends some 30 s compiling
// shaders.
package vulkan

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// device is the Vulkan device the tests run on.
const device = "Vulkan0"

// f16Child marks the child process of TestF16Products, which keeps ggml's
// default f16 products.
const f16Child = "DA3_VULKAN_TEST_F16"

// Parity gates against the CPU: f32 products, and ggml-vulkan's default
// f16 products (TestF16Products).
const (
	relF32  = 1e-5
	relF16  = 3e-3
	minCorr = 0.99999
)

// skip is why the tests cannot run here ("" when they can).
var skip string

// quiet drops the models' Info logs (load, device); warnings, such as ops
// falling back to the CPU, still show.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func TestMain(m *testing.M) {
	flag.Parse()
	skip = setup()
	code := m.Run()
	if cache.dir != "" {
		os.RemoveAll(cache.dir)
	}
	os.Exit(code)
}

// setup prepares the environment before anything loads a backend and
// returns why the tests must skip, or "".
func setup() string {
	if testing.Short() {
		return "-short: the Vulkan tests run on the device (on lavapipe, a software device, a minute or more)"
	}
	if os.Getenv("GGML_VK_VISIBLE_DEVICES") == "" {
		os.Setenv("GGML_VK_VISIBLE_DEVICES", "0") // ggml skips CPU-type devices (lavapipe) otherwise
	}
	if os.Getenv(f16Child) == "" {
		os.Setenv("GGML_VK_DISABLE_F16", "1")
	} else {
		os.Unsetenv("GGML_VK_DISABLE_F16")
	}
	if os.Getenv("DA3_BACKEND_PATH") == "" {
		lib, err := filepath.Abs(filepath.Join("..", "..", "ggml", "vendor", "lib"))
		if err != nil {
			return err.Error()
		}
		os.Setenv("DA3_BACKEND_PATH", lib)
	}
	const how = "build it with `make vulkan` (Debian packages: glslc libvulkan-dev, and mesa-vulkan-drivers for the software device)"
	dirs := filepath.SplitList(os.Getenv("DA3_BACKEND_PATH"))
	found := false
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "libggml-vulkan.so")); err == nil {
			found = true
		}
	}
	if !found {
		return fmt.Sprintf("no libggml-vulkan.so in DA3_BACKEND_PATH=%s: %s", strings.Join(dirs, ":"), how)
	}
	_, err := backend.LoadBackends(dirs)
	if _, derr := ggml.DeviceByName(device); derr != nil {
		return fmt.Sprintf("no Vulkan device (%v; %v): %s; a machine without a GPU needs mesa-vulkan-drivers", derr, err, how)
	}
	return ""
}

// need skips t when the device is not there.
func need(t *testing.T) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
}

// The fixtures converted to GGUF once per process.
var cache struct {
	sync.Mutex
	dir   string
	files map[string]string
}

// fixtureDir is a committed fixture's directory.
func fixtureDir(name string) string { return filepath.Join("..", "fixtures", name) }

// gguf converts fixture src (a path under tests/fixtures) with opts once
// and returns the GGUF's path (for nested models, the any-view file's; see
// convert.OutputPaths).
func gguf(t *testing.T, src string, opts convert.Options) string {
	t.Helper()
	cache.Lock()
	defer cache.Unlock()
	key := fmt.Sprintf("%s %+v", src, opts)
	if p, ok := cache.files[key]; ok {
		return p
	}
	if cache.dir == "" {
		d, err := os.MkdirTemp("", "da3-vulkan-test")
		require.NoError(t, err)
		cache.dir, cache.files = d, map[string]string{}
	}
	dst := filepath.Join(cache.dir, fmt.Sprintf("m%d.gguf", len(cache.files)))
	require.NoError(t, convert.Convert(context.Background(), fixtureDir(src), dst, opts), "convert %s", src)
	cache.files[key] = dst
	return dst
}

// da2Options are the conversion options of a DA2 fixture (its meta.json).
func da2Options(t *testing.T, name string) convert.Options {
	t.Helper()
	meta := readMeta(t, filepath.Join(fixtureDir(name), "meta.json"))
	opts := convert.Options{Heads: int(meta["heads"].(float64))}
	for _, l := range meta["out_layers"].([]any) {
		opts.OutLayers = append(opts.OutLayers, int(l.(float64)))
	}
	if md, _ := meta["max_depth"].(float64); md > 0 {
		opts.MaxDepth = float32(md)
	}
	return opts
}

// load loads path on dev; the model is closed when t ends.
func load(t *testing.T, path, dev string) *model.Model {
	t.Helper()
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: dev, Threads: 2, Logger: quiet}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// pair loads path on the CPU and on the device.
func pair(t *testing.T, path string) (cpu, vk *model.Model) {
	t.Helper()
	cpu, vk = load(t, path, "cpu"), load(t, path, device)
	require.Equal(t, device, vk.Device())
	return cpu, vk
}

// images decodes fixture images (paths under tests/fixtures).
func images(t *testing.T, paths ...string) []model.Image {
	t.Helper()
	var out []model.Image
	for _, p := range paths {
		img, err := imgio.Decode(fixtureDir(p))
		require.NoError(t, err)
		out = append(out, img)
	}
	return out
}

// caseImages are the images of a fixture case, as its meta.json lists them.
func caseImages(t *testing.T, fixture, tc string) ([]model.Image, map[string]any) {
	t.Helper()
	meta := readMeta(t, filepath.Join(fixtureDir(fixture), tc, "meta.json"))
	var paths []string
	for _, p := range meta["images"].([]any) {
		paths = append(paths, filepath.Join(fixture, tc, "..", p.(string)))
	}
	return images(t, paths...), meta
}

func readMeta(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), path)
	return m
}

// gate compares the device's output got with the CPU's want: correlation ≥
// minCorr and max|d| ≤ rel·max|want|.
func gate(t *testing.T, what string, want, got []float32, rel float64) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: size", what)
	require.NotEmpty(t, want, "%s: empty", what)
	maxAbs, meanAbs, corr := testutil.Stats(want, got)
	var ref float64
	for _, v := range want {
		ref = math.Max(ref, math.Abs(float64(v)))
	}
	t.Logf("%-24s max|d| %.3g = %.2g of max|ref| %.3g, mean|d| %.3g, corr %.9f", what, maxAbs, maxAbs/ref, ref, meanAbs, corr)
	if !(corr >= minCorr) || !(maxAbs <= rel*ref) {
		t.Errorf("%s: %s differs from the CPU: corr %.9f (min %g), max|d| %.3g > %.0e of max|ref| %.3g", what, device, corr, minCorr, maxAbs, rel, ref)
	}
}

// gateScalar compares one value of the device's run with the CPU's:
// |d| ≤ rel·|want|.
func gateScalar(t *testing.T, what string, want, got, rel float64) {
	t.Helper()
	d := math.Abs(got - want)
	t.Logf("%-24s |d| %.3g = %.2g of %.7g", what, d, d/math.Abs(want), want)
	if !(d <= rel*math.Abs(want)) {
		t.Errorf("%s: %s gives %.9g, the CPU %.9g: |d| %.3g > %.0e of it", what, device, got, want, d, rel)
	}
}

// outputs are a run's outputs, all views' concatenated, by name.
type outputs map[string][]float32

// collect gathers the outputs every view of res has: depth, conf, sky,
// camera extrinsics and intrinsics (processed image), Gaussians.
func collect(t *testing.T, res []model.Result) outputs {
	t.Helper()
	o := outputs{}
	add := func(name string, v ...float32) { o[name] = append(o[name], v...) }
	for _, r := range res {
		add("depth", r.Depth...)
		add("conf", r.Conf...)
		add("sky", r.Sky...)
		if c := r.Camera; c != nil {
			for i := range 3 {
				for j := range 4 {
					add("extrinsics", float32(c.Extrinsics[i][j]))
				}
				for j := range 3 {
					add("intrinsics", float32(c.Intrinsics[i][j]))
				}
			}
		}
		if g := r.Gaussians; g != nil {
			add("gs.means", g.Means...)
			add("gs.scales", g.Scales...)
			add("gs.rotations", g.Rotations...)
			add("gs.harmonics", g.Harmonics...)
			add("gs.opacities", g.Opacities...)
		}
	}
	for k, v := range o {
		if len(v) == 0 {
			delete(o, k)
		}
	}
	return o
}

// compare gates every output of the device's results vk against the
// CPU's (the same views in the same order), and their sizes.
func compare(t *testing.T, cpu, vk []model.Result, rel float64, want ...string) {
	t.Helper()
	require.Len(t, vk, len(cpu))
	for i := range cpu {
		require.Equal(t, [2]int{cpu[i].Width, cpu[i].Height}, [2]int{vk[i].Width, vk[i].Height}, "view %d size", i)
		require.Equal(t, cpu[i].Position, vk[i].Position, "view %d position (reference view choice)", i)
	}
	co, vo := collect(t, cpu), collect(t, vk)
	for _, name := range want {
		require.Contains(t, co, name, "the CPU's results have no %s", name)
	}
	require.ElementsMatch(t, keys(co), keys(vo), "the same outputs")
	for _, name := range sortedKeys(co) {
		gate(t, name, co[name], vo[name], rel)
	}
}

func keys(o outputs) []string {
	var k []string
	for n := range o {
		k = append(k, n)
	}
	return k
}

// sortedKeys lists o's names in a fixed order: maps, then cameras, then
// Gaussians.
func sortedKeys(o outputs) []string {
	var out []string
	for _, n := range []string{"depth", "conf", "sky", "extrinsics", "intrinsics", "gs.means", "gs.scales", "gs.rotations", "gs.harmonics", "gs.opacities"} {
		if _, ok := o[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// onDevice checks that m's last graph ran whole on the device: no op fell
// back to the CPU, no CPU kernel (ggml CUSTOM op) in it, and splits
// scheduler splits.
//
// The splits: every node runs on the device, so the scheduler makes one
// split of the whole graph; the host inputs (pixels, position embeddings,
// RoPE positions, camera tokens, UV maps) are copied in as that split's
// inputs and make no split of their own.
func onDevice(t *testing.T, m *model.Model) {
	t.Helper()
	const splits = 1
	st := m.Stats()
	assert.Empty(t, st.Fallbacks, "ops that fell back to the CPU")
	assert.Zero(t, st.Ops["CUSTOM"], "CPU kernels (ggml custom ops) in a device graph")
	assert.Equal(t, splits, st.Splits, "scheduler splits")
	assert.NotZero(t, st.ComputeBuffers[device], "compute buffer on the device")
}
