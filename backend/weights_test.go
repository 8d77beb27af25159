package backend_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model/nn"
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
		buf := backend.WeightBuffer{Name: "CPU", Host: true}
		if w.OwnsFile() {
			buf.Name = "CPU_Mapped" // ggml_backend_cpu_buffer_from_ptr
		}
		assert.Equal(t, map[string]backend.WeightBuffer{"w": buf, "b": buf}, w.Buffers())
		st := rt.LastStats()
		assert.Equal(t, map[string]int{"CONT": 1, "MUL_MAT": 1, "ADD": 1}, st.Ops, "the graph's ops, the transpose left out")
		assert.Nil(t, st.Fallbacks, "no fallbacks on the CPU")
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

// TestPackWeights checks Weights.Pack on memory-mapped weights: the
// matrices whose width fits the kernels' panels are packed (the narrow one
// and the vector are not), a linear layer built through nn.MatMul in a run
// then multiplies by the packed form (after UsePacked) and gives the same
// values as without it, bit for bit, the weights still read back from the
// file (their dropped pages return), and copied weights are not packed.
func TestPackWeights(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	const K, N = 96, 128
	r := rand.New(rand.NewPCG(3, 4))
	wv := make([]float32, K*N)
	for i := range wv {
		wv[i] = float32(r.NormFloat64())
	}
	path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{
		testutil.F32Tensor(t, "l.weight", wv, K, N),
		testutil.F32Tensor(t, "narrow.weight", wv[:K*3], K, 3),
		testutil.F32Tensor(t, "b.weight", wv[:K], K),
	})
	x := make([]float32, K*5)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2})
	require.NoError(t, err)
	defer rt.Close()
	run := func(w *backend.Weights, packed bool) []float32 {
		out, err := rt.Run(context.Background(), backend.RunOptions{}, func(bd *backend.Builder) error {
			y := nn.MatMul(bd.G, w.Tensor("l.weight"), bd.Input("x", x, K, 5))
			assert.Equal(t, []int{N, 5}, y.Shape())
			assert.Equal(t, packed, !assert.ObjectsAreEqual([]int{K, N}, y.Src(0).Shape()), "the product reads the packed weight: %v", packed)
			bd.Output("y", y)
			return nil
		})
		require.NoError(t, err)
		return out["y"].Data
	}
	f, err := loader.Open(path)
	require.NoError(t, err)
	w, err := rt.UploadWeights(context.Background(), f, nil, nil)
	require.NoError(t, err)
	defer w.Close()
	if !w.OwnsFile() {
		t.Skip("the file is not memory-mapped here")
	}
	plain := run(w, false)
	require.NoError(t, w.Pack(rt.Kernels(), []string{"l.weight", "narrow.weight", "b.weight"}))
	require.Len(t, w.Packed(), 1, "only the matrix as wide as whole panels")
	assert.NotNil(t, w.Packed()[w.Tensor("l.weight")])
	assert.Positive(t, w.PackedBytes())
	rt.UsePacked(w.Packed())
	assert.Equal(t, plain, run(w, true), "packed once = packed per call")
	got, err := w.Tensor("l.weight").Float32s()
	require.NoError(t, err)
	assert.Equal(t, wv, got, "the weight reads back after its pages were dropped")
	rt.UsePacked(nil)

	f2, err := loader.Open(path)
	require.NoError(t, err)
	defer f2.Close()
	wc, err := rt.UploadWeights(context.Background(), f2, nil, nil, backend.CopyWeights())
	require.NoError(t, err)
	defer wc.Close()
	require.NoError(t, wc.Pack(rt.Kernels(), []string{"l.weight"}))
	assert.Empty(t, wc.Packed(), "copied weights stay as they are")
}

