package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// TestCABI builds libda3go.so (go build -buildmode=c-shared), compiles the C
// test program testdata/capi_test.c against it with gcc, and runs it on the
// tiny DA3 fixture: its depth, scene and point cloud must equal the Go
// library's. Then the README's Python ctypes example runs on the same
// library when python3 is installed.
func TestCABI(t *testing.T) {
	if testing.Short() {
		t.Skip("the c-shared build recompiles ggml: skipped in -short mode")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libda3go.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, out)
	}
	require.FileExists(t, filepath.Join(dir, "libda3go.h"))
	prog := filepath.Join(dir, "capi_test")
	cc := exec.Command(gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", prog, "testdata/capi_test.c",
		"-I", dir, "-L", dir, "-lda3go", "-Wl,-rpath,"+dir)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}

	// The fixture and what the Go library computes for it (one thread, as the C side loads it).
	gguf := filepath.Join(dir, "da3-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", gguf, convert.Options{}))
	img0 := "../tests/fixtures/da3-tiny/two/images/view0.png"
	img1 := "../tests/fixtures/da3-tiny/two/images/view1.png"
	m, err := model.Load(context.Background(), gguf, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	var imgs []image.Image
	for _, p := range []string{img0, img1} {
		img, err := imgio.Decode(p)
		require.NoError(t, err)
		imgs = append(imgs, img)
	}
	opt := model.RunOptions{ProcessRes: 56}
	one, err := m.Depth(context.Background(), imgs[0], opt)
	require.NoError(t, err)
	two, err := m.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	opt.ProcessedSize = true
	processed, err := m.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	views, err := model.Views(processed, nil)
	require.NoError(t, err)
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	var scene bytes.Buffer
	for _, r := range two {
		binary.Write(&scene, binary.LittleEndian, [2]int32{int32(r.Width), int32(r.Height)})
		binary.Write(&scene, binary.LittleEndian, r.Depth)
		binary.Write(&scene, binary.LittleEndian, r.Camera.Extrinsics)
	}
	var depth0 bytes.Buffer
	binary.Write(&depth0, binary.LittleEndian, one.Depth)
	b := imgs[0].Bounds()
	rgb := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := imgs[0].At(x, y).RGBA()
			rgb = append(rgb, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	run := exec.Command(prog, gguf, img0, img1, write("rgb0.bin", rgb), strconv.Itoa(b.Dx()), strconv.Itoa(b.Dy()),
		write("depth0.f32", depth0.Bytes()), write("scene.bin", scene.Bytes()), strconv.Itoa(pc.Len()), dir)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	require.NoError(t, run.Run(), "capi_test:\n%s%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "all")
	t.Log(strings.TrimSpace(stdout.String()))

	// The README's Python example.
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not installed: the ctypes example is not run")
		return
	}
	py := exec.Command(python, "example.py", lib, gguf, img0, "56")
	var pyErr bytes.Buffer
	py.Stderr = &pyErr
	out, err := py.Output()
	require.NoError(t, err, "example.py: %s%s", out, pyErr.String())
	assert.Empty(t, pyErr.String(), "the library does not log at info level")
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, v := range one.Depth {
		lo, hi, sum = math.Min(lo, float64(v)), math.Max(hi, float64(v)), sum+float64(v)
	}
	var w, h int
	var gotLo, gotHi, gotMean float64
	_, err = fmt.Sscanf(string(out), "depth %dx%d min %f max %f mean %f", &w, &h, &gotLo, &gotHi, &gotMean)
	require.NoError(t, err, "example.py printed %q", out)
	assert.Equal(t, [2]int{one.Width, one.Height}, [2]int{w, h})
	assert.InDelta(t, lo, gotLo, 1e-6)
	assert.InDelta(t, hi, gotHi, 1e-6)
	assert.InDelta(t, sum/float64(len(one.Depth)), gotMean, 1e-6)
}

// TestBackendDirsFollowLibrary: the backend folders searched are those of the file this code was
// loaded from, found with dladdr (here the test binary itself; libda3go.so in a C program), with
// symbolic links resolved, and never relative.
func TestBackendDirsFollowLibrary(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	self, err = filepath.EvalSymlinks(self)
	require.NoError(t, err)
	dirs := backend.DefaultBackendDirs()
	require.NotEmpty(t, dirs)
	assert.Equal(t, filepath.Dir(self), dirs[0])
	for _, d := range dirs {
		assert.True(t, filepath.IsAbs(d), d)
	}
}
