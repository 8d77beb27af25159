// Package kernels holds da3-go's CPU kernels for ggml graphs: a packed
// AVX-512 matrix product with fused bias and activation (GEMM), an
// implicit-im2col convolution on the same product (Conv2D), fused attention
// (Attention) and a bilinear resize with per-column tables (Bilinear). They
// are ggml custom ops (ggml_custom_4d) and run on the CPU backend only.
//
// Every function here checks its operands and panics with a
// *ggml.ShapeError when they do not fit (the Fits functions say so
// beforehand), and the C kernels check them again on entry; the raw C
// functions are not exported. A kernel call that cannot run (out of memory
// for its scratch buffers, or operands that fail the entry check) computes
// nothing and is counted: the runtime checks FaultsSince after each compute.
//
// Which kernels a graph uses is one Policy value, set on the graph by the
// runtime (SetPolicy) and read by the layers of model/nn (PolicyOf).
package kernels

/*
#cgo CPPFLAGS: -I${SRCDIR}/.. -I${SRCDIR}/../vendor/include
#cgo CFLAGS: -O3
#include "custom.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/ggml"
)

// Policy is the kernel policy of a graph: which of the fused paths the
// layers of model/nn take. The zero value uses ggml's own ops only.
type Policy struct {
	// GEMM computes linear layers and convolutions with GEMM and Conv2D
	// (bias and activation fused). AVX-512 builds.
	GEMM bool
	// Attention computes attention with the fused kernel. AVX-512 builds.
	Attention bool
	// Resize computes bilinear resizes with Bilinear. Any build.
	Resize bool
	// Flash computes the attention the fused kernel does not take with
	// ggml_flash_attn_ext (no score matrix: the choice on GPUs); otherwise
	// it is two matrix products and a softmax, in chunks of queries.
	Flash bool
	// ScoreBytes bounds one chunk of attention scores when they are
	// materialised (0 means 256 MiB); smaller values trade speed for memory.
	ScoreBytes int64
}

// Available is what this binary can run: GEMM and Attention need a build
// with AVX-512 (CGO_CFLAGS with -march=native on an AVX-512 CPU, or
// -mavx512f); the others are portable.
func Available() Policy {
	avx512 := C.da3_gemm_available() != 0
	return Policy{GEMM: avx512, Attention: avx512, Resize: true, Flash: true}
}

// Default is the fastest policy for graphs that run on the CPU (cpu) or on
// another device: every kernel of this build on the CPU, ggml's flash
// attention elsewhere (the custom ops run on the CPU backend only).
func Default(cpu bool) Policy {
	if !cpu {
		return Policy{Flash: true}
	}
	p := Available()
	p.Flash = false // two products and a softmax are faster than ggml's CPU flash attention
	return p
}

// Mask returns p without the kernels this binary lacks.
func (p Policy) Mask() Policy {
	a := Available()
	p.GEMM = p.GEMM && a.GEMM
	p.Attention = p.Attention && a.Attention
	p.Resize = p.Resize && a.Resize
	return p
}

type policyKey struct{}

// SetPolicy sets the kernel policy of the graph built in g (the runtime
// does, for every graph); kernels this binary lacks are dropped.
func SetPolicy(g *ggml.Context, p Policy) { g.SetValue(policyKey{}, p.Mask()) }

// PolicyOf is the kernel policy of the graph built in g: the zero Policy
// when none was set.
func PolicyOf(g *ggml.Context) Policy {
	p, _ := g.Value(policyKey{}).(Policy)
	return p
}

// Faults is the number of kernel calls, since the process started, that
// computed nothing because they could not run.
func Faults() uint64 { return uint64(C.da3_faults()) }

// ErrFault reports kernel calls that could not run; see FaultsSince.
var ErrFault = errors.New("CPU kernel failed")

// FaultsSince returns an error wrapping ErrFault (and ggml.ErrOutOfMemory
// when scratch memory ran out) when kernel calls failed since Faults
// returned n, else nil. The count is process-wide: a failure in one graph is
// also seen by graphs computed at the same time by other runtimes.
func FaultsSince(n uint64) error {
	now := Faults()
	if now == n {
		return nil
	}
	switch C.da3_last_fault() {
	case C.DA3_FAULT_NOMEM:
		return fmt.Errorf("%w: scratch buffers: %w", ErrFault, ggml.ErrOutOfMemory)
	case C.DA3_FAULT_UNAVAILABLE:
		return fmt.Errorf("%w: the kernel is not in this build", ErrFault)
	}
	return fmt.Errorf("%w: %d calls rejected their operands", ErrFault, now-n)
}

// mustFit panics with a *ggml.ShapeError for op unless ok.
func mustFit(ok bool, op string, ts []*ggml.Tensor, format string, args ...any) {
	if ok {
		return
	}
	e := &ggml.ShapeError{Op: op, Msg: fmt.Sprintf(format, args...)}
	for _, t := range ts {
		if t == nil {
			e.Shapes = append(e.Shapes, nil)
			continue
		}
		e.Shapes = append(e.Shapes, []int{t.Dim(0), t.Dim(1), t.Dim(2), t.Dim(3)})
	}
	panic(e)
}

// dims is t's shape as 4 dims (ggml order).
func dims(t *ggml.Tensor) []int { return []int{t.Dim(0), t.Dim(1), t.Dim(2), t.Dim(3)} }

// nonNil reports whether no tensor is nil.
func nonNil(ts ...*ggml.Tensor) bool {
	for _, t := range ts {
		if t == nil {
			return false
		}
	}
	return true
}
