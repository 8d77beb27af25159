// Package par runs loops over indices on several goroutines.
package par

import (
	"sync"
	"sync/atomic"
)

// For calls fn(0 … n−1), each index once, on at most workers goroutines
// that take the next index as they finish one (on the caller's goroutine
// alone when workers ≤ 1); it returns when every call has. fn must not
// depend on which goroutine or in which order the indices run.
func For(workers, n int, fn func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// Runs splits [0, n) into at most parts runs of at least least items each (one run when n < 2·least),
// in order: the runs' results concatenated are the loop's.
func Runs(n, parts, least int) [][2]int {
	k := max(1, parts)
	if least > 0 {
		k = max(1, min(k, n/least))
	}
	out := make([][2]int, k)
	for i := range k {
		out[i] = [2]int{n * i / k, n * (i + 1) / k}
	}
	return out
}
