// Package wine runs the Windows build of the command, bin/da3-go.exe, under
// Wine and checks it against the Linux build on the committed tiny
// fixtures. scripts/windows-wine-test.sh (make test-windows) builds both,
// prepares a Wine prefix and runs these tests; without DA3_WINE_EXE they
// skip.
//
// The environment:
//
//	DA3_WINE_EXE  the Windows binary (required)
//	DA3_BIN       the Linux binary to compare with (default ../../bin/da3-go)
//	DA3_WINE      the Wine loader (default wine64, else wine, on PATH)
//	WINEPREFIX, WINEDEBUG  passed to Wine as they are
package wine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
)

// relTol bounds max|d| between the two builds' depth, relative to the
// largest depth. The builds run the same kernels (same CPU, same variant by
// CPUID) but not the same C math library: expf, tanhf, erff, logf, sinf and
// cosf of MinGW's runtime and of glibc differ in the last bit for some
// inputs, and the differences travel through the network. Measured on the
// fixtures: at most 4e-8 of the largest depth with da3-go's kernels (most
// values bit-identical), 2e-6 with ggml's ops alone; an op computed wrongly
// is off by far more.
const relTol = 1e-5

type tool struct {
	wine, exe, linux string
}

func tools(t *testing.T) tool {
	t.Helper()
	exe := os.Getenv("DA3_WINE_EXE")
	if exe == "" {
		t.Skip("DA3_WINE_EXE not set: run scripts/windows-wine-test.sh (make test-windows)")
	}
	wine := os.Getenv("DA3_WINE")
	if wine == "" {
		for _, name := range []string{"wine64", "wine"} {
			if p, err := exec.LookPath(name); err == nil {
				wine = p
				break
			}
		}
	}
	require.NotEmpty(t, wine, "no Wine: set DA3_WINE")
	linux := os.Getenv("DA3_BIN")
	if linux == "" {
		linux = filepath.Join("..", "..", "bin", "da3-go")
	}
	var err error
	exe, err = filepath.Abs(exe)
	require.NoError(t, err)
	linux, err = filepath.Abs(linux)
	require.NoError(t, err)
	require.FileExists(t, exe)
	require.FileExists(t, linux)
	return tool{wine: wine, exe: exe, linux: linux}
}

// result is one run of a command.
type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Files, not pipes: Wine's own processes (services, devices) that a
	// run starts inherit the output and outlive it, and a pipe would stay
	// open until they end.
	outs := t.TempDir()
	stdout, err := os.Create(filepath.Join(outs, "stdout"))
	require.NoError(t, err)
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(outs, "stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%s: %v", name, err)
		code = ee.ExitCode()
	}
	// Console output of a Windows program may end lines with CR LF.
	read := func(f *os.File) string {
		b, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		return strings.ReplaceAll(string(b), "\r\n", "\n")
	}
	return result{code, read(stdout), read(stderr)}
}

// windows runs da3-go.exe under Wine in dir.
func (tl tool) windows(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return run(t, dir, env, tl.wine, append([]string{tl.exe}, args...)...)
}

// native runs the Linux build in dir.
func (tl tool) native(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return run(t, dir, env, tl.linux, args...)
}

// winPath is a Unix path as Wine's default Z: drive (the Unix root) names it.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

func fixture(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "fixtures", rel))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not present", p)
	}
	return p
}

// copyInto copies files into dir under their base names and returns those.
func copyInto(t *testing.T, dir string, files ...string) []string {
	t.Helper()
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		name := filepath.Base(f)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		names = append(names, name)
	}
	return names
}

func TestWineVersion(t *testing.T) {
	tl := tools(t)
	r := tl.windows(t, t.TempDir(), nil, "version")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "windows/amd64")
	assert.Contains(t, r.stdout, "CPU backend features:")
	assert.Contains(t, r.stdout, "CPU kernels:")
}

