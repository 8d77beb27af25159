package ggml_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
)

// relRMS is ‖x − y‖ / ‖x‖.
func relRMS(x, y []float32) float64 {
	var se, sx float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		se += d * d
		sx += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(se / sx)
}

// TestQuantizeRoundTrip quantizes standard normal rows with QuantizeChunk and
// dequantizes them with ToFloat32. Each bound is the relative RMS error
// measured on this data (64 rows of 512, seed 3) plus about 20%: tight
// enough that a kernel producing wrong scales, shuffled blocks or zeros (error
// ≥ 1) fails.
func TestQuantizeRoundTrip(t *testing.T) {
	const rows, cols = 64, 512
	x := optest.Randn(optest.RNG(3), rows*cols, 1)
	ones := make([]float32, cols)
	for i := range ones {
		ones[i] = 1
	}
	cases := []struct {
		typ     ggml.Type
		bound   float64 // measured in the comment
		imatrix bool    // pass an importance matrix (required by some types)
		slow    bool    // the type's grid initialisation takes seconds
	}{
		{ggml.TypeF32, 0, false, false},
		{ggml.TypeF16, 2.5e-4, false, false},  // 0.00020
		{ggml.TypeBF16, 2.0e-3, false, false}, // 0.00166
		{ggml.TypeQ8_0, 0.0065, false, false}, // 0.00532
		{ggml.TypeQ6K, 0.021, false, false},   // 0.0176
		{ggml.TypeQ5_0, 0.051, false, false},  // 0.0424
		{ggml.TypeQ5_1, 0.046, false, false},  // 0.0377
		{ggml.TypeQ5K, 0.044, false, false},   // 0.0359
		{ggml.TypeQ4_0, 0.103, false, false},  // 0.0855
		{ggml.TypeQ4_1, 0.094, false, false},  // 0.0782
		{ggml.TypeQ4K, 0.087, false, false},   // 0.0715
		{ggml.TypeIQ4NL, 0.091, false, false}, // 0.0757
		{ggml.TypeIQ4XS, 0.092, false, false}, // 0.0763
		{ggml.TypeMXFP4, 0.14, false, false},  // 0.1154
		{ggml.TypeQ3K, 0.18, false, false},    // 0.1502
		{ggml.TypeQ2K, 0.35, false, false},    // 0.2932
		{ggml.TypeQ4K, 0.086, true, false},    // 0.0709 with a flat imatrix
		{ggml.TypeIQ3XXS, 0.26, false, false}, // 0.2116
		{ggml.TypeIQ3S, 0.20, false, false},   // 0.1653
		{ggml.TypeIQ2S, 0.32, false, true},    // 0.2628
		{ggml.TypeIQ2XXS, 0.41, true, true},   // 0.3441
		{ggml.TypeIQ2XS, 0.36, true, true},    // 0.2995
		{ggml.TypeIQ1S, 0.58, true, true},     // 0.4845
		{ggml.TypeIQ1M, 0.69, false, true},    // 0.5770
	}
	for _, tc := range cases {
		name := tc.typ.String()
		if tc.imatrix {
			name += "/imatrix"
		}
		t.Run(name, func(t *testing.T) {
			if tc.slow && testing.Short() {
				t.Skip("slow grid initialisation in -short mode")
			}
			var im []float32
			if tc.imatrix {
				im = ones
			}
			q, err := ggml.QuantizeChunk(tc.typ, x, rows, cols, im)
			require.NoError(t, err)
			require.Len(t, q, rows*tc.typ.RowSize(cols))
			y, err := ggml.ToFloat32(tc.typ, q, rows*cols)
			require.NoError(t, err)
			e := relRMS(x, y)
			assert.LessOrEqual(t, e, tc.bound, "relative RMS error of %s", tc.typ)
			if tc.typ != ggml.TypeF32 {
				// Every type loses something on Gaussian data: an identity
				// "quantizer" would be a bug too.
				assert.Greater(t, e, 0.0)
			}
		})
	}
}

