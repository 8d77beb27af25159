package loader_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// TestOpenRefusesNonRegular: a FIFO given as a model (which os.Open would
// wait on until a writer came), a device and a directory are refused at
// once with ErrNotRegular, naming the path and what it is.
func TestOpenRefusesNonRegular(t *testing.T) {
	fifo := testutil.FIFO(t, "model.gguf")
	dir := filepath.Dir(fifo)
	for _, tc := range []struct{ path, kind string }{{fifo, "p"}, {"/dev/zero", "D"}, {dir, "d"}} {
		err := testutil.NotBlocked(t, fifo, func() error {
			f, err := loader.Open(tc.path)
			if err == nil {
				f.Close()
			}
			return err
		})
		require.ErrorIs(t, err, loader.ErrNotRegular, tc.path)
		assert.Contains(t, err.Error(), tc.path)
	}
}
