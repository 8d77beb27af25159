package backend

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const plantChildEnv = "DA3_TEST_PLANTED_CHILD"

// plantedSource is a library named like a ggml backend, carrying a forged
// version stamp (so the version check passes), whose constructor writes a
// marker file: if the file appears, the library was loaded and its code ran.
const plantedSource = `#include <stdio.h>
__attribute__((used, section(%q))) static const char stamp[] = %q;
__attribute__((constructor)) static void planted(void) {
	FILE *f = fopen(%q, "a");
	if (f) { fputs("planted library loaded\n", f); fclose(f); }
}
`

// TestPlantedLibraryNotLoaded plants backend libraries in ggml/vendor/lib
// under a working directory and loads the default backend folders from
// there, with the folders of DA3_BACKEND_PATH as a program reads them (what
// da3-go depth -device cpu and da3-go devices do): nothing in the working
// directory may be loaded, whether found by the default search or through
// a relative DA3_BACKEND_PATH. The same library through an absolute
// DA3_BACKEND_PATH is loaded, which shows the planted library would run.
func TestPlantedLibraryNotLoaded(t *testing.T) {
	if os.Getenv(plantChildEnv) != "" {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		dirs, refused := SplitBackendPath(os.Getenv("DA3_BACKEND_PATH"))
		for _, d := range refused {
			log.Warn("DA3_BACKEND_PATH: relative folder refused", "dir", d)
		}
		_, err := loadBackends(append(defaultBackendDirs(log), dirs...), log)
		fmt.Fprintf(os.Stderr, "load error: %v\n", err)
		return
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed: cannot build the planted library (this test needs a C compiler)")
	}
	work := t.TempDir()
	marker := filepath.Join(work, "marker")
	src := filepath.Join(work, "planted.c")
	require.NoError(t, os.WriteFile(src, fmt.Appendf(nil, plantedSource, LibVersionSection, libVersionPrefix+GGMLVersion(), marker), 0o644))
	cwd := filepath.Join(work, "cwd")
	planted := filepath.Join(cwd, "ggml", "vendor", "lib")
	control := filepath.Join(work, "control")
	for _, dir := range []string{planted, control} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, name := range []string{"libggml-cuda.so", "libggml-cpu-haswell.so"} {
			out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", filepath.Join(dir, name), src).CombinedOutput()
			require.NoError(t, err, "gcc: %s", out)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, VersionFile), []byte(GGMLVersion()+"\n"), 0o644))
	}
	libs, err := CheckBackendDir(planted, GGMLVersion())
	require.NoError(t, err)
	require.Len(t, libs, 2, "the planted libraries pass the version check: only their folder keeps them out")

	self, err := os.Executable()
	require.NoError(t, err)
	child := func(dir, backendPath string) string {
		cmd := exec.Command(self, "-test.run=^TestPlantedLibraryNotLoaded$", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), plantChildEnv+"=1", "DA3_BACKEND_PATH="+backendPath, "GGML_BACKEND_PATH=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child:\n%s", out)
		return string(out)
	}

	out := child(cwd, strings.Join([]string{"ggml/vendor/lib", "./ggml/vendor/lib"}, string(os.PathListSeparator)))
	assert.NoFileExists(t, marker, "a library in the working directory was loaded:\n%s", out)
	assert.Contains(t, out, "relative folder refused")
	assert.NotContains(t, out, planted)

	out = child(work, control)
	assert.FileExists(t, marker, "control: the library through an absolute DA3_BACKEND_PATH was not loaded:\n%s", out)
	assert.Contains(t, out, "loading backend library", "every library loaded is logged with its path")
	assert.Contains(t, out, filepath.Join(control, "libggml-cuda.so"))
}
