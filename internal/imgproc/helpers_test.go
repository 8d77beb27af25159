package imgproc

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// mix64 is the splitmix64 finalizer; noiseU8 must match noise_u8 in testdata/gen.py.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func noiseU8(seed uint64, n int) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		out[i] = uint8(mix64(seed*0x9E3779B97F4A7C15+uint64(i)*0xD1B54A32D192ED03) >> 56)
	}
	return out
}

func hash16(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

// toPlanar converts an interleaved h×w×cn byte image to CHW.
func toPlanar(pix []uint8, w, h, cn int) []uint8 {
	out := make([]uint8, len(pix))
	for c := range cn {
		for i := range w * h {
			out[c*w*h+i] = pix[i*cn+c]
		}
	}
	return out
}

// resizeCase is one row of testdata/resize.json: [sw, sh, dw, dh, cn, seed, hash, (off, n)].
type resizeCase struct {
	SW, SH, DW, DH, CN int
	Seed               uint64
	Hash               string
	Off, N             int
	HasData            bool
}

func (c *resizeCase) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	ints := []*int{&c.SW, &c.SH, &c.DW, &c.DH, &c.CN}
	for i, p := range ints {
		if err := json.Unmarshal(raw[i], p); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(raw[5], &c.Seed); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[6], &c.Hash); err != nil {
		return err
	}
	if len(raw) >= 9 {
		c.HasData = true
		if err := json.Unmarshal(raw[7], &c.Off); err != nil {
			return err
		}
		return json.Unmarshal(raw[8], &c.N)
	}
	return nil
}

type resizeManifest struct {
	OpenCV string                  `json:"opencv"`
	Cases  map[string][]resizeCase `json:"cases"`
}

func loadManifest(t *testing.T) (*resizeManifest, []int8, []float32) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "resize.json"))
	require.NoError(t, err)
	var m resizeManifest
	require.NoError(t, json.Unmarshal(b, &m))

	gz, err := os.ReadFile(filepath.Join("testdata", "ipp_u8.bin.gz"))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	diffs := make([]int8, len(raw))
	for i, v := range raw {
		diffs[i] = int8(v)
	}

	fb, err := os.ReadFile(filepath.Join("testdata", "float_ref.bin"))
	require.NoError(t, err)
	require.Zero(t, len(fb)%4)
	floats := make([]float32, len(fb)/4)
	for i := range floats {
		floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(fb[4*i:]))
	}
	return &m, diffs, floats
}

// cubicExact returns the exact value of OpenCV's INTER_CUBIC (Keys a = -3/4, half-pixel centres, replicated
// border) at interleaved output value i, in rational arithmetic, and Σ|w|·p over its 16 taps (what
// bounds the rounding error of a floating-point evaluation).
func cubicExact(src []uint8, sw, sh, cn, dw, dh, i int) (*big.Rat, float64) {
	c := i % cn
	x := (i / cn) % dw
	y := i / cn / dw
	wx, ix := exactTaps(x, sw, dw)
	wy, iy := exactTaps(y, sh, dh)
	sum := new(big.Rat)
	t := new(big.Rat)
	abs := 0.0
	for a := range 4 {
		for b := range 4 {
			v := big.NewRat(int64(src[(iy[a]*sw+ix[b])*cn+c]), 1)
			t.Mul(v, wy[a])
			sum.Add(sum, t.Mul(t, wx[b]))
			f, _ := t.Float64()
			abs += math.Abs(f)
		}
	}
	return sum, abs
}

// exactTaps gives the four Keys weights and clamped source indices for output coordinate d.
func exactTaps(d, sin, sout int) ([4]*big.Rat, [4]int) {
	// f = (d + 1/2)·sin/sout − 1/2 = ((2d+1)·sin − sout) / (2·sout)
	f := big.NewRat(int64((2*d+1)*sin-sout), int64(2*sout))
	s := new(big.Int).Div(f.Num(), f.Denom()) // floor (Denom > 0; big.Int.Div is Euclidean)
	fx := new(big.Rat).Sub(f, new(big.Rat).SetInt(s))
	one := big.NewRat(1, 1)
	ts := [4]*big.Rat{new(big.Rat).Add(fx, one), fx, new(big.Rat).Sub(one, fx), new(big.Rat).Sub(big.NewRat(2, 1), fx)}
	var w [4]*big.Rat
	var idx [4]int
	for j, tj := range ts {
		w[j] = keysExact(tj)
		idx[j] = clampIndex(int(s.Int64())-1+j, sin)
	}
	return w, idx
}

// keysExact is the Keys kernel with a = −3/4 at t ≥ 0.
func keysExact(t *big.Rat) *big.Rat {
	a := big.NewRat(-3, 4)
	t2 := new(big.Rat).Mul(t, t)
	t3 := new(big.Rat).Mul(t2, t)
	r := new(big.Rat)
	switch {
	case t.Cmp(big.NewRat(1, 1)) < 0: // (a+2)t³ − (a+3)t² + 1
		r.Mul(new(big.Rat).Add(a, big.NewRat(2, 1)), t3)
		r.Sub(r, new(big.Rat).Mul(new(big.Rat).Add(a, big.NewRat(3, 1)), t2))
		return r.Add(r, big.NewRat(1, 1))
	case t.Cmp(big.NewRat(2, 1)) < 0: // a·t³ − 5a·t² + 8a·t − 4a
		r.Mul(a, t3)
		r.Sub(r, new(big.Rat).Mul(new(big.Rat).Mul(big.NewRat(5, 1), a), t2))
		r.Add(r, new(big.Rat).Mul(new(big.Rat).Mul(big.NewRat(8, 1), a), t))
		return r.Sub(r, new(big.Rat).Mul(big.NewRat(4, 1), a))
	}
	return r
}

// halfTieDistance returns |r − (k + 1/2)| for the half-integer k + 1/2 nearest to r.
func halfTieDistance(r *big.Rat) float64 {
	f, _ := r.Float64()
	k := math.Floor(f)
	d := new(big.Rat).Sub(r, new(big.Rat).Add(new(big.Rat).SetFloat64(k), big.NewRat(1, 2)))
	v, _ := d.Float64()
	return math.Abs(v)
}
