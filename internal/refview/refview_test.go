package refview

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// tokens builds [C, T, S] tokens whose token 0 of view v is vecs[v].
func tokens(vecs [][]float32, t int) []float32 {
	c := len(vecs[0])
	x := make([]float32, c*t*len(vecs))
	for v, vec := range vecs {
		copy(x[v*c*t:], vec)
	}
	return x
}

func TestSaddleSimRange(t *testing.T) {
	// Views 0 and 1 are identical, 2 orthogonal to them, 3 in between: view
	// 3's similarities span (0, 0.71, 0.71, 0) → range 0.71; views 0/1 span
	// (1 (twin), 0 (view 2)) → range 1: the first of them wins.
	x := tokens([][]float32{{1, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}}, 2)
	assert.Equal(t, 0, SaddleSimRange(x, 3, 2, 4))
	// Make view 2 a near-copy of view 0's direction but keep 1 orthogonal:
	// view 2 now has the widest range.
	x = tokens([][]float32{{1, 0.1, 0}, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}}, 1)
	// sims: v0: (.., 0.0995, 0.995, 0) range .995; v1: (0.0995, .., 0, 0) range .0995;
	// v2: (0.995, 0, .., 0) range .995 — tie with v0, the first wins.
	assert.Equal(t, 0, SaddleSimRange(x, 3, 1, 4))
	x = tokens([][]float32{{0, 0, 1}, {0, 1, 0}, {1, 0.1, 0}, {1, 0, 0}}, 1)
	assert.Equal(t, 2, SaddleSimRange(x, 3, 1, 4))
	// All similarities positive (as for real photos): every row's minimum is
	// its diagonal, and the two views of the most similar pair (2 and 3)
	// tie up to rounding; the first wins.
	x = tokens([][]float32{{1, 0, 0}, {0.2, 1, 0.3}, {0.5, 0.5, 0.7}, {0.49, 0.52, 0.7}}, 1)
	assert.Equal(t, 2, SaddleSimRange(x, 3, 1, 4))
	x = tokens([][]float32{{1, 0, 0}, {0.2, 1, 0.3}, {0.49, 0.52, 0.7}, {0.5, 0.5, 0.7}}, 1)
	assert.Equal(t, 2, SaddleSimRange(x, 3, 1, 4))
	// Scale does not matter (tokens are normalised).
	x = tokens([][]float32{{0, 0, 10}, {0, 5, 0}, {3, 0.3, 0}, {0.1, 0, 0}}, 1)
	assert.Equal(t, 2, SaddleSimRange(x, 3, 1, 4))
}
