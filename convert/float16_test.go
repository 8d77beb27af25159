package convert

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestF16RoundTripExhaustive converts every f16 bit pattern to f32 and back.
func TestF16RoundTripExhaustive(t *testing.T) {
	bad := 0
	for h := range 1 << 16 {
		f := f16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			assert.True(t, math.IsNaN(float64(f16ToF32(f32ToF16(f)))), "NaN %#04x", h)
			continue
		}
		if got := f32ToF16(f); got != uint16(h) {
			bad++
			if bad < 5 {
				t.Errorf("f16 %#04x -> %g -> %#04x", h, f, got)
			}
		}
	}
	assert.Zero(t, bad)
}

// TestF16RoundingExhaustive checks round-to-nearest-even on the midpoint
// between every pair of adjacent finite f16 values, and just either side of
// it, for both signs (subnormals included).
func TestF16RoundingExhaustive(t *testing.T) {
	bad := 0
	for h := uint16(0); h < 0x7bff; h++ {
		for _, sign := range []uint16{0, 0x8000} {
			lo, hi := h|sign, (h+1)|sign
			a, b := float64(f16ToF32(lo)), float64(f16ToF32(hi))
			mid := float32((a + b) / 2) // exact: 12 significant bits
			even := lo
			if lo&1 == 1 {
				even = hi
			}
			toHi := math.Nextafter32(mid, float32(math.Copysign(math.Inf(1), b)))
			toLo := math.Nextafter32(mid, 0)
			if f32ToF16(mid) != even || f32ToF16(toHi) != hi || f32ToF16(toLo) != lo {
				bad++
				if bad < 5 {
					t.Errorf("between %#04x and %#04x: mid %#04x above %#04x below %#04x",
						lo, hi, f32ToF16(mid), f32ToF16(toHi), f32ToF16(toLo))
				}
			}
		}
	}
	assert.Zero(t, bad)
}

func TestF16Specials(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"max", 65504, 0x7bff},
		{"just below overflow midpoint", 65519.99, 0x7bff},
		{"overflow midpoint rounds to inf", 65520, 0x7c00},
		{"large", 1e10, 0x7c00},
		{"-large", -1e10, 0xfc00},
		{"+inf", float32(math.Inf(1)), 0x7c00},
		{"-0", float32(math.Copysign(0, -1)), 0x8000},
		{"below half the smallest subnormal", 2.9e-8, 0},
		{"half the smallest subnormal ties to even", float32(math.Ldexp(1, -25)), 0},
		{"above half the smallest subnormal", float32(math.Ldexp(1.01, -25)), 1},
		{"one", 1, 0x3c00},
		{"one third", 1.0 / 3, 0x3555},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, f32ToF16(tc.in))
		})
	}
	nan := f32ToF16(float32(math.NaN()))
	require.Equal(t, uint16(0x7c00), nan&0x7c00)
	assert.NotZero(t, nan&0x3ff, "NaN must keep a non-zero mantissa")
}
