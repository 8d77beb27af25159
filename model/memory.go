package model

import (
	"errors"
	"fmt"
	"image"
	"strings"
	"sync"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/internal/sysmem"
)

// MemoryEstimate is the memory one request needs, in bytes, as planned
// before it runs: the compute buffers come from ggml's scheduler planning
// the request's own graphs (ggml_backend_sched_reserve_size), the rest from
// the sizes of the buffers the request allocates.
type MemoryEstimate struct {
	// Views and the processed Width×Height the request runs at.
	Views, Width, Height int
	// ChunkSize is the number of views per head graph.
	ChunkSize int
	// Weights are the model's weights (mapped from the file on the CPU).
	Weights int64
	// Compute is the largest compute buffer of the request's graphs, host
	// and device together; DeviceCompute is its part on a GPU.
	Compute, DeviceCompute int64
	// Backbone and Head are the compute buffers of the backbone graph (all
	// views) and of one head chunk; a single view runs both in one graph
	// (then Head is 0).
	Backbone, Head int64
	// Host is the Go heap the request allocates: preprocessed pixels,
	// backbone features, outputs (the caller's decoded images excluded).
	Host int64
	// Maps is the part of Host that holds the maps at the image size
	// (EstimateMemory counts them; 0 with RunOptions.ProcessedSize).
	Maps int64
	// Scratch is the CPU kernels' per-thread scratch buffers and stacks,
	// ggml's CPU work buffer (operands converted for its matrix products,
	// as ggml_graph_plan sizes it), and a bound on the Winograd kernel
	// transforms the runtime still has to store (its first runs keep them
	// for the later ones: backend.Runtime.WinogradPending).
	Scratch int64
}

// Total is everything the request needs, weights included.
func (e MemoryEstimate) Total() int64 { return e.Weights + e.Compute + e.Host + e.Scratch }

func (e MemoryEstimate) String() string {
	b := func(n int64) string { return sysmem.Bytes(uint64(max(n, 0))) }
	s := fmt.Sprintf("%s in all (weights %s, compute %s", b(e.Total()), b(e.Weights), b(e.Compute))
	if e.Views > 1 && e.Head > 0 {
		s += fmt.Sprintf(" [backbone %s, head %s for %d view(s) at a time]", b(e.Backbone), b(e.Head), min(e.ChunkSize, e.Views))
	}
	return s + fmt.Sprintf(", host buffers %s, kernel scratch %s)", b(e.Host), b(e.Scratch))
}

// ErrNotEnoughMemory is wrapped by the errors of requests that would not fit.
var ErrNotEnoughMemory = errors.New("not enough memory")

// MemoryError reports a request refused before it ran.
type MemoryError struct {
	Estimate MemoryEstimate
	// Need is what the request would add to what the process holds now
	// (Estimate.Total for -max-memory); Reserve is kept free besides it
	// under an address-space limit (the Go heap grows in 64 MiB arenas).
	Need, Reserve int64
	// Limit is the bound it exceeds.
	Limit sysmem.Limit
	// Advice lists what lowers the need, most effective first.
	Advice []string
}

func (e *MemoryError) Error() string {
	what := fmt.Sprintf("%d view(s) at %dx%d", e.Estimate.Views, e.Estimate.Width, e.Estimate.Height)
	need := fmt.Sprintf("%s more than the process holds now", sysmem.Bytes(uint64(e.Need)))
	if e.Reserve > 0 {
		need += fmt.Sprintf(" (and %s kept free for the Go runtime)", sysmem.Bytes(uint64(e.Reserve)))
	}
	advice := strings.Join(e.Advice, ", or ")
	if e.Need == e.Estimate.Total() && e.Limit.Used == 0 {
		return fmt.Sprintf("%s for %s: it needs %s, more than the %s; %s", ErrNotEnoughMemory, what, e.Estimate, e.Limit, advice)
	}
	return fmt.Sprintf("%s for %s: it needs %s, %s, but only %s is free under the %s; %s",
		ErrNotEnoughMemory, what, e.Estimate, need, sysmem.Bytes(e.Limit.Free), e.Limit, advice)
}

func (e *MemoryError) Unwrap() error { return ErrNotEnoughMemory }

