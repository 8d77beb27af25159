// Package kernels holds da3-go's CPU kernels for ggml graphs: a packed
// matrix product with fused bias and activation (GEMM), an implicit-im2col
// convolution on the same product (Conv2D), Winograd's F(4×4, 3×3) and
// F(2×2, 3×3) for 3×3 convolutions (taken by Conv2D), fused attention
// (Attention), layer norm in one pass a row, optionally followed by DA3's
// 2-D RoPE (LayerNorm, LayerNormRoPE), and a bilinear resize with
// per-column tables (Bilinear), also as zero-bordered windows of rows
// (BilinearWindow) on which a convolution runs in strips. They are ggml
// custom ops (ggml_custom_4d) and run on the CPU backend only.
//
// The GEMM, convolution and attention come in instruction-set variants
// compiled into every binary (AVX-512, AVX2 with FMA, portable C) and
// chosen at run time from the CPU's features (BestVariant), so a binary
// built for x86-64-v3 keeps the AVX-512 paths. SetDefaultVariant overrides
// the choice for the process (the command's DA3_KERNELS: avx512, avx2,
// portable or off); a Policy can name one per graph. On AVX-512 CPUs
// with AVX512_BF16 and AVX512_VNNI the products can also run in bf16 or int8
// (Precision); the per-channel int8 products (PrecisionInt8Channel) also run
// in the AVX2 variant.
//
// Every function here checks its operands and panics with a
// *ggml.ShapeError when they do not fit (the Fits functions say so
// beforehand), and the C kernels check them again on entry; the raw C
// functions are not exported. A kernel call that cannot run (out of memory
// for its scratch buffers, or operands that fail the entry check) computes
// nothing and is counted: the runtime checks FaultsSince after each compute.
//
// Which kernels a graph uses is one Policy value, set on the graph by the
// runtime (SetPolicy) and read by the layers of model/nn (PolicyOf).
package kernels

