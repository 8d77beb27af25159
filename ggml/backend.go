package ggml

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "da3_ggml.h"
#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

extern void da3GoLog(int level, char *text, void *user_data);

// Loaded backends link their own libggml-base.so (this binary's copy is
// static and its symbols are not exported), whose log sink prints to stderr:
// point it at ours. name is a library's soname or path. With preload the
// library is loaded (and stays loaded, for the backends that need it) so that
// what backends log while they initialise is forwarded too; otherwise only an
// already loaded one is used. On Windows the same with LoadLibrary (preload)
// or GetModuleHandle (already loaded, no reference taken).
typedef void (*da3_log_set_t)(ggml_log_callback, void *);
static int da3_forward_log(const char *name, int preload) {
#ifdef _WIN32
    HMODULE h = preload ? LoadLibraryA(name) : GetModuleHandleA(name);
    if (h == NULL) return 0;
    int ok = 0;
    da3_log_set_t fn = (da3_log_set_t) (void (*)(void)) GetProcAddress(h, "ggml_log_set");
    if (fn != NULL && fn != (da3_log_set_t) ggml_log_set) {
        fn((ggml_log_callback) da3GoLog, NULL);
        ok = 1;
    }
    if (preload && !ok) FreeLibrary(h);
    return ok;
#else
    void *h = dlopen(name, RTLD_NOW | (preload ? RTLD_LOCAL : RTLD_NOLOAD));
    if (h == NULL) return 0;
    int ok = 0;
    da3_log_set_t fn = (da3_log_set_t) dlsym(h, "ggml_log_set");
    if (fn != NULL && fn != (da3_log_set_t) ggml_log_set) {
        fn((ggml_log_callback) da3GoLog, NULL);
        ok = 1;
    }
    if (!preload || !ok) dlclose(h);
    return ok;
#endif
}

