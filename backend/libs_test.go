package backend

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
)

// writeELF writes a minimal ELF64 shared object with, when stamp is not
// empty, a .da3_ggml_version section as ggml/cmake compiles into libraries.
func writeELF(t *testing.T, path, stamp string) {
	t.Helper()
	names := "\x00.shstrtab\x00" + LibVersionSection + "\x00"
	const ehsize, shentsize = 64, 64
	body := []byte(names)
	verOff := ehsize + len(body)
	ver := []byte(libVersionPrefix + stamp + "\x00")
	if stamp != "" {
		body = append(body, ver...)
	}
	shoff := ehsize + len(body)
	shoff += (8 - shoff%8) % 8
	sections := []elf.Section64{
		{}, // the null section
		{Name: 1, Type: uint32(elf.SHT_STRTAB), Off: ehsize, Size: uint64(len(names)), Addralign: 1},
	}
	if stamp != "" {
		sections = append(sections, elf.Section64{Name: uint32(len("\x00.shstrtab\x00")), Type: uint32(elf.SHT_PROGBITS),
			Flags: uint64(elf.SHF_ALLOC), Off: uint64(verOff), Size: uint64(len(ver)), Addralign: 1})
	}
	h := elf.Header64{
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: uint64(shoff), Ehsize: ehsize, Shentsize: shentsize, Shnum: uint16(len(sections)), Shstrndx: 1,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
	buf.Write(body)
	buf.Write(make([]byte, shoff-buf.Len()))
	for _, s := range sections {
		require.NoError(t, binary.Write(&buf, binary.LittleEndian, s))
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

func TestLibraryVersion(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "libggml-x.so")
	writeELF(t, p, "example.com/m v1.2.3")
	v, isELF, ok, err := LibraryVersion(p)
	require.NoError(t, err)
	assert.True(t, isELF)
	assert.True(t, ok)
	assert.Equal(t, "example.com/m v1.2.3", v)

	writeELF(t, p, "")
	v, isELF, ok, err = LibraryVersion(p)
	require.NoError(t, err)
	assert.True(t, isELF)
	assert.False(t, ok, "an ELF file without the section has no stamp")
	assert.Empty(t, v)

	require.NoError(t, os.WriteFile(p, []byte("not an ELF file"), 0o644))
	_, isELF, ok, err = LibraryVersion(p)
	require.NoError(t, err, "a file of another format is judged by the VERSION file")
	assert.False(t, isELF)
	assert.False(t, ok)

	_, _, _, err = LibraryVersion(filepath.Join(dir, "missing.so"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.so")
}

func TestCheckBackendDir(t *testing.T) {
	want := GGMLVersion()
	require.True(t, strings.HasPrefix(want, ggml.ModulePath+" v"), want)

	// A folder as make cuda installs it: stamped libraries, a soname link
	// chain and the VERSION file.
	good := func(t *testing.T) string {
		dir := t.TempDir()
		writeELF(t, filepath.Join(dir, "libggml-base.so.0.0.0"), want)
		require.NoError(t, os.Symlink("libggml-base.so.0.0.0", filepath.Join(dir, "libggml-base.so.0")))
		require.NoError(t, os.Symlink("libggml-base.so.0", filepath.Join(dir, "libggml-base.so")))
		writeELF(t, filepath.Join(dir, "libggml-cuda.so"), want)
		require.NoError(t, os.WriteFile(filepath.Join(dir, VersionFile), []byte(want+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a library"), 0o644))
		return dir
	}

	t.Run("match", func(t *testing.T) {
		dir := good(t)
		libs, err := CheckBackendDir(dir, want)
		require.NoError(t, err)
		// The link chain is one library, listed once.
		assert.Len(t, libs, 2)
		assert.Contains(t, baseNames(libs), "libggml-cuda.so")
	})

	t.Run("library from another version", func(t *testing.T) {
		dir := good(t)
		writeELF(t, filepath.Join(dir, "libggml-cuda.so"), ggml.ModulePath+" v0.0.1")
		_, err := CheckBackendDir(dir, want)
		require.ErrorIs(t, err, ErrBackendVersion)
		var ve *VersionError
		require.True(t, errors.As(err, &ve))
		assert.Equal(t, ggml.ModulePath+" v0.0.1", ve.Have)
		assert.Equal(t, want, ve.Want)
		msg := err.Error()
		for _, s := range []string{"libggml-cuda.so", "v0.0.1", want, dir, "make cuda"} {
			assert.Contains(t, msg, s, "the message names the library, both versions, the folder and the fix")
		}
	})

	t.Run("VERSION file from another version", func(t *testing.T) {
		dir := good(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, VersionFile), []byte(ggml.ModulePath+" v0.0.2\n"), 0o644))
		_, err := CheckBackendDir(dir, want)
		require.ErrorIs(t, err, ErrBackendVersion)
		assert.Contains(t, err.Error(), "its VERSION file names "+ggml.ModulePath+" v0.0.2")
	})

	t.Run("unstamped ELF library", func(t *testing.T) {
		dir := good(t)
		writeELF(t, filepath.Join(dir, "libggml-vulkan.so"), "")
		_, err := CheckBackendDir(dir, want)
		require.ErrorIs(t, err, ErrBackendVersion, "a matching VERSION file does not vouch for an ELF library without a stamp")
		assert.Contains(t, err.Error(), "libggml-vulkan.so")
		assert.Contains(t, err.Error(), "no da3 version stamp")
	})

	t.Run("non-ELF libraries and the VERSION file", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "libggml-metal.so"), []byte("Mach-O, say"), 0o644))
		_, err := CheckBackendDir(dir, want)
		require.ErrorIs(t, err, ErrBackendVersion, "no stamp at all")
		require.NoError(t, os.WriteFile(filepath.Join(dir, VersionFile), []byte(want), 0o644))
		libs, err := CheckBackendDir(dir, want)
		require.NoError(t, err, "the VERSION file vouches for libraries that cannot carry the ELF stamp")
		assert.Len(t, libs, 1)
	})

	t.Run("nothing to load", func(t *testing.T) {
		libs, err := CheckBackendDir(filepath.Join(t.TempDir(), "missing"), want)
		require.NoError(t, err)
		assert.Empty(t, libs)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, VersionFile), []byte("other v9\n"), 0o644))
		require.NoError(t, os.Symlink("nowhere.so", filepath.Join(dir, "libggml-dangling.so")))
		libs, err = CheckBackendDir(dir, want)
		require.NoError(t, err, "a folder without loadable libraries is not checked further")
		assert.Empty(t, libs)
	})
}

