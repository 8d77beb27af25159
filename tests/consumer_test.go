package tests

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

const modulePath = "github.com/da3-go/da3-go"

// TestExternalConsumer builds and runs a program in a module of its own that
// gets da3-go with `go get`, as a library user does: da3-go comes
// from a module proxy (a directory holding this checkout as a module zip),
// so the go command extracts it read-only into the module cache, without
// ggml/vendor, and builds it from there with no setup step. The program
// loads the tiny DA3 fixture and runs depth; its result must equal the same
// call made in this process.
func TestExternalConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program against a copy of the module (about a minute)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git command (lists the module's files)")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	files := moduleFiles(t, root)

	// The module proxy: list, .info, .mod and .zip of a version named after
	// the files' contents.
	zipData, sum := moduleZip(t, root, files, "")
	version := "v0.0.0-20000101000000-" + sum[:12]
	zipData, _ = moduleZip(t, root, files, modulePath+"@"+version+"/")
	proxy := t.TempDir()
	dl := filepath.Join(proxy, modulePath, "@v")
	require.NoError(t, os.MkdirAll(dl, 0o755))
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2000-01-01T00:00:00Z"}`),
		version + ".mod":  goMod,
		version + ".zip":  zipData,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dl, name), data, 0o644))
	}

	goEnv := func(key string) string {
		out, err := exec.Command(goBin, "env", key).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	modCache := goEnv("GOMODCACHE")
	t.Cleanup(func() { removeModuleVersion(t, modCache, version) })
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+goEnv("GOPROXY"),
		"GOSUMDB=off", "GOPRIVATE=", "GONOPROXY=", "GOTOOLCHAIN=local", "GOWORK=off")

	// The consumer module: go.mod with the same go version, and this
	// module's go.sum so that the dependencies' hashes are known offline.
	dir := t.TempDir()
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(goMod)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/consumer\n\n"+string(goLine)+"\n"), 0o644))
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), goSum, 0o644))
	src, err := os.ReadFile("testdata/consumer/main.go.txt")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644))
	goCmd := func(args ...string) string {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	goCmd("get", modulePath+"@"+version)
	goCmd("mod", "tidy")
	goCmd("build", "-o", "consumer", ".")
	pkgDir := strings.TrimSpace(goCmd("list", "-f", "{{.Dir}}", modulePath+"/ggml"))
	assert.True(t, strings.HasPrefix(pkgDir, modCache), "da3-go is built from the module cache (%s)", pkgDir)
	_, err = os.Stat(filepath.Join(pkgDir, "vendor"))
	assert.True(t, os.IsNotExist(err), "the module has no generated ggml/vendor")

	gguf := convertFixture(t, fixture(t, "da3-tiny"), convert.Options{})
	photo := filepath.Join(fixture(t, "da3-tiny"), "one", "images", "view0.png")
	cmd := exec.Command(filepath.Join(dir, "consumer"), gguf, photo)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// The same call in this process.
	m := loadModel(t, gguf)
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			img.Set(x, y, color.RGBA{uint8(4 * x), uint8(5 * y), 128, 255})
		}
	}
	res, err := m.Depth(context.Background(), img, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	var s float64
	for _, d := range res.Depth {
		s += float64(d)
	}
	want := fmt.Sprintf("depth 64x48 mean %.5f camera true unit relative\n", s/float64(len(res.Depth)))
	assert.Equal(t, want, lastLine(string(out)))
	assert.Contains(t, string(out), "photo (", "the public image decoder read the photo")
}

// moduleFiles lists the checkout's files as `git ls-files` sees them:
// tracked and untracked, without the ignored (generated) ones.
func moduleFiles(t *testing.T, root string) []string {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if st, err := os.Lstat(filepath.Join(root, f)); err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a plain file
		}
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	return files
}

// moduleZip writes files into a module zip whose entries start with prefix,
// and returns it with a hash of the names and contents.
func moduleZip(t *testing.T, root string, files []string, prefix string) ([]byte, string) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		fmt.Fprintf(h, "%s %d\n", f, len(data))
		h.Write(data)
		w, err := zw.Create(prefix + filepath.ToSlash(f))
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil))
}

// removeModuleVersion deletes version from the module cache (its files are
// read-only there), so the test leaves nothing behind.
func removeModuleVersion(t *testing.T, modCache, version string) {
	dir := filepath.Join(modCache, modulePath+"@"+version)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	assert.NoError(t, os.RemoveAll(dir))
	matches, _ := filepath.Glob(filepath.Join(modCache, "cache", "download", modulePath, "@v", version+".*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s + "\n"
}
