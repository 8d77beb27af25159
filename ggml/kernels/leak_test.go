package kernels_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// rssBytes is the process's resident set size (Linux), after a GC that
// returns free Go memory to the OS.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(f), 2)
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// TestScratchFreedAtThreadExit checks that the kernels' per-thread scratch
// buffers do not outlive ggml's worker threads: the CPU backend starts new
// worker threads for every compute, so a buffer kept per thread and never
// freed grows the process by its size for every extra thread and call. A
// graph with a GEMM and an attention runs 500 times at 2 and at 4 threads
// (each worker thread packs about 0.3 MB); the resident size after 500
// calls must be within a few MB of that after 50. DA3_LEAK_CALLS sets the
// total number of calls (e.g. 1000).
func TestScratchFreedAtThreadExit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	if !kernels.Available().GEMM {
		t.Skip("built without AVX-512: no kernel keeps per-thread buffers")
	}
	if testing.Short() {
		t.Skip("hundreds of graph computes")
	}
	calls := 500
	if v, err := strconv.Atoi(os.Getenv("DA3_LEAK_CALLS")); err == nil && v > 100 {
		calls = v
	}
	const K, N, M, hd, H, n = 256, 1024, 14, 64, 2, 100
	for _, threads := range []int{2, 4} {
		t.Run(fmt.Sprintf("threads%d", threads), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			rng := optest.RNG(1)
			w := h.Input(ggml.TypeF32, optest.Randn(rng, K*N, 0.1), K, N)
			x := h.Input(ggml.TypeF32, optest.Randn(rng, K*M, 1), K, M)
			qkv := h.Input(ggml.TypeF32, optest.Randn(rng, hd*H*n, 1), hd, H, n)
			y := kernels.GEMM(h.G, w, x, kernels.Epilogue{Act: kernels.ActGELU})
			a := kernels.Attention(h.G, qkv, qkv, qkv, 0.125)
			out := y.Reshape(h.G, N*M).Concat(h.G, a.Reshape(h.G, hd*H*n), 0)
			h.Alloc(out)
			be := optest.NewCPUBackend(t, threads)
			run := func(calls int) {
				for range calls {
					require.NoError(t, be.Compute(h.G))
				}
			}
			faults := kernels.Faults()
			run(50)
			r50 := rssBytes(t)
			run(calls/2 - 50)
			rHalf := rssBytes(t)
			run(calls - calls/2)
			rAll := rssBytes(t)
			require.NoError(t, kernels.FaultsSince(faults))
			const mb = 1 << 20
			t.Logf("%d threads: RSS after 50 calls %.1f MB, %d calls %.1f MB, %d calls %.1f MB", threads,
				float64(r50)/mb, calls/2, float64(rHalf)/mb, calls, float64(rAll)/mb)
			assert.Less(t, rAll-r50, int64(8*mb), "RSS grew by %.1f MB over %d calls", float64(rAll-r50)/mb, calls-50)
		})
	}
}