typedef void (*da3_set_threads_t)(ggml_backend_t, int);
static int da3_set_n_threads(ggml_backend_t b, int n) {
    ggml_backend_dev_t dev = ggml_backend_get_device(b);
    if (dev == NULL) return 0;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    if (reg == NULL) return 0;
    da3_set_threads_t fn = (da3_set_threads_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (fn == NULL) return 0;
    fn(b, n);
    return 1;
}

// A CPU backend computes every graph on a thread pool of its own, kept for
// the backend's life: without one, ggml starts and joins a pool of threads
// per graph, and the kernels' per-thread scratch buffers (da3_scratch,
// freed when their thread ends) are allocated and faulted in again every
// run. poll 0: between graphs the workers sleep on the pool's condition
// variable instead of spinning. Only the CPU registry has it (its
// set_threadpool asserts a CPU backend); other CPU-like backends (BLAS) keep
// ggml's per-graph threads.
typedef struct ggml_threadpool * (*da3_tp_new_t)(struct ggml_threadpool_params *);
typedef void (*da3_tp_free_t)(struct ggml_threadpool *);
typedef void (*da3_tp_set_t)(ggml_backend_t, struct ggml_threadpool *);
static ggml_backend_reg_t da3_cpu_reg(ggml_backend_t b) {
    ggml_backend_dev_t dev = ggml_backend_get_device(b);
    if (dev == NULL || ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU) return NULL;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    if (reg == NULL || strcmp(ggml_backend_reg_name(reg), "CPU") != 0) return NULL;
    return reg;
}
// da3_set_pool gives b a new pool of n threads and returns it (NULL where
// b is not of the CPU registry, or the pool cannot be made); a pool b had
// before is then unused and must be freed.
static void * da3_set_pool(ggml_backend_t b, int n) {
    ggml_backend_reg_t reg = da3_cpu_reg(b);
    if (reg == NULL) return NULL;
    da3_tp_new_t mk = (da3_tp_new_t) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    da3_tp_set_t set = (da3_tp_set_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_threadpool");
    da3_tp_free_t fr = (da3_tp_free_t) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    if (mk == NULL || set == NULL || fr == NULL) return NULL;
    struct ggml_threadpool_params p;
    ggml_threadpool_params_init(&p, n);
    p.poll = 0;
    struct ggml_threadpool * tp = mk(&p);
    set(b, tp); // NULL: ggml's per-graph threads again
    return tp;
}
// da3_free_pool frees a pool da3_set_pool made for a backend of the CPU
// registry, once no backend uses it (after ggml_backend_free, or after
// another pool took its place).
static void da3_free_pool(void * tp) {
    if (tp == NULL) return;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    da3_tp_free_t fr = reg == NULL ? NULL : (da3_tp_free_t) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    if (fr != NULL) fr((struct ggml_threadpool *) tp);
}

// The abort callback ggml's CPU backend calls after every node (from one
// thread): it counts the node and reads a flag in C memory that Go sets
// (atomically) to stop a graph. The flag comes first, so custom kernels
// poll the same address as an int.
typedef struct {
    int flag;
    long long nodes; // nodes computed since the last reset
} da3_abort_state;
static bool da3_abort_cb(void * data) {
    da3_abort_state * s = (da3_abort_state *) data;
    __atomic_fetch_add(&s->nodes, 1, __ATOMIC_RELAXED);
    return __atomic_load_n(&s->flag, __ATOMIC_RELAXED) != 0;
}
static long long da3_abort_nodes(int * flag, int reset) {
    da3_abort_state * s = (da3_abort_state *) flag;
    return reset ? __atomic_exchange_n(&s->nodes, 0, __ATOMIC_RELAXED) : __atomic_load_n(&s->nodes, __ATOMIC_RELAXED);
}
typedef void (*da3_set_abort_t)(ggml_backend_t, ggml_abort_callback, void *);
static int da3_set_abort(ggml_backend_t b, int * flag) {
    ggml_backend_dev_t dev = ggml_backend_get_device(b);
    if (dev == NULL) return 0;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    if (reg == NULL) return 0;
    da3_set_abort_t fn = (da3_set_abort_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_abort_callback");
    if (fn == NULL) return 0;
    fn(b, da3_abort_cb, flag);
    return 1;
}
static void da3_store_flag(int * flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELAXED); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// DeviceType mirrors enum ggml_backend_dev_type.
type DeviceType int

const (
	DeviceCPU   DeviceType = C.GGML_BACKEND_DEVICE_TYPE_CPU
	DeviceGPU   DeviceType = C.GGML_BACKEND_DEVICE_TYPE_GPU
	DeviceIGPU  DeviceType = C.GGML_BACKEND_DEVICE_TYPE_IGPU
	DeviceAccel DeviceType = C.GGML_BACKEND_DEVICE_TYPE_ACCEL
)

func (t DeviceType) String() string {
	switch t {
	case DeviceCPU:
		return "CPU"
	case DeviceGPU:
		return "GPU"
	case DeviceIGPU:
		return "iGPU"
	case DeviceAccel:
		return "accelerator"
	}
	return fmt.Sprintf("DeviceType(%d)", int(t))
}

// Device is a ggml backend device (ggml_backend_dev_t) from the registry.
// Devices are process-global and never freed.
type Device struct{ d C.ggml_backend_dev_t }

// Devices lists the registered devices (ggml_backend_dev_count/get): the CPU
// always, plus those of backends loaded with LoadBackends.
func Devices() []Device {
	n := int(C.ggml_backend_dev_count())
	ds := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		ds = append(ds, Device{C.ggml_backend_dev_get(C.size_t(i))})
	}
	return ds
}

// ErrNoDevice reports that no device matched a name.
var ErrNoDevice = errors.New("no such device")

// DeviceByName finds a device by name, case-insensitively ("CPU", "CUDA0").
func DeviceByName(name string) (Device, error) {
	var names []string
	for _, d := range Devices() {
		if strings.EqualFold(d.Name(), name) {
			return d, nil
		}
		names = append(names, d.Name())
	}
	return Device{}, fmt.Errorf("device %q: %w (have %s)", name, ErrNoDevice, strings.Join(names, ", "))
}

// CPUDevice returns the CPU device, which is always registered.
func CPUDevice() Device {
	for _, d := range Devices() {
		if d.Type() == DeviceCPU {
			return d
		}
	}
	panic("ggml: no CPU device registered")
}

// Name is ggml_backend_dev_name.
func (d Device) Name() string { return C.GoString(C.ggml_backend_dev_name(d.d)) }

// Description is ggml_backend_dev_description.
func (d Device) Description() string { return C.GoString(C.ggml_backend_dev_description(d.d)) }

// Type is ggml_backend_dev_type.
func (d Device) Type() DeviceType { return DeviceType(C.ggml_backend_dev_type(d.d)) }

// Memory is ggml_backend_dev_memory: free and total bytes.
func (d Device) Memory() (free, total uint64) {
	var f, t C.size_t
	C.ggml_backend_dev_memory(d.d, &f, &t)
	return uint64(f), uint64(t)
}

// Backend is the name of the backend (registry) the device belongs to.
func (d Device) Backend() string {
	r := C.ggml_backend_dev_backend_reg(d.d)
	if r == nil {
		return ""
	}
	return C.GoString(C.ggml_backend_reg_name(r))
}

// BufferType is the device's default buffer type.
func (d Device) BufferType() BufferType { return BufferType{C.ggml_backend_dev_buffer_type(d.d)} }

// HostBufferType is the device's pinned host buffer type, if it has one.
func (d Device) HostBufferType() (BufferType, bool) {
	b := C.ggml_backend_dev_host_buffer_type(d.d)
	return BufferType{b}, b != nil
}

// SupportsOp reports whether the device can compute node t (ggml_backend_dev_supports_op).
func (d Device) SupportsOp(t *Tensor) bool {
	notNil("supports_op", t)
	return bool(C.ggml_backend_dev_supports_op(d.d, t.p))
}

// NewBackend initialises a backend (stream) on the device (ggml_backend_dev_init).
func (d Device) NewBackend() (*Backend, error) {
	b := C.ggml_backend_dev_init(d.d, nil)
	if b == nil {
		return nil, fmt.Errorf("ggml: initialising backend on %s failed", d.Name())
	}
	return &Backend{b: b, dev: d}, nil
}

var loadMu sync.Mutex
var loadedDirs = map[string]bool{}

// LoadBackends loads every dynamic backend library (libggml-*.so) in dir
// (ggml_backend_load_all_from_path) once per directory, and returns the
// devices added. A missing directory is not an error; a relative one is (it
// would be looked for in the working directory). It does not check the
// libraries' ggml version: backend.LoadBackends does, before calling this.
func LoadBackends(dir string) ([]Device, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("ggml: backend folder %q is not an absolute path", dir)
	}
	abs := filepath.Clean(dir)
	loadMu.Lock()
	defer loadMu.Unlock()
	if loadedDirs[abs] {
		return nil, nil
	}
	loadedDirs[abs] = true
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, nil
	}
	before := map[C.ggml_backend_dev_t]bool{}
	for _, d := range Devices() {
		before[d.d] = true
	}
	// The backends' libggml-base.so is found next to them (RUNPATH $ORIGIN):
	// load it first to forward its log from the start.
	forwarded := false
	for _, name := range []string{"libggml-base.so.0", "libggml-base.so"} {
		p := filepath.Join(abs, name)
		if _, err := os.Stat(p); err == nil && forwardLog(p, true) {
			forwarded = true
			break
		}
	}
	cs := C.CString(abs)
	defer C.free(unsafe.Pointer(cs))
	C.ggml_backend_load_all_from_path(cs)
	// The registry keeps devices sorted by backend score, so new ones are not
	// necessarily at the end.
	var added []Device
	for _, d := range Devices() {
		if !before[d.d] {
			added = append(added, d)
		}
	}
	if len(added) > 0 && !forwarded {
		forwardLoaded(abs)
	}
	return added, nil
}

