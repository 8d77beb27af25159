package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
)

// Weights are a model's tensors uploaded once to the runtime's device. They
// stay valid until Close.
type Weights struct {
	ctx    *ggml.Context
	buf    *ggml.Buffer
	byName map[string]*ggml.Tensor
	names  []string
	bytes  uint64
}

// UploadWeights creates every tensor of f on the runtime's device and copies
// its data there. keep, when non-nil, selects the tensors to upload.
// progress (optional) is called with bytes done and total.
func (rt *Runtime) UploadWeights(ctx context.Context, f *loader.File, keep func(name string) bool, progress func(done, total int64)) (*Weights, error) {
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
	w.buf, err = g.AllocTensors(rt.dev.BufferType(), ggml.UsageWeights)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("uploading %d weights (%.1f MiB) to %s: %w; try a quantized model or -device cpu", len(infos), float64(total)/(1<<20), rt.dev.Name(), err)
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

// Bytes is the weights' total size in bytes.
func (w *Weights) Bytes() uint64 { return w.bytes }

// BufferName is the name of the buffer holding the weights.
func (w *Weights) BufferName() string { return w.buf.Name() }

// Close frees the weight buffer and context. Idempotent.
func (w *Weights) Close() error {
	if w == nil {
		return nil
	}
	err := errors.Join(w.buf.Close(), w.ctx.Close())
	w.buf, w.ctx, w.byName = nil, nil, nil
	return err
}
