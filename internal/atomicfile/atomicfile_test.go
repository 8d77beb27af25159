package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// TestOnlyRegularFilesAreReplaced: a regular file is replaced, and nothing
// else: a FIFO, a directory, a symbolic link and a character device are
// refused before anything is written, and stay what they were.
func TestOnlyRegularFilesAreReplaced(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "out.png")
	require.NoError(t, os.WriteFile(reg, []byte("old"), 0o644))
	require.NoError(t, atomicfile.WriteFile(reg, []byte("new")))
	b, err := os.ReadFile(reg)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))

	fifo := filepath.Join(dir, "fifo.png")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	sub := filepath.Join(dir, "sub.png")
	require.NoError(t, os.Mkdir(sub, 0o755))
	link := filepath.Join(dir, "link.png")
	require.NoError(t, os.Symlink(reg, link))
	for _, tc := range []struct{ name, path, kind string }{
		{"FIFO", fifo, "a named pipe"},
		{"directory", sub, "a directory"},
		{"symbolic link", link, "a symbolic link"},
		{"character device", "/dev/full", "a character device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := os.Lstat(tc.path)
			require.NoError(t, err)
			called := false
			err = atomicfile.Write(tc.path, func(w io.Writer) error { called = true; return nil })
			require.Error(t, err)
			assert.ErrorIs(t, err, atomicfile.ErrNotRegular)
			assert.Contains(t, err.Error(), tc.path)
			assert.Contains(t, err.Error(), tc.kind)
			assert.False(t, called, "nothing is computed for a refused destination")
			after, err := os.Lstat(tc.path)
			require.NoError(t, err)
			assert.Equal(t, before.Mode(), after.Mode(), "the destination is untouched")
			assert.ErrorIs(t, atomicfile.CheckDest(tc.path), atomicfile.ErrNotRegular)
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), atomicfile.TempPrefix), "temporary file %s left", e.Name())
	}
}

// TestInputsAreNeverReplaced: by path (also spelled differently) and as the
// same file under another name (a hard link).
func TestInputsAreNeverReplaced(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "photo.png")
	require.NoError(t, os.WriteFile(in, []byte("pixels"), 0o644))
	hard := filepath.Join(dir, "hard.png")
	require.NoError(t, os.Link(in, hard))
	for _, out := range []string{in, filepath.Join(dir, ".", "photo.png"), hard} {
		err := atomicfile.WriteFile(out, []byte("depth"), in)
		require.Error(t, err, out)
		assert.ErrorIs(t, err, atomicfile.ErrInput)
		assert.Contains(t, err.Error(), "would overwrite the input "+in)
	}
	b, err := os.ReadFile(in)
	require.NoError(t, err)
	assert.Equal(t, "pixels", string(b))
	require.NoError(t, atomicfile.WriteFile(filepath.Join(dir, "photo_depth.png"), []byte("depth"), in))
}

// TestLongNames: any name the file system takes is written (the temporary
// name does not grow with it); a longer one is refused by CheckDest,
// before anything runs, naming the length.
func TestLongNames(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, strings.Repeat("a", atomicfile.MaxName-4)+".png")
	require.NoError(t, atomicfile.WriteFile(ok, []byte("x")))
	assert.FileExists(t, ok)
	long := filepath.Join(dir, strings.Repeat("b", atomicfile.MaxName-3)+".png")
	err := atomicfile.CheckDest(long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "256 bytes long")
	assert.Error(t, atomicfile.WriteFile(long, []byte("x")))
}

// TestRemoveStale: the temporary files of a process that is gone are
// removed; those of running processes (this one) and every other file,
// however named, stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	dead := gone.Process.Pid
	plant := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		return p
	}
	stale := plant(atomicfile.TempPrefix + strconv.Itoa(dead) + "-123456")
	mine := plant(atomicfile.TempPrefix + strconv.Itoa(os.Getpid()) + "-654321")
	parent := plant(atomicfile.TempPrefix + strconv.Itoa(os.Getppid()) + "-1")
	user := plant(".da3-tmp-notes.txt")
	other := plant(".photo.png.tmp123")
	removed, err := atomicfile.RemoveStale(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{stale}, removed)
	assert.NoFileExists(t, stale)
	for _, p := range []string{mine, parent, user, other} {
		assert.FileExists(t, p)
	}
	removed, err = atomicfile.RemoveStale(filepath.Join(dir, "missing"))
	assert.NoError(t, err)
	assert.Empty(t, removed)
}

// TestFailedWriteLeavesNothing: an error of the writer leaves the
// destination as it was and no temporary file.
func TestFailedWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.npy")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	boom := errors.New("disk full")
	err := atomicfile.Write(p, func(w io.Writer) error { return boom })
	assert.ErrorIs(t, err, boom)
	b, _ := os.ReadFile(p)
	assert.Equal(t, "old", string(b))
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1)
}

// TestWriteVia: a file another writer fills by name replaces the
// destination when it succeeds; when it fails the destination keeps its
// content and no temporary file is left; a directory is not replaced.
func TestWriteVia(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v.mp4")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	boom := errors.New("encoder failed")
	err := atomicfile.WriteVia(p, func(tmp string) error {
		require.NoError(t, os.WriteFile(tmp, []byte("half"), 0o600))
		return boom
	})
	assert.ErrorIs(t, err, boom)
	b, _ := os.ReadFile(p)
	assert.Equal(t, "old", string(b))
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1)

	require.NoError(t, atomicfile.WriteVia(p, func(tmp string) error {
		assert.True(t, strings.HasPrefix(filepath.Base(tmp), atomicfile.TempPrefix))
		return os.WriteFile(tmp, []byte("new"), 0o600)
	}))
	b, _ = os.ReadFile(p)
	assert.Equal(t, "new", string(b))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	err = atomicfile.WriteVia(dir, func(string) error { return nil })
	assert.ErrorIs(t, err, atomicfile.ErrNotRegular)
}

// TestProbe: a writable directory passes and keeps nothing of the probe; a
// directory nothing can be created in fails, whoever runs the test (/proc
// refuses root too, a path under a regular file is never a directory), and
// as a user a directory without write permission fails as well.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, atomicfile.Probe(dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe is removed")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	assert.ErrorContains(t, atomicfile.Probe(file), "output directory "+file+" is not writable")
	if fi, err := os.Stat("/proc/self"); err == nil && fi.IsDir() {
		assert.ErrorContains(t, atomicfile.Probe("/proc"), "is not writable")
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		assert.ErrorContains(t, atomicfile.Probe(ro), "is not writable")
	}
}
