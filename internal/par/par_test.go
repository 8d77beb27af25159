package par

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFor: every index runs exactly once, with any number of workers.
func TestFor(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 7, 100} {
		for _, n := range []int{0, 1, 5, 1000} {
			counts := make([]atomic.Int32, n)
			For(workers, n, func(i int) { counts[i].Add(1) })
			for i := range counts {
				assert.Equal(t, int32(1), counts[i].Load(), "workers %d, n %d, index %d", workers, n, i)
			}
		}
	}
}
