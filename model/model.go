package model

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/sysmem"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model/bind"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/nn"
	"github.com/da3-go/da3-go/model/vit"
)

// Options configure Load.
type Options struct {
	// Options choose the device and the runtime: device, threads, backend
	// folders, logger, kernel policy and precision (see backend.Options).
	backend.Options
	// Progress, when set, is called with bytes uploaded so far and the total.
	Progress func(done, total int64)
	// MaxDeviceMemory, when positive, is the device memory (bytes) the model
	// may use on a GPU, weights and compute buffers together, below what
	// the device has free: Load refuses weights that exceed it, runs are
	// refused (or, for multi-view runs without a chunk size, chunked) when
	// their compute buffers would not fit in what is left. Ignored on the
	// CPU.
	MaxDeviceMemory int64
}

// ErrClosed reports use of a Model after Close.
var ErrClosed = errors.New("model is closed")

// Model is a loaded Depth Anything network: its parts (Backbone, Head,
// Camera) with their weights on a device, and the runtime that computes
// their graphs.
//
// Concurrency: the methods are safe for concurrent use. Runs (Depth,
// MultiView, Forward, Run) are computed one at a time; Close waits for the
// runs in flight to end, and runs started after Close return ErrClosed. The
// parts may be changed (a block replaced, say) only while no run is in
// flight.
type Model struct {
	cfg  Config
	path string // the file, named in errors
	rt   *backend.Runtime
	w    *backend.Weights
	vit  *vit.Model
	head *dpt.Head
	cam  *camera.Decoder
	// camEnc encodes given cameras (pose-conditioned runs); gsHead is
	// DA3-GIANT's Gaussian head. Nil when the file has none.
	camEnc *camera.Encoder
	gsHead *dpt.Head
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup // runs in flight
	done   chan struct{}  // closed when Close has freed everything
	err    error          // Close's result

	est estimates
	// deviceBudget is Options.MaxDeviceMemory on a GPU (0: none).
	deviceBudget int64
}

// Load opens a Depth Anything GGUF, reads its config from the metadata,
// uploads the weights to the chosen device and binds them.
func Load(ctx context.Context, path string, opts Options) (m *Model, err error) {
	f, err := openModel(path)
	if err != nil {
		return nil, err
	}
	// On the CPU the weights are read straight from the file's memory map:
	// then the uploaded Weights own the file and close it.
	defer func() {
		if m == nil || m.w == nil || !m.w.OwnsFile() {
			f.Close()
		}
	}()
	cfg, err := readConfig(f, path)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bo := opts.Options
	bo.Logger = log
	bo.Kernels.Convs = cfg.Convs(bo.Kernels)
	rt, err := backend.Open(bo)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	m = &Model{cfg: cfg, path: path, rt: rt, log: log, done: make(chan struct{})}
	if !rt.IsCPU() {
		m.deviceBudget = max(opts.MaxDeviceMemory, 0)
	}
	parts := m.newLayers()
	want := wanted(parts) // upload only what the graphs use
	if err := m.checkWeightBudget(f, want, path); err != nil {
		return nil, err
	}
	w, err := rt.UploadWeights(ctx, f, func(name string) bool { return want[name] }, opts.Progress)
	if err != nil {
		return nil, err
	}
	m.w = w
	defer func() {
		if err != nil {
			w.Close() // m is nil here: the named result was cleared by the return
		}
	}()
	if err := m.bindWeights(f, parts, want, path); err != nil {
		return nil, err
	}
	m.warnUnused(f, want)
	log.Info("model loaded", "arch", cfg.Arch.String(), "name", cfg.Name, "device", rt.Device().Name(), "weights_MiB", m.w.Bytes()>>20)
	return m, nil
}

// openModel maps the model file.
func openModel(path string) (*loader.File, error) {
	f, err := loader.Open(path)
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) {
			return nil, fmt.Errorf("open model %s: %w: not enough memory or address space (ulimit -v) to map the file", path, err)
		}
		return nil, fmt.Errorf("open model %s: %w", path, err)
	}
	return f, nil
}

