package imgio_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/imgio"
)

func TestDecodeNPY(t *testing.T) {
	encode := func(data []float32, shape ...int) []byte {
		var b bytes.Buffer
		require.NoError(t, imgio.EncodeNPY(&b, data, shape...))
		return b.Bytes()
	}
	good := encode([]float32{1, 2, 3, 4, 5, -6.5}, 2, 3)
	data, shape, err := imgio.DecodeNPY(bytes.NewReader(good), int64(len(good)))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, shape)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, -6.5}, data)

	f64 := bytes.Replace(good, []byte("'<f4'"), []byte("'<f8'"), 1)
	fortran := bytes.Replace(good, []byte("False"), []byte("True "), 1)
	// A header that claims 2^40 values, within the same header length.
	one := encode([]float32{0}, 1, 1)
	huge := bytes.Replace(one, []byte("(1, 1), }"+strings.Repeat(" ", 20)), []byte("(1048576, 1048576), }        "), 1)
	require.NotEqual(t, one, huge)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a .npy file"},
		{"bad magic", []byte("\x93NUMPX\x01\x00\x10\x00"), "not a .npy file"},
		{"version", []byte("\x93NUMPY\x07\x00\x10\x00"), "version 7"},
		{"truncated header", good[:20], "truncated .npy header"},
		{"float64", f64, "not little-endian float32"},
		{"fortran", fortran, "fortran-order"},
		{"truncated data", good[:len(good)-3], "needs 24 bytes of data, the file has 21"},
		{"huge", huge, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := imgio.DecodeNPY(bytes.NewReader(tc.b), int64(len(tc.b)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
