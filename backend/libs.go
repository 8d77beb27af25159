package backend

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/da3-go/da3-go/ggml"
)

// Dynamic ggml backends (libggml-cuda.so, libggml-cpu-*.so and the
// libggml-base.so they link) are built by ggml/cmake from the pinned module's
// ggml sources. The structs that cross between this binary's static ggml and
// a loaded library (tensors, buffers, the backend interface) are only
// compatible within one ggml version, so every library is checked before
// anything in its folder is loaded:
//
//   - ggml/cmake compiles into each library an ELF section
//     .da3_ggml_version holding "da3-ggml-version:<module> <version>";
//   - the install folder holds a VERSION file with "<module> <version>".
//
// A folder is loaded only when its VERSION file (if any) and every library's
// stamp equal GGMLVersion. Libraries that are not ELF (macOS) are judged by
// the VERSION file alone.

const (
	// VersionFile is the stamp ggml/cmake writes next to the libraries.
	VersionFile = "VERSION"
	// LibVersionSection is the ELF section holding a library's stamp.
	LibVersionSection = ".da3_ggml_version"
	libVersionPrefix  = "da3-ggml-version:"
)

// ErrBackendVersion marks backend libraries that were not built from the
// ggml version this binary links.
var ErrBackendVersion = errors.New("ggml backend library from another ggml version")

// VersionError reports a backend folder that was not loaded because of a
// library (or the folder's VERSION file) whose ggml version differs.
type VersionError struct {
	Dir  string // the folder, not loaded
	File string // the library or VERSION file
	Have string // the version it names; "" when it has no stamp
	Want string // GGMLVersion
}

func (e *VersionError) Error() string {
	have := e.Have
	if have == "" {
		have = "an unknown ggml version (no da3 version stamp: not built by ggml/cmake)"
	}
	what := filepath.Base(e.File) + " was built from"
	if filepath.Base(e.File) == VersionFile {
		what = "its " + VersionFile + " file names"
	}
	return fmt.Sprintf("not loading the ggml backends in %s: %s %s, but this da3-go links %s; "+
		"rebuild them from this checkout (make cuda) or point DA3_BACKEND_PATH at a matching build",
		e.Dir, what, have, e.Want)
}

func (e *VersionError) Unwrap() error { return ErrBackendVersion }

// GGMLVersion is "<module> <version>" of the ggml this binary links, in the
// form of ggml/vendor/VERSION and the libraries' stamps.
func GGMLVersion() string { return ggml.ModulePath + " " + ggml.HeaderVersion() }

// BackendLibraries lists the ggml libraries in dir that ggml's loader or the
// dynamic linker may load: libggml-*.so and their versioned names
// (libggml-base.so.0). Symbolic links are listed once, by their own name.
func BackendLibraries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("backend folder %s: %w", dir, err)
	}
	seen := map[string]bool{}
	var libs []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "libggml-") || !(strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.") || strings.HasSuffix(name, ".dylib")) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // dangling link or not a file: nothing can load it
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if !seen[real] {
			seen[real] = true
			libs = append(libs, p)
		}
	}
	sort.Strings(libs)
	return libs, nil
}

// LibraryVersion reads the version stamp of a library: ok is false when the
// file is ELF without a stamp, or not ELF (then only the folder's VERSION
// file tells).
func LibraryVersion(path string) (version string, elfFile, ok bool, err error) {
	r, err := os.Open(path)
	if err != nil {
		return "", false, false, fmt.Errorf("read backend library %s: %w", path, err)
	}
	defer r.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != elf.ELFMAG {
		return "", false, false, nil // another format (or too short to be a library)
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return "", true, false, fmt.Errorf("read backend library %s: %w", path, err)
	}
	sec := f.Section(LibVersionSection)
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return "", true, false, nil
	}
	if sec.Size > 4096 {
		return "", true, false, fmt.Errorf("backend library %s: %s section of %d bytes is too large", path, LibVersionSection, sec.Size)
	}
	data, err := io.ReadAll(sec.Open())
	if err != nil {
		return "", true, false, fmt.Errorf("backend library %s: read %s: %w", path, LibVersionSection, err)
	}
	s := string(bytes.TrimRight(data, "\x00"))
	if !strings.HasPrefix(s, libVersionPrefix) {
		return "", true, false, fmt.Errorf("backend library %s: malformed %s section %q", path, LibVersionSection, s)
	}
	return strings.TrimSpace(strings.TrimPrefix(s, libVersionPrefix)), true, true, nil
}