// processedSize is the network input size of a w×h image under opt, as
// preprocess computes it.
func (m *Model) processedSize(w, h int, opt RunOptions) (int, int, error) {
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("image size %dx%d", w, h)
	}
	res := opt.ProcessRes
	if res == 0 {
		res = m.cfg.ResizeTarget
	}
	ps := m.cfg.ViT.PatchSize
	if m.cfg.Arch == DA2 {
		pw, ph := preprocess.SizeDA2(w, h, res, ps)
		return pw, ph, nil
	}
	pw, ph := preprocess.SizeDA3(w, h, preprocess.Options{ProcessRes: res, Patch: ps,
		Shortest: opt.Method == LowerBoundResize || opt.Method == LowerBoundCrop,
		Crop:     opt.Method == UpperBoundCrop || opt.Method == LowerBoundCrop})
	return pw, ph, nil
}

// estimateKey identifies a request's graphs for the estimate cache: its
// shape and every option that adds to them (the ray and Gaussian heads,
// given cameras, which replace stage A).
type estimateKey struct {
	views, w, h, chunk int
	ray, gs, given     bool
}

// estimates caches MemoryEstimate by request shape (per Model).
type estimates struct {
	mu sync.Mutex
	m  map[estimateKey]MemoryEstimate
}

// EstimateMemory estimates the memory of running views images of w×h
// pixels each (the original size) with opt, without running anything. The
// memory check of every run uses the same figures; callers use it to pick a
// resolution or chunk size that fits.
func (m *Model) EstimateMemory(opt RunOptions, views, w, h int) (MemoryEstimate, error) {
	if err := m.begin(); err != nil {
		return MemoryEstimate{}, err
	}
	defer m.runs.Done()
	if views < 1 {
		return MemoryEstimate{}, fmt.Errorf("estimate: %d views", views)
	}
	pw, ph, err := m.processedSize(w, h, opt)
	if err != nil {
		return MemoryEstimate{}, err
	}
	if pw < m.cfg.ViT.PatchSize || ph < m.cfg.ViT.PatchSize {
		return MemoryEstimate{}, fmt.Errorf("estimate: %dx%d processes to %dx%d, smaller than a patch", w, h, pw, ph)
	}
	e, err := m.estimate(opt, views, pw, ph)
	if err != nil {
		return e, err
	}
	// The original-size outputs.
	if !opt.ProcessedSize {
		e.Maps = int64(views) * int64(w) * int64(h) * 4 * int64(m.outputMaps())
		e.Host += e.Maps
	}
	return e, nil
}

// CheckMemory reports whether running views images of w×h pixels each (the
// original size) with opt fits in the memory left and in opt.MaxMemory:
// nil when it does, else the *MemoryError the run would be refused with.
// Callers use it to choose how many views to run at once and the head
// chunk size (the CLI's streaming windows).
func (m *Model) CheckMemory(opt RunOptions, views, w, h int) error {
	if err := m.begin(); err != nil {
		return err
	}
	defer m.runs.Done()
	if views < 1 {
		return fmt.Errorf("memory check: %d views", views)
	}
	pw, ph, err := m.processedSize(w, h, opt)
	if err != nil {
		return err
	}
	if pw < m.cfg.ViT.PatchSize || ph < m.cfg.ViT.PatchSize {
		return fmt.Errorf("memory check: %dx%d processes to %dx%d, smaller than a patch", w, h, pw, ph)
	}
	orig := make([]image.Point, views)
	for i := range orig {
		orig[i] = image.Pt(w, h)
	}
	return m.checkMemory(opt, views, pw, ph, orig)
}

// outputMaps is the number of per-pixel maps a view returns.
func (m *Model) outputMaps() int {
	if m.cfg.Arch == DA2 {
		return 1
	}
	return 2 // depth and confidence, or depth and sky
}

