package loader_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

// TestOpenRefusesNonRegular: a FIFO given as a model (which os.Open would
// wait on until a writer came), a device and a directory are refused at
// once with ErrNotRegular, naming the path and what it is.
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct{ path, kind string }{{fifo, "p"}, {"/dev/zero", "D"}, {dir, "d"}} {
		done := make(chan error, 1)
		go func() {
			f, err := loader.Open(tc.path)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, loader.ErrNotRegular, tc.path)
			assert.Contains(t, err.Error(), tc.path)
		case <-time.After(5 * time.Second):
			w, _ := os.OpenFile(fifo, os.O_RDWR, 0) // lets the blocked open return
			defer w.Close()
			t.Fatalf("Open(%s) blocked", tc.path)
		}
	}
}
