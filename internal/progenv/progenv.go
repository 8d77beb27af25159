// Package progenv reads the environment variables of da3-go's programs, the
// command and the C ABI, in one place; the library packages read none (their
// options say everything).
package progenv

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// The variables.
const (
	Device      = "DA3_DEVICE"         // the default device
	BackendPath = "DA3_BACKEND_PATH"   // more folders of ggml backend libraries (absolute)
	Kernels     = "DA3_KERNELS"        // the CPU kernels' instruction-set variant
	AVX2Int8    = "DA3_AVX2_INT8"      // the avx2 kernels' int8 step (vpmaddubsw or vpdpbusd)
	CacheDir    = "DA3_CACHE_DIR"      // the downloaded models
	BaseURL     = "DA3_MODEL_BASE_URL" // where the published models are downloaded from
)

// FetchOptions are the download options of DA3_CACHE_DIR and
// DA3_MODEL_BASE_URL; cacheDir, when set, replaces the first.
func FetchOptions(cacheDir string) fetch.Options {
	if cacheDir == "" {
		cacheDir = os.Getenv(CacheDir)
	}
	return fetch.Options{CacheDir: cacheDir, BaseURL: os.Getenv(BaseURL)}
}

// DeviceOr is device, else DA3_DEVICE.
func DeviceOr(device string) string {
	if device != "" {
		return device
	}
	return os.Getenv(Device)
}

// BackendDirs are the absolute folders of DA3_BACKEND_PATH; relative ones
// are refused with a warning on log (a library is never loaded from the
// working directory).
func BackendDirs(log *slog.Logger) []string {
	dirs, refused := backend.SplitBackendPath(os.Getenv(BackendPath))
	for _, d := range refused {
		log.Warn(BackendPath+": relative folder refused (backend folders must be absolute paths)", "dir", d)
	}
	return dirs
}

// ApplyKernels sets the CPU kernels' variant from DA3_KERNELS (avx512,
// avx2, portable, off or auto) and the avx2 kernels' int8 step from
// DA3_AVX2_INT8 (auto, vpmaddubsw, vpdpbusd, vpdpbusd-evex or
// vpdpbusd-avx-vnni), where set. A value it cannot use is an error that
// names it and what stays.
func ApplyKernels() error {
	if env := os.Getenv(Kernels); env != "" {
		v, err := kernels.ParseVariant(env)
		if err == nil {
			err = kernels.SetDefaultVariant(v)
		}
		if err != nil {
			return fmt.Errorf("%s=%s: %w; the kernels stay %s", Kernels, env, err, kernels.DefaultVariant())
		}
	}
	if env := os.Getenv(AVX2Int8); env != "" {
		f, err := kernels.ParseAVX2Int8Form(env)
		if err == nil {
			if _, ok := kernels.SetAVX2Int8Form(f); !ok {
				err = fmt.Errorf("this CPU cannot run %s (CPU features: %s)", f, strings.Join(kernels.CPUFeatures(), " "))
			}
		}
		if err != nil {
			now, _ := kernels.SetAVX2Int8Form(-1)
			return fmt.Errorf("%s=%s: %w; the step stays %s", AVX2Int8, env, err, now)
		}
	}
	return nil
}
