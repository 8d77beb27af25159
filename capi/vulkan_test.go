package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// vulkanChild marks the child process of TestVulkanDevice.
const vulkanChild = "DA3_CAPI_TEST_VULKAN"

// TestVulkanDevice loads the tiny DA3 fixture through the C ABI's functions
// (da3go_load, da3go_depth, da3go_run, da3go_free) once with device "cpu"
// and once with "Vulkan0", and the device's depth, confidence and cameras
// must agree with the CPU's (f32 products: max|d| ≤ 1e-5·max|CPU|,
// correlation ≥ 0.99999), its graph having run whole on the device.
//
// It runs in a child process (this test binary again) whose environment
// makes Mesa's software Vulkan device (lavapipe) visible to ggml
// (GGML_VK_VISIBLE_DEVICES=0), keeps ggml-vulkan's products in f32
// (GGML_VK_DISABLE_F16=1) and points DA3_BACKEND_PATH at the repository's
// ggml/vendor/lib unless it is set, as tests/vulkan does, so that nothing of
// it reaches this package's other tests. It skips, saying why, without
// libggml-vulkan.so (make vulkan) or a Vulkan device.
func TestVulkanDevice(t *testing.T) {
	if os.Getenv(vulkanChild) != "" {
		vulkanDevice(t)
		return
	}
	if testing.Short() {
		t.Skip("-short: the Vulkan device test runs on the device (lavapipe, a software device, without a GPU)")
	}
	env := []string{vulkanChild + "=1", "GGML_VK_VISIBLE_DEVICES=0", "GGML_VK_DISABLE_F16=1"}
	if v := os.Getenv("GGML_VK_VISIBLE_DEVICES"); v != "" {
		env[1] = "GGML_VK_VISIBLE_DEVICES=" + v
	}
	libs := os.Getenv("DA3_BACKEND_PATH")
	if libs == "" {
		d, err := filepath.Abs(filepath.Join("..", "ggml", "vendor", "lib"))
		require.NoError(t, err)
		libs = d
		env = append(env, "DA3_BACKEND_PATH="+d)
	}
	found := false
	for _, d := range filepath.SplitList(libs) {
		if _, err := os.Stat(filepath.Join(d, "libggml-vulkan.so")); err == nil {
			found = true
		}
	}
	if !found {
		t.Skipf("no libggml-vulkan.so in DA3_BACKEND_PATH=%s: build it with `make vulkan` (Debian packages: glslc libvulkan-dev, and mesa-vulkan-drivers for the software device)", libs)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestVulkanDevice$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	if m := regexp.MustCompile(`(?m)^\s*vulkan_test\.go:\d+: (skip: .*)$`).FindStringSubmatch(text); m != nil && err == nil {
		t.Skip(m[1])
	}
	require.NoError(t, err, "child process:\n%s", text)
	require.Contains(t, text, "--- PASS: TestVulkanDevice", "child process:\n%s", text)
	for _, m := range regexp.MustCompile(`(?m)^\s*vulkan_test\.go:\d+: (.*max\|d\|.*)$`).FindAllStringSubmatch(text, -1) {
		t.Log(m[1])
	}
}

// vulkanDevice is TestVulkanDevice in the child process.
func vulkanDevice(t *testing.T) {
	dirs := backend.DefaultBackendDirs()
	_, lerr := backend.LoadBackends(dirs)
	if _, err := ggml.DeviceByName("Vulkan0"); err != nil {
		t.Skipf("skip: no Vulkan device (%v; %v); a machine without a GPU needs mesa-vulkan-drivers", err, lerr)
	}
	dir := t.TempDir()
	gguf := filepath.Join(dir, "da3-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", gguf, convert.Options{}))
	img := "../tests/fixtures/da3-tiny/one/images/view0.png"

	// C strings, freed when the test ends.
	str := func(s string) *_Ctype_da3go_cchar {
		p := cString(s)
		t.Cleanup(func() { da3go_free_string(p) })
		return (*_Ctype_da3go_cchar)(unsafe.Pointer(p))
	}
	check := func(what string, rc _Ctype_int, cerr *_Ctype_char) {
		t.Helper()
		if rc != 0 {
			msg := "(no message)"
			if cerr != nil {
				msg = goString((*_Ctype_da3go_cchar)(unsafe.Pointer(cerr)))
				da3go_free_string(cerr)
			}
			t.Fatalf("%s: %s", what, msg)
		}
	}
	opt := &_Ctype_da3go_options{process_res: 56, processed_size: 1}
	paths := []*_Ctype_da3go_cchar{str(img)}

	// run loads gguf on dev through the C ABI and returns the depth of
	// da3go_depth, and depth, confidence and extrinsics of da3go_run on the
	// same view.
	type outputs struct{ depth, runDepth, conf, extrinsics []float32 }
	run := func(dev string) outputs {
		var h _Ctype_da3go_model
		var cerr *_Ctype_char
		check("da3go_load "+dev, da3go_load(str(gguf), nil, str(dev), 2, &h, &cerr), cerr)
		defer func() { check("da3go_free", da3go_free(h, &cerr), cerr) }()

		var o outputs
		var depth *_Ctype_float
		var w, ht _Ctype_int
		check("da3go_depth "+dev, da3go_depth(h, str(img), opt, &depth, &w, &ht, &cerr), cerr)
		o.depth = slices32(unsafe.Pointer(depth), int(w*ht))
		da3go_free_buffer(unsafe.Pointer(depth))

		var views *_Ctype_da3go_view
		check("da3go_run "+dev, da3go_run(h, &paths[0], 1, opt, &views, &cerr), cerr)
		v := unsafe.Slice(views, 1)[0]
		n := int(v.width * v.height)
		o.runDepth = slices32(unsafe.Pointer(v.depth), n)
		require.NotNil(t, v.conf, "conf")
		o.conf = slices32(unsafe.Pointer(v.conf), n)
		require.NotZero(t, v.has_camera, "camera")
		for _, e := range v.extrinsics {
			o.extrinsics = append(o.extrinsics, float32(e))
		}
		da3go_free_views(views, 1)

		if dev != "cpu" {
			s, err := lookup(h)
			require.NoError(t, err)
			m := s.Runner.(*model.Model)
			require.Equal(t, dev, m.Device())
			st := m.Stats()
			assert.Empty(t, st.Fallbacks, "ops that fell back to the CPU")
			assert.Zero(t, st.Ops["CUSTOM"], "CPU kernels (ggml custom ops) in a device graph")
			assert.Equal(t, 1, st.Splits, "scheduler splits")
		}
		return o
	}
	cpu, vk := run("cpu"), run("Vulkan0")
	for _, c := range []struct {
		name      string
		want, got []float32
	}{
		{"da3go_depth depth", cpu.depth, vk.depth},
		{"da3go_run depth", cpu.runDepth, vk.runDepth},
		{"da3go_run conf", cpu.conf, vk.conf},
		{"da3go_run extrinsics", cpu.extrinsics, vk.extrinsics},
	} {
		vulkanGate(t, c.name, c.want, c.got)
	}
}

// vulkanGate compares the device's output got with the CPU's want:
// correlation ≥ 0.99999 and max|d| ≤ 1e-5·max|want|.
func vulkanGate(t *testing.T, what string, want, got []float32) {
	t.Helper()
	const rel, minCorr = 1e-5, 0.99999
	require.Len(t, got, len(want), what)
	require.NotEmpty(t, want, what)
	maxAbs, _, corr := testutil.Stats(want, got)
	var ref float64
	for _, v := range want {
		ref = math.Max(ref, math.Abs(float64(v)))
	}
	t.Logf("%-22s max|d| %.3g = %.2g of max|ref| %.3g, corr %.9f", what, maxAbs, maxAbs/ref, ref, corr)
	assert.True(t, corr >= minCorr && maxAbs <= rel*ref, "%s: Vulkan0 differs from the CPU: corr %.9f (min %g), max|d| %.3g > %.0e of max|ref| %.3g",
		what, corr, minCorr, maxAbs, rel, ref)
}

// slices32 copies n floats from a buffer of the library.
func slices32(p unsafe.Pointer, n int) []float32 {
	return append([]float32(nil), unsafe.Slice((*float32)(p), n)...)
}
