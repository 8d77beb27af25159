package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unwritableDirs are directories no file can be created in, by the user
// running the tests: a path under a regular file (never a directory), /proc
// (refuses root too), and, when not root (root writes through permission
// bits), an existing directory without write permission.
func unwritableDirs(t *testing.T) map[string]string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	dirs := map[string]string{"under a file": filepath.Join(file, "out")}
	if fi, err := os.Stat("/proc/self"); err == nil && fi.IsDir() {
		dirs["/proc"] = "/proc"
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		dirs["read-only"] = ro
	}
	return dirs
}

// TestOutputsCheckedBeforeTheModel: every command that writes files fails
// on an output directory it cannot write before it opens the model (or
// checkpoint): given a model path that does not exist, the error names the
// output directory, not the model, and nothing is written.
func TestOutputsCheckedBeforeTheModel(t *testing.T) {
	img := fixtureImage(t, "da2-tiny/image.png")
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	for name, dir := range unwritableDirs(t) {
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"depth -o DIR/", []string{"depth", "-model", missing, "-o", dir + "/", img}},
			{"depth -o FILE", []string{"depth", "-model", missing, "-o", filepath.Join(dir, "d.png"), img}},
			{"depth -gaussians", []string{"depth", "-model", missing, "-gaussians", filepath.Join(dir, "g.ply"), "-o", t.TempDir(), img}},
			{"depth -stream-dir", []string{"depth", "-model", missing, "-stream-dir", dir, "-o", t.TempDir(), img}},
			{"pose -o", []string{"pose", "-model", missing, "-o", filepath.Join(dir, "poses.json"), img}},
			{"reconstruct -o", []string{"reconstruct", "-model", missing, "-o", dir, img}},
			{"reconstruct subdirectories", []string{"reconstruct", "-model", missing, "-format", "npz,depth_vis", "-o", filepath.Join(dir, "scene"), img}},
			{"reconstruct -stream-dir", []string{"reconstruct", "-model", missing, "-stream-dir", dir, "-o", t.TempDir(), img}},
			{"convert", []string{"convert", missing, filepath.Join(dir, "m.gguf")}},
			{"quantize", []string{"quantize", missing, filepath.Join(dir, "m.gguf")}},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				code, stdout, stderr := runCLI(tc.args...)
				assert.Equal(t, exitFailure, code, stderr)
				assert.Contains(t, stderr, "output directory")
				assert.NotContains(t, stderr, "missing.gguf", "the model was not looked at")
				assert.Empty(t, stdout)
			})
		}
	}
}

// TestFailedRunLeavesNoDirectory: a run that fails after its outputs were
// planned (an undecodable image, a model that does not load, a checkpoint
// that is not one) removes the directories it made for them, and leaves a
// directory that was there before as it was.
func TestFailedRunLeavesNoDirectory(t *testing.T) {
	img := fixtureImage(t, "da2-tiny/image.png")
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.png")
	require.NoError(t, os.WriteFile(bad, []byte("not a png"), 0o644))
	garbage := filepath.Join(tmp, "garbage.safetensors")
	require.NoError(t, os.WriteFile(garbage, []byte("not a checkpoint"), 0o644))
	m := tinyDA2(t)
	missing := filepath.Join(tmp, "missing.gguf")
	for _, tc := range []struct {
		name string
		args func(out string) []string
	}{
		{"depth, an undecodable image", func(out string) []string { return []string{"depth", "-model", m, "-o", out + "/", bad} }},
		{"depth, no model", func(out string) []string { return []string{"depth", "-model", missing, "-o", out + "/", img} }},
		{"depth -gaussians, no model", func(out string) []string {
			return []string{"depth", "-model", missing, "-gaussians", filepath.Join(out, "g.ply"), "-o", out, img}
		}},
		{"pose, no model", func(out string) []string {
			return []string{"pose", "-model", missing, "-o", filepath.Join(out, "poses.json"), img}
		}},
		{"reconstruct, no model", func(out string) []string {
			return []string{"reconstruct", "-model", missing, "-format", "glb,npz,depth_vis", "-o", out, img}
		}},
		{"reconstruct, an undecodable image", func(out string) []string {
			return []string{"reconstruct", "-model", m, "-format", "npz", "-o", out, bad}
		}},
		{"convert, not a checkpoint", func(out string) []string { return []string{"convert", garbage, filepath.Join(out, "m.gguf")} }},
		{"quantize, no model", func(out string) []string { return []string{"quantize", missing, filepath.Join(out, "m.gguf")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "new", "out")
			code, _, stderr := runCLI(tc.args(out)...)
			assert.Equal(t, exitFailure, code, stderr)
			assert.NoDirExists(t, filepath.Join(parent, "new"), "the directories the run made are removed")

			existing := t.TempDir()
			code, _, stderr = runCLI(tc.args(existing)...)
			assert.Equal(t, exitFailure, code, stderr)
			assert.DirExists(t, existing, "a directory that was there stays")
			assertEmptyDir(t, existing)
		})
	}
}