func TestLoadBackendsRefusesOtherVersion(t *testing.T) {
	before := len(ggml.Devices())
	dir := t.TempDir()
	// A library ggml's loader would pick up (libggml-cpu-*.so), stamped with
	// another version: it must not even be opened.
	writeELF(t, filepath.Join(dir, "libggml-cpu-fake.so"), ggml.ModulePath+" v0.0.3")
	devs, err := LoadBackends([]string{dir})
	require.ErrorIs(t, err, ErrBackendVersion)
	assert.Empty(t, devs)
	assert.Len(t, ggml.Devices(), before)
	assert.Contains(t, err.Error(), "v0.0.3")

	found := false
	for _, e := range BackendErrors() {
		found = found || strings.Contains(e.Error(), dir)
	}
	assert.True(t, found, "the refusal is remembered")

	// Asking for a device that folder would have provided names the refusal.
	_, err = pickDevice("CUDA9")
	require.ErrorIs(t, err, ggml.ErrNoDevice)
	assert.ErrorIs(t, err, ErrBackendVersion)
	assert.Contains(t, err.Error(), "v0.0.3")

	// A folder is examined once per process.
	devs, err = LoadBackends([]string{dir})
	require.NoError(t, err)
	assert.Empty(t, devs)
}

// TestDefaultBackendDirs: the default folders are the executable's and the
// checkout's, all absolute; a list such as DA3_BACKEND_PATH keeps its
// absolute folders and refuses the relative ones, and LoadBackends refuses
// a relative folder too.
func TestDefaultBackendDirs(t *testing.T) {
	var logs bytes.Buffer
	dirs := defaultBackendDirs(slog.New(slog.NewTextHandler(&logs, nil)))
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	src := SourceLibDir()
	require.NotEmpty(t, src, "go test keeps the source paths: the checkout's ggml/vendor/lib is known")
	assert.Equal(t, []string{filepath.Dir(exe), filepath.Join(filepath.Dir(exe), "lib"), src}, dirs)

	abs, refused := SplitBackendPath(strings.Join([]string{"/opt/a", "relative/b", "", "./c", "/opt/d/"}, string(os.PathListSeparator)))
	assert.Equal(t, []string{"/opt/a", "/opt/d"}, abs)
	assert.Equal(t, []string{"relative/b", "./c"}, refused)

	_, err = LoadBackends([]string{filepath.Join("ggml", "vendor", "lib")})
	require.Error(t, err, "a relative folder is refused")
	assert.Contains(t, err.Error(), "not an absolute path")
}