// CheckBackendDir checks that every ggml library in dir was built from the
// ggml version want (see the package notes). It returns the libraries; an
// error is a *VersionError (wrapping ErrBackendVersion) or an I/O error. A
// missing or library-free folder passes with no libraries.
func CheckBackendDir(dir, want string) ([]string, error) {
	libs, err := BackendLibraries(dir)
	if err != nil || len(libs) == 0 {
		return nil, err
	}
	stamp := ""
	vf := filepath.Join(dir, VersionFile)
	if b, err := os.ReadFile(vf); err == nil {
		stamp = strings.TrimSpace(string(b))
		if stamp != want {
			return nil, &VersionError{Dir: dir, File: vf, Have: stamp, Want: want}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("backend folder %s: %w", dir, err)
	}
	for _, lib := range libs {
		v, isELF, ok, err := LibraryVersion(lib)
		if err != nil {
			return nil, err
		}
		switch {
		case ok && v != want:
			return nil, &VersionError{Dir: dir, File: lib, Have: v, Want: want}
		case !ok && (isELF || stamp == ""):
			return nil, &VersionError{Dir: dir, File: lib, Want: want}
		}
	}
	return libs, nil
}

var libState struct {
	sync.Mutex
	seen    map[string]bool
	refused []error
	loaded  map[string]string // backend library name -> the folder it was loaded from
}

// loadedElsewhere reports the folder every backend library of libs (the
// libggml-base copies aside) was already loaded from under the same name, if
// one was: a second copy of the same backend (the checkout's build and a
// copy of it in DA3_BACKEND_PATH, say) would list every device twice.
func loadedElsewhere(libs []string, loaded map[string]string) (string, bool) {
	from := ""
	for _, l := range libs {
		name := filepath.Base(l)
		if strings.HasPrefix(name, "libggml-base.") {
			continue
		}
		d, ok := loaded[name]
		if !ok {
			return "", false
		}
		from = d
	}
	return from, from != ""
}

// LoadBackends loads the dynamic backends of dirs (each folder once per
// process) after checking their ggml version, and returns the devices added.
// Folders must be absolute paths: a relative one is refused (never resolved
// against the working directory). Each library is logged with its path, on
// ggml.Logger (silent unless ggml.SetLogger set one).
// The error joins the folders refused (*VersionError) and other failures;
// folders that pass are loaded even when others are refused.
func LoadBackends(dirs []string) ([]ggml.Device, error) {
	return loadBackends(dirs, ggml.Logger())
}

// BackendErrors lists every refusal and failure of LoadBackends so far, for
// messages such as "device CUDA0 not found" and the devices listing.
func BackendErrors() []error {
	libState.Lock()
	defer libState.Unlock()
	return append([]error(nil), libState.refused...)
}

func loadBackends(dirs []string, log *slog.Logger) ([]ggml.Device, error) {
	want := GGMLVersion()
	var added []ggml.Device
	var errs []error
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			err := fmt.Errorf("backend folder %q refused: not an absolute path (it would be looked for in the working directory)", d)
			log.Warn("backend libraries not loaded", "err", err)
			errs = append(errs, err)
			continue
		}
		abs := filepath.Clean(d)
		libState.Lock()
		if libState.seen == nil {
			libState.seen = map[string]bool{}
		}
		seen := libState.seen[abs]
		libState.seen[abs] = true
		libState.Unlock()
		if seen {
			continue
		}
		devs, err := loadDir(abs, want, log)
		added = append(added, devs...)
		if err != nil {
			log.Warn("backend libraries not loaded", "err", err)
			errs = append(errs, err)
			libState.Lock()
			libState.refused = append(libState.refused, err)
			libState.Unlock()
		}
	}
	return added, errors.Join(errs...)
}

func loadDir(dir, want string, log *slog.Logger) ([]ggml.Device, error) {
	libs, err := CheckBackendDir(dir, want)
	if err != nil || len(libs) == 0 {
		return nil, err
	}
	if p := os.Getenv("GGML_BACKEND_PATH"); p != "" {
		// ggml_backend_load_all_from_path also loads this library, unchecked
		// and again for every folder.
		return nil, fmt.Errorf("not loading the ggml backends in %s: GGML_BACKEND_PATH=%s is set, which ggml would load unchecked; unset it and use DA3_BACKEND_PATH", dir, p)
	}
	libState.Lock()
	from, dup := loadedElsewhere(libs, libState.loaded)
	libState.Unlock()
	if dup {
		log.Info("backend libraries not loaded again: the same backends were loaded from another folder", "dir", dir, "loaded_from", from, "libraries", baseNames(libs))
		return nil, nil
	}
	for _, lib := range libs {
		log.Info("loading backend library", "path", lib)
	}
	devs, err := ggml.LoadBackends(dir)
	libState.Lock()
	if libState.loaded == nil {
		libState.loaded = map[string]string{}
	}
	for _, l := range libs {
		if name := filepath.Base(l); !strings.HasPrefix(name, "libggml-base.") {
			if _, ok := libState.loaded[name]; !ok {
				libState.loaded[name] = dir
			}
		}
	}
	libState.Unlock()
	if err != nil {
		return nil, fmt.Errorf("load ggml backends from %s: %w", dir, err)
	}
	for _, d := range devs {
		free, total := d.Memory()
		log.Info("backend device loaded", "dir", dir, "name", d.Name(), "description", d.Description(),
			"type", d.Type().String(), "free_MiB", free>>20, "total_MiB", total>>20)
	}
	if len(devs) == 0 && hasBackendLib(libs) {
		// ggml loads silently: a library whose dependencies are missing
		// (libcudart, libcublas, the driver) or that found no device adds nothing.
		log.Info("backend libraries added no device (no GPU, or a missing driver or runtime library: check with ldd)",
			"dir", dir, "libraries", baseNames(libs))
	}
	return devs, nil
}

func hasBackendLib(libs []string) bool {
	for _, l := range libs {
		if !strings.HasPrefix(filepath.Base(l), "libggml-base.") {
			return true
		}
	}
	return false
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
