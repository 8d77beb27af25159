package shasum_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/fetch/internal/shasum"
)

const (
	sumA = "2975419c99702ca646d5b7120c53e35c9fee158f0a803577241d16957f75624b"
	sumB = "1B13B166E8A8B4F2C862F42D36EDB2F9AAB995A18CC527A52B9F160B99C6B8DA"
)

func TestParse(t *testing.T) {
	got, err := shasum.Parse("# comment\n\n" + sumA + "  z.gguf\n" + sumB + " *a.gguf\n")
	require.NoError(t, err)
	assert.Equal(t, []shasum.Entry{
		{File: "a.gguf", SHA256: strings.ToLower(sumB)},
		{File: "z.gguf", SHA256: sumA},
	}, got)
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no file", sumA + "\n", "line 1"},
		{"short digest", "abcd  x.gguf\n", "not a SHA-256"},
		{"not hex", strings.Repeat("g", 64) + "  x.gguf\n", "not a SHA-256"},
		{"duplicate", sumA + "  x.gguf\n" + sumA + "  x.gguf\n", "already listed on line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shasum.Parse(tc.text)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