// estimate plans the graphs of S views processed at W×H (cached).
func (m *Model) estimate(opt RunOptions, S, W, H int) (MemoryEstimate, error) {
	chunk := chunkSize(opt)
	if m.cfg.Arch != DA3 {
		S = 1 // other models run one image at a time
	}
	key := estimateKey{views: S, w: W, h: H, chunk: min(chunk, S), ray: opt.RayPose, gs: opt.Gaussians, given: opt.Extrinsics != nil}
	m.est.mu.Lock()
	e, ok := m.est.m[key]
	m.est.mu.Unlock()
	if ok {
		return m.withPending(e), nil
	}
	var poseEnc []float32
	if opt.Extrinsics != nil {
		poseEnc = make([]float32, 9*S)
	}
	net := m.network(S, W, H, opt, poseEnc)
	e = MemoryEstimate{Views: S, Width: W, Height: H, ChunkSize: chunk, Weights: int64(m.w.Bytes())}
	work, err := m.planGraphs(net, &e)
	if err != nil {
		return e, err
	}
	e.Host = net.hostBytes()
	if m.rt.IsCPU() {
		e.Scratch = int64(m.rt.Threads()) * scratchPerThread(S, net.tokens(), m.cfg.ViT.HeadDim)
	}
	e.Scratch += int64(work)
	m.est.mu.Lock()
	if m.est.m == nil {
		m.est.m = map[estimateKey]MemoryEstimate{}
	}
	m.est.m[key] = e
	m.est.mu.Unlock()
	return m.withPending(e), nil
}

// withPending is e with the Winograd transforms still to be stored added
// to its scratch (not cached with the estimate: the first runs store them).
func (m *Model) withPending(e MemoryEstimate) MemoryEstimate {
	e.Scratch += int64(m.rt.WinogradPending())
	return e
}

// planGraphs plans the memory of net's graphs as a run computes them: the
// reference view's (three or more views), the backbone's (with the heads
// when the views fit one chunk) and a head chunk's. It sets e's compute
// buffers and returns the largest CPU work buffer.
func (m *Model) planGraphs(net network, e *MemoryEstimate) (work uint64, err error) {
	var host, dev uint64
	measure := func(build func(b *backend.Builder) error) (uint64, error) {
		ms, err := m.rt.Measure(backend.RunOptions{MaxNodes: m.nodeBudget(net.S)}, build)
		if errors.Is(err, ggml.ErrNodeBudget) {
			// Attention without a fused kernel takes its queries in chunks
			// whose scores stay small, each over all S·T keys: many views
			// make graphs too large to plan or run as one.
			return 0, fmt.Errorf("%w for %d view(s) at %dx%d: their graph has more than the %d nodes planned for them (attention without the fused kernel, in chunks of queries over all %d keys); run fewer views at once",
				ErrNotEnoughMemory, net.S, net.W, net.H, m.nodeBudget(net.S), net.S*net.tokens())
		}
		if err != nil {
			return 0, fmt.Errorf("planning the memory of %d view(s) at %dx%d: %w", net.S, net.W, net.H, err)
		}
		host, dev, work = max(host, ms.Host), max(dev, ms.Device), max(work, ms.Work)
		return ms.Host + ms.Device, nil
	}
	var in backboneInput
	if stop, ok := net.referenceStop(); ok {
		if _, err := measure(net.referenceGraph(nil, stop)); err != nil {
			return 0, err
		}
		in = backboneInput{fromTokens: true, from: stop}
	}
	n, err := measure(net.backboneGraph(in))
	if err != nil {
		return 0, err
	}
	e.Backbone = int64(n)
	if !net.fused() {
		if n, err = measure(net.headGraph(headInput{views: net.chunk})); err != nil {
			return 0, err
		}
		e.Head = int64(n)
	}
	e.Compute, e.DeviceCompute = int64(host+dev), int64(dev)
	return work, nil
}

// hostBytes is the Go heap a run of net allocates: the pixels per view and
// stacked (twice without fusion), the reference view's tokens and their
// reordered copy, the features of every view, the outputs and their
// per-view copies.
func (n network) hostBytes() int64 {
	cfg := n.m.cfg.ViT
	S, C, D, np := int64(n.S), int64(cfg.EmbedDim), int64(cfg.FeatureDim()), int64(n.grid.PH*n.grid.PW)
	px := int64(3 * n.W * n.H * 4)
	maps := int64(n.W*n.H*4) * int64(n.m.outputMaps())
	host := 2*S*px + 2*S*maps
	if _, ok := n.referenceStop(); ok {
		host += 2 * S * C * int64(n.tokens()) * 4
	}
	if !n.fused() {
		host += S*px + 4*D*np*S*4
	}
	return host
}

