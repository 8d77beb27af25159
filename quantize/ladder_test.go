package quantize

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
)

// relRMSE quantizes x (rows of cols) to t as Run does and returns the
// relative RMS error of the round trip.
func relRMSE(t *testing.T, typ ggml.Type, x []float32, cols int) float64 {
	t.Helper()
	q, err := quantizeRows(typ, x, len(x)/cols, cols)
	require.NoError(t, err, typ)
	y, err := ggml.ToFloat32(typ, q, len(x))
	require.NoError(t, err, typ)
	var e, r float64
	for i := range x {
		d := float64(x[i] - y[i])
		e += d * d
		r += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(e / r)
}

// TestLadderOrder verifies the accuracy ladder the fallback relies on: with
// ggml's quantizers called as Run calls them, each type's round-trip error
// is below the previous one's, on weight-like data of four distributions.
func TestLadderOrder(t *testing.T) {
	const rows, cols = 256, 1536 // 1536 fits every block size
	for _, dist := range []string{"normal", "laplace", "uniform", "outliers"} {
		t.Run(dist, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			x := make([]float32, rows*cols)
			for i := range x {
				switch dist {
				case "normal":
					x[i] = float32(0.02 * r.NormFloat64())
				case "laplace":
					x[i] = float32(0.02 * r.ExpFloat64() * float64(1-2*r.IntN(2)))
				case "uniform":
					x[i] = float32(0.1 * (2*r.Float64() - 1))
				case "outliers":
					x[i] = float32(0.02 * r.NormFloat64())
					if r.IntN(200) == 0 {
						x[i] *= 10
					}
				}
			}
			prev := math.Inf(1)
			for _, typ := range ladder[:len(ladder)-1] {
				e := relRMSE(t, typ, x, cols)
				t.Logf("%-5s %.3f bpw  rel RMSE %.3e", typ, bitsPerWeight(typ), e)
				assert.Less(t, e, prev, "%s is not more accurate than the type below it", typ)
				prev = e
			}
			assert.Zero(t, relRMSE(t, ggml.TypeF32, x, cols))
		})
	}
}

// TestImportanceHelps checks that the uniform importance matrix Run passes
// lowers the error of every type ggml searches scales for.
func TestImportanceHelps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const cols = 1536
	x := make([]float32, 128*cols)
	for i := range x {
		x[i] = float32(0.02 * r.NormFloat64())
	}
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ4K, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5K, ggml.TypeQ5_1, ggml.TypeQ6K} {
		plain, err := ggml.QuantizeChunk(typ, x, len(x)/cols, cols, nil)
		require.NoError(t, err)
		y, err := ggml.ToFloat32(typ, plain, len(x))
		require.NoError(t, err)
		var e, ref float64
		for i := range x {
			e += float64(x[i]-y[i]) * float64(x[i]-y[i])
			ref += float64(x[i]) * float64(x[i])
		}
		assert.Less(t, relRMSE(t, typ, x, cols), math.Sqrt(e/ref), typ)
	}
}

// TestFitNeverLosesAccuracy checks, for every requested type and the row
// widths of the real backbones, that the chosen type fits the row and is no
// less accurate (measured) than the requested one would be.
func TestFitNeverLosesAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const cols = 256 * 3 * 5 // 3840 fits every type, to measure them alike
	x := make([]float32, 64*cols)
	for i := range x {
		x[i] = float32(0.02 * r.NormFloat64())
	}
	for _, req := range ladder {
		for _, ne0 := range []uint64{384, 768, 1024, 1536, 4096, 100, 96, 14} {
			got, fb := fit(req, ne0)
			assert.Zero(t, ne0%uint64(got.BlockSize()), "%s for rows of %d", got, ne0)
			assert.Equal(t, ne0%uint64(req.BlockSize()) != 0, fb, "%s rows of %d", req, ne0)
			if fb {
				assert.LessOrEqual(t, relRMSE(t, got, x, cols), relRMSE(t, req, x, cols), "%s → %s", req, got)
				assert.NotEqual(t, ggml.TypeBF16, got)
			} else {
				assert.Equal(t, req, got)
			}
		}
	}
}
