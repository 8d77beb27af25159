package export_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

// TestReadCOLMAPRefusesFIFO: a COLMAP directory (-cameras DIR) whose
// cameras.bin is a FIFO is refused at once, not waited on.
func TestReadCOLMAPRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cameras.bin")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { _, err := export.ReadCOLMAP(dir); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not a regular file")
		assert.Contains(t, err.Error(), "cameras.bin")
	case <-time.After(5 * time.Second):
		w, _ := os.OpenFile(fifo, os.O_RDWR, 0)
		defer w.Close()
		t.Fatal("ReadCOLMAP blocked on a FIFO")
	}
}