// convertBoth converts the fixture src (a folder or file) with both builds,
// each in its own folder, and requires the same GGUF bytes: the converter is
// pure Go, so any difference is a bug of the Windows build (paths, file
// writing). It returns the Windows build's file, name, in dir.
func convertBoth(t *testing.T, tl tool, dir, src, name string, flags ...string) {
	t.Helper()
	lin := t.TempDir()
	args := append(append([]string{"convert"}, flags...), src, name)
	r := tl.native(t, lin, nil, args...)
	require.Equal(t, 0, r.code, "linux convert: %s", r.stderr)
	args[len(args)-2] = winPath(src)
	r = tl.windows(t, dir, nil, args...)
	require.Equal(t, 0, r.code, "windows convert: %s", r.stderr)
	assert.Contains(t, r.stdout, "wrote "+name)
	want, err := os.ReadFile(filepath.Join(lin, name))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the Windows build's %s differs from the Linux build's (%d and %d bytes)", name, len(got), len(want))
}

// TestWineDepthMatchesLinux converts each tiny fixture and runs depth on it
// with both builds (.npy outputs), in the kernels' automatic choice and with
// da3-go's kernels off (ggml's ops alone): the depth maps have the same shape
// and agree within relTol.
func TestWineDepthMatchesLinux(t *testing.T) {
	tl := tools(t)
	cases := []struct {
		name, src string
		flags     []string
		images    []string
	}{
		{name: "da3-one-view", src: "da3-tiny", images: []string{"da3-tiny/one/images/view0.png"}},
		{name: "da3-two-views", src: "da3-tiny", images: []string{"da3-tiny/two/images/view0.png", "da3-tiny/two/images/view1.png"}},
		{name: "da2", src: "da2-tiny/model.pth", flags: []string{"-heads", "2", "-out-layers", "0,1,2,3"}, images: []string{"da2-tiny/image.png"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			convertBoth(t, tl, dir, fixture(t, c.src), "model.gguf", c.flags...)
			var paths []string
			for _, im := range c.images {
				paths = append(paths, fixture(t, im))
			}
			images := copyInto(t, dir, paths...)
			for _, kernels := range []string{"", "off"} {
				label := "kernels=" + kernels
				if kernels == "" {
					label = "kernels=auto"
				}
				t.Run(label, func(t *testing.T) {
					env := []string{"DA3_KERNELS=" + kernels}
					args := append([]string{"depth", "-model", "model.gguf", "-format", "npy", "-o", "out-" + label}, images...)
					wr := tl.windows(t, dir, env, args...)
					require.Equal(t, 0, wr.code, "windows depth: %s", wr.stderr)
					args[6] = "lin-" + label
					lr := tl.native(t, dir, env, args...)
					require.Equal(t, 0, lr.code, "linux depth: %s", lr.stderr)
					for _, im := range images {
						base := strings.TrimSuffix(im, filepath.Ext(im)) + "_depth.npy"
						compareNPY(t, filepath.Join(dir, "lin-"+label, base), filepath.Join(dir, "out-"+label, base))
					}
				})
			}
		})
	}
}

func compareNPY(t *testing.T, wantPath, gotPath string) {
	t.Helper()
	want, wshape, err := imgio.ReadNPY(wantPath)
	require.NoError(t, err)
	got, gshape, err := imgio.ReadNPY(gotPath)
	require.NoError(t, err)
	require.Equal(t, wshape, gshape, "shape")
	require.NotEmpty(t, want)
	maxAbs, _, corr := testutil.Stats(want, got)
	var ref float64
	for _, v := range want {
		ref = math.Max(ref, math.Abs(float64(v)))
	}
	require.Positive(t, ref, "the Linux depth is all zero")
	same := 0
	for i := range want {
		if want[i] == got[i] {
			same++
		}
	}
	t.Logf("%s: shape %v, max|d| %.3g (%.2g of max|depth| %.4g), corr %.9f, %d of %d values bit-identical",
		filepath.Base(gotPath), gshape, maxAbs, maxAbs/ref, ref, corr, same, len(want))
	assert.LessOrEqual(t, maxAbs, relTol*ref, "max|d| between the Windows and the Linux build")
}

