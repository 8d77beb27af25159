package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/loader"
)

// Weights are a model's tensors uploaded once to the runtime's device. They
// stay valid until Close.
type Weights struct {
	file   *loader.File // kept open while the CPU reads weights from its memory map
	ctx    *ggml.Context
	buf    *ggml.Buffer
	byName map[string]*ggml.Tensor
	names  []string
	bytes  uint64
	packed *kernels.PackedSet // Pack
}

// Pack packs the named F32 matrices [K, N] (and Q8_0 ones, for int8
// products) once for the CPU products of
// graphs with policy pol (kernels.PackWeights: the GEMM then reads their
// panels in place instead of packing them on every call; the same values),
// when the weights are read from the file's memory map (else it does
// nothing). The pages of the file that held them are handed back to the
// kernel (madvise), so the packed copies do not add to the resident memory;
// should a graph still read a weight itself, its pages come back from the
// file. Pass the result of Packed to Runtime.UsePacked.
func (w *Weights) Pack(pol kernels.Policy, names []string) error {
	if w == nil || w.file == nil || w.packed != nil || !pol.GEMM {
		return nil
	}
	var ts []*ggml.Tensor
	for _, n := range names {
		if t := w.byName[n]; t != nil {
			ts = append(ts, t)
		}
	}
	// Each weight is read in place from the map and its pages dropped as soon as it is packed, so the
	// resident memory does not hold both forms of all of them at once.
	mapped := func(t *ggml.Tensor) ([]byte, error) {
		data, err := w.file.TensorData(t.Name())
		if err == nil && len(data) < t.Bytes() {
			err = fmt.Errorf("weight %s: %d bytes mapped, want %d", t.Name(), len(data), t.Bytes())
		}
		return data, err
	}
	set, err := kernels.PackWeights(pol, ts, func(t *ggml.Tensor) ([]byte, error) {
		data, err := mapped(t)
		if err != nil {
			return nil, err
		}
		return data[:t.Bytes()], nil
	}, w.dropMapped)
	if err != nil {
		return err
	}
	w.packed = set
	return nil
}

// CacheKernelTransforms makes the runtime's later runs keep the Winograd
// transforms of w's 3×3 convolution kernels from one run to the next
// (kernels.WinogradCache): the first run that convolves with a kernel
// computes its transform, later runs read it, and the file pages of the
// kernel are handed back where the weights are read from the file's memory
// map (as Pack does). The memory the transforms take is WinogradBytes. CPU
// runtimes only (elsewhere it does nothing); w must stay open and unchanged
// while the runtime runs graphs that use it.
func (rt *Runtime) CacheKernelTransforms(w *Weights) {
	if w == nil || !rt.IsCPU() {
		return
	}
	keep := map[*ggml.Tensor]bool{}
	bound := 0
	for _, t := range w.byName {
		if t.Dim(0) == 3 && t.Dim(1) == 3 && t.Type() == ggml.TypeF32 {
			keep[t] = true
			bound += kernels.WinogradTransformBound(t, rt.kernels.Variant)
		}
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed || rt.wino != nil {
		return
	}
	rt.wino = kernels.NewWinogradCache(func(t *ggml.Tensor) bool { return keep[t] }, w.dropMapped)
	rt.winoBound = bound
}

// WinogradPending bounds the memory the runtime's Winograd transforms may
// still take (CacheKernelTransforms): the most they can come to, less what
// they take now. The first runs store them; a request's memory check counts
// them.
func (rt *Runtime) WinogradPending() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return max(0, rt.winoBound-rt.wino.Bytes())
}

// WinogradBytes is the memory the runtime's stored Winograd transforms take
// (CacheKernelTransforms).
func (rt *Runtime) WinogradBytes() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.wino.Bytes()
}

