// Package testutil holds helpers shared by the tests of da3-go.
package testutil

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

// WriteGGUF writes a GGUF v3 file with the given metadata and tensors
// (default alignment) into t.TempDir() and returns its path. It stops the
// test on failure.
func WriteGGUF(t testing.TB, kv []loader.KeyValue, tensors []loader.WriterTensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.gguf")
	require.NoError(t, loader.WriteFile(path, kv, tensors, 0), "write synthetic GGUF")
	return path
}

// F32Tensor returns an f32 tensor of the given ggml shape (ne0 first) whose
// data is x. It stops the test when len(x) does not match the shape.
func F32Tensor(t testing.TB, name string, x []float32, shape ...uint64) loader.WriterTensor {
	t.Helper()
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	require.Equal(t, n, uint64(len(x)), "tensor %q: %d values for shape %v", name, len(x), shape)
	return loader.WriterTensor{Name: name, Type: loader.TypeF32, Shape: shape, Data: loader.Float32Bytes(x)}
}
