package safeio

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.txt")
	require.NoError(t, os.WriteFile(ok, []byte("a\nb\n"), 0o644))
	b, err := ReadFile(ok, 4)
	require.NoError(t, err)
	assert.Equal(t, "a\nb\n", string(b))

	_, err = ReadFile(ok, 3)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, ok)
	assert.ErrorContains(t, err, "over the limit of 3 bytes")

	big := filepath.Join(dir, "big.txt")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxListBytes+1), 0o644))
	_, err = ReadFile(big, MaxListBytes)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, "limit of 4 MiB")

	_, err = ReadFile(dir, MaxJSONBytes)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "a directory")

	_, err = ReadFile(filepath.Join(dir, "missing"), MaxJSONBytes)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestDevZeroRefused(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := ReadFile("/dev/zero", MaxJSONBytes)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "/dev/zero: not a regular file (a character device)")
}

// TestFIFORefused: a named pipe without a writer would block os.Open (and then a read) forever.
func TestFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "list.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(fifo, MaxListBytes)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotRegular)
		assert.ErrorContains(t, err, "a named pipe")
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked for 5 s")
	}
}

func TestBytes(t *testing.T) {
	assert.Equal(t, "16 MiB", Bytes(16<<20))
	assert.Equal(t, "4 KiB", Bytes(4<<10))
	assert.Equal(t, "1000 bytes", Bytes(1000))
}
