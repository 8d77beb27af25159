package kernels

// #include "custom.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"

	"github.com/da3-go/da3-go/ggml"
)

// WinogradCache keeps the Winograd transforms of 3×3 kernels (the first
// operand of the Winograd convolution) from one graph to the next, so that
// a model's runs compute each once instead of in every run. A transform is computed by the first graph
// that needs it, as a node of that graph whose output is placed in memory
// of the cache's own; once that graph has computed (GraphDone), later
// graphs read the stored transform instead, a tensor with no node. Each
// (weight, tile, precision, variant) is stored once. A transform in bf16
// F(2×2) takes 8/9 of the f32 kernel's size, in int8c 4/9 (DA3-BASE's head:
// 6 MiB in int8c, for 1.3 % of its run); in f32 16/9 (F(2×2)) or 4 times
// (F(4×4)) the kernel's (DA3-BASE's head: 35 MiB more at the peak in f32,
// for 1.0–1.4 % of its run in f32 and bf16; DA2-Small's 10 MiB, for 1 %).
// Only the weights the cache was made for are kept; they
// must not change while it holds their transforms. Safe for concurrent use;
// the graphs of one cache must be computed one at a time (a Runtime
// serialises them).
type WinogradCache struct {
	keep    func(w *ggml.Tensor) bool
	stored  func(w *ggml.Tensor)
	mu      sync.Mutex
	entries map[winoKey]*winoEntry
	bytes   int
	closed  bool
}

type winoKey struct {
	w    *ggml.Tensor
	tile int
	prec Precision
	v    Variant
}

// winoEntry is one stored transform: its memory, the buffer over it and,
// once a graph has computed it, the tensor later graphs read.
type winoEntry struct {
	*hostMemory
	n     int // floats
	ready *ggml.Tensor
}

// NewWinogradCache returns an empty cache for the kernels keep accepts
// (unchanging weights, never a graph's own tensors); stored (optional) is
// called with each kernel once a transform of it is stored (GraphDone), for
// the caller to release what it no longer needs. Close frees its memory.
func NewWinogradCache(keep func(w *ggml.Tensor) bool, stored func(w *ggml.Tensor)) *WinogradCache {
	return &WinogradCache{keep: keep, stored: stored, entries: map[winoKey]*winoEntry{}}
}

// Bytes is the memory the stored transforms take.
func (c *WinogradCache) Bytes() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// WinogradTransformBound is the most a WinogradCache can come to hold for
// the 3×3 kernel w ([3, 3, IC, OC]) in variant v: its f32 transforms in both
// tile sizes, the largest of every precision's (bf16 takes 8/9 of the
// kernel's size, int8c 4/9; f32 16/9 and 4 times). 0 for another shape or
// a variant that cannot run here.
func WinogradTransformBound(w *ggml.Tensor, v Variant) int {
	if w == nil || w.Dim(0) != 3 || w.Dim(1) != 3 {
		return 0
	}
	if v == VariantAuto || v == VariantOff || !v.Runs() {
		v = DefaultVariant()
	}
	n := 0
	for _, tile := range []int{2, 4} {
		n += max(0, int(C.da3_wino_kernel_size(C.int(v), C.int64_t(w.Dim(2)), C.int64_t(w.Dim(3)), C.int(tile), C.int(PrecisionF32))))
	}
	return 4 * n
}

// Len is the number of transforms stored or being computed.
func (c *WinogradCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Close frees the stored transforms. Graphs built with the cache must have
// been closed first. Idempotent.
func (c *WinogradCache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for _, e := range c.entries {
		err = errors.Join(err, e.free())
	}
	c.entries, c.bytes, c.closed = nil, 0, true
	return err
}

func (e *winoEntry) free() error {
	e.ready = nil
	return e.close()
}

// SetWinogradCache makes the Winograd convolutions built in g read and
// store their kernels' transforms in c (nil: none, each graph computes its
// own). Call GraphDone once g has computed.
func SetWinogradCache(g *ggml.Context, c *WinogradCache) {
	g.SetValue(winoCacheKey{}, &winoGraph{cache: c})
}

type winoCacheKey struct{}

// winoGraph is a graph's use of a cache: the transforms its nodes compute
// into the cache's memory, each through a buffer of the graph's own (so
// that nothing of the cache points at the graph's tensors once it closes).
type winoGraph struct {
	cache   *WinogradCache
	pending []winoPending
}

type winoPending struct {
	k   winoKey
	buf *ggml.Buffer
}

// GraphDone tells the cache set on g (SetWinogradCache) whether g computed:
// if so, the transforms its nodes stored are read by later graphs; if not,
// the next graph that needs them computes them again. Call it before
// closing g; a graph without a cache is ignored.
func GraphDone(g *ggml.Context, computed bool) error {
	wg, _ := g.Value(winoCacheKey{}).(*winoGraph)
	if wg == nil || wg.cache == nil {
		return nil
	}
	c := wg.cache
	c.mu.Lock()
	var err error
	var stored []*ggml.Tensor
	for _, p := range wg.pending {
		err = errors.Join(err, p.buf.Close())
		e := c.entries[p.k]
		if !computed || c.closed || e == nil || e.ready != nil {
			continue
		}
		if e2 := e.publish(); e2 != nil {
			err = errors.Join(err, e2)
			continue
		}
		stored = append(stored, p.k.w)
	}
	wg.pending = nil
	c.mu.Unlock()
	if c.stored != nil {
		for _, w := range stored {
			c.stored(w)
		}
	}
	return err
}

// publish makes the tensor later graphs read the stored transform as.
func (e *winoEntry) publish() error {
	ctx, err := ggml.NewContext(1)
	if err != nil {
		return err
	}
	t := ctx.NewTensor(ggml.TypeF32, e.n)
	if err := e.buf.Place(t, 0); err != nil {
		ctx.Close()
		return err
	}
	e.ctx, e.ready = ctx, t
	return nil
}

// cachedWinogradKernel is the transform of w for the tile, precision and
// variant from g's cache: the stored tensor once computed; else the node u
// that computes it (made by node), with its output placed in the cache's
// memory; nil when g has no cache or the memory cannot be had (the caller
// then builds its own node).
func cachedWinogradKernel(g *ggml.Context, k winoKey, n int, node func() *ggml.Tensor) *ggml.Tensor {
	wg, _ := g.Value(winoCacheKey{}).(*winoGraph)
	if wg == nil || wg.cache == nil || wg.cache.keep == nil || !wg.cache.keep(k.w) {
		return nil
	}
	c := wg.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	e := c.entries[k]
	if e != nil && e.ready != nil {
		return e.ready
	}
	size := (n*4 + 63) &^ 63
	if e == nil {
		h, err := newHostMemory(size)
		if err != nil {
			return nil
		}
		e = &winoEntry{hostMemory: h, n: n}
		c.entries[k] = e
		c.bytes += size
	}
	// The node writes the cache's memory through a buffer of its own, closed by GraphDone.
	buf, err := ggml.NewCPUBufferFromMemory(e.mem, e.size)
	if err != nil {
		return nil
	}
	u := node()
	if err := buf.Place(u, 0); err != nil {
		buf.Close()
		panic(&ggml.ShapeError{Op: "wino_kernel", Msg: fmt.Sprintf("placing the transform in the cache: %v", err)})
	}
	wg.pending = append(wg.pending, winoPending{k: k, buf: buf})
	return u
}