// scratchPerThread bounds the CPU kernels' scratch buffers of one thread
// (ggml/kernels: the packed GEMM panels and their bf16 copies, the Winograd
// convolution's transformed kernel, input and products for up to 256
// channels, and the fused attention's packed keys, values and scores over
// at most S·T keys, and their bf16 copies) plus its stack.
func scratchPerThread(S, T, headDim int) int64 {
	const gemm = (256*1024 + 256*112 + 32*256 + 32*64) * 4 * 3 / 2
	const winograd = (16*256*256 + 2*16*128*256) * 4
	keys := int64(S) * int64(T)
	attn := (2*keys*int64(headDim+16) + keys*32 + int64(headDim+16)*32) * 4 * 3 / 2
	return gemm + winograd + attn + 8<<20
}

// checkMemory refuses a request that would not fit in the memory left (the
// tightest of MemAvailable, the cgroup limit, the address-space limit and
// the device's free memory) or in opt.MaxMemory.
func (m *Model) checkMemory(opt RunOptions, S, W, H int, orig []image.Point) error {
	curHost, curDev := m.rt.ComputeBytes() // buffers the request will reuse
	e, err := m.estimate(opt, S, W, H)
	if err != nil {
		return err
	}
	if !opt.ProcessedSize {
		for _, p := range orig {
			e.Host += int64(p.X) * int64(p.Y) * 4 * int64(m.outputMaps())
		}
	}
	if S > 1 && m.cfg.Arch != DA3 {
		e.Host *= int64(S) // one at a time, the results kept
		e.Views = S
	}
	fail := func(need, reserve int64, l sysmem.Limit) error {
		return &MemoryError{Estimate: e, Need: need, Reserve: reserve, Limit: l, Advice: m.advice(e, opt, l.Virtual)}
	}
	if opt.MaxMemory > 0 && e.Total() > opt.MaxMemory {
		return fail(e.Total(), 0, sysmem.Limit{Name: "memory limit asked for (-max-memory)", Total: uint64(opt.MaxMemory), Free: uint64(opt.MaxMemory)})
	}
	hostCompute := e.Compute - e.DeviceCompute
	ram := max(0, hostCompute-int64(curHost)) + e.Host + e.Scratch
	limits := sysmem.Limits()
	if l, ok := sysmem.Tightest(limits, false); ok && ram > int64(l.Free) {
		return fail(ram, 0, l)
	}
	// Address space: the Go heap grows in 64 MiB arenas and C allocations
	// round up, so a margin is kept.
	const margin = 192 << 20
	if l, ok := sysmem.Tightest(limits, true); ok && ram+margin > int64(l.Free) {
		return fail(ram, margin, l)
	}
	if !m.rt.IsCPU() && e.DeviceCompute > int64(curDev) {
		if l, ok := m.deviceLimit(curDev); ok && e.DeviceCompute-int64(curDev) > int64(l.Free) {
			return fail(e.DeviceCompute-int64(curDev), 0, l)
		}
	}
	return nil
}

// deviceLimit is the device memory a run's compute buffers may still take
// beyond the curDev bytes held now: what the device has free, or less under
// Options.MaxDeviceMemory (which counts the weights and the buffers held).
func (m *Model) deviceLimit(curDev uint64) (sysmem.Limit, bool) {
	free, total := m.rt.Device().Memory()
	l := sysmem.Limit{Name: m.rt.Device().Name() + " memory", Total: total, Used: total - free, Free: free}
	if b := m.deviceBudget; b > 0 {
		used := int64(m.w.Bytes()) + int64(curDev)
		if left := uint64(max(b-used, 0)); free == 0 || left < free {
			l = sysmem.Limit{Name: m.rt.Device().Name() + " memory budget (-max-device-memory)", Total: uint64(b), Used: uint64(used), Free: left}
		}
	}
	return l, l.Total > 0
}