// TestQuantizeTernary checks TQ1_0 and TQ2_0 on the data they are for:
// blocks of {−a, 0, a}, which they represent up to the f16 scale.
func TestQuantizeTernary(t *testing.T) {
	const rows, cols = 8, 512
	rng := optest.RNG(5)
	x := make([]float32, rows*cols)
	for b := 0; b < len(x); b += 256 {
		a := float32(0.5 + rng.Float64())
		for i := b; i < b+256; i++ {
			x[i] = a * float32(rng.IntN(3)-1)
		}
	}
	for _, typ := range []ggml.Type{ggml.TypeTQ1_0, ggml.TypeTQ2_0} {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := ggml.QuantizeChunk(typ, x, rows, cols, nil)
			require.NoError(t, err)
			y, err := ggml.ToFloat32(typ, q, rows*cols)
			require.NoError(t, err)
			assert.Less(t, relRMS(x, y), 5e-4, "only the f16 scale rounds")
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	x := make([]float32, 512)
	for _, tc := range []struct {
		name        string
		typ         ggml.Type
		src         []float32
		nrows, ncol int
		im          []float32
		msg         string
	}{
		{"row not a block multiple", ggml.TypeQ4K, x[:200], 2, 100, nil, "block size 256"},
		{"count mismatch", ggml.TypeQ8_0, x[:100], 2, 64, nil, "not 2 rows of 64"},
		{"zero columns", ggml.TypeQ8_0, nil, 0, 0, nil, "rows of 0"},
		{"negative rows", ggml.TypeQ8_0, nil, -1, 32, nil, "rows"},
		{"invalid type", ggml.Type(4), x[:64], 1, 64, nil, "invalid type"},
		{"integer type", ggml.TypeI32, x[:64], 1, 64, nil, "cannot convert"},
		{"q8_K", ggml.TypeQ8K, x[:256], 1, 256, nil, "cannot convert"},
		{"imatrix required", ggml.TypeIQ2XXS, x[:256], 1, 256, nil, "importance matrix"},
		{"imatrix length", ggml.TypeQ4K, x[:256], 1, 256, make([]float32, 255), "importance matrix has 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ggml.QuantizeChunk(tc.typ, tc.src, tc.nrows, tc.ncol, tc.im)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.True(t, ggml.QuantizeRequiresImatrix(ggml.TypeIQ2XXS))
	assert.True(t, ggml.QuantizeRequiresImatrix(ggml.TypeIQ1S))
	assert.False(t, ggml.QuantizeRequiresImatrix(ggml.TypeQ4K))

	// Zero rows is valid and yields nothing.
	q, err := ggml.QuantizeChunk(ggml.TypeQ8_0, nil, 0, 32, nil)
	require.NoError(t, err)
	assert.Empty(t, q)
}

func TestToFloat32Errors(t *testing.T) {
	q, err := ggml.QuantizeChunk(ggml.TypeQ8_0, make([]float32, 64), 2, 32, nil)
	require.NoError(t, err)
	_, err = ggml.ToFloat32(ggml.TypeQ8_0, q, 48)
	assert.ErrorContains(t, err, "multiple of the block size")
	_, err = ggml.ToFloat32(ggml.TypeQ8_0, q[:len(q)-1], 64)
	assert.ErrorContains(t, err, "need 68 bytes, got 67")
	_, err = ggml.ToFloat32(ggml.TypeQ8_0, q, 96)
	assert.Error(t, err)
	_, err = ggml.ToFloat32(ggml.Type(5), q, 64)
	assert.ErrorContains(t, err, "invalid type")
	_, err = ggml.ToFloat32(ggml.TypeI32, make([]byte, 16), 4)
	assert.ErrorContains(t, err, "no float conversion")
	y, err := ggml.ToFloat32(ggml.TypeF32, make([]byte, 0), 0)
	require.NoError(t, err)
	assert.Empty(t, y)
}

// TestQuantizedTensorIO round-trips through a backend tensor: SetFloat32s
// quantizes, Float32s dequantizes, and GetRows dequantizes on the CPU to the
// same values.
func TestQuantizedTensorIO(t *testing.T) {
	h := optest.NewHarness(t, 8)
	x := optest.Randn(optest.RNG(9), 64*4, 1)
	w := h.Input(ggml.TypeQ8_0, x, 64, 4)
	rows := h.InputI32([]int32{2, 0}, 2)
	out := h.Compute(w.GetRows(h.G, rows), w)
	got, all := out[0], out[1]
	assert.Less(t, relRMS(x, all), 0.0065)
	assert.Equal(t, all[128:192], got[:64])
	assert.Equal(t, all[:64], got[64:])
}

func TestTypes(t *testing.T) {
	for _, tc := range []struct {
		typ         ggml.Type
		name        string
		block, size int
		quantized   bool
	}{
		{ggml.TypeF32, "f32", 1, 4, false},
		{ggml.TypeF16, "f16", 1, 2, false},
		{ggml.TypeBF16, "bf16", 1, 2, false},
		{ggml.TypeQ8_0, "q8_0", 32, 34, true},
		{ggml.TypeQ4_0, "q4_0", 32, 18, true},
		{ggml.TypeQ4K, "q4_K", 256, 144, true},
		{ggml.TypeQ6K, "q6_K", 256, 210, true},
		{ggml.TypeIQ4NL, "iq4_nl", 32, 18, true},
		{ggml.TypeMXFP4, "mxfp4", 32, 17, true},
		{ggml.TypeI32, "i32", 1, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, tc.typ.Valid())
			assert.Equal(t, tc.name, tc.typ.String())
			assert.Equal(t, tc.block, tc.typ.BlockSize())
			assert.Equal(t, tc.size, tc.typ.TypeSize())
			assert.Equal(t, tc.quantized, tc.typ.IsQuantized())
			assert.Equal(t, 2*tc.size*256/tc.block, tc.typ.RowSize(512))
			p, ok := ggml.ParseType(tc.name)
			assert.True(t, ok)
			assert.Equal(t, tc.typ, p)
		})
	}
	for _, bad := range []ggml.Type{-1, 4, 5, 31, 1000} {
		assert.False(t, bad.Valid(), "type %d", int(bad))
		assert.Equal(t, "invalid", bad.String())
		assert.Zero(t, bad.BlockSize())
	}
	p, ok := ggml.ParseType("Q4_k")
	assert.True(t, ok, "case-insensitive")
	assert.Equal(t, ggml.TypeQ4K, p)
	_, ok = ggml.ParseType("q4")
	assert.False(t, ok)
	assert.Len(t, ggml.Types(), 32, "the pinned ggml has 32 live types")
}
