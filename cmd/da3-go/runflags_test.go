package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestParseKernels checks -kernels: auto and none, a list naming kernels
// (only those on), a variant alone (every kernel in it), and a bad name.
func TestParseKernels(t *testing.T) {
	p, err := parseKernels("auto")
	require.NoError(t, err)
	assert.Zero(t, p, "auto: the zero policy, the runtime's default")

	p, err = parseKernels("none")
	require.NoError(t, err)
	assert.Equal(t, kernels.Policy{Explicit: true, Variant: kernels.VariantOff}, p)

	p, err = parseKernels("gemm, norm")
	require.NoError(t, err)
	assert.Equal(t, kernels.Policy{Explicit: true, GEMM: true, Norm: true}, p)

	p, err = parseKernels("avx2")
	require.NoError(t, err)
	assert.Equal(t, kernels.Policy{Explicit: true, GEMM: true, Attention: true, Resize: true, Norm: true, Winograd: true, Strips: true, Variant: kernels.VariantAVX2}, p)

	_, err = parseKernels("gemm,fast")
	assert.ErrorContains(t, err, "norm")
}
