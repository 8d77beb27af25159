package stream

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// runKeyed runs s's frames with the given content keys, logging into log.
func runKeyed(t *testing.T, s *windowScene, dir string, keys []string, log *bytes.Buffer) (*Reconstruction, Stats, error) {
	t.Helper()
	fr := synthFrames(s.n, s.room.w, s.room.h, nil, nil)
	for i := range fr {
		fr[i].Key = keys[i]
	}
	opt := Options{Window: 10, Overlap: 3, Dir: dir, Fingerprint: "synthetic", Logger: slog.New(slog.NewTextHandler(log, nil))}
	return Run(context.Background(), s, fr, opt)
}

func keysOf(n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = "sha256:" + strconv.Itoa(i)
	}
	return k
}

// TestFilesKeyIsTheContent: two files of one size and name, different
// bytes, have different keys (a path and a size said they were the same).
func TestFilesKeyIsTheContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "frame.png")
	require.NoError(t, os.WriteFile(p, []byte("aaaa"), 0o644))
	a := Files([]string{p}, nil)[0].Key
	require.NoError(t, os.WriteFile(p, []byte("bbbb"), 0o644))
	b := Files([]string{p}, nil)[0].Key
	assert.NotEqual(t, a, b)
	assert.Contains(t, a, "sha256:")
}

// TestResumeChecksFrames: a frame replaced by another (same name, same
// size, other content) reruns the windows that hold it, says why, and
// aligns the resumed windows after it again; the others are read back.
func TestResumeChecksFrames(t *testing.T) {
	dir := t.TempDir()
	s := &windowScene{room: newRoom(16, 12), n: 30, noise: 0.01, failAt: -1}
	keys := keysOf(s.n)
	var log bytes.Buffer
	_, st, err := runKeyed(t, s, dir, keys, &log)
	require.NoError(t, err)
	require.Equal(t, st.Windows, st.Ran)
	plan, err := Plan(s.n, 10, 3)
	require.NoError(t, err)

	keys[12] = "sha256:another image"
	s2 := &windowScene{room: s.room, n: s.n, noise: 0.01, failAt: -1}
	log.Reset()
	r, st, err := runKeyed(t, s2, dir, keys, &log)
	require.NoError(t, err)
	var want [][2]int
	for _, w := range plan {
		if w.Start <= 12 && 12 < w.End {
			want = append(want, [2]int{w.Start, w.End})
		}
	}
	assert.Equal(t, want, s2.calls, "only the windows holding the changed frame run")
	assert.Equal(t, len(plan)-len(want), st.Resumed)
	assert.Contains(t, log.String(), "frame f00012.png changed")
	assert.Contains(t, log.String(), "aligned again")
	for i := range r.Len() {
		_, err := r.Result(i)
		require.NoError(t, err)
	}

	// Another run with the same keys resumes everything.
	s3 := &windowScene{room: s.room, n: s.n, failAt: -1}
	_, st, err = runKeyed(t, s3, dir, keys, &log)
	require.NoError(t, err)
	assert.Equal(t, len(plan), st.Resumed)
}

// TestResumeChecksArrays: a byte flipped inside a window file's depth
// array is found (the zip entry's CRC, read to its end, and the array's
// SHA-256 in meta.json): the window runs again and the log says why.
func TestResumeChecksArrays(t *testing.T) {
	dir := t.TempDir()
	s := &windowScene{room: newRoom(16, 12), n: 30, failAt: -1}
	keys := keysOf(s.n)
	var log bytes.Buffer
	_, _, err := runKeyed(t, s, dir, keys, &log)
	require.NoError(t, err)

	path := windowPath(dir, 1)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	i := bytes.Index(b, []byte("depth.npy"))
	require.Positive(t, i)
	off := i + 400 // inside the depth values (stored, not compressed)
	b[off] ^= 0x40
	require.NoError(t, os.WriteFile(path, b, 0o644))

	s2 := &windowScene{room: s.room, n: s.n, failAt: -1}
	log.Reset()
	_, st, err := runKeyed(t, s2, dir, keys, &log)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Ran)
	assert.Len(t, s2.calls, 1)
	assert.Regexp(t, `window-00001.npz: depth: .*checksum`, log.String())
}

// TestDirOwnership: a file of the user's named like a window is never
// replaced or removed: a fresh run in that directory is refused naming
// it, and removing a run removes only the files its manifest lists.
func TestDirOwnership(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "window-00001.npz")
	require.NoError(t, os.WriteFile(mine, []byte("my own file"), 0o644))
	s := &windowScene{room: newRoom(16, 12), n: 30, failAt: -1}
	var log bytes.Buffer
	_, _, err := runKeyed(t, s, dir, keysOf(s.n), &log)
	require.Error(t, err)
	assert.Contains(t, err.Error(), mine)
	b, err := os.ReadFile(mine)
	require.NoError(t, err)
	assert.Equal(t, "my own file", string(b))

	dir = t.TempDir()
	other := filepath.Join(dir, "window-99999.npz")
	notes := filepath.Join(dir, "notes.txt")
	r, _, err := runKeyed(t, s, dir, keysOf(s.n), &log)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(other, []byte("mine too"), 0o644))
	require.NoError(t, os.WriteFile(notes, []byte("notes"), 0o644))
	require.NoError(t, r.Remove())
	assert.FileExists(t, other)
	assert.FileExists(t, notes)
	assert.NoFileExists(t, windowPath(dir, 0))
	assert.NoFileExists(t, filepath.Join(dir, manifestName))
}

// TestLeftoverTemporaryFiles: the temporary file of a killed run (its
// process gone) is removed by the next run; files of other names stay.
func TestLeftoverTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	stale := filepath.Join(dir, atomicfile.TempPrefix+strconv.Itoa(gone.Process.Pid)+"-4242")
	require.NoError(t, os.WriteFile(stale, []byte("half a window"), 0o644))
	keep := filepath.Join(dir, ".window-00000.npz.tmp1")
	require.NoError(t, os.WriteFile(keep, []byte("not ours"), 0o644))
	s := &windowScene{room: newRoom(16, 12), n: 30, failAt: -1}
	var log bytes.Buffer
	_, _, err := runKeyed(t, s, dir, keysOf(s.n), &log)
	require.NoError(t, err)
	assert.NoFileExists(t, stale)
	assert.FileExists(t, keep)
	assert.Contains(t, log.String(), "temporary files of an interrupted run")
}
