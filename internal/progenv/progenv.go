// Package progenv reads the environment variables of da3-go's programs, the
// command and the C ABI, in one place; the library packages read none (their
// options say everything).
package progenv

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// The variables.
const (
	Device      = "DA3_DEVICE"         // the default device
	BackendPath = "DA3_BACKEND_PATH"   // more folders of ggml backend libraries (absolute)
	Kernels     = "DA3_KERNELS"        // the CPU kernels' instruction-set variant
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
// avx2, portable, off or auto), if set. A value it cannot use is an error
// that names it and the variant that stays.
func ApplyKernels() error {
	env := os.Getenv(Kernels)
	if env == "" {
		return nil
	}
	v, err := kernels.ParseVariant(env)
	if err == nil {
		err = kernels.SetDefaultVariant(v)
	}
	if err != nil {
		return fmt.Errorf("%s=%s: %w; the kernels stay %s", Kernels, env, err, kernels.DefaultVariant())
	}
	return nil
}
