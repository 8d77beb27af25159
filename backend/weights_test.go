package backend_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// The CPU reads weights straight from the file's memory map; the copied
// upload must give the same tensors, and Run must compute with either.
func TestUploadWeightsZeroCopyMatchesCopy(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{-1, 0.5, 7}
	path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{
		testutil.F32Tensor(t, "w", a, 3, 2),
		testutil.F32Tensor(t, "b", b, 3),
	})
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 1})
	require.NoError(t, err)
	defer rt.Close()

	run := func(w *backend.Weights) []float32 {
		out, err := rt.Run(context.Background(), backend.RunOptions{}, func(bd *backend.Builder) error {
			x := bd.Input("x", []float32{1, 1}, 2, 1)
			bd.Output("y", w.Tensor("w").Transpose(bd.G).Cont(bd.G).MulMat(bd.G, x).Add(bd.G, w.Tensor("b")))
			return nil
		})
		require.NoError(t, err)
		return out["y"].Data
	}
	var results [][]float32
	for _, copyMode := range []bool{false, true} {
		f, err := loader.Open(path)
		require.NoError(t, err)
		var opts []backend.UploadOption
		if copyMode {
			opts = append(opts, backend.CopyWeights())
		}
		w, err := rt.UploadWeights(context.Background(), f, nil, nil, opts...)
		require.NoError(t, err)
		assert.Equal(t, !copyMode && f.Mapped(), w.OwnsFile())
		got, err := w.Tensor("w").Float32s()
		require.NoError(t, err)
		assert.Equal(t, a, got)
		results = append(results, run(w))
		require.NoError(t, w.Close())
		if !w.OwnsFile() {
			f.Close()
		}
		_, err = w.Tensor("w").Float32s()
		assert.Error(t, err, "weights are unusable after Close")
	}
	// y = Wᵀ·[1,1] + b with W [3 out, 2 in] stored as ne [3, 2].
	assert.Equal(t, []float32{1 + 4 - 1, 2 + 5 + 0.5, 3 + 6 + 7}, results[0])
	assert.Equal(t, results[0], results[1])
}