// forwardLog points the log of the libggml-base.so named (a path, or a
// soname when already loaded) at the Go side (SetLogger), as init does for the static copy.
func forwardLog(name string, preload bool) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.int(0)
	if preload {
		p = 1
	}
	return C.da3_forward_log(cs, p) != 0
}

// forwardLoaded forwards the log of the libggml-base.so that backends loaded
// from dir bound to, if one is loaded.
func forwardLoaded(dir string) {
	for _, name := range []string{"libggml-base.so.0", filepath.Join(dir, "libggml-base.so")} {
		if forwardLog(name, false) {
			return
		}
	}
}

// LoadBackend loads one dynamic backend library (ggml_backend_load).
func LoadBackend(path string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if C.ggml_backend_load(cs) == nil {
		return fmt.Errorf("ggml: loading backend %s failed (see the log; a backend built from another ggml version is refused)", path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		forwardLoaded(filepath.Dir(abs))
	}
	return nil
}

// Backend is an initialised ggml_backend_t. Close it when done.
type Backend struct {
	b       C.ggml_backend_t
	dev     Device
	abort   *C.int         // the flag of the abort callback (C memory), nil without one
	pool    unsafe.Pointer // the CPU backend's thread pool (SetThreads), nil without one
	poolLen int            // its threads
}

// Name is ggml_backend_name.
func (b *Backend) Name() string {
	if b == nil || b.b == nil {
		return "closed"
	}
	return C.GoString(C.ggml_backend_name(b.b))
}

// Device is the device the backend runs on.
func (b *Backend) Device() Device { return b.dev }

// SetThreads sets the thread count of a CPU-like backend (through the
// registry's ggml_backend_set_n_threads). It reports whether the backend
// supports it. The CPU backend then computes on a pool of that many threads
// kept until Close (ggml would otherwise start and join threads for every
// graph); they sleep between graphs.
func (b *Backend) SetThreads(n int) (bool, error) {
	if b == nil || b.b == nil {
		return false, ErrClosed
	}
	if n < 1 {
		return false, fmt.Errorf("ggml: thread count %d must be positive", n)
	}
	if C.da3_set_n_threads(b.b, C.int(n)) == 0 {
		return false, nil
	}
	if b.pool == nil || b.poolLen != n {
		tp := C.da3_set_pool(b.b, C.int(n))
		C.da3_free_pool(b.pool)
		b.pool, b.poolLen = tp, n
	}
	return true, nil
}

// EnableAbort installs an abort callback (through the registry's
// ggml_backend_set_abort_callback; the CPU backend checks it after every
// node) so that Abort can stop a running graph, whose compute then returns
// a StatusError with StatusAborted. It reports whether the backend supports
// it.
func (b *Backend) EnableAbort() (bool, error) {
	if b == nil || b.b == nil {
		return false, ErrClosed
	}
	if b.abort != nil {
		return true, nil
	}
	flag := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.da3_abort_state{}))))
	if flag == nil {
		return false, ErrOutOfMemory
	}
	if C.da3_set_abort(b.b, flag) == 0 {
		C.free(unsafe.Pointer(flag))
		return false, nil
	}
	b.abort = flag
	return true, nil
}