// TestReconstructReplacesThePreviousOutputs: a second run into a directory
// replaces the first run's outputs as a whole (its GLB and depth_vis are
// removed when the second writes only PLY), leaves files that are not
// outputs alone, and refuses to replace a file no run wrote unless
// -overwrite.
func TestReconstructReplacesThePreviousOutputs(t *testing.T) {
	m := tinyDA3(t)
	in := t.TempDir()
	a, b := filepath.Join(in, "a.png"), filepath.Join(in, "b.png")
	writePhoto(t, a, 64, 48, 0)
	writePhoto(t, b, 64, 48, 1)
	out := t.TempDir()
	notes := filepath.Join(out, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("mine"), 0o644))

	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "glb,depth_vis,npz", "-o", out, a, b)
	require.Equal(t, exitOK, code, stderr)
	for _, f := range []string{"scene.glb", "depth_vis/0000.jpg", "depth_vis/0001.jpg", "exports/npz/results.npz"} {
		assert.Contains(t, stdout, "wrote "+filepath.Join(out, f)+"\n")
	}
	assert.Equal(t, manifest("depth_vis/0000.jpg", "depth_vis/0001.jpg", "exports/npz/results.npz", "scene.glb"), readFile(t, filepath.Join(out, manifestName)))

	code, stdout, stderr = runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "ply", "-o", out, a, b)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "wrote "+filepath.Join(out, "scene.ply")+"\n", stdout)
	assert.Contains(t, stderr, "removed "+filepath.Join(out, "scene.glb"))
	assert.NoFileExists(t, filepath.Join(out, "scene.glb"))
	assert.NoDirExists(t, filepath.Join(out, "depth_vis"))
	assert.NoDirExists(t, filepath.Join(out, "exports"))
	assert.FileExists(t, filepath.Join(out, "scene.ply"))
	assert.Equal(t, "mine", readFile(t, notes), "a file no run wrote stays")
	assert.Equal(t, manifest("scene.ply"), readFile(t, filepath.Join(out, manifestName)))

	// A scene.glb that no run wrote is refused before the model loads, and kept.
	other := t.TempDir()
	glb := filepath.Join(other, "scene.glb")
	require.NoError(t, os.WriteFile(glb, []byte("yours"), 0o644))
	code, stdout, stderr = runCLI("reconstruct", "-model", filepath.Join(in, "missing.gguf"), "-o", other, a, b)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "is not an output of an earlier run")
	assert.Contains(t, stderr, "-overwrite")
	assert.Empty(t, stdout)
	assert.Equal(t, "yours", readFile(t, glb))
	code, _, stderr = runCLI("reconstruct", "-model", m, "-process-res", "56", "-overwrite", "-quiet", "-o", other, a, b)
	require.Equal(t, exitOK, code, stderr)
	assert.NotEqual(t, "yours", readFile(t, glb))
	assert.Equal(t, manifest("scene.glb"), readFile(t, filepath.Join(other, manifestName)))
}

