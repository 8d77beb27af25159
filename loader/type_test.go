package loader_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/loader"
)

// Block and type sizes from ggml.c type_traits and the static_asserts of
// ggml-common.h (QK_K = 256).
func TestTypeTraits(t *testing.T) {
	cases := []struct {
		typ       loader.Type
		id        uint32
		name      string
		blockSize int
		typeSize  int
		quantized bool
	}{
		{loader.TypeF32, 0, "f32", 1, 4, false},
		{loader.TypeF16, 1, "f16", 1, 2, false},
		{loader.TypeQ4_0, 2, "q4_0", 32, 18, true},
		{loader.TypeQ4_1, 3, "q4_1", 32, 20, true},
		{loader.TypeQ5_0, 6, "q5_0", 32, 22, true},
		{loader.TypeQ5_1, 7, "q5_1", 32, 24, true},
		{loader.TypeQ8_0, 8, "q8_0", 32, 34, true},
		{loader.TypeQ8_1, 9, "q8_1", 32, 36, true},
		{loader.TypeQ2K, 10, "q2_K", 256, 84, true},
		{loader.TypeQ3K, 11, "q3_K", 256, 110, true},
		{loader.TypeQ4K, 12, "q4_K", 256, 144, true},
		{loader.TypeQ5K, 13, "q5_K", 256, 176, true},
		{loader.TypeQ6K, 14, "q6_K", 256, 210, true},
		{loader.TypeQ8K, 15, "q8_K", 256, 292, true},
		{loader.TypeIQ2XXS, 16, "iq2_xxs", 256, 66, true},
		{loader.TypeIQ2XS, 17, "iq2_xs", 256, 74, true},
		{loader.TypeIQ3XXS, 18, "iq3_xxs", 256, 98, true},
		{loader.TypeIQ1S, 19, "iq1_s", 256, 50, true},
		{loader.TypeIQ4NL, 20, "iq4_nl", 32, 18, true},
		{loader.TypeIQ3S, 21, "iq3_s", 256, 110, true},
		{loader.TypeIQ2S, 22, "iq2_s", 256, 82, true},
		{loader.TypeIQ4XS, 23, "iq4_xs", 256, 136, true},
		{loader.TypeI8, 24, "i8", 1, 1, false},
		{loader.TypeI16, 25, "i16", 1, 2, false},
		{loader.TypeI32, 26, "i32", 1, 4, false},
		{loader.TypeI64, 27, "i64", 1, 8, false},
		{loader.TypeF64, 28, "f64", 1, 8, false},
		{loader.TypeIQ1M, 29, "iq1_m", 256, 56, true},
		{loader.TypeBF16, 30, "bf16", 1, 2, false},
		{loader.TypeTQ1_0, 34, "tq1_0", 256, 54, true},
		{loader.TypeTQ2_0, 35, "tq2_0", 256, 66, true},
		{loader.TypeMXFP4, 39, "mxfp4", 32, 17, true},
	}
	require.Len(t, loader.Types(), len(cases), "every known type is covered")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.id, uint32(tc.typ))
			assert.True(t, tc.typ.Known())
			assert.Equal(t, tc.name, tc.typ.String())
			assert.Equal(t, tc.blockSize, tc.typ.BlockSize())
			assert.Equal(t, tc.typeSize, tc.typ.TypeSize())
			assert.Equal(t, tc.quantized, tc.typ.Quantized())
			for _, s := range []string{tc.name, strings.ToUpper(tc.name), strings.ToLower(tc.name)} {
				got, err := loader.ParseType(s)
				require.NoError(t, err, s)
				assert.Equal(t, tc.typ, got, s)
			}
		})
	}
}

func TestTypeUnknown(t *testing.T) {
	for _, id := range []uint32{4, 5, 31, 32, 33, 36, 37, 38, 40, 1 << 31} {
		typ := loader.Type(id)
		assert.False(t, typ.Known(), "type %d", id)
		assert.Equal(t, "type("+strconv.FormatUint(uint64(id), 10)+")", typ.String())
		assert.Zero(t, typ.BlockSize())
		assert.Zero(t, typ.TypeSize())
		_, err := typ.RowSize(32)
		assert.Error(t, err)
		_, err = typ.ByteSize([]uint64{32})
		assert.Error(t, err)
	}
	for _, s := range []string{"", "q4", "q4_k_m", "f33", "type(4)", "q4_0 "} {
		_, err := loader.ParseType(s)
		assert.ErrorContains(t, err, "unknown tensor type", "%q", s)
	}
}

func TestRowSizeAndByteSize(t *testing.T) {
	n, err := loader.TypeQ8_0.RowSize(64)
	require.NoError(t, err)
	assert.Equal(t, int64(68), n)
	n, err = loader.TypeQ4K.RowSize(768)
	require.NoError(t, err)
	assert.Equal(t, int64(3*144), n)
	n, err = loader.TypeF32.RowSize(0)
	require.NoError(t, err)
	assert.Zero(t, n)

	_, err = loader.TypeQ8_0.RowSize(33)
	assert.ErrorContains(t, err, "not a multiple of the block size 32")
	_, err = loader.TypeF32.RowSize(-1)
	assert.ErrorContains(t, err, "negative")
	_, err = loader.TypeF64.RowSize(1 << 62)
	assert.ErrorContains(t, err, "overflow")

	cases := []struct {
		name  string
		typ   loader.Type
		shape []uint64
		want  uint64
		err   string
	}{
		{"scalar f32", loader.TypeF32, nil, 4, ""},
		{"f32 3d", loader.TypeF32, []uint64{3, 4, 5}, 240, ""},
		{"f16 2d", loader.TypeF16, []uint64{7, 3}, 42, ""},
		{"q6_K", loader.TypeQ6K, []uint64{512, 3}, 2 * 210 * 3, ""},
		{"zero dim", loader.TypeQ8_0, []uint64{64, 0, 9}, 0, ""},
		{"scalar q8_0", loader.TypeQ8_0, nil, 0, "not a multiple"},
		{"bad ne0", loader.TypeQ4K, []uint64{384, 2}, 0, "not a multiple of the block size 256"},
		{"overflow", loader.TypeF32, []uint64{1 << 40, 1 << 30}, 0, "overflows"},
		{"overflow ne0", loader.TypeF64, []uint64{1 << 62}, 0, "overflows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.typ.ByteSize(tc.shape)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestTypesMatchGGMLHeader checks the type ids against enum ggml_type of the
// pinned ggml when its module is in the module cache (the ggml package also
// checks them at compile time).
func TestTypesMatchGGMLHeader(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	header := filepath.Join(strings.TrimSpace(string(out)),
		"github.com/ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml.h")
	src, err := os.ReadFile(header)
	if err != nil {
		t.Skipf("pinned ggml.h not available: %v", err)
	}
	re := regexp.MustCompile(`(?m)^\s*GGML_TYPE_(\w+)\s*=\s*(\d+),`)
	matches := re.FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, matches)
	seen := 0
	for _, m := range matches {
		id, err := strconv.ParseUint(m[2], 10, 32)
		require.NoError(t, err)
		if m[1] == "COUNT" {
			assert.False(t, loader.Type(id).Known(), "GGML_TYPE_COUNT")
			continue
		}
		typ, err := loader.ParseType(m[1])
		if assert.NoError(t, err, "GGML_TYPE_%s", m[1]) {
			assert.Equal(t, uint32(id), uint32(typ), "GGML_TYPE_%s", m[1])
		}
		seen++
	}
	assert.Equal(t, len(loader.Types()), seen, "number of types in ggml.h")
}