/*
#cgo CPPFLAGS: -I${SRCDIR}/.. -I${SRCDIR}/../vendor/include
#cgo CFLAGS: -O3
#include "custom.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// Variant is an instruction-set variant of the GEMM, convolution and
// attention kernels.
type Variant int

const (
	VariantAuto     Variant = C.DA3_VAR_AUTO     // DefaultVariant
	VariantOff      Variant = C.DA3_VAR_OFF      // none: ggml's own ops
	VariantPortable Variant = C.DA3_VAR_PORTABLE // portable C (vector extensions), any CPU
	VariantAVX2     Variant = C.DA3_VAR_AVX2     // AVX2 with FMA and F16C (x86-64-v3)
	VariantAVX512   Variant = C.DA3_VAR_AVX512   // AVX-512 F, BW, DQ, VL
)

var variantNames = []string{VariantAuto: "auto", VariantOff: "off", VariantPortable: "portable", VariantAVX2: "avx2", VariantAVX512: "avx512"}

func (v Variant) String() string {
	if v >= 0 && int(v) < len(variantNames) {
		return variantNames[v]
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// ParseVariant parses a variant name: auto, off, portable, avx2 or avx512.
func ParseVariant(s string) (Variant, error) {
	for v, n := range variantNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Variant(v), nil
		}
	}
	return 0, fmt.Errorf("kernel variant %q: want auto, off, portable, avx2 or avx512", s)
}

// Runs reports whether this binary and CPU can run v (VariantOff always
// "runs": it is ggml's own ops).
func (v Variant) Runs() bool {
	return v == VariantOff || v == VariantAuto || C.da3_variant_ok(C.int(v)) != 0
}

// BestVariant is the fastest variant this CPU runs: AVX-512, else AVX2,
// else portable.
func BestVariant() Variant { return Variant(C.da3_best_variant()) }

// chosenVariant is the variant SetDefaultVariant chose (VariantAuto: none).
var chosenVariant atomic.Int32

// SetDefaultVariant sets the instruction-set variant of the process's
// kernels (the command's DA3_KERNELS): VariantAuto restores BestVariant,
// VariantOff turns GEMM and attention off. A variant this CPU or build
// cannot run is refused, and the variant stays. Call it before the first
// graph is built: policies already made keep theirs.
func SetDefaultVariant(v Variant) error {
	if v != VariantAuto && !v.Runs() {
		return fmt.Errorf("kernel variant %s: this CPU or build cannot run it (CPU features: %s)", v, strings.Join(CPUFeatures(), " "))
	}
	chosenVariant.Store(int32(v))
	return nil
}

// DefaultVariant is the variant of this process: the one SetDefaultVariant
// chose, else BestVariant.
func DefaultVariant() Variant {
	if v := Variant(chosenVariant.Load()); v != VariantAuto {
		return v
	}
	return BestVariant()
}

// Precision is the arithmetic of the GEMM and convolution products.
type Precision int

const (
	// PrecisionF32: float32 products and sums (the default; ggml's result up
	// to summation order).
	PrecisionF32 Precision = C.DA3_PREC_F32
	// PrecisionBF16: both operands rounded to bfloat16 (8-bit significand),
	// exact products summed in float32 (AVX512_BF16 vdpbf16ps), for the
	// linear layers and the attention; the convolutions stay float32 unless
	// Policy.Convs narrows them.
	PrecisionBF16 Precision = C.DA3_PREC_BF16
	// PrecisionInt8: q8_0 weight matrices times activations quantized to
	// q8_0 blocks (32 values, scale max|x|/127) as ggml quantizes them,
	// integer sums per block (AVX512_VNNI vpdpbusd); the other products as
	// with PrecisionBF16 where the CPU has it, else float32.
	PrecisionInt8 Precision = C.DA3_PREC_INT8
	// PrecisionInt8Channel: the weight matrices packed at load (F32, F16,
	// BF16 or Q8_0, the last dequantized first) quantized symmetrically to
	// int8 with one scale per output channel over the whole depth, times
	// activations quantized with one scale per row over the whole depth;
	// integer sums over all of K (AVX512_VNNI vpdpbusd in the avx512
	// variant; in the avx2 variant, on any AVX2 CPU, 256-bit vpdpbusd where
	// the CPU has AVX-VNNI or AVX512_VNNI, else vpmaddubsw: AVX2Int8Form),
	// scaled once per output: the same values in all. With vpdpbusd the
	// attention's two products are int8 too (q and k quantized per token, v
	// per head dim, the probabilities to bytes 255·p; see Attention); the
	// vpmaddubsw form computes the attention in f32. Weights not packed take
	// PrecisionInt8's path (Q8_0: q8_0 blocks; the others bf16 where the CPU
	// has it, else float32), as do the convolutions.
	PrecisionInt8Channel Precision = C.DA3_PREC_INT8C
)

var precisionNames = []string{PrecisionF32: "f32", PrecisionBF16: "bf16", PrecisionInt8: "int8", PrecisionInt8Channel: "int8c"}

func (p Precision) String() string {
	if p >= 0 && int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision parses f32, bf16, int8 or int8c.
func ParsePrecision(s string) (Precision, error) {
	for p, n := range precisionNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Precision(p), nil
		}
	}
	return 0, fmt.Errorf("precision %q: want f32, bf16, int8 or int8c", s)
}

// ErrPrecision reports a precision the CPU or the kernel variant cannot
// compute.
var ErrPrecision = errors.New("precision not supported")

// PrecisionRuns reports whether variant v computes precision p on this CPU
// (f32: every variant that runs; bf16: AVX-512 with AVX512_BF16; int8:
// AVX-512 with AVX512_VNNI; int8c: AVX-512 with AVX512_VNNI, or AVX2).
func PrecisionRuns(v Variant, p Precision) bool {
	if v == VariantAuto {
		v = DefaultVariant()
	}
	return C.da3_precision_ok(C.int(v), C.int(p)) != 0
}

// peak measures the peak rate, in operations a second (two per
// multiply-add), of the products of precision p in variant v on one core
// (the calling goroutine's thread, for at least d): independent
// multiply-adds on registers alone, the bound a kernel's speed is compared
// with (BenchmarkPeak, BenchmarkGEMM: the tests export it). It returns 0 when v cannot compute p
// on this CPU.
func peak(v Variant, p Precision, d time.Duration) float64 {
	if v == VariantAuto {
		v = DefaultVariant()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for rounds := int64(1 << 12); ; rounds *= 2 {
		t := time.Now()
		ops := float64(C.da3_peak(C.int(v), C.int(p), C.int64_t(rounds)))
		el := time.Since(t)
		if ops == 0 {
			return 0
		}
		if el >= d || rounds >= 1<<40 {
			return ops / el.Seconds()
		}
	}
}

// The call counters, for tests and diagnostics, are read through
// internal/kernelcount.
func init() {
	kernelcount.Register(kernelcount.Source{
		Calls:    func(v, p int) uint64 { return uint64(C.da3_variant_calls(C.int(v), C.int(p))) },
		Winograd: func() uint64 { return uint64(C.da3_winograd_calls()) },
		Window:   func() uint64 { return uint64(C.da3_window_calls()) },
	})
}

// CPUFeatures lists the CPU features the kernel variants use that this CPU
// has (avx2 stands for AVX2 with FMA and F16C, avx512 for F, BW, DQ and VL).
func CPUFeatures() []string {
	f := int(C.da3_cpu_features())
	var out []string
	for _, x := range []struct {
		bit  int
		name string
	}{{C.DA3_CPU_AVX2, "avx2"}, {C.DA3_CPU_AVX512, "avx512"}, {C.DA3_CPU_AVX512BF16, "avx512_bf16"}, {C.DA3_CPU_AVX512VNNI, "avx512_vnni"}, {C.DA3_CPU_AVXVNNI, "avx_vnni"}} {
		if f&x.bit != 0 {
			out = append(out, x.name)
		}
	}
	return out
}

// Describe says which kernels a graph with policy p runs, e.g. "avx512
// (bf16)", "avx512 (int8c, narrow convolutions)" or "off (ggml's ops)".
func Describe(p Policy) string {
	p = p.Mask()
	if !p.GEMM && !p.Attention {
		return "off (ggml's ops)"
	}
	prec := p.Precision.String()
	if p.Variant == VariantAVX2 && p.Precision == PrecisionInt8Channel {
		form, _ := SetAVX2Int8Form(-1)
		prec += ", " + form.String()
	}
	if p.winogradPrecision(p.Variant) != PrecisionF32 { // narrowed, and the variant can
		prec += ", narrow convolutions"
	} else if p.convPrecision(p.Variant, true) != PrecisionF32 {
		prec += ", narrow strided convolutions"
	}
	return fmt.Sprintf("%s (%s)", p.Variant, prec)
}

// AVX2Int8Form is the step of the avx2 variant's int8c tiles: vpmaddubsw
// (any AVX2 CPU), or vpdpbusd on 256-bit registers where the CPU has it
// (EVEX with AVX512_VNNI, VEX with AVX-VNNI), which also computes the
// attention in int8. All give the same linear layers' outputs.
type AVX2Int8Form int

const (
	AVX2Int8Auto    AVX2Int8Form = iota // the fastest this CPU runs
	AVX2Int8Maddubs                     // vpmaddubsw, vpmaddwd: any AVX2 CPU
	AVX2Int8VNNI512                     // EVEX vpdpbusd: AVX512_VNNI with VL
	AVX2Int8AVXVNNI                     // VEX vpdpbusd: AVX-VNNI
)

var avx2Int8FormNames = []string{AVX2Int8Auto: "auto", AVX2Int8Maddubs: "vpmaddubsw", AVX2Int8VNNI512: "vpdpbusd-evex",
	AVX2Int8AVXVNNI: "vpdpbusd-avx-vnni"}

func (f AVX2Int8Form) String() string {
	if f >= 0 && int(f) < len(avx2Int8FormNames) {
		return avx2Int8FormNames[f]
	}
	return "none"
}

// ParseAVX2Int8Form parses auto, vpmaddubsw, vpdpbusd (the VEX form where
// the CPU has AVX-VNNI, else EVEX), vpdpbusd-evex or vpdpbusd-avx-vnni.
func ParseAVX2Int8Form(s string) (AVX2Int8Form, error) {
	if s == "vpdpbusd" {
		if C.da3_cpu_features()&C.DA3_CPU_AVXVNNI != 0 {
			return AVX2Int8AVXVNNI, nil
		}
		return AVX2Int8VNNI512, nil
	}
	for i, n := range avx2Int8FormNames {
		if s == n {
			return AVX2Int8Form(i), nil
		}
	}
	return 0, fmt.Errorf("avx2 int8 step %q: want auto, vpmaddubsw, vpdpbusd, vpdpbusd-evex or vpdpbusd-avx-vnni", s)
}

// SetAVX2Int8Form makes the avx2 variant's int8c tiles take form f and
// returns the form in effect, or false when this CPU cannot run f (nothing
// changes); f < 0 only reports the form in effect. Call it before building
// graphs: one built under another form computes its attention in f32.
func SetAVX2Int8Form(f AVX2Int8Form) (AVX2Int8Form, bool) {
	got := AVX2Int8Form(C.da3_i8c_avx2_form(C.int(f)))
	return got, got != 0
}

// Policy is the kernel policy of a graph: which of the fused paths the
// layers of model/nn take. Given to a runtime (backend.Options.Kernels),
// the zero value means auto: the fastest kernels for the device, to which
// Precision, Convs, StripBytes and ScoreBytes still apply; Explicit
// makes the switches the policy as given (Policy{Explicit: true} is ggml's
// own ops only). The policy set on a graph is always explicit.
type Policy struct {
	// Explicit: the kernel switches below (GEMM … DirectConv, ContiguousNorm)
	// and Variant are the policy as given, not the device's default.
	Explicit bool
	// GEMM computes linear layers and convolutions with GEMM and Conv2D
	// (bias and activation fused).
	GEMM bool
	// Winograd computes the 3×3 stride-1 convolutions that fit with
	// Winograd's F(4×4, 3×3) or F(2×2, 3×3) instead of the direct GEMM.
	Winograd bool
	// Attention computes attention with the fused kernel.
	Attention bool
	// Resize computes bilinear resizes with Bilinear. Any build.
	Resize bool
	// Norm computes layer norms with LayerNorm (one pass a row, the affine
	// weight and bias applied in it), and the passes over tokens with their
	// kernels too: a block's scaled skip connection (AddScaled) and
	// concatenations (Concat, whole rows copied). Any build.
	Norm bool
	// Strips runs the DPT heads' high-resolution maps in strips of rows with
	// BilinearWindow: the last fusion block's ×2 upsampling with
	// output_conv1, and the resize to the image size with the UV embedding
	// and output_conv2. Those maps never exist whole: the same values in a
	// fraction of the memory. Any build.
	Strips bool
	// StripBytes is the size of one strip of the resized map, all views
	// together (0 means 8 MiB; strips are at least two rows).
	StripBytes int64
	// Flash computes the attention the fused kernel does not take with
	// ggml_flash_attn_ext (no score matrix: the choice on GPUs); otherwise
	// it is two matrix products and a softmax, in chunks of queries.
	Flash bool
	// ScoreBytes bounds one chunk of attention scores when they are
	// materialised (0 means 256 MiB); smaller values trade speed for memory.
	ScoreBytes int64
	// Variant is the instruction-set variant of GEMM, Conv2D and Attention
	// (VariantAuto: DefaultVariant; VariantOff turns them off).
	Variant Variant
	// Precision is the arithmetic of GEMM and the attention (default f32).
	Precision Precision
	// DirectConv computes the convolutions that the CPU kernels do not take
	// with ggml_conv_2d_direct (no im2col matrix: a fraction of the device
	// memory) instead of im2col and a matrix product. Device routing (see
	// backend.DevicePolicy): on only where the device runs CONV_2D.
	DirectConv bool
	// ContiguousNorm makes the layer norms' strided inputs (the QK norm of
	// heads viewed in a fused QKV projection) contiguous first: devices whose
	// NORM takes contiguous rows only (ggml-vulkan) would otherwise leave it
	// to the CPU, splitting the graph at every block. Device routing.
	ContiguousNorm bool
	// Convs is the precision of the convolutions (Conv2D, Winograd's
	// included): ConvsF32, ConvsNarrow for Precision's (bf16; bf16 for
	// int8; for int8c the Winograd ones in int8, F(2×2) with U_ξ per output
	// channel and V_ξ per tile, where the variant has the VNNI tiles, and
	// those whose kernels were packed at load (PackWeights: conv2DPacked)
	// as int8c products of their im2col rows; the others in bf16), or
	// ConvsStrided for the strided ones only (bf16). ConvsAuto, the zero
	// value, leaves the choice to the model (model.Load); a runtime resolves
	// it to ConvsF32.
	Convs Convs
}

// Convs is the precision of a policy's convolutions.
type Convs int8

const (
	// ConvsAuto: the model's choice. model.Load narrows the convolutions of
	// the DualDPT head (DA3's any-view models) under int8c, where the VNNI
	// tiles compute them in int8, and only the strided ones (ConvsStrided)
	// of every other head and narrow precision: the depth heads' convolutions
	// carry most of the narrow modes' error, and DA2's DPT head does not keep
	// the int8c gate with them narrowed (depth correlation with f32 on an
	// NYU photo, random weights: DA3-BASE 0.99915, DA3-SMALL 0.99954,
	// DA2-Small 0.99823; with f32 convolutions 0.99967, 0.99986, 0.99940),
	// nor bf16's with them in bf16 (DA2-Small 0.99985), while the strided
	// resize in bf16 costs DA2-Small 0.00001 in bf16 (0.99995) and nothing
	// measurable in int8c.
	ConvsAuto Convs = iota
	// ConvsF32: the convolutions in float32 whatever the precision.
	ConvsF32
	// ConvsNarrow: the convolutions in the policy's narrow precision.
	ConvsNarrow
	// ConvsStrided: the strided convolutions (the DPT heads' 3×3 stride-2
	// resize) in the policy's narrow precision, bf16 for int8 and int8c
	// too; the others in float32.
	ConvsStrided
)

// String is "auto", "f32", "narrow" or "strided".
func (c Convs) String() string {
	switch c {
	case ConvsAuto:
		return "auto"
	case ConvsF32:
		return "f32"
	case ConvsNarrow:
		return "narrow"
	case ConvsStrided:
		return "strided"
	}
	return fmt.Sprintf("Convs(%d)", int8(c))
}

// Available is what this binary can run on this CPU with the process's
// variant (DefaultVariant): GEMM and Attention unless it is VariantOff;
// Resize, Norm and Strips always.
func Available() Policy {
	v := DefaultVariant()
	on := v != VariantOff
	return Policy{Explicit: true, GEMM: on, Attention: on, Resize: true, Norm: true, Strips: true, Flash: true, Variant: v}
}

// Default is the fastest policy for graphs that run on the CPU (cpu) or on
// another device: every kernel of this build on the CPU, ggml's flash
// attention elsewhere (the custom ops run on the CPU backend only).
// The process variant VariantOff turns the CPU kernels off, Resize, Norm and
// Strips included.
func Default(cpu bool) Policy {
	if !cpu {
		return Policy{Explicit: true, Flash: true}
	}
	// Two products and a softmax are faster than ggml's CPU flash attention: Flash stays off.
	return CPUKernels(DefaultVariant())
}

// CPUKernels is every CPU kernel, in variant v: the one list of them (Default
// and the CLI's -kernels VARIANT use it); none for VariantOff.
func CPUKernels(v Variant) Policy {
	on := v != VariantOff
	return Policy{Explicit: true, GEMM: on, Winograd: on, Attention: on, Resize: on, Norm: on, Strips: on, Variant: v}
}

// Mask returns p without the kernels this binary and CPU lack, with
// VariantAuto resolved to DefaultVariant. A variant that cannot run here
// turns GEMM and Attention off; a precision the variant cannot compute
// falls back to f32 (Check reports both).
func (p Policy) Mask() Policy {
	if p.Variant == VariantAuto {
		p.Variant = DefaultVariant()
	}
	if p.Variant == VariantOff || !p.Variant.Runs() {
		p.GEMM, p.Attention = false, false
	}
	if p.Precision != PrecisionF32 && !PrecisionRuns(p.Variant, p.Precision) {
		p.Precision = PrecisionF32
	}
	return p
}

// CPUOnlyOff returns p without the kernels that run on the CPU backend only
// (the runtime's policy for graphs on another device).
func (p Policy) CPUOnlyOff() Policy {
	p.GEMM, p.Attention, p.Resize, p.Norm, p.Strips = false, false, false, false, false
	return p
}

// Validate reports what makes p invalid on any device: narrow convolutions
// without a narrow precision, or an unknown Convs. Check adds what this CPU
// cannot run.
func (p Policy) Validate() error {
	if p.Convs < ConvsAuto || p.Convs > ConvsStrided {
		return fmt.Errorf("%w: unknown convolution precision %s", ErrPrecision, p.Convs)
	}
	if (p.Convs == ConvsNarrow || p.Convs == ConvsStrided) && p.Precision == PrecisionF32 {
		return fmt.Errorf("%w: narrow convolutions need the bf16 or int8 precision", ErrPrecision)
	}
	return nil
}

// Check reports a variant or precision in p that cannot run on this CPU
// (the errors wrap ErrPrecision for precisions).
func (p Policy) Check() error {
	v := p.Variant
	if v == VariantAuto {
		v = DefaultVariant()
	}
	if !v.Runs() {
		return fmt.Errorf("kernel variant %s: not runnable on this CPU (features: %s)", v, strings.Join(CPUFeatures(), " "))
	}
	if p.Precision != PrecisionF32 && (v == VariantOff || !p.GEMM || !PrecisionRuns(v, p.Precision)) {
		need := map[Precision]string{PrecisionBF16: "the avx512 kernels and AVX512_BF16", PrecisionInt8: "the avx512 kernels and AVX512_VNNI",
			PrecisionInt8Channel: "the avx2 kernels, or the avx512 kernels and AVX512_VNNI"}[p.Precision]
		return fmt.Errorf("%w: %s needs %s (kernels %s, CPU features: %s)", ErrPrecision, p.Precision, need, v, strings.Join(CPUFeatures(), " "))
	}
	return nil
}

// nodePrecision is the precision of a product with weight type w under p
// (one not packed at load: see weightPrecision): int8 (and int8c) only for
// q8_0 weights, the others bf16 where the CPU has it.
func (p Policy) nodePrecision(w ggml.Type) Precision {
	switch p.Precision {
	case PrecisionInt8, PrecisionInt8Channel:
		if w == ggml.TypeQ8_0 {
			return PrecisionInt8
		}
		if PrecisionRuns(p.Variant, PrecisionBF16) {
			return PrecisionBF16
		}
		return PrecisionF32
	}
	return p.Precision
}

type policyKey struct{}

// SetPolicy sets the kernel policy of the graph built in g (the runtime
// does, for every graph); kernels this binary lacks are dropped.
func SetPolicy(g *ggml.Context, p Policy) { g.SetValue(policyKey{}, p.Mask()) }

// PolicyOf is the kernel policy of the graph built in g: the zero Policy
// when none was set.
func PolicyOf(g *ggml.Context) Policy {
	p, _ := g.Value(policyKey{}).(Policy)
	return p
}

// Faults is the number of kernel calls, since the process started, that
// computed nothing because they could not run.
func Faults() uint64 { return uint64(C.da3_faults()) }

// ErrFault reports kernel calls that could not run; see FaultsSince.
var ErrFault = errors.New("CPU kernel failed")

// FaultsSince returns an error wrapping ErrFault (and ggml.ErrOutOfMemory
// when scratch memory ran out) when kernel calls failed since Faults
// returned n, else nil. The count is process-wide: a failure in one graph is
// also seen by graphs computed at the same time by other runtimes.
func FaultsSince(n uint64) error {
	now := Faults()
	if now == n {
		return nil
	}
	switch C.da3_last_fault() {
	case C.DA3_FAULT_NOMEM:
		return fmt.Errorf("%w: scratch buffers: %w", ErrFault, ggml.ErrOutOfMemory)
	case C.DA3_FAULT_UNAVAILABLE:
		return fmt.Errorf("%w: the kernel is not in this build", ErrFault)
	}
	return fmt.Errorf("%w: %d calls rejected their operands", ErrFault, now-n)
}

// mustFit panics with a *ggml.ShapeError for op unless ok.
func mustFit(ok bool, op string, ts []*ggml.Tensor, format string, args ...any) {
	if ok {
		return
	}
	e := &ggml.ShapeError{Op: op, Msg: fmt.Sprintf(format, args...)}
	for _, t := range ts {
		if t == nil {
			e.Shapes = append(e.Shapes, nil)
			continue
		}
		e.Shapes = append(e.Shapes, []int{t.Dim(0), t.Dim(1), t.Dim(2), t.Dim(3)})
	}
	panic(e)
}

// dims is t's shape as 4 dims (ggml order).
func dims(t *ggml.Tensor) []int { return []int{t.Dim(0), t.Dim(1), t.Dim(2), t.Dim(3)} }

// nonNil reports whether no tensor is nil.
func nonNil(ts ...*ggml.Tensor) bool {
	for _, t := range ts {
		if t == nil {
			return false
		}
	}
	return true
}