// wanted are the names of the tensors the parts bind.
func wanted(parts []layer) map[string]bool {
	want := map[string]bool{}
	for _, p := range parts {
		for _, n := range bind.Names(p.dst, p.root) {
			want[n] = true
		}
	}
	return want
}

// readConfig reads f's configuration and checks the file against it: the
// tensors the schema wants, all of them finite.
func readConfig(f *loader.File, path string) (Config, error) {
	cfg, err := configFromFile(f)
	if err != nil {
		return Config{}, fmt.Errorf("model %s: %w", path, err)
	}
	if err := validate(f, cfg); err != nil {
		return Config{}, fmt.Errorf("model %s (%s): %w", path, cfg.Arch, err)
	}
	if err := checkFinite(f); err != nil {
		return Config{}, fmt.Errorf("model %s: %w", path, err)
	}
	return cfg, nil
}

// Convs is the convolutions' precision of this model under p, as Load
// resolves it: p's own choice, or for ConvsAuto narrow under int8c for the
// DualDPT head (DA3's any-view models, within the int8c gate with its 3×3
// convolutions in int8), the strided ones only for every other head under
// a narrow precision, and f32 in f32 (see kernels.ConvsAuto).
func (c Config) Convs(p kernels.Policy) kernels.Convs {
	switch {
	case p.Convs != kernels.ConvsAuto:
		return p.Convs
	case p.Precision == kernels.PrecisionInt8Channel && c.Head.Kind == dpt.DualDPT:
		return kernels.ConvsNarrow
	case p.Precision != kernels.PrecisionF32:
		return kernels.ConvsStrided
	}
	return kernels.ConvsF32
}

// layer is a part of the network to bind to the weights under root.
type layer struct {
	dst  any
	root string
}

// newLayers makes the model's parts, unbound, and lists them with their
// weights' roots.
func (m *Model) newLayers() []layer {
	cfg := m.cfg
	m.vit = vit.New(cfg.ViT)
	m.head = dpt.New(cfg.Head)
	layers := []layer{{m.vit, m.vitRoot()}, {m.head, "head"}}
	if cfg.NestedMetric {
		layers[1].root = "m_head"
	}
	if cfg.HasCamera {
		m.cam = &camera.Decoder{}
		layers = append(layers, layer{m.cam, "cam"})
	}
	if cfg.CamEnc != nil {
		m.camEnc = camera.NewEncoder(*cfg.CamEnc)
		layers = append(layers, layer{m.camEnc, "cam_enc"})
	}
	if cfg.GS != nil {
		m.gsHead = dpt.New(*cfg.GS)
		layers = append(layers, layer{m.gsHead, "gs"})
	}
	return layers
}

// vitRoot is the backbone's weights' root: "vit", or the nested metric
// branch's "m_vit".
func (m *Model) vitRoot() string {
	if m.cfg.NestedMetric {
		return "m_vit"
	}
	return "vit"
}

// checkWeightBudget refuses weights (the tensors of f in want) that exceed
// the device memory budget (Options.MaxDeviceMemory).
func (m *Model) checkWeightBudget(f *loader.File, want map[string]bool, path string) error {
	if m.deviceBudget <= 0 {
		return nil
	}
	var bytes uint64
	for _, ti := range f.Tensors() {
		if want[ti.Name] {
			bytes += ti.Size
		}
	}
	if int64(bytes) > m.deviceBudget {
		return fmt.Errorf("model %s: %w: its weights need %s of %s memory, more than the %s the model may use (-max-device-memory); use a quantized model (da3-go quantize) or raise the budget",
			path, ErrNotEnoughMemory, sysmem.Bytes(bytes), m.rt.Device().Name(), sysmem.Bytes(uint64(m.deviceBudget)))
	}
	return nil
}