// Abort asks the graph running on b (or the next one) to stop; ClearAbort
// lets graphs run again. Both are safe to call from any goroutine while a
// graph computes; they do nothing without EnableAbort.
func (b *Backend) Abort() {
	if b != nil && b.abort != nil {
		C.da3_store_flag(b.abort, 1)
	}
}

// SetAbort makes the custom nodes built in g from now on carry b's abort
// flag (nil: none), so that kernels which poll it (ggml/kernels) stop
// within a block of work when b.Abort is called, not at the end of the
// node. b must outlive g's graph computations.
func (g *Context) SetAbort(b *Backend) {
	if b == nil {
		g.abort = nil
		return
	}
	g.abort = b.abort
}

// ClearAbort resets the flag Abort set.
func (b *Backend) ClearAbort() {
	if b != nil && b.abort != nil {
		C.da3_store_flag(b.abort, 0)
	}
}

// NodesDone is the number of graph nodes the backend has computed since
// the last ResetNodes, counted by the abort callback (so 0 without
// EnableAbort, or on backends that have no abort callback). Safe to call
// from any goroutine while a graph computes: it is a progress measure.
func (b *Backend) NodesDone() int64 {
	if b == nil || b.abort == nil {
		return 0
	}
	return int64(C.da3_abort_nodes(b.abort, 0))
}

// ResetNodes sets the NodesDone count back to 0.
func (b *Backend) ResetNodes() {
	if b != nil && b.abort != nil {
		C.da3_abort_nodes(b.abort, 1)
	}
}

// Compute runs g's graph on this backend alone (ggml_backend_graph_compute).
// All tensors of the graph must already be allocated in buffers this backend
// can use.
func (b *Backend) Compute(g *Context) error {
	if b == nil || b.b == nil {
		return ErrClosed
	}
	if g.Closed() {
		return fmt.Errorf("ggml: compute: %w context", ErrClosed)
	}
	if g.gf == nil {
		return errors.New("ggml: compute: the context has no graph (expand one first)")
	}
	if err := b.checkGraph(g); err != nil {
		return err
	}
	if st := C.ggml_backend_graph_compute(b.b, g.gf); st != C.GGML_STATUS_SUCCESS {
		return &StatusError{Op: "compute", Status: int(st)}
	}
	return nil
}