// cpuDLDir is where make cpu-dl installs a dynamically loadable CPU backend.
var cpuDLDir = filepath.Join("..", "ggml", "vendor", "lib", "cpu-dl")

const childEnv = "DA3_TEST_DYNAMIC_CPU_CHILD"

// TestDynamicCPUBackend loads the CPU backend that make cpu-dl builds (from
// the same ggml sources, as a loadable library linking its own
// libggml-base.so) into this binary, whose ggml is static, and checks that
// it registers a new device that computes what the built-in CPU computes,
// alone and under the scheduler with the built-in CPU beside it: the path a
// CUDA backend takes. It runs in a child process, because a second CPU device
// would change what the other tests of this package see.
func TestDynamicCPUBackend(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		dynamicCPUChild(t, os.Getenv(childEnv))
		return
	}
	libs, err := BackendLibraries(cpuDLDir)
	require.NoError(t, err)
	if len(libs) == 0 {
		t.Skipf("no dynamic CPU backend in %s: run 'make cpu-dl' to test loading ggml backends at run time", cpuDLDir)
	}
	abs, err := filepath.Abs(cpuDLDir)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDynamicCPUBackend$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+abs)
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	require.NoError(t, err, "the child test failed")
	assert.Contains(t, string(out), "--- PASS: TestDynamicCPUBackend")
	assert.Contains(t, string(out), "dynamic CPU device computed", "the child ran the checks instead of skipping")
}

