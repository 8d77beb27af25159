package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/da3-go/da3-go/internal/progenv"
)

// The environment variables the command reads besides those it shares with
// the C ABI (internal/progenv); the library packages read none.
const (
	envCacheDir = progenv.CacheDir // the downloaded models
	envBaseURL  = progenv.BaseURL  // where the published models are downloaded from
	envProgress = "DA3_PROGRESS"   // 1: progress bars even when stderr is not a terminal
)

// deviceOr is flag, else DA3_DEVICE.
func deviceOr(flag string) string { return progenv.DeviceOr(flag) }

// backendDirs are the absolute folders of DA3_BACKEND_PATH (see
// progenv.BackendDirs), refused ones warned about on the command's log.
func backendDirs() []string { return progenv.BackendDirs(slog.Default()) }

// applyKernelsEnv sets the CPU kernels' variant from DA3_KERNELS (and the
// avx2 kernels' int8 step from DA3_AVX2_INT8), warning about a value it
// cannot use.
func applyKernelsEnv(stderr io.Writer) {
	if err := progenv.ApplyKernels(); err != nil {
		fmt.Fprintf(stderr, "da3-go: warning: %v\n", err)
	}
}