// checkGraph reports nodes or operands that have no data, or whose data is in
// a buffer the backend cannot use: computing them would crash.
func (b *Backend) checkGraph(g *Context) error {
	n := int(C.ggml_graph_n_nodes(g.gf))
	for i := 0; i < n; i++ {
		node := C.ggml_graph_node(g.gf, C.int(i))
		ts := []*C.struct_ggml_tensor{node}
		for j := 0; j < C.GGML_MAX_SRC; j++ {
			if node.src[j] != nil {
				ts = append(ts, node.src[j])
			}
		}
		for _, p := range ts {
			t := &Tensor{p: p}
			if p.data == nil && C.ggml_nelements(p) > 0 {
				return fmt.Errorf("ggml: compute: tensor %q (%s) %w", t.Name(), t.Op(), errNoBuffer)
			}
			buf := p.buffer
			if p.view_src != nil && p.view_src.buffer != nil {
				buf = p.view_src.buffer
			}
			if buf != nil && !C.ggml_backend_supports_buft(b.b, C.ggml_backend_buffer_get_type(buf)) {
				return fmt.Errorf("ggml: compute: tensor %q is in a %s buffer, which backend %s cannot use", t.Name(), C.GoString(C.ggml_backend_buffer_name(buf)), b.Name())
			}
		}
	}
	return nil
}

// Close frees the backend. Idempotent and nil-safe.
func (b *Backend) Close() error {
	if b == nil || b.b == nil {
		return nil
	}
	C.ggml_backend_free(b.b)
	b.b = nil
	C.da3_free_pool(b.pool)
	b.pool = nil
	if b.abort != nil {
		C.free(unsafe.Pointer(b.abort))
		b.abort = nil
	}
	return nil
}

// BufferType is a ggml_backend_buffer_type_t (device memory kind).
type BufferType struct{ t C.ggml_backend_buffer_type_t }

// Name is ggml_backend_buft_name.
func (bt BufferType) Name() string {
	if bt.t == nil {
		return "none"
	}
	return C.GoString(C.ggml_backend_buft_name(bt.t))
}

// IsHost reports whether buffers of this type are in host memory.
func (bt BufferType) IsHost() bool { return bt.t != nil && bool(C.ggml_backend_buft_is_host(bt.t)) }

// Buffer is a backend buffer holding tensor data. Close it when done.
type Buffer struct {
	b C.ggml_backend_buffer_t
	// The context whose tensors were allocated in the buffer, and those
	// tensors: Close detaches them so that later data transfers return an
	// error instead of touching freed memory.
	ctx     *Context
	tensors []*C.struct_ggml_tensor
}

// BufferUsage tells a backend what a buffer holds.
type BufferUsage int

const (
	UsageAny     BufferUsage = C.GGML_BACKEND_BUFFER_USAGE_ANY
	UsageWeights BufferUsage = C.GGML_BACKEND_BUFFER_USAGE_WEIGHTS
	UsageCompute BufferUsage = C.GGML_BACKEND_BUFFER_USAGE_COMPUTE
)

