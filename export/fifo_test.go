package export_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/testutil"
)

// TestReadCOLMAPRefusesFIFO: a COLMAP directory (-cameras DIR) whose
// cameras.bin is a FIFO is refused at once, not waited on.
func TestReadCOLMAPRefusesFIFO(t *testing.T) {
	fifo := testutil.FIFO(t, "cameras.bin")
	err := testutil.NotBlocked(t, fifo, func() error { _, err := export.ReadCOLMAP(filepath.Dir(fifo)); return err })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
	assert.Contains(t, err.Error(), "cameras.bin")
}
