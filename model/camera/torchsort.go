package camera

import (
	"math"
	"math/bits"
)

// argsortDesc is torch.argsort(v, descending=True) on the CPU: PyTorch sorts
// (value, index) pairs with libstdc++'s std::sort (introsort: median-of-three
// quicksort down to 16 elements, heapsort past a depth of 2·⌊log₂n⌋, then
// insertion sort) and the comparator "a is NaN and b is not, or a > b". It
// is not stable: equal values come out in the order this exact algorithm
// leaves them, which the RANSAC candidates of the ray solver depend on.
func argsortDesc(v []float64) []int {
	s := &introSorter{v: v, idx: make([]int, len(v))}
	for i := range s.idx {
		s.idx[i] = i
	}
	n := len(v)
	if n > 1 {
		s.introsortLoop(0, n, 2*(bits.Len(uint(n))-1))
		s.finalInsertionSort(0, n)
	}
	return s.idx
}

const introThreshold = 16 // libstdc++'s _S_threshold

type introSorter struct {
	v   []float64
	idx []int
}

// less is KeyValueCompDesc on the positions' values.
func (s *introSorter) comp(a, b int) bool { return s.compVal(s.v[s.idx[a]], s.v[s.idx[b]]) }

func (s *introSorter) compVal(a, b float64) bool {
	return (math.IsNaN(a) && !math.IsNaN(b)) || a > b
}

func (s *introSorter) swap(a, b int) { s.idx[a], s.idx[b] = s.idx[b], s.idx[a] }

func (s *introSorter) introsortLoop(first, last, depth int) {
	for last-first > introThreshold {
		if depth == 0 {
			s.heapSort(first, last)
			return
		}
		depth--
		cut := s.partitionPivot(first, last)
		s.introsortLoop(cut, last, depth)
		last = cut
	}
}

// partitionPivot is __unguarded_partition_pivot: the median of positions
// first+1, mid, last−1 moved to first, then Hoare partition around it.
func (s *introSorter) partitionPivot(first, last int) int {
	mid := first + (last-first)/2
	a, b, c := first+1, mid, last-1
	switch {
	case s.comp(a, b):
		switch {
		case s.comp(b, c):
			s.swap(first, b)
		case s.comp(a, c):
			s.swap(first, c)
		default:
			s.swap(first, a)
		}
	case s.comp(a, c):
		s.swap(first, a)
	case s.comp(b, c):
		s.swap(first, c)
	default:
		s.swap(first, b)
	}
	lo, hi := first+1, last
	for {
		for s.comp(lo, first) {
			lo++
		}
		hi--
		for s.comp(first, hi) {
			hi--
		}
		if lo >= hi {
			return lo
		}
		s.swap(lo, hi)
		lo++
	}
}

func (s *introSorter) finalInsertionSort(first, last int) {
	if last-first > introThreshold {
		s.insertionSort(first, first+introThreshold)
		for i := first + introThreshold; i < last; i++ {
			s.linearInsert(i)
		}
		return
	}
	s.insertionSort(first, last)
}

func (s *introSorter) insertionSort(first, last int) {
	for i := first + 1; i < last; i++ {
		if s.comp(i, first) {
			x := s.idx[i]
			copy(s.idx[first+1:i+1], s.idx[first:i])
			s.idx[first] = x
		} else {
			s.linearInsert(i)
		}
	}
}

// linearInsert is __unguarded_linear_insert.
func (s *introSorter) linearInsert(last int) {
	x := s.idx[last]
	next := last - 1
	for s.compVal(s.v[x], s.v[s.idx[next]]) {
		s.idx[last] = s.idx[next]
		last = next
		next--
	}
	s.idx[last] = x
}

// heapSort is __partial_sort(first, last, last): make_heap, then sort_heap,
// with libstdc++'s __adjust_heap and __push_heap.
func (s *introSorter) heapSort(first, last int) {
	n := last - first
	if n >= 2 {
		for parent := (n - 2) / 2; ; parent-- {
			s.adjustHeap(first, parent, n, s.idx[first+parent])
			if parent == 0 {
				break
			}
		}
	}
	for last-first > 1 {
		last--
		x := s.idx[last]
		s.idx[last] = s.idx[first]
		s.adjustHeap(first, 0, last-first, x)
	}
}

func (s *introSorter) adjustHeap(first, hole, n, x int) {
	top, child := hole, hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if s.comp(first+child, first+child-1) {
			child--
		}
		s.idx[first+hole] = s.idx[first+child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		s.idx[first+hole] = s.idx[first+child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && s.compVal(s.v[s.idx[first+parent]], s.v[x]) {
		s.idx[first+hole] = s.idx[first+parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	s.idx[first+hole] = x
}