// AllocTensors allocates every tensor of g in one buffer of type bt
// (ggml_backend_alloc_ctx_tensors_from_buft). An empty context yields an empty
// buffer (nil, nil is never returned).
func (g *Context) AllocTensors(bt BufferType, usage BufferUsage) (*Buffer, error) {
	if g.Closed() {
		return nil, ErrClosed
	}
	if bt.t == nil {
		return nil, errors.New("ggml: allocating tensors: no buffer type given")
	}
	if g.tensors == 0 {
		return &Buffer{}, nil
	}
	var need C.size_t
	var fresh []*C.struct_ggml_tensor
	for p := C.ggml_get_first_tensor(g.c); p != nil; p = C.ggml_get_next_tensor(g.c, p) {
		if p.data == nil && p.buffer == nil {
			need += C.ggml_backend_buft_get_alloc_size(bt.t, p)
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		return &Buffer{}, nil
	}
	b := C.ggml_backend_alloc_ctx_tensors_from_buft(g.c, bt.t)
	if b == nil {
		return nil, fmt.Errorf("ggml: allocating %d tensors (%.1f MiB) on %s: %w", len(fresh), float64(need)/(1<<20), bt.Name(), ErrOutOfMemory)
	}
	C.ggml_backend_buffer_set_usage(b, C.enum_ggml_backend_buffer_usage(usage))
	return &Buffer{b: b, ctx: g, tensors: fresh}, nil
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 {
	if b == nil || b.b == nil {
		return 0
	}
	return uint64(C.ggml_backend_buffer_get_size(b.b))
}

// Name is the buffer's name (its buffer type).
func (b *Buffer) Name() string {
	if b == nil || b.b == nil {
		return "none"
	}
	return C.GoString(C.ggml_backend_buffer_name(b.b))
}

// Close frees the buffer; tensors allocated in it lose their data (their
// data transfers then fail). Idempotent and nil-safe.
func (b *Buffer) Close() error {
	if b == nil || b.b == nil {
		return nil
	}
	if !b.ctx.Closed() {
		for _, p := range b.tensors {
			p.buffer, p.data = nil, nil
		}
		// Views of the detached tensors (allocated with them) lose their data too.
		for p := C.ggml_get_first_tensor(b.ctx.c); p != nil; p = C.ggml_get_next_tensor(b.ctx.c, p) {
			if p.view_src != nil && p.view_src.buffer == nil {
				p.buffer, p.data = nil, nil
			}
		}
	}
	C.ggml_backend_buffer_free(b.b)
	b.b, b.ctx, b.tensors = nil, nil, nil
	return nil
}

// NewCPUBufferFromMemory wraps size bytes at ptr as a CPU backend buffer
// without copying (ggml_backend_cpu_buffer_from_ptr), for tensors whose data
// already sits in memory, such as a memory-mapped model file. ptr must be
// 32-byte aligned, must not point into Go-managed memory, and must stay valid
// and unchanged until the buffer is closed. Place tensors in it with Place.
func NewCPUBufferFromMemory(ptr unsafe.Pointer, size int) (*Buffer, error) {
	if ptr == nil || size <= 0 {
		return nil, errors.New("ggml: CPU buffer over caller memory: empty memory")
	}
	if uintptr(ptr)%32 != 0 {
		return nil, fmt.Errorf("ggml: CPU buffer over caller memory: address %#x is not 32-byte aligned", uintptr(ptr))
	}
	b := C.ggml_backend_cpu_buffer_from_ptr(ptr, C.size_t(size))
	if b == nil {
		return nil, fmt.Errorf("ggml: wrapping %d bytes as a CPU buffer: %w", size, ErrOutOfMemory)
	}
	C.ggml_backend_buffer_set_usage(b, C.GGML_BACKEND_BUFFER_USAGE_WEIGHTS)
	return &Buffer{b: b}, nil
}

// Place gives t (an unallocated tensor) the data at byte offset in the buffer
// (ggml_backend_tensor_alloc). The data must lie inside the buffer and be
// aligned to the tensor type's size.
func (b *Buffer) Place(t *Tensor, offset int) error {
	if b == nil || b.b == nil {
		return ErrClosed
	}
	if t == nil || t.p == nil {
		return errors.New("ggml: placing a tensor in a buffer: nil tensor")
	}
	if t.p.data != nil || t.p.buffer != nil {
		return fmt.Errorf("ggml: placing tensor %q in a buffer: it is already allocated", t.Name())
	}
	size := int(C.ggml_backend_buffer_get_alloc_size(b.b, t.p))
	if offset < 0 || offset+size > int(C.ggml_backend_buffer_get_size(b.b)) {
		return fmt.Errorf("ggml: placing tensor %q in a buffer: %d bytes at %d are outside the %d-byte buffer", t.Name(), size, offset, b.Size())
	}
	addr := unsafe.Add(C.ggml_backend_buffer_get_base(b.b), offset)
	if uintptr(addr)%4 != 0 {
		return fmt.Errorf("ggml: placing tensor %q in a buffer: its data at %p is misaligned", t.Name(), addr)
	}
	if st := C.ggml_backend_tensor_alloc(b.b, t.p, addr); st != C.GGML_STATUS_SUCCESS {
		return &StatusError{Op: "tensor_alloc", Status: int(st)}
	}
	if b.ctx == nil {
		b.ctx = t.ctx
	}
	b.tensors = append(b.tensors, t.p)
	return nil
}