// TestCacheKernelTransforms checks the Winograd transforms kept from run to
// run (Runtime.CacheKernelTransforms): a convolution of a 3×3 weight in
// bf16 or int8c gives the same values, bit for bit, in its first run (which
// computes the transform into the cache: the graph has the wino_kernel
// node), in later runs (which read it: one custom node fewer) and on a
// runtime without the cache; a run whose graph is not computed stores
// nothing that later runs read (the next run still computes it), and a
// kernel that is not one of the weights (a graph's input) is never kept; in
// f32 (F(4×4) on this map), bf16 and int8c.
func TestCacheKernelTransforms(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	const IC, OC, W, H = 16, 24, 40, 24
	r := rand.New(rand.NewPCG(5, 6))
	normals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	kv, xv := normals(3*3*IC*OC), normals(W*H*IC)
	path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{testutil.F32Tensor(t, "c.weight", kv, 3, 3, IC, OC)})
	for _, prec := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8Channel} {
		t.Run(prec.String(), func(t *testing.T) {
			pol := kernels.Default(true)
			pol.Precision, pol.Convs = prec, kernels.ConvsNarrow // the convolutions in prec (F(2×2) for bf16 and int8c; F(4×4) for f32 on this map)
			if prec == kernels.PrecisionF32 {
				pol.Convs = kernels.ConvsF32
			}
			if !pol.Winograd || !kernels.PrecisionRuns(pol.Variant, prec) {
				t.Skipf("no Winograd kernel in %s in this build", prec)
			}
			open := func(cache bool) (*backend.Runtime, *backend.Weights) {
				rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2, Kernels: pol})
				require.NoError(t, err)
				t.Cleanup(func() { rt.Close() })
				f, err := loader.Open(path)
				require.NoError(t, err)
				w, err := rt.UploadWeights(context.Background(), f, nil, nil)
				require.NoError(t, err)
				t.Cleanup(func() { w.Close() })
				if cache {
					rt.CacheKernelTransforms(w)
				}
				return rt, w
			}
			conv := func(rt *backend.Runtime, k func(b *backend.Builder) *ggml.Tensor, fail bool) ([]float32, int, error) {
				out, err := rt.Run(context.Background(), backend.RunOptions{}, func(b *backend.Builder) error {
					x := b.Input("x", xv, W, H, IC, 1)
					b.Output("y", kernels.Conv2D(b.G, k(b), x, ggml.Conv2DParams{Stride: 1, Pad: 1}, kernels.Epilogue{}))
					if fail {
						return errors.New("not this time")
					}
					return nil
				})
				if err != nil {
					return nil, 0, err
				}
				return out["y"].Data, rt.LastStats().Ops["CUSTOM"], nil
			}
			plain, pw := open(false)
			want, nodes, err := conv(plain, func(*backend.Builder) *ggml.Tensor { return pw.Tensor("c.weight") }, false)
			require.NoError(t, err)
			require.Equal(t, 2, nodes, "the transform and the convolution")

			rt, w := open(true)
			weight := func(*backend.Builder) *ggml.Tensor { return w.Tensor("c.weight") }
			bound := kernels.WinogradTransformBound(w.Tensor("c.weight"), pol.Variant)
			assert.GreaterOrEqual(t, bound, 4*3*3*IC*OC*52/9, "f32 in both tiles: 16/9 and 36/9 of the kernel, or more with padding")
			assert.Equal(t, bound, rt.WinogradPending(), "nothing stored yet: the memory checks count the bound")
			_, _, err = conv(rt, weight, true)
			require.Error(t, err)
			assert.Positive(t, rt.WinogradBytes(), "the memory is the cache's from the first graph that needs it")
			for run := 1; run <= 3; run++ {
				got, nodes, err := conv(rt, weight, false)
				require.NoError(t, err)
				assert.Equal(t, want, got, "run %d: the same values as without the cache", run)
				if run == 1 {
					assert.Equal(t, 2, nodes, "the graph before did not compute: the first run computes the transform")
				} else {
					assert.Equal(t, 1, nodes, "run %d reads the stored transform", run)
				}
			}
			stored := rt.WinogradBytes()
			assert.LessOrEqual(t, stored, bound, "the bound holds")
			assert.Equal(t, bound-stored, rt.WinogradPending(), "what is stored is no longer pending")
			got, nodes, err := conv(rt, func(b *backend.Builder) *ggml.Tensor { return b.Input("k", kv, 3, 3, IC, OC) }, false)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, 2, nodes, "a graph's own kernel is transformed in the graph")
			assert.Equal(t, stored, rt.WinogradBytes(), "and not kept")
			back, err := w.Tensor("c.weight").Float32s()
			require.NoError(t, err)
			assert.Equal(t, kv, back, "the kernel reads back from the file after its pages were handed back")
		})
	}
}