// dropMapped hands the pages of the file that hold weight t (whole pages
// inside it) back to the kernel (madvise), when the weights are read from
// the file's memory map: they come back from the file if read again.
func (w *Weights) dropMapped(t *ggml.Tensor) {
	if w.file == nil {
		return
	}
	data, err := w.file.TensorData(t.Name())
	if err != nil || len(data) < t.Bytes() || len(data) == 0 {
		return
	}
	data = data[:t.Bytes()]
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(&data[0]))
	lo, hi := (p+page-1)&^(page-1), (p+uintptr(len(data)))&^(page-1) // whole pages inside the tensor
	if hi > lo {
		dropPages(data[lo-p : hi-p])
	}
}

// Packed is what Pack packed (nil if nothing).
func (w *Weights) Packed() map[*ggml.Tensor]*kernels.PackedWeight { return w.packed.Weights() }

// PackedBytes is the memory the packed weights take.
func (w *Weights) PackedBytes() int { return w.packed.Bytes() }

// UploadWeights creates every tensor of f on the runtime's device and copies
// its data there. keep, when non-nil, selects the tensors to upload.
// progress (optional) is called with bytes done and total.
func (rt *Runtime) UploadWeights(ctx context.Context, f *loader.File, keep func(name string) bool, progress func(done, total int64), opts ...UploadOption) (*Weights, error) {
	var o uploadOptions
	for _, opt := range opts {
		opt(&o)
	}
	rt.mu.Lock()
	closed := rt.closed
	rt.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	var infos []loader.TensorInfo
	var total int64
	for _, ti := range f.Tensors() {
		if keep != nil && !keep(ti.Name) {
			continue
		}
		infos = append(infos, ti)
		total += int64(ti.Size)
	}
	g, err := ggml.NewContext(len(infos) + 1)
	if err != nil {
		return nil, err
	}
	w := &Weights{ctx: g, byName: make(map[string]*ggml.Tensor, len(infos))}
	for _, ti := range infos {
		t, err := newWeightTensor(g, ti)
		if err != nil {
			g.Close()
			return nil, err
		}
		t.SetName(ti.Name)
		w.byName[ti.Name] = t
		w.names = append(w.names, ti.Name)
	}
	if rt.IsCPU() && f.Mapped() && !o.copy {
		// Zero copy: the CPU reads the weights straight from the file's
		// read-only memory map, which then must stay open.
		if err := w.mapCPU(f, infos); err == nil {
			w.file = f
			if progress != nil {
				progress(total, total)
			}
			return w, nil
		} else {
			rt.log.Debug("zero-copy weights unavailable, copying", "err", err)
			g.Close()
			return rt.UploadWeights(ctx, f, keep, progress, copyWeights)
		}
	}
	w.buf, err = g.AllocTensors(rt.dev.BufferType(), ggml.UsageWeights)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("uploading %d weights (%.1f MiB) to %s: %w; try a quantized model or the CPU device", len(infos), float64(total)/(1<<20), rt.dev.Name(), err)
	}
	var done int64
	for _, ti := range infos {
		if err := ctx.Err(); err != nil {
			w.Close()
			return nil, err
		}
		data, err := f.TensorData(ti.Name)
		if err != nil {
			w.Close()
			return nil, err
		}
		if err := w.byName[ti.Name].SetBytes(data); err != nil {
			w.Close()
			return nil, fmt.Errorf("tensor %q: %w", ti.Name, err)
		}
		done += int64(len(data))
		w.bytes += uint64(len(data))
		if progress != nil {
			progress(done, total)
		}
	}
	return w, nil
}

func newWeightTensor(g *ggml.Context, ti loader.TensorInfo) (t *ggml.Tensor, err error) {
	typ := ggml.Type(ti.Type)
	if !typ.Valid() {
		return nil, fmt.Errorf("tensor %q: unsupported type %d", ti.Name, ti.Type)
	}
	if len(ti.Shape) == 0 || len(ti.Shape) > 4 {
		return nil, fmt.Errorf("tensor %q: %d dims (1 to 4 supported)", ti.Name, len(ti.Shape))
	}
	shape := make([]int, len(ti.Shape))
	for i, d := range ti.Shape {
		if d > 1<<40 {
			return nil, fmt.Errorf("tensor %q: dimension %d too large", ti.Name, d)
		}
		shape[i] = int(d)
	}
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*ggml.ShapeError); ok {
				err = fmt.Errorf("tensor %q: %w", ti.Name, se)
				return
			}
			panic(r)
		}
	}()
	return g.NewTensor(typ, shape...), nil
}