// bindWeights binds the layers to the uploaded weights (want: their names),
// packs the linear layers' weights on the CPU, reads the position
// embedding and checks that the address space left can run the model.
func (m *Model) bindWeights(f *loader.File, layers []layer, want map[string]bool, path string) error {
	var missing []string
	for _, l := range layers {
		if err := bind.Struct(l.dst, m.w, l.root); err != nil {
			var me *bind.MissingError
			if !errors.As(err, &me) {
				return err
			}
			missing = append(missing, me.Names...)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("model %s (%s): %w", path, m.cfg.Arch, &bind.MissingError{Names: missing})
	}
	if m.rt.IsCPU() {
		if err := m.packWeights(layers, want); err != nil {
			return fmt.Errorf("model %s: %w", path, err)
		}
		m.rt.CacheKernelTransforms(m.w)
	}
	if err := m.readPosEmbed(f); err != nil {
		return err
	}
	// Under an address-space limit the Go runtime aborts when its heap
	// cannot grow, so a model that leaves no room to run is refused here.
	if l, ok := sysmem.Tightest(sysmem.Limits(), true); ok && l.Free < minHeadroom {
		return fmt.Errorf("model %s: %w: only %s of address space is left after loading (%s); raise ulimit -v (it counts reserved address space, not memory: the Go runtime alone reserves about 1.2 GiB)",
			path, ErrNotEnoughMemory, sysmem.Bytes(l.Free), l)
	}
	return nil
}

// packWeights packs the linear layers' weights (among want) once into the
// GEMM's panels on the CPU, and the kernels of the convolutions that
// packedConv selects (kernels.PackWeights packs those only where the policy
// narrows the convolutions to int8): the products then skip packing them
// on every call (the same values), and the file pages that held them are
// dropped.
func (m *Model) packWeights(layers []layer, want map[string]bool) error {
	convs := map[string]bool{}
	for _, l := range layers {
		for _, c := range nn.Conv2Ds(l.dst) {
			if c.Weight != nil && packedConv(c) {
				convs[c.Weight.Name()] = true
			}
		}
	}
	var names []string
	for n := range want {
		if t := m.w.Tensor(n); t != nil && strings.HasSuffix(n, ".weight") && (t.Dim(2) == 1 && t.Dim(3) == 1 || convs[n]) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if err := m.w.Pack(m.rt.Kernels(), names); err != nil {
		return err
	}
	if p := m.w.Packed(); len(p) > 0 {
		m.rt.UsePacked(p)
		m.log.Debug("weights packed for the CPU products", "weights", len(p), "MiB", m.w.PackedBytes()>>20)
	}
	return nil
}

// packedConv reports whether c's kernel is packed at load for the
// convolutions in int8 (kernels.Conv2D then multiplies by it): those up to
// 3×3 that Winograd's algorithm does not take (a DPT head's 3×3 stride-2
// resize). The patch embedding (14×14) and the 1×1 convolutions stay as
// they are: in int8 too, they cost DA3-BASE's int8c depth correlation with
// f32 on an NYU photo 0.00015 and 0.00022 (0.99899 and 0.99893, under the
// 0.999 gate; 0.99915 with the resize alone); the DPT projections of the
// tokens alone (1×1, 1536 channels in) 0.00022 too.
func packedConv(c *nn.Conv2D) bool {
	s, _, d := c.Params.Norm()
	kw, kh := c.Weight.Dim(0), c.Weight.Dim(1)
	return kw*kh > 1 && kw*kh <= 9 && !(kw == 3 && kh == 3 && s == 1 && d == 1)
}

// readPosEmbed reads the position embedding, which is needed on the host
// for per-grid interpolation.
func (m *Model) readPosEmbed(f *loader.File) error {
	name := m.vitRoot() + ".pos_embed"
	pe, err := f.TensorData(name)
	if err != nil {
		return err
	}
	peInfo, _ := f.Tensor(name)
	table, err := ggml.ToFloat32(ggml.Type(peInfo.Type), pe, int(peInfo.Elements()))
	if err != nil {
		return fmt.Errorf("pos_embed: %w", err)
	}
	m.vit.Pos, err = vit.NewPosEmbed(table, m.cfg.ViT.EmbedDim, m.cfg.ViT.PosGrid, m.cfg.ViT.InterpOff)
	return err
}

// warnUnused logs the file's tensors that no graph uses (want: those they
// use), besides those files may carry (auxTensor).
func (m *Model) warnUnused(f *loader.File, want map[string]bool) {
	var unused []string
	for _, ti := range f.Tensors() {
		if !want[ti.Name] && !auxTensor(ti.Name) {
			unused = append(unused, ti.Name)
		}
	}
	if len(unused) > 0 {
		m.log.Warn("model file tensors not used", "count", len(unused), "first", unused[0])
	}
}

// minHeadroom is the address space Load requires to be left: the Go heap
// grows in 64 MiB arenas, and the smallest run needs some hundred MiB.
const minHeadroom = 256 << 20

// auxTensor reports tensors that files may carry and the graphs do not use:
// DA2's unused refinenet4 rc1.
func auxTensor(name string) bool {
	return strings.HasPrefix(name, "head.scratch.rn4.rc1.") || strings.HasPrefix(name, "m_head.scratch.rn4.rc1.")
}

// Config is the loaded model's configuration.
func (m *Model) Config() Config { return m.cfg }

// describe names the model in errors: its file (the base name, so that a
// service does not tell its clients its directories) and architecture.
func (m *Model) describe() string {
	return fmt.Sprintf("model %s (%s)", filepath.Base(m.path), m.cfg.Arch)
}

// Device is the name of the device the model runs on.
func (m *Model) Device() string { return m.rt.Device().Name() }

// Kernels is the kernel policy of the model's graphs (which CPU kernels the
// layers use, in which variant and precision).
func (m *Model) Kernels() kernels.Policy { return m.rt.Kernels() }

// Stats describes the last graph the model computed (nodes, compute
// buffers, ops that fell back to the CPU).
func (m *Model) Stats() backend.Stats { return m.rt.LastStats() }

// ProfileOps starts (on) or stops timing every node of the model's later
// runs by op (backend.Runtime.ProfileOps: profiled runs are slower; use
// their shares, not their times); OpProfile returns what was gathered.
func (m *Model) ProfileOps(on bool) error { return m.rt.ProfileOps(on) }

// OpProfile returns the op times of the runs since ProfileOps(true),
// longest first.
func (m *Model) OpProfile() []backend.OpTime { return m.rt.OpProfile() }

// NodeProfile returns the node times of the runs since ProfileOps(true),
// longest first.
func (m *Model) NodeProfile() []backend.NodeTime { return m.rt.NodeProfile() }

// WeightBytes is the size of the uploaded weights.
func (m *Model) WeightBytes() uint64 { return m.w.Bytes() }

// WeightBuffers maps every uploaded weight to the buffer holding it: on a
// GPU, device buffers (Host false) for all of them.
func (m *Model) WeightBuffers() map[string]backend.WeightBuffer { return m.w.Buffers() }

// Backbone is the model's ViT backbone, bound to its weights: run it on a
// graph of Run, or change it (replace or wrap blocks) between runs.
func (m *Model) Backbone() *vit.Model { return m.vit }

// Head is the model's dense prediction head (DA3's DualDPT, the mono DPT
// with its sky branch, or DA2's DPT), bound to its weights.
func (m *Model) Head() *dpt.Head { return m.head }

// Camera is the camera decoder of DA3 any-view models, bound to its
// weights; nil for other models.
func (m *Model) Camera() *camera.Decoder { return m.cam }

// Run builds a graph with build and computes it on the model's device, as
// the model's own runs do (backend.Runtime.Run: host inputs and outputs by
// name, the kernel policy, taps): the way to run the parts alone, or
// together in one graph, or a variant of them. Like the other runs it holds
// Close back until it returns.
func (m *Model) Run(ctx context.Context, opts backend.RunOptions, build func(b *backend.Builder) error) (map[string]backend.Tensor, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.runs.Done()
	return m.rt.Run(ctx, opts, build)
}

// Close waits for the runs in flight, then frees the runtime and the
// weights. Runs started after Close return ErrClosed. It is idempotent and
// safe to call concurrently with runs and with itself: every call returns
// when everything is freed.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.done
		return m.err
	}
	m.closed = true
	m.mu.Unlock()
	m.runs.Wait()
	m.err = errors.Join(m.rt.Close(), m.w.Close())
	close(m.done)
	return m.err
}

// begin registers a run, or returns ErrClosed after Close; the caller
// calls m.runs.Done when the run ends.
func (m *Model) begin() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.runs.Add(1)
	return nil
}

// Image is an input image; any image.Image works (decode with image.Decode or
// the CLI's decoders).
type Image = image.Image