// fitChunk is opt with the head's chunk of views chosen from the device's
// memory: for a multi-view run on a GPU, the chunk asked for (default 8) or,
// when its compute buffers would not fit in what the device has left, the
// largest smaller one of 4, 2 and 1 that does (the head computes each view
// alike, so chunking changes no value). Elsewhere, or when none fits, opt
// as given (the memory check then refuses the run, naming the figures).
func (m *Model) fitChunk(opt RunOptions, S, W, H int) RunOptions {
	if m.rt.IsCPU() || S < 2 || m.cfg.Arch != DA3 {
		return opt
	}
	_, curDev := m.rt.ComputeBytes()
	l, ok := m.deviceLimit(curDev)
	if !ok {
		return opt
	}
	asked := opt.ChunkSize
	if asked <= 0 {
		asked = 8
	}
	for _, c := range []int{asked, 4, 2, 1} {
		if c > asked || (c != asked && c >= S) {
			continue
		}
		o := opt
		o.ChunkSize = c
		e, err := m.estimate(o, S, W, H)
		if err != nil {
			return opt
		}
		if e.DeviceCompute <= int64(curDev)+int64(l.Free) {
			if c != asked {
				m.log.Info("head chunk lowered to fit the device memory", "device", m.rt.Device().Name(), "views", S,
					"chunk", c, "asked", asked, "device_compute", sysmem.Bytes(uint64(e.DeviceCompute)), "free", sysmem.Bytes(l.Free))
			}
			return o
		}
	}
	return opt
}

// advice lists what lowers the estimate, each with the total it would need.
func (m *Model) advice(e MemoryEstimate, opt RunOptions, virtual bool) []string {
	var a []string
	alt := func(o RunOptions, w, h int) string {
		if x, err := m.estimate(o, e.Views, w, h); err == nil {
			return sysmem.Bytes(uint64(x.Total()))
		}
		return "less"
	}
	if e.Views > 1 && m.cfg.Arch == DA3 && e.ChunkSize > 1 {
		o := opt
		o.ChunkSize = 1
		a = append(a, fmt.Sprintf("use -chunk-size 1 (the head one view at a time: %s)", alt(o, e.Width, e.Height)))
	}
	res := opt.ProcessRes
	if res == 0 {
		res = m.cfg.ResizeTarget
	}
	ps := m.cfg.ViT.PatchSize
	if lower := res * 2 / 3 / ps * ps; lower >= ps {
		o := opt
		o.ProcessRes = lower
		w := max(ps, e.Width*lower/res/ps*ps)
		h := max(ps, e.Height*lower/res/ps*ps)
		a = append(a, fmt.Sprintf("lower -process-res (now %d; -process-res %d: %s)", res, lower, alt(o, w, h)))
	}
	if e.Views > 1 && m.cfg.Arch == DA3 {
		a = append(a, "run fewer views at once (or -independent)")
	}
	if e.Weights > e.Compute {
		a = append(a, "use a quantized model (da3-go quantize)")
	}
	if virtual {
		a = append(a, "raise the address-space limit (ulimit -v counts reserved address space, not memory: the Go runtime alone reserves about 1.2 GiB)")
	}
	return a
}

// checkViews checks the memory of running imgs as views before they are
// preprocessed (their processed size is known from their bounds alone), with
// the head chunk chosen from the device memory (fitChunk): it returns opt
// as the run must use it.
func (m *Model) checkViews(imgs []Image, opt RunOptions) (RunOptions, error) {
	S := len(imgs)
	W, H := 0, 0
	orig := make([]image.Point, S)
	for i, im := range imgs {
		b := im.Bounds()
		pw, ph, err := m.processedSize(b.Dx(), b.Dy(), opt)
		if err != nil || pw < m.cfg.ViT.PatchSize || ph < m.cfg.ViT.PatchSize {
			return opt, nil // preprocessing reports it
		}
		if i == 0 || m.cfg.Arch != DA3 {
			W, H = pw, ph
		} else {
			W, H = min(W, pw), min(H, ph) // views are cropped to the smallest
		}
		orig[i] = b.Size()
	}
	opt = m.fitChunk(opt, S, W, H)
	return opt, m.checkMemory(opt, S, W, H, orig)
}

// DeviceMemory is what a model holds on its device.
type DeviceMemory struct {
	// Device is false on the CPU (the other fields are then zero).
	Device bool
	// Weights and Compute are the bytes of the weights and of the compute
	// buffers held on the device (the compute buffers of the largest graph
	// run so far; ggml's scheduler keeps them for the next run).
	Weights, Compute uint64
	// Free and Total are the device's memory as its driver reports it now.
	Free, Total uint64
}

// DeviceMemory reports the model's device memory (see DeviceMemory).
func (m *Model) DeviceMemory() DeviceMemory {
	if m.rt.IsCPU() {
		return DeviceMemory{}
	}
	_, dev := m.rt.ComputeBytes()
	free, total := m.rt.Device().Memory()
	return DeviceMemory{Device: true, Weights: m.w.Bytes(), Compute: dev, Free: free, Total: total}
}
