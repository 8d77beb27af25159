package loader

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/da3-go/da3-go/internal/safeio"
)

// ErrClosed is returned by File methods that touch tensor data after Close.
var ErrClosed = errors.New("gguf file closed")

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Type   Type
	Shape  []uint64 // ggml ne order: Shape[0] = ne0, the contiguous dimension
	Offset uint64   // absolute file offset of the data
	Size   uint64   // bytes of data
}

// Elements returns the number of elements (the product of Shape; 1 for a
// scalar). Shapes read by Open never overflow.
func (ti TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range ti.Shape {
		n *= d
	}
	return n
}

// File is an open GGUF file. Its metadata lives on the Go heap; tensor data
// is read from a read-only memory map (or an in-memory copy where mmap is not
// available) until Close. A File is safe for concurrent use.
type File struct {
	path      string
	size      int64
	version   uint32
	alignment uint64
	kv        *KV
	tensors   []TensorInfo
	index     map[string]int

	mu      sync.RWMutex
	data    []byte
	release func() error // unmaps data; nil for heap data
	closed  bool
}

// Open maps the GGUF file at path and validates its header, metadata and
// tensor table. It returns an error wrapping ErrNotGGUF for a file without
// the GGUF magic and ErrUnsupportedVersion for versions other than 2 and 3.
//
// The file must not be truncated or modified while open: like any mmap
// reader, access to a shrunk file faults.
func Open(path string) (*File, error) {
	osf, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer osf.Close()
	f, err := openMapped(path, osf)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// ErrNotRegular is wrapped by the error of Open for a path that is not a
// regular file (a FIFO, a device, a directory).
var ErrNotRegular = safeio.ErrNotRegular

// openRegular opens path for reading, refusing anything but a regular file
// before it is read; it never waits on a FIFO (see safeio.Open), which
// os.Open would until a writer came.
func openRegular(path string) (*os.File, error) {
	f, _, err := safeio.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open model: %w", err)
	}
	return f, nil
}

func openMapped(path string, osf *os.File) (*File, error) {
	st, err := osf.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	size := st.Size()
	if size < int64(len(ggufMagic)) {
		return nil, fmt.Errorf("%w: file is %d bytes", ErrNotGGUF, size)
	}
	if uint64(size) > math.MaxInt {
		return nil, fmt.Errorf("file of %d bytes is too large to map on this platform", size)
	}
	data, release, err := mapFile(osf, int(size))
	if err != nil {
		return nil, err
	}
	f, err := newFile(path, data, release)
	if err != nil {
		if release != nil {
			_ = release()
		}
		return nil, err
	}
	return f, nil
}

// newFile parses data (the whole file) into a File that owns it.
func newFile(path string, data []byte, release func() error) (*File, error) {
	h, err := parseHeader(data)
	if err != nil {
		return nil, err
	}
	f := &File{
		path:      path,
		size:      int64(len(data)),
		version:   h.version,
		alignment: h.alignment,
		kv:        h.kv,
		tensors:   h.tensors,
		index:     make(map[string]int, len(h.tensors)),
		data:      data,
		release:   release,
	}
	for i, ti := range h.tensors {
		f.index[ti.Name] = i
	}
	return f, nil
}

// Close releases the mapping. It is idempotent; afterwards TensorData,
// TensorReader and ReadAt return ErrClosed and slices returned by
// TensorData must no longer be used. Metadata stays available.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	release := f.release
	f.data, f.release = nil, nil
	if release != nil {
		if err := release(); err != nil {
			return fmt.Errorf("close %s: %w", f.path, err)
		}
	}
	return nil
}

// Version returns the GGUF version (2 or 3).
func (f *File) Version() uint32 { return f.version }

// Alignment returns the data alignment in bytes.
func (f *File) Alignment() uint64 { return f.alignment }

// Size returns the file size in bytes.
func (f *File) Size() int64 { return f.size }

// Path returns the path given to Open.
func (f *File) Path() string { return f.path }

// KV returns the metadata.
func (f *File) KV() *KV { return f.kv }

// Tensors returns a copy of the tensor descriptors in file order.
func (f *File) Tensors() []TensorInfo {
	out := slices.Clone(f.tensors)
	for i := range out {
		out[i].Shape = slices.Clone(out[i].Shape)
	}
	return out
}

// Tensor returns the descriptor of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	ti := f.tensors[i]
	ti.Shape = slices.Clone(ti.Shape)
	return ti, true
}

func (f *File) lookup(name string) (TensorInfo, error) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, fmt.Errorf("tensor %q: not found in %s", name, f.path)
	}
	return f.tensors[i], nil
}

// TensorData returns the named tensor's bytes without copying. The slice
// aliases a read-only mapping: never write to it, and do not use it after
// Close.
func (f *File) TensorData(name string) ([]byte, error) {
	ti, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return nil, fmt.Errorf("tensor %q: %w", name, ErrClosed)
	}
	end := ti.Offset + ti.Size
	return f.data[ti.Offset:end:end], nil
}

// TensorReader returns a reader of the named tensor's bytes. Reads after
// Close fail with ErrClosed.
func (f *File) TensorReader(name string) (*io.SectionReader, error) {
	ti, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	f.mu.RLock()
	closed := f.closed
	f.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("tensor %q: %w", name, ErrClosed)
	}
	return io.NewSectionReader(f, int64(ti.Offset), int64(ti.Size)), nil
}

// ReadAt implements io.ReaderAt over the whole file.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset %d", f.path, off)
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Mapped reports whether the file's bytes come from a read-only memory map
// (so TensorData slices point outside the Go heap and stay valid, unmoved,
// until Close).
func (f *File) Mapped() bool { return f.release != nil }
