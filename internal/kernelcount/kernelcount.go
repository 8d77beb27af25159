// Package kernelcount reads the call counters of ggml/kernels' CPU kernels:
// which kernels actually ran, for tests and diagnostics, kept out of the
// kernels' API. The counters are process-wide and count from the start of
// the process; they read 0 until package ggml/kernels is linked in (any
// package that runs a model links it).
package kernelcount

import "sync"

// Source is what ggml/kernels registers: its counters.
type Source struct {
	// Calls counts the GEMM, convolution and attention calls (one per
	// thread and node) of a variant in a precision (kernels.Variant and
	// kernels.Precision values).
	Calls func(variant, precision int) uint64
	// Winograd counts the Winograd convolution's calls; Window those of
	// the bilinear window kernel (whether a head ran in strips).
	Winograd, Window func() uint64
}

var (
	mu  sync.RWMutex
	src Source
)

// Register installs the counters (ggml/kernels does, once).
func Register(s Source) {
	mu.Lock()
	defer mu.Unlock()
	src = s
}

func source() Source {
	mu.RLock()
	defer mu.RUnlock()
	return src
}

// Calls counts the GEMM, convolution and attention calls (one per thread
// and node) that variant v has run in precision p (kernels.Variant and
// kernels.Precision values, or any integer types of them).
func Calls[V, P ~int](v V, p P) uint64 {
	if f := source().Calls; f != nil {
		return f(int(v), int(p))
	}
	return 0
}

// WinogradCalls counts the calls of the Winograd convolution (one per
// thread and node).
func WinogradCalls() uint64 {
	if f := source().Winograd; f != nil {
		return f()
	}
	return 0
}

// WindowCalls counts the calls of the bilinear window kernel (one per
// thread and node): whether a head ran in strips.
func WindowCalls() uint64 {
	if f := source().Window; f != nil {
		return f()
	}
	return 0
}
