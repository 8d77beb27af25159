package imgio

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeNPYRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  any
		shape []int
	}{
		{"f32", []float32{1, -2.5, 3e-7, 4, 5, 6}, []int{2, 3}},
		{"f64", []float64{1.25, -2, 1e300}, []int{3}},
		{"u8", []uint8{0, 1, 255, 7}, []int{1, 2, 2, 1}},
		{"empty", []float32{}, []int{0, 4}},
		{"scalar", []float64{7}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, EncodeNPY(&b, tc.data, tc.shape...))
			data, shape, err := DecodeNPYReuse(&b, 1<<20, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.data, data)
			assert.Equal(t, tc.shape, shape)
		})
	}
}

func TestDecodeNPYRefusesBadInput(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, EncodeNPY(&b, []float32{1, 2, 3, 4}, 2, 2))
	good := b.Bytes()
	hdrEnd := 10 + int(good[8])
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want string
	}{
		{"empty", nil, 100, "not a .npy file"},
		{"magic", append([]byte("XNUMPY"), good[6:]...), 100, "not a .npy file"},
		{"version", append(append([]byte{}, good[:6]...), append([]byte{9, 0}, good[8:]...)...), 100, "version 9"},
		{"truncated header", good[:20], 100, "truncated .npy header"},
		{"truncated data", good[:len(good)-3], 100, "unexpected EOF"},
		{"too large", good, 3, "too large (at most 3 values)"},
		{"dtype", bytes.Replace(good, []byte("<f4"), []byte("<i4"), 1), 100, "unsupported .npy dtype"},
		{"fortran", bytes.Replace(good, []byte("False"), []byte("True "), 1), 100, "fortran-order"},
		{"shape", bytes.Replace(good, []byte("(2, 2)"), []byte("(2, -2)"), 1), 100, "malformed"},
		{"not a dict", append(append([]byte{}, good[:10]...), append(bytes.Repeat([]byte(" "), hdrEnd-10), good[hdrEnd:]...)...), 100, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeNPYReuse(bytes.NewReader(tc.in), tc.max, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A huge declared shape is refused before any allocation.
	hdr := "{'descr': '|u1', 'fortran_order': False, 'shape': (9999999999999,), }\n"
	huge := append([]byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, byte(len(hdr)), 0}, hdr...)
	_, _, err := DecodeNPYReuse(bytes.NewReader(huge), 1<<30, nil)
	assert.ErrorContains(t, err, "too large")
}

func TestDecodeNPYReuse(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, EncodeNPY(&b, []float32{1, 2, 3}, 3))
	buf := make([]float32, 5)
	got, _, err := DecodeNPYReuse(bytes.NewReader(b.Bytes()), 10, buf)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, got)
	assert.Same(t, &buf[0], &got.([]float32)[0], "decoded into the buffer given")
	small := make([]float32, 2)
	got, _, err = DecodeNPYReuse(bytes.NewReader(b.Bytes()), 10, small)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, got, "a buffer too small is not used")
	got, _, err = DecodeNPYReuse(bytes.NewReader(b.Bytes()), 10, []float64{0, 0, 0})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, got, "nor one of another type")
}
