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

// TestRuns: the runs cover [0, n) in order, at most parts of them, none shorter than least unless one.
func TestRuns(t *testing.T) {
	for _, tc := range []struct{ n, parts, least, want int }{
		{10000, 4, 2048, 4}, {5000, 4, 2048, 2}, {3000, 4, 2048, 1}, {0, 4, 2048, 1}, {100, 3, 0, 3}, {100, 0, 0, 1},
	} {
		runs := Runs(tc.n, tc.parts, tc.least)
		assert.Len(t, runs, tc.want, "%+v", tc)
		next := 0
		for _, r := range runs {
			assert.Equal(t, next, r[0])
			next = r[1]
			if len(runs) > 1 {
				assert.GreaterOrEqual(t, r[1]-r[0], tc.least)
			}
		}
		assert.Equal(t, tc.n, next)
	}
}