// TestWineHostileInputs: a missing image, a missing model and a file that is
// not a model end with exit status 1, a message on stderr naming the file,
// nothing on stdout and no output folder.
func TestWineHostileInputs(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	images := copyInto(t, dir, fixture(t, "da3-tiny/one/images/view0.png"))
	convertBoth(t, tl, dir, fixture(t, "da3-tiny"), "model.gguf")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"missing image", []string{"depth", "-model", "model.gguf", "-o", "out", "missing.png"}, []string{"da3-go: ", "missing.png"}},
		{"missing model", []string{"depth", "-model", "missing.gguf", "-o", "out", images[0]}, []string{"da3-go: ", "missing.gguf"}},
		{"not a model", []string{"depth", "-model", images[0], "-o", "out", images[0]}, []string{"da3-go: ", "not a GGUF file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := tl.windows(t, dir, nil, c.args...)
			assert.Equal(t, 1, r.code, "exit status")
			for _, w := range c.want {
				assert.Contains(t, r.stderr, w)
			}
			assert.Empty(t, r.stdout)
			assert.NoDirExists(t, filepath.Join(dir, "out"))
		})
	}
}

// TestWineServe: serve starts under Wine on a free port, answers /healthz,
// and returns a depth map of the image's size for a POST /v1/depth.
func TestWineServe(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	images := copyInto(t, dir, fixture(t, "da3-tiny/one/images/view0.png"))
	convertBoth(t, tl, dir, fixture(t, "da3-tiny"), "model.gguf")
	logPath := filepath.Join(t.TempDir(), "stderr")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(tl.wine, tl.exe, "serve", "-model", "model.gguf", "-addr", "127.0.0.1:0")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no SIGTERM on Windows; the process is Wine's, a Unix process
		_ = cmd.Wait()
	})

	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:[0-9]+)`)
	var base string
	for deadline := time.Now().Add(60 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(logPath)
		require.NoError(t, err)
		if m := listening.FindSubmatch(b); m != nil {
			base = string(m[1])
		}
	}
	require.NotEmpty(t, base, "serve did not say where it listens")

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `"status":"ok"`)

	img, err := os.ReadFile(filepath.Join(dir, images[0]))
	require.NoError(t, err)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("image", images[0])
	require.NoError(t, err)
	_, err = fw.Write(img)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	resp, err = http.Post(base+"/v1/depth", mw.FormDataContentType(), &form)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct {
		Width  int `json:"width"`
		Height int `json:"height"`
		Views  []struct {
			Depth struct {
				Width  int    `json:"width"`
				Height int    `json:"height"`
				F32    string `json:"f32"`
			} `json:"depth"`
		} `json:"views"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Len(t, got.Views, 1)
	d := got.Views[0].Depth
	assert.Equal(t, [2]int{61, 45}, [2]int{got.Width, got.Height}, "the image's size")
	assert.Equal(t, [2]int{61, 45}, [2]int{d.Width, d.Height}, "the depth map's size")
	assert.Len(t, d.F32, (61*45*4+2)/3*4, "base64 of 61×45 float32")
}

// TestWineRerunReplaces: a second run into the same folder replaces the
// first's file (a rename over an existing file, which Windows does
// differently), and a run in another format removes the outputs it no
// longer writes, as on Linux.
func TestWineRerunReplaces(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	images := copyInto(t, dir, fixture(t, "da3-tiny/one/images/view0.png"))
	convertBoth(t, tl, dir, fixture(t, "da3-tiny"), "model.gguf")
	npy := filepath.Join(dir, "out", "view0_depth.npy")
	for i := 0; i < 2; i++ {
		r := tl.windows(t, dir, nil, "depth", "-model", "model.gguf", "-format", "npy", "-o", "out", images[0])
		require.Equal(t, 0, r.code, "run %d: %s", i+1, r.stderr)
		require.FileExists(t, npy)
	}
	r := tl.windows(t, dir, nil, "depth", "-model", "model.gguf", "-format", "png", "-o", "out", images[0])
	require.Equal(t, 0, r.code, r.stderr)
	assert.FileExists(t, filepath.Join(dir, "out", "view0_depth.png"))
	assert.NoFileExists(t, npy, "the previous run's output this run does not write")
	assert.Contains(t, r.stderr, "removed out\\view0_depth.npy")
}
