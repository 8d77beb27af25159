package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/safeio"
)

// TestHostileListAndCameras: -list and -cameras read only regular files of bounded size: /dev/zero
// (endless), a FIFO (which would block forever) and an oversized file are refused at once, with
// errors that name the file and the limit.
func TestHostileListAndCameras(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	bigList := filepath.Join(dir, "big.txt")
	require.NoError(t, os.WriteFile(bigList, make([]byte, safeio.MaxListBytes+1), 0o644))
	bigJSON := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(bigJSON, make([]byte, safeio.MaxJSONBytes+1), 0o644))

	readers := map[string]func(string) error{
		"-list":    func(p string) error { _, err := readList(p); return err },
		"-cameras": func(p string) error { _, err := loadCameras(p, []string{"a.png"}, nil); return err },
	}
	for flag, read := range readers {
		big, limit := bigList, "4 MiB"
		if flag == "-cameras" {
			big, limit = bigJSON, "16 MiB"
		}
		for _, tc := range []struct{ path, want string }{
			{"/dev/zero", "not a regular file (a character device)"},
			{fifo, "not a regular file (a named pipe)"},
			{big, "over the limit of " + limit},
		} {
			t.Run(flag+" "+filepath.Base(tc.path), func(t *testing.T) {
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- read(tc.path) }()
				select {
				case err := <-done:
					require.Error(t, err)
					assert.Contains(t, err.Error(), flag)
					assert.Contains(t, err.Error(), tc.path)
					assert.Contains(t, err.Error(), tc.want)
					t.Logf("refused in %v: %v", time.Since(start), err)
				case <-time.After(5 * time.Second):
					t.Fatalf("%s %s blocked for 5 s", flag, tc.path)
				}
			})
		}
	}
}
