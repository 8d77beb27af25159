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
