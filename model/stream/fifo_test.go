package stream

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/internal/testutil"
)

// TestManifestAndWindowsRead: the run's manifest and window files are read
// through safeio: a FIFO in the manifest's place is refused at once by Run
// and Open, an oversized manifest is refused naming the limit, and a FIFO
// in a window file's place makes Open fail at once.
func TestManifestAndWindowsRead(t *testing.T) {
	s := &windowScene{room: newRoom(16, 12), n: 20, noise: 0.01, failAt: -1}
	var log bytes.Buffer

	dir := t.TempDir()
	fifo := filepath.Join(dir, manifestName)
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	err := testutil.NotBlocked(t, fifo, func() error { _, _, err := runKeyed(t, s, dir, keysOf(s.n), &log); return err })
	require.ErrorIs(t, err, safeio.ErrNotRegular)
	err = testutil.NotBlocked(t, fifo, func() error { _, err := Open(dir); return err })
	require.ErrorIs(t, err, safeio.ErrNotRegular)

	big := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(big, manifestName), make([]byte, safeio.MaxJSONBytes+1), 0o644))
	_, err = Open(big)
	require.ErrorIs(t, err, safeio.ErrTooLarge)
	assert.Contains(t, err.Error(), "16 MiB")

	run := t.TempDir()
	_, _, err = runKeyed(t, s, run, keysOf(s.n), &log)
	require.NoError(t, err)
	win := filepath.Join(run, "window-00000.npz")
	require.FileExists(t, win)
	require.NoError(t, os.Remove(win))
	require.NoError(t, syscall.Mkfifo(win, 0o600))
	err = testutil.NotBlocked(t, win, func() error { _, err := Open(run); return err })
	require.ErrorIs(t, err, safeio.ErrNotRegular)
}
