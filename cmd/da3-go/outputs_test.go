package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyFile copies src to dst (creating dst's directory).
func copyFile(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, b, 0o644))
	return dst
}

// TestOutputNames: the -o extension decides the format (or disagrees with
// -format), inputs are never overwritten, images with the same base name
// keep their directories, -o DIR/ is made before anything runs, and flags
// may follow the images.
func TestOutputNames(t *testing.T) {
	m := tinyDA2(t)
	src := fixtureImage(t, "da2-tiny/image.png")
	dir := t.TempDir()
	img := copyFile(t, src, filepath.Join(dir, "photo.png"))
	orig, err := os.ReadFile(img)
	require.NoError(t, err)

	t.Run("extension sets the format", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "sub", "d.pfm")
		code, stdout, stderr := runCLI("depth", img, "-model", m, "-process-res", "84", "-o", out)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "wrote "+out)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(b, []byte("Pf\n")), "PFM bytes in the .pfm file")
	})
	t.Run("extension disagrees with -format", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "d.pfm")
		code, _, stderr := runCLI("depth", "-model", m, "-format", "png", "-o", out, img)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "make them agree")
		assert.NoFileExists(t, out)
	})
	for _, tc := range []struct{ name, out, want string }{
		{"-o names the input", img, "would overwrite the input"},
		{"-o an image extension", filepath.Join(dir, "x.jpg"), "unknown map extension"},
		{"one file, several outputs", filepath.Join(dir, "d.png"), "names one file, but 2 outputs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"depth", "-model", m, "-o", tc.out, img}
			if strings.Contains(tc.name, "several") {
				args = append(args, "-format", "png,pfm")
			}
			code, _, stderr := runCLI(args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, tc.want)
		})
	}
	t.Run("an output that is an input", func(t *testing.T) {
		other := copyFile(t, src, filepath.Join(dir, "photo_depth.png"))
		code, _, stderr := runCLI("depth", "-model", m, img, other)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "would overwrite the input")
		os.Remove(other)
	})
	b, err := os.ReadFile(img)
	require.NoError(t, err)
	assert.Equal(t, orig, b, "the input is untouched")

	t.Run("same base names keep their directories", func(t *testing.T) {
		d := t.TempDir()
		a := copyFile(t, src, filepath.Join(d, "cam0", "frame.png"))
		c := copyFile(t, src, filepath.Join(d, "cam1", "frame.png"))
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-o", out, a, c)
		require.Equal(t, 0, code, stderr)
		for _, p := range []string{filepath.Join(out, "cam0", "frame_depth.png"), filepath.Join(out, "cam1", "frame_depth.png")} {
			assert.FileExists(t, p)
			assert.Equal(t, 1, strings.Count(stdout, "wrote "+p+"\n"))
		}
	})
	t.Run("the same image twice", func(t *testing.T) {
		code, _, stderr := runCLI("depth", "-model", m, "-o", t.TempDir(), img, img)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "two images would write")
	})
	t.Run("-o newdir/ is made first", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "new", "dir") + "/"
		code, _, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-o", out, img)
		require.Equal(t, 0, code, stderr)
		assert.FileExists(t, filepath.Join(out, "photo_depth.png"))
		// A model that fails to load leaves nothing: not the directory made
		// for it either.
		out2 := filepath.Join(t.TempDir(), "again", "deeper") + "/"
		code, _, _ = runCLI("depth", "-model", filepath.Join(dir, "missing.gguf"), "-o", out2, img)
		assert.Equal(t, exitFailure, code)
		assert.NoDirExists(t, filepath.Dir(filepath.Dir(out2)))
	})
}

// TestPoseMakesOutputDir: pose -o creates the directories of its file.
func TestPoseMakesOutputDir(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	out := filepath.Join(t.TempDir(), "a", "b", "poses.json")
	code, _, stderr := runCLI("pose", img, "-model", m, "-process-res", "42", "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, out)
	code, _, stderr = runCLI("pose", "-model", m, "-o", img, img)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "would overwrite the input")
}

// TestIndependentStreams: -independent writes each image's maps as soon as
// it is done, so an interruption keeps the finished ones (and leaves no
// temporary file).
func TestIndependentStreams(t *testing.T) {
	m := tinyDA2(t)
	src := fixtureImage(t, "da2-tiny/image.png")
	dir := t.TempDir()
	var imgs []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		imgs = append(imgs, copyFile(t, src, filepath.Join(dir, n+".png")))
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := filepath.Join(out, "a_depth.png")
	go func() { // interrupt once the first map is written
		for ctx.Err() == nil {
			if _, err := os.Stat(first); err == nil {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var o, e bytes.Buffer
	// Batches of two same-size images: four graphs.
	args := append([]string{"depth", "-model", m, "-process-res", "84", "-independent", "-chunk-size", "2", "-o", out}, imgs...)
	code := run(ctx, args, &o, &e)
	require.Equal(t, exitInterrupted, code, e.String())
	assert.FileExists(t, first)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Less(t, len(entries), len(imgs)+1, "stopped before the end")
	assert.Equal(t, len(imgs), strings.Count(readFile(t, filepath.Join(out, manifestName)), "_depth.png\n"),
		"the interrupted run lists every planned map, so that the next run replaces them")
	for _, en := range entries {
		if en.Name() == manifestName {
			continue
		}
		assert.False(t, strings.HasPrefix(en.Name(), "."), "temporary file %s left", en.Name())
		assert.Contains(t, o.String(), "wrote "+filepath.Join(out, en.Name()))
	}
}

// TestOutputRules: an output that is not a regular file (a FIFO, a
// character device) is refused in planning and stays what it was; a
// 253-byte output name is written (its temporary name no longer grows with
// it) and a 256-byte one is refused before the model loads.
func TestOutputRules(t *testing.T) {
	m := tinyDA2(t)
	src := fixtureImage(t, "da2-tiny/image.png")
	dir := t.TempDir()
	img := copyFile(t, src, filepath.Join(dir, "photo.png"))

	out := t.TempDir()
	fifo := filepath.Join(out, "photo_depth.png")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-o", out+"/", img)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "is a named pipe, not a regular file")
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.True(t, fi.Mode()&os.ModeNamedPipe != 0, "the FIFO is still a FIFO")

	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "84", "-o", "/dev/full", img)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "/dev/full")

	long := copyFile(t, src, filepath.Join(dir, strings.Repeat("l", 253-len("_depth.png"))+".png"))
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-o", t.TempDir()+"/", long)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, strings.Repeat("l", 243)+"_depth.png")

	start := time.Now()
	tooLong := filepath.Join(t.TempDir(), strings.Repeat("x", 252)+".png")
	code, _, stderr = runCLI("depth", "-model", filepath.Join(dir, "missing.gguf"), "-o", tooLong, img)
	assert.Equal(t, exitUsage, code, "refused in planning, before the model is opened")
	assert.Contains(t, stderr, "256 bytes long")
	assert.Less(t, time.Since(start), 10*time.Second)
}