// Tensor returns the weight named name, or nil.
func (w *Weights) Tensor(name string) *ggml.Tensor {
	if w == nil || w.byName == nil {
		return nil
	}
	return w.byName[name]
}

// Names lists the weights in file order.
func (w *Weights) Names() []string { return w.names }

// WeightBuffer is where a weight's data lives.
type WeightBuffer struct {
	Name string // the buffer's name (its type's): "CPU", "Vulkan0", "CUDA0"…
	Host bool   // in host memory
}

// Buffers maps every weight's name to the buffer holding its data.
func (w *Weights) Buffers() map[string]WeightBuffer {
	out := make(map[string]WeightBuffer, len(w.byName))
	for name, t := range w.byName {
		out[name] = WeightBuffer{Name: t.BufferName(), Host: t.InHostBuffer()}
	}
	return out
}

// Bytes is the weights' total size in bytes.
func (w *Weights) Bytes() uint64 { return w.bytes }

// BufferName is the name of the buffer holding the weights.
func (w *Weights) BufferName() string { return w.buf.Name() }

// Close frees the weight buffer and context. Idempotent.
func (w *Weights) Close() error {
	if w == nil {
		return nil
	}
	var ferr error
	if w.file != nil {
		ferr = w.file.Close()
	}
	err := errors.Join(w.packed.Close(), w.buf.Close(), w.ctx.Close(), ferr)
	w.buf, w.ctx, w.byName, w.file, w.packed = nil, nil, nil, nil, nil
	return err
}

// UploadOption modifies UploadWeights.
type UploadOption func(*uploadOptions)

type uploadOptions struct{ copy bool }

// copyWeights forces a copy into a device buffer even where the CPU could read
// the file's memory map directly.
func copyWeights(o *uploadOptions) { o.copy = true }

// CopyWeights makes UploadWeights copy the weights into an allocated buffer
// instead of reading them from the file's memory map (zero copy, CPU only).
func CopyWeights() UploadOption { return copyWeights }

// mapCPU places every tensor at its data in the file's memory map.
func (w *Weights) mapCPU(f *loader.File, infos []loader.TensorInfo) error {
	if len(infos) == 0 {
		return errors.New("no tensors")
	}
	var lo, hi uintptr
	ptrs := make([]uintptr, len(infos))
	for i, ti := range infos {
		data, err := f.TensorData(ti.Name)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return fmt.Errorf("tensor %q is empty", ti.Name)
		}
		p := uintptr(unsafe.Pointer(&data[0]))
		ptrs[i] = p
		if i == 0 || p < lo {
			lo = p
		}
		if e := p + uintptr(len(data)); e > hi {
			hi = e
		}
	}
	lo &^= 31 // the mapping is page aligned and tensor data 32-byte aligned in GGUF
	base, err := f.TensorData(infos[0].Name)
	if err != nil {
		return err
	}
	start := unsafe.Add(unsafe.Pointer(&base[0]), -int(ptrs[0]-lo))
	buf, err := ggml.NewCPUBufferFromMemory(start, int(hi-lo))
	if err != nil {
		return err
	}
	for i, ti := range infos {
		if err := buf.Place(w.byName[ti.Name], int(ptrs[i]-lo)); err != nil {
			buf.Close()
			return err
		}
		w.bytes += ti.Size
	}
	w.buf = buf
	return nil
}

// OwnsFile reports whether the weights read the model file's memory map
// directly (CPU zero copy), so that the file stays open until Close.
func (w *Weights) OwnsFile() bool { return w != nil && w.file != nil }
