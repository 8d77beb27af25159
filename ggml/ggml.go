// Package ggml is a thin, idiomatic Go binding to ggml, the tensor library behind
// llama.cpp and the C++ Depth Anything engine. cgo in da3-go is confined to it,
// its subpackage ggml/kernels (da3-go's own CPU kernels) and capi (the C ABI).
//
// ggml itself is compiled from the pinned github.com/ollama/ollama module (its
// cgo packages build ggml-base and the CPU backend). Its public headers are
// read from that module in the module cache, or in a checkout of this
// repository from ggml/vendor/include where `go generate ./ggml` copies them
// (see da3_ggml.h).
//
// The binding follows ggml closely:
//
//   - A Context is a no_alloc arena of tensor metadata plus the graph built in it.
//   - Ops are methods on *Tensor that take the graph context g explicitly:
//     w.MulMat(g, x) reads "weight applied to x". Shapes are in ggml order
//     (ne0 fastest), the reverse of PyTorch.
//   - Shape preconditions that would trip a GGML_ASSERT (which aborts the whole
//     process) are checked in Go first and panic with a *ShapeError, a programmer
//     error that can be recovered. Runtime failures (allocation, compute) return
//     errors.
//   - Tensor memory lives in backend buffers (CPU, CUDA, ...). Data moves in and
//     out with bulk copies (SetFloat32s, Float32s).
//
// ggml's log is forwarded to the *slog.Logger set with SetLogger, and discarded by default.
package ggml

//go:generate go run ./internal/gen

/*
#cgo CPPFLAGS: -I${SRCDIR}/vendor/include
#cgo CFLAGS: -O3
#cgo CXXFLAGS: -std=c++17
#include <stdlib.h>
#include "da3_ggml.h"

extern void da3GoLog(int level, char *text, void *user_data);
static void da3_set_log(void) { ggml_log_set((ggml_log_callback)da3GoLog, NULL); }
static const char * da3_module_version(void) { return DA3_GGML_MODULE_VERSION; }
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	// The pinned ggml: compiles ggml-base and registers the CPU backend.
	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// ModulePath is the Go module that provides ggml's sources.
const ModulePath = "github.com/ollama/ollama"

// Errors that callers branch on.
var (
	// ErrOutOfMemory reports that ggml could not allocate memory (host or device).
	ErrOutOfMemory = errors.New("out of memory")
	// ErrClosed reports use of a resource after Close.
	ErrClosed = errors.New("use of closed ggml resource")
	// ErrNodeBudget is the cause of the ShapeError an op panics with when
	// its context's node budget (NewContext's maxNodes) is spent.
	ErrNodeBudget = errors.New("graph larger than its node budget")
)

// StatusAborted is the status of a compute stopped by Backend.Abort.
const StatusAborted = int(C.GGML_STATUS_ABORTED)

// StatusError is a non-success ggml_status returned by a compute call.
type StatusError struct {
	Op     string
	Status int
}

func (e *StatusError) Error() string {
	name := "unknown"
	switch e.Status {
	case int(C.GGML_STATUS_ALLOC_FAILED):
		name = "allocation failed"
	case int(C.GGML_STATUS_FAILED):
		name = "failed"
	case int(C.GGML_STATUS_ABORTED):
		name = "aborted"
	}
	return fmt.Sprintf("ggml %s: status %d (%s)", e.Op, e.Status, name)
}

func init() {
	// Replace the log sink installed by the ollama package with ours.
	C.da3_set_log()
}

var logState struct {
	sync.Mutex
	level C.int
	buf   strings.Builder
}

//export da3GoLog
func da3GoLog(level C.int, text *C.char, _ unsafe.Pointer) {
	s := C.GoString(text)
	logState.Lock()
	defer logState.Unlock()
	if level != C.GGML_LOG_LEVEL_CONT {
		logState.level = level
	}
	logState.buf.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		return
	}
	msg := strings.TrimRight(logState.buf.String(), "\n")
	logState.buf.Reset()
	var l slog.Level
	switch logState.level {
	case C.GGML_LOG_LEVEL_DEBUG:
		l = slog.LevelDebug
	case C.GGML_LOG_LEVEL_INFO:
		l = slog.LevelDebug // ggml's info is chatty; it is debug for us
	case C.GGML_LOG_LEVEL_WARN:
		l = slog.LevelWarn
	case C.GGML_LOG_LEVEL_ERROR:
		l = slog.LevelError
	default:
		l = slog.LevelDebug
	}
	if log := Logger(); log.Enabled(context.Background(), l) {
		log.Log(context.Background(), l, msg, "src", "ggml")
	}
}

// HeaderVersion is the ollama module version whose headers the binding was
// compiled with ("" when they came from an include path of unknown version;
// see da3_ggml.h).
func HeaderVersion() string { return C.GoString(C.da3_module_version()) }

// LinkedVersion is the ollama module version linked into this binary, from the
// build info ("" when the build info is unavailable).
func LinkedVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// CheckVersion reports an error when the binding was compiled with the
// headers of another module version than the one linked: the structs the
// binding passes to C would not match.
func CheckVersion() error {
	h, l := HeaderVersion(), LinkedVersion()
	if l == "" || h == "" || h == l {
		return nil
	}
	return fmt.Errorf("the ggml headers the binding was compiled with are from %s@%s but %s is linked: in the da3-go repository run 'go generate ./ggml' (or make); elsewhere point CGO_CPPFLAGS at the linked module's headers (see da3_ggml.h)", ModulePath, h, l)
}

// HasAVX2 reports whether the CPU backend was compiled with AVX2. Without SIMD
// flags (see the Makefile) the CPU backend runs about 35x slower.
func HasAVX2() bool { return C.ggml_cpu_has_avx2() != 0 }

// CPUFeatures lists the SIMD features the CPU backend was compiled with.
func CPUFeatures() []string {
	var f []string
	add := func(ok C.int, name string) {
		if ok != 0 {
			f = append(f, name)
		}
	}
	add(C.ggml_cpu_has_sse3(), "SSE3")
	add(C.ggml_cpu_has_avx(), "AVX")
	add(C.ggml_cpu_has_avx2(), "AVX2")
	add(C.ggml_cpu_has_f16c(), "F16C")
	add(C.ggml_cpu_has_fma(), "FMA")
	add(C.ggml_cpu_has_avx512(), "AVX512")
	add(C.ggml_cpu_has_avx512_vnni(), "AVX512_VNNI")
	add(C.ggml_cpu_has_avx512_bf16(), "AVX512_BF16")
	add(C.ggml_cpu_has_neon(), "NEON")
	add(C.ggml_cpu_has_arm_fma(), "ARM_FMA")
	return f
}