// TestDepthDirReplacesAnImagesMaps: depth -o DIR replaces the maps of the
// images it runs (a format no longer asked for is removed) and keeps those
// of other images; a map file no run wrote is refused unless -overwrite.
func TestDepthDirReplacesAnImagesMaps(t *testing.T) {
	m := tinyDA2(t)
	src := fixtureImage(t, "da2-tiny/image.png")
	dir := t.TempDir()
	a := copyFile(t, src, filepath.Join(dir, "a.png"))
	b := copyFile(t, src, filepath.Join(dir, "b.png"))
	out := t.TempDir()

	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-format", "png,pfm", "-o", out, a, b)
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-o", out, a)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "wrote "+filepath.Join(out, "a_depth.png")+"\n", stdout)
	assert.NoFileExists(t, filepath.Join(out, "a_depth.pfm"), "a's map in a format this run does not write is removed")
	for _, f := range []string{"a_depth.png", "b_depth.png", "b_depth.pfm"} {
		assert.FileExists(t, filepath.Join(out, f))
	}
	assert.Equal(t, manifest("a_depth.png", "b_depth.pfm", "b_depth.png"), readFile(t, filepath.Join(out, manifestName)))

	other := t.TempDir()
	mine := filepath.Join(other, "a_depth.png")
	require.NoError(t, os.WriteFile(mine, []byte("yours"), 0o644))
	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "84", "-o", other, a)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-overwrite")
	assert.Equal(t, "yours", readFile(t, mine))
	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "84", "-overwrite", "-o", other, a)
	require.Equal(t, exitOK, code, stderr)
	assert.NotEqual(t, "yours", readFile(t, mine))
}

// TestOutputSetRemovesOnlyItsOwnFiles: a manifest naming paths outside the
// directory, through a symbolic link, a directory, or an input, gets none
// of them removed.
func TestOutputSetRemovesOnlyItsOwnFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "out")
	outside := filepath.Join(root, "outside.txt")
	elsewhere := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "victim"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "input.png"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "old.ply"), nil, 0o644))
	require.NoError(t, os.WriteFile(outside, nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestName),
		[]byte("../outside.txt\n"+outside+"\nlink/victim\nsub\ninput.png\nold.ply\n"), 0o644))

	s, err := planOutputSet(dir, []string{filepath.Join(dir, "scene.ply")}, []string{filepath.Join(dir, "input.png")},
		func(string) bool { return true }, false)
	require.NoError(t, err)
	require.NoError(t, s.commit())
	assert.FileExists(t, outside)
	assert.FileExists(t, filepath.Join(elsewhere, "victim"))
	assert.DirExists(t, filepath.Join(dir, "sub"))
	assert.FileExists(t, filepath.Join(dir, "input.png"))
	assert.NoFileExists(t, filepath.Join(dir, "old.ply"), "the one previous output is removed")
	assert.Equal(t, manifest("scene.ply"), readFile(t, filepath.Join(dir, manifestName)))
}

// TestConvertNestedPrintsBothFiles: a nested checkpoint becomes two files,
// and both are printed.
func TestConvertNestedPrintsBothFiles(t *testing.T) {
	src := filepath.Join("..", "..", "tests", "fixtures", "da3-tiny-nested")
	if _, err := os.Stat(filepath.Join(src, "model.safetensors")); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	dst := filepath.Join(t.TempDir(), "new", "nested.gguf")
	code, stdout, stderr := runCLI("convert", src, dst)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 2, stdout)
	for i, suffix := range []string{"-anyview.gguf", "-metric.gguf"} {
		p := strings.TrimSuffix(dst, ".gguf") + suffix
		assert.True(t, strings.HasPrefix(lines[i], "wrote "+p+" ("), lines[i])
		assert.FileExists(t, p)
	}
	entries, err := os.ReadDir(filepath.Dir(dst))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "exactly the printed files are written")
}

// manifest is the text of a manifest listing rels.
func manifest(rels ...string) string {
	var b strings.Builder
	b.WriteString("# da3-go outputs in this directory: the next run into it replaces them, removing those it does not write\n")
	for _, r := range rels {
		b.WriteString(r + "\n")
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
