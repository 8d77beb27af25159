package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// The environment variables the command reads; the library packages read
// none (their options say everything).
const (
	envDevice      = "DA3_DEVICE"         // the default of -device
	envBackendPath = "DA3_BACKEND_PATH"   // more folders of ggml backend libraries (absolute)
	envKernels     = "DA3_KERNELS"        // the CPU kernels' instruction-set variant
	envCacheDir    = "DA3_CACHE_DIR"      // the downloaded models
	envBaseURL     = "DA3_MODEL_BASE_URL" // where the published models are downloaded from
	envProgress    = "DA3_PROGRESS"       // 1: progress bars even when stderr is not a terminal
)

// deviceOr is flag, else DA3_DEVICE.
func deviceOr(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(envDevice)
}

// backendDirs are the absolute folders of DA3_BACKEND_PATH; relative ones
// are refused with a warning (a library is never loaded from the working
// directory).
func backendDirs() []string {
	dirs, refused := backend.SplitBackendPath(os.Getenv(envBackendPath))
	for _, d := range refused {
		slog.Warn(envBackendPath+": relative folder refused (backend folders must be absolute paths)", "dir", d)
	}
	return dirs
}

// applyKernelsEnv sets the CPU kernels' variant from DA3_KERNELS (avx512,
// avx2, portable, off or auto), warning about a value it cannot use.
func applyKernelsEnv(stderr io.Writer) {
	env := os.Getenv(envKernels)
	if env == "" {
		return
	}
	v, err := kernels.ParseVariant(env)
	if err == nil {
		err = kernels.SetDefaultVariant(v)
	}
	if err != nil {
		fmt.Fprintf(stderr, "da3-go: warning: %s=%s: %v; the kernels stay %s\n", envKernels, env, err, kernels.DefaultVariant())
	}
}
