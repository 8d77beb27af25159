package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestDepthToSpace checks the pixel shuffle value by value against its
// definition, out[x·kw + i][y·kh + j][oc][n] = r[(oc·kh + j)·kw + i][(n·h +
// y)·w + x], exactly: square and non-square kernels, several channels and
// images, w ≠ h.
func TestDepthToSpace(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, c := range []struct{ kw, kh, oc, w, h, n int }{
		{4, 4, 3, 5, 3, 1}, {2, 2, 4, 7, 2, 2}, {3, 2, 2, 4, 3, 3}, {1, 1, 5, 3, 4, 1}, {4, 4, 96, 36, 24, 1},
	} {
		t.Run(fmt.Sprintf("k%dx%d_oc%d_%dx%d_n%d", c.kw, c.kh, c.oc, c.w, c.h, c.n), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			rows, cols := c.kw*c.kh*c.oc, c.w*c.h*c.n
			r, rr := h.Rand(optest.RNG(uint64(rows*cols)), rows, cols)
			require.True(t, kernels.DepthToSpaceFits(r, c.kw, c.kh, c.w, c.h))
			out := kernels.DepthToSpace(h.G, r, c.kw, c.kh, c.w, c.h)
			require.Equal(t, [4]int{c.kw * c.w, c.kh * c.h, c.oc, c.n}, optest.Dims4(out))
			got := h.Compute(out)[0]
			bad := 0
			for n := range c.n {
				for oc := range c.oc {
					for yy := range c.kh * c.h {
						for xx := range c.kw * c.w {
							y, j, x, i := yy/c.kh, yy%c.kh, xx/c.kw, xx%c.kw
							want := float32(rr.At((oc*c.kh+j)*c.kw+i, (n*c.h+y)*c.w+x, 0, 0))
							if g := got[((n*c.oc+oc)*c.kh*c.h+yy)*c.kw*c.w+xx]; g != want {
								if bad < 5 {
									t.Errorf("out[%d][%d][%d][%d] = %g, want %g", xx, yy, oc, n, g, want)
								}
								bad++
							}
						}
					}
				}
			}
			assert.Zero(t, bad, "values out of place")
		})
	}
	h := optest.NewHarness(t, 16)
	r, _ := h.Rand(optest.RNG(1), 12, 10)
	assert.False(t, kernels.DepthToSpaceFits(r, 4, 4, 5, 2), "12 rows are not 4·4·OC")
	assert.False(t, kernels.DepthToSpaceFits(r, 2, 2, 3, 2), "10 columns are not 3·2·N")
	assert.False(t, kernels.DepthToSpaceFits(r.Transpose(h.G), 2, 2, 5, 2), "not contiguous")
	assert.False(t, kernels.DepthToSpaceFits(r, 256, 1, 5, 2), "a kernel of 256")
}

// TestIm2Col checks Im2Col against ggml's im2col of the same input, value
// for value: strides, padding, dilation, a non-square kernel, two images,
// and the shape of the int8c strided convolution of DA3-BASE's head.
func TestIm2Col(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	for _, c := range []struct {
		w, h, ic, n, kw, kh int
		p                   ggml.Conv2DParams
	}{
		{7, 5, 3, 1, 3, 3, ggml.Conv2DParams{Stride: 1, Pad: 1}},
		{9, 6, 2, 2, 3, 3, ggml.Conv2DParams{Stride: 2, Pad: 1}},
		{8, 7, 4, 1, 3, 2, ggml.Conv2DParams{Stride: 1, Pad: 0, Dilation: 2}},
		{5, 5, 3, 2, 1, 1, ggml.Conv2DParams{}},
		{3, 4, 2, 1, 3, 3, ggml.Conv2DParams{Stride: 1, Pad: 1}},              // one inner column
		{10, 7, 2, 1, 3, 3, ggml.Conv2DParams{Stride: 3, Pad: 2}},             // padding past a stride
		{6, 6, 2, 1, 5, 5, ggml.Conv2DParams{Stride: 1, Pad: 2, Dilation: 2}}, // no inner column
		{36, 24, 96, 1, 3, 3, ggml.Conv2DParams{Stride: 2, Pad: 1}},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d_n%d_k%dx%d_%+v", c.w, c.h, c.ic, c.n, c.kw, c.kh, c.p), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			x, _ := h.Rand(optest.RNG(uint64(c.w*c.h*c.ic)), c.w, c.h, c.ic, c.n)
			k := h.Input(ggml.TypeF32, make([]float32, c.kw*c.kh*c.ic), c.kw, c.kh, c.ic, 1)
			require.True(t, kernels.Im2ColFits(x, c.kw, c.kh, c.p))
			got, want := kernels.Im2Col(h.G, x, c.kw, c.kh, c.p), k.Im2Col(h.G, x, c.p, ggml.TypeF32)
			require.Equal(t, optest.Dims4(want), optest.Dims4(got))
			out := h.Compute(got, want)
			assert.Equal(t, out[1], out[0], "the values of ggml's im2col")
		})
	}
	h := optest.NewHarness(t, 16)
	x, _ := h.Rand(optest.RNG(1), 4, 4, 2, 1)
	assert.False(t, kernels.Im2ColFits(x, 7, 3, ggml.Conv2DParams{}), "a kernel wider than the input")
	assert.False(t, kernels.Im2ColFits(x.Transpose(h.G), 3, 3, ggml.Conv2DParams{}), "not contiguous")
	assert.False(t, kernels.Im2ColFits(x, 3, 3, ggml.Conv2DParams{Pad: 300}), "padding of 300")
	assert.False(t, kernels.Im2ColFits(nil, 3, 3, ggml.Conv2DParams{}))
}