func dynamicCPUChild(t *testing.T, dir string) {
	builtin := ggml.CPUDevice()
	before := ggml.Devices()

	devs, err := LoadBackends([]string{dir})
	require.NoError(t, err)
	require.Len(t, devs, 1, "the library registers one device")
	dyn := devs[0]
	assert.Len(t, ggml.Devices(), len(before)+1)
	assert.Equal(t, ggml.DeviceCPU, dyn.Type())
	assert.True(t, dyn != builtin, "a device of its own, not the built-in CPU") // (assert.Equal would compare the C structs deeply)
	assert.Equal(t, "CPU", dyn.Backend())
	_, total := dyn.Memory()
	assert.Greater(t, total, uint64(0))
	// ggml keeps devices sorted by score: the scored library comes first.
	assert.True(t, ggml.CPUDevice() == dyn, "a loaded, scored CPU backend precedes the built-in one")

	// The library's own libggml-base.so logs through ggml.SetLogger's
	// logger too: an allocation it cannot make is reported there, not on
	// stderr.
	var logs bytes.Buffer
	old := ggml.SetLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	huge, err := ggml.NewContext(1)
	require.NoError(t, err)
	huge.NewTensor(ggml.TypeF32, 1<<24, 1<<24) // 4 PiB
	_, err = huge.AllocTensors(dyn.BufferType(), ggml.UsageWeights)
	ggml.SetLogger(old)
	require.ErrorIs(t, err, ggml.ErrOutOfMemory)
	require.NoError(t, huge.Close())
	// (alloc_tensor_range's complaint comes from the static copy; these two
	// from the library's.)
	assert.Contains(t, logs.String(), "ggml_aligned_malloc: insufficient memory", "the dynamic ggml-base's log reaches slog")
	assert.Contains(t, logs.String(), "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate")

	const in, out, tokens = 96, 40, 7
	rng := rand.New(rand.NewSource(5))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	wd, bd, xd := randn(in*out), randn(out), randn(in*tokens)

	// compute builds y = GELU(norm(W·x + b)) with W and b in a buffer of
	// weightDev and runs it on backends (through the scheduler when there
	// are several).
	compute := func(weightDev ggml.Device, backends ...*ggml.Backend) []float32 {
		wctx, err := ggml.NewContext(2)
		require.NoError(t, err)
		defer wctx.Close()
		w := wctx.NewTensor(ggml.TypeF32, in, out).SetName("w")
		b := wctx.NewTensor(ggml.TypeF32, out).SetName("b")
		buf, err := wctx.AllocTensors(weightDev.BufferType(), ggml.UsageWeights)
		require.NoError(t, err)
		defer buf.Close()
		require.NoError(t, w.SetFloat32s(wd))
		require.NoError(t, b.SetFloat32s(bd))

		g, err := ggml.NewContext(16)
		require.NoError(t, err)
		defer g.Close()
		x := g.Input(g.NewTensor(ggml.TypeF32, in, tokens)).SetName("x")
		y := g.Output(w.MulMat(g, x).Add(g, b).Norm(g, 1e-6).GELUErf(g).SetName("y"))
		g.Expand(y)
		if len(backends) == 1 {
			gbuf, err := g.AllocTensors(backends[0].Device().BufferType(), ggml.UsageCompute)
			require.NoError(t, err)
			defer gbuf.Close()
			require.NoError(t, x.SetFloat32s(xd))
			require.NoError(t, backends[0].Compute(g))
		} else {
			s, err := ggml.NewScheduler(backends, 64)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Alloc(g))
			require.NoError(t, x.SetFloat32s(xd))
			require.NoError(t, s.Compute(g))
			assert.Same(t, backends[0], s.BackendOf(y), "the first backend runs what it supports")
		}
		got, err := y.Float32s()
		require.NoError(t, err)
		return got
	}

	bi, err := builtin.NewBackend()
	require.NoError(t, err)
	defer bi.Close()
	db, err := dyn.NewBackend()
	require.NoError(t, err)
	defer db.Close()
	for _, be := range []*ggml.Backend{bi, db} {
		ok, err := be.SetThreads(runtime.NumCPU())
		require.NoError(t, err)
		assert.True(t, ok, "%s exports ggml_backend_set_n_threads", be.Name())
	}

	ref := compute(builtin, bi)
	require.Len(t, ref, out*tokens)
	for _, v := range ref {
		require.False(t, math.IsNaN(float64(v)))
	}
	// The two builds may differ in SIMD width and so in summation order: f32
	// rounding of 96-term dot products, not an algorithmic difference.
	alone := compute(dyn, db)
	testutil.AllClose(t, ref, alone, 1e-5, 1e-5, "dynamic CPU backend alone")
	sched := compute(dyn, db, bi)
	testutil.AllClose(t, ref, sched, 1e-5, 1e-5, "dynamic CPU backend under the scheduler")
	t.Logf("dynamic CPU device computed %d values like the built-in one (%s from %s)", len(alone), dyn.Description(), dir)
}

// A folder whose backend libraries were all loaded from another folder is
// not loaded again (every device would be listed twice); one with a backend
// of its own is.
func TestLoadedElsewhere(t *testing.T) {
	loaded := map[string]string{"libggml-cuda.so": "/opt/a"}
	from, dup := loadedElsewhere([]string{"/b/libggml-base.so", "/b/libggml-cuda.so"}, loaded)
	assert.True(t, dup)
	assert.Equal(t, "/opt/a", from)
	_, dup = loadedElsewhere([]string{"/b/libggml-base.so", "/b/libggml-cuda.so", "/b/libggml-vulkan.so"}, loaded)
	assert.False(t, dup, "a folder with a backend of its own")
	_, dup = loadedElsewhere([]string{"/b/libggml-base.so"}, loaded)
	assert.False(t, dup, "no backend library at all")
	_, dup = loadedElsewhere([]string{"/b/libggml-cuda.so"}, nil)
	assert.False(t, dup)
}
