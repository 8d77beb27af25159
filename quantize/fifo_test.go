package quantize_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/quantize"
)

// TestQuantizeRefusesFIFO: a FIFO given as the input model is refused at
// once instead of waited on.
func TestQuantizeRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.gguf")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := quantize.Run(context.Background(), fifo, filepath.Join(dir, "out.gguf"), ggml.TypeQ8_0, quantize.Options{})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, loader.ErrNotRegular)
	case <-time.After(5 * time.Second):
		w, _ := os.OpenFile(fifo, os.O_RDWR, 0)
		defer w.Close()
		t.Fatal("quantize blocked on a FIFO")
	}
}
