package testutil

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

func TestWriteGGUF(t *testing.T) {
	kv := []loader.KeyValue{{Key: "depthanything3.arch", Value: loader.ValueOf[string]("depthanything3")}}
	path := WriteGGUF(t, kv, []loader.WriterTensor{F32Tensor(t, "x", []float32{1, 2, 3, 4, 5, 6}, 3, 2)})
	assert.Equal(t, ".gguf", filepath.Ext(path))

	f, err := loader.Open(path)
	require.NoError(t, err)
	defer f.Close()
	arch, err := f.KV().String("depthanything3.arch")
	require.NoError(t, err)
	assert.Equal(t, "depthanything3", arch)
	ti, ok := f.Tensor("x")
	require.True(t, ok)
	assert.Equal(t, []uint64{3, 2}, ti.Shape)
	assert.Equal(t, loader.TypeF32, ti.Type)
	data, err := f.TensorData("x")
	require.NoError(t, err)
	assert.Equal(t, []byte(loader.Float32Bytes([]float32{1, 2, 3, 4, 5, 6})), append([]byte{}, data...))
}

func TestF32TensorShapeMismatch(t *testing.T) {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		F32Tensor(r, "x", []float32{1, 2, 3}, 2, 2)
	}()
	<-done
	assert.True(t, r.failed)
	assert.Contains(t, r.text(), `tensor "x": 3 values for shape [2 2]`)
}

// fatalRecorder records failures; FailNow stops the goroutine like testing does.
type fatalRecorder struct {
	testing.TB
	msgs   []string
	failed bool
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *fatalRecorder) FailNow() {
	r.failed = true
	runtime.Goexit()
}

func (r *fatalRecorder) text() string { return strings.Join(r.msgs, "\n") }
