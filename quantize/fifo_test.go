package quantize_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/quantize"
)

// TestQuantizeRefusesFIFO: a FIFO given as the input model is refused at
// once instead of waited on.
func TestQuantizeRefusesFIFO(t *testing.T) {
	fifo := testutil.FIFO(t, "in.gguf")
	err := testutil.NotBlocked(t, fifo, func() error {
		_, err := quantize.Run(context.Background(), fifo, filepath.Join(t.TempDir(), "out.gguf"), ggml.TypeQ8_0, quantize.Options{})
		return err
	})
	require.ErrorIs(t, err, loader.ErrNotRegular)
}
