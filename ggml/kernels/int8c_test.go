package kernels_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// TestGEMMInt8Channel checks the per-channel int8 product (int8c) of weights
// packed at load (F32, F16, BF16 and Q8_0, the last dequantized and
// quantized again) with a bias, in each variant that computes it (avx512:
// vpdpbusd; avx2: each of its steps this CPU runs, vpmaddubsw and 256-bit
// vpdpbusd, EVEX or AVX-VNNI): bit for bit against the same quantization
// computed here (one scale per weight row and per activation row over the
// whole depth, exact integer sums, one f32 scaling per output), and within
// int8's error of the float64 product; on depths that are not multiples of 4
// or 16, row counts off the tiles (8 rows; avx2 4), one and several panels
// (32 columns; avx2 16: its own 16- and 48-wide products too), and a product
// whose rows the threads share.
func TestGEMMInt8Channel(t *testing.T) {
	if !kernels.Available().GEMM {
		t.Skip("the CPU kernels are off in this build")
	}
	ran := 0
	for _, v := range []kernels.Variant{kernels.VariantAVX512, kernels.VariantAVX2} {
		if !kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
			t.Logf("variant %s: no int8c on this CPU (features %v)", v, kernels.CPUFeatures())
			continue
		}
		ran++
		for _, form := range int8ChannelForms(t, v) {
			for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0} {
				sizes := [][3]int{{70, 32, 15}, {768, 96, 29}, {3, 32, 1}, {300, 64, 300}, {1037, 32, 14}, {5, 16, 3}, {97, 48, 7}}
				if typ == ggml.TypeQ8_0 { // whole q8_0 blocks
					sizes = [][3]int{{64, 32, 15}, {768, 96, 29}, {32, 32, 1}, {288, 64, 300}, {96, 48, 5}}
				}
				for _, s := range sizes {
					K, N, M := s[0], s[1], s[2]
					if _, ok := kernels.PackedShape(v, kernels.PrecisionInt8Channel, K, N); !ok {
						continue // N not a multiple of the variant's panel width
					}
					t.Run(fmt.Sprintf("%s%s/%s/K%d_N%d_M%d", v, form.name, typ, K, N, M), func(t *testing.T) {
						form.set(t)
						testGEMMInt8Channel(t, v, typ, K, N, M)
					})
				}
			}
		}
	}
	if ran == 0 {
		t.Skip("no variant computes int8c on this CPU")
	}
}

// int8ChannelForm is one way a variant computes int8c: the avx2 variant's
// steps (its name, e.g. " vpdpbusd evex"), or the avx512 variant's one
// (no name). set makes the kernels take it until the test ends.
type int8ChannelForm struct {
	name string
	set  func(testing.TB)
}

// sub is the form's name in a benchmark's name ("_vpdpbusd-evex").
func (f int8ChannelForm) sub() string { return strings.ReplaceAll(f.name, " ", "_") }

// precisionForms lists the ways variant v computes precision p: for int8c
// its forms, else one (no name).
func precisionForms(tb testing.TB, v kernels.Variant, p kernels.Precision) []int8ChannelForm {
	if p != kernels.PrecisionInt8Channel {
		return []int8ChannelForm{{"", func(testing.TB) {}}}
	}
	return int8ChannelForms(tb, v)
}

// int8ChannelForms lists the forms of variant v this CPU runs, logging the
// avx2 ones it cannot.
func int8ChannelForms(tb testing.TB, v kernels.Variant) []int8ChannelForm {
	if v != kernels.VariantAVX2 {
		return []int8ChannelForm{{"", func(testing.TB) {}}}
	}
	var out []int8ChannelForm
	for _, f := range []kernels.AVX2Int8Form{kernels.AVX2Int8Maddubs, kernels.AVX2Int8VNNI512, kernels.AVX2Int8AVXVNNI} {
		before, _ := kernels.SetAVX2Int8Form(-1)
		got, ok := kernels.SetAVX2Int8Form(f)
		if !ok {
			tb.Logf("avx2 int8c step %s: not on this CPU (features %v)", f, kernels.CPUFeatures())
			continue
		}
		kernels.SetAVX2Int8Form(before)
		require.Equal(tb, f, got)
		out = append(out, int8ChannelForm{" " + f.String(), func(tb testing.TB) {
			before, _ := kernels.SetAVX2Int8Form(-1)
			_, ok := kernels.SetAVX2Int8Form(f)
			require.True(tb, ok)
			tb.Cleanup(func() { kernels.SetAVX2Int8Form(before) })
		}})
	}
	return out
}

// TestAVX2Int8FormChoice checks that the avx2 variant's int8c takes the
// fastest step this CPU has (AVX-VNNI, else AVX512_VNNI's 256-bit vpdpbusd,
// else vpmaddubsw), refuses a step it lacks and names it in Describe.
func TestAVX2Int8FormChoice(t *testing.T) {
	if !kernels.PrecisionRuns(kernels.VariantAVX2, kernels.PrecisionInt8Channel) {
		t.Skipf("no avx2 int8c on this CPU (features %v)", kernels.CPUFeatures())
	}
	feats := strings.Join(kernels.CPUFeatures(), " ")
	want := kernels.AVX2Int8Maddubs
	switch {
	case strings.Contains(feats, "avx_vnni"):
		want = kernels.AVX2Int8AVXVNNI
	case strings.Contains(feats, "avx512_vnni"):
		want = kernels.AVX2Int8VNNI512
	}
	before, _ := kernels.SetAVX2Int8Form(-1)
	t.Cleanup(func() { kernels.SetAVX2Int8Form(before) })
	got, ok := kernels.SetAVX2Int8Form(kernels.AVX2Int8Auto)
	require.True(t, ok)
	assert.Equal(t, want, got, "CPU features %s", feats)
	assert.Contains(t, kernels.Describe(kernels.Policy{GEMM: true, Variant: kernels.VariantAVX2,
		Precision: kernels.PrecisionInt8Channel}), want.String())
	for _, f := range []kernels.AVX2Int8Form{kernels.AVX2Int8Auto, kernels.AVX2Int8Maddubs, kernels.AVX2Int8VNNI512, kernels.AVX2Int8AVXVNNI} {
		p, err := kernels.ParseAVX2Int8Form(f.String())
		require.NoError(t, err)
		assert.Equal(t, f, p)
	}
	p, err := kernels.ParseAVX2Int8Form("vpdpbusd")
	require.NoError(t, err)
	assert.Contains(t, []kernels.AVX2Int8Form{kernels.AVX2Int8VNNI512, kernels.AVX2Int8AVXVNNI}, p)
	_, err = kernels.ParseAVX2Int8Form("vpdpwssd")
	assert.ErrorContains(t, err, "vpdpwssd")
	if !strings.Contains(feats, "avx_vnni") {
		_, ok := kernels.SetAVX2Int8Form(kernels.AVX2Int8AVXVNNI)
		assert.False(t, ok, "AVX-VNNI refused where the CPU lacks it")
		now, _ := kernels.SetAVX2Int8Form(-1)
		assert.Equal(t, want, now, "a refused step changes nothing")
	}
}

func testGEMMInt8Channel(t *testing.T, v kernels.Variant, typ ggml.Type, K, N, M int) {
	h := optest.NewHarness(t, 16)
	pol := kernels.Policy{GEMM: true, Variant: v, Precision: kernels.PrecisionInt8Channel}
	kernels.SetPolicy(h.G, pol)
	rng := optest.RNG(uint64(K*1000 + M))
	wv := optest.Randn(rng, K*N, 1)
	for n := range N { // channels of very different ranges: one scale per channel must follow them
		for k := range K {
			wv[n*K+k] *= float32(math.Exp2(float64(n%7) - 3))
		}
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(&wv[0])), 4*len(wv))
	if typ != ggml.TypeF32 {
		var err error
		data, err = ggml.QuantizeChunk(typ, wv, N, K, nil)
		require.NoError(t, err)
	}
	wd, err := ggml.ToFloat32(typ, data, K*N) // the weights' values as stored
	require.NoError(t, err)
	w := h.Input(typ, wv, K, N)
	xv := optest.Randn(rng, K*M, 1)
	for m := range M { // rows of different ranges, an outlier in every fourth
		for k := range K {
			xv[m*K+k] *= float32(1 + m%5)
		}
		if m%4 == 0 {
			xv[m*K+(m*7)%K] = 20
		}
	}
	x := h.Input(ggml.TypeF32, xv, K, M)
	bv := optest.Randn(rng, N, 1)
	b := h.Input(ggml.TypeF32, bv, N)

	set, err := kernels.PackWeights(pol, []*ggml.Tensor{w}, func(*ggml.Tensor) ([]byte, error) { return data, nil }, nil)
	require.NoError(t, err)
	defer set.Close()
	pw := set.Weights()[w]
	require.NotNil(t, pw, "the weight is packed for int8c")
	assert.Equal(t, kernels.PrecisionInt8Channel, pw.Precision)
	ep := kernels.Epilogue{Bias: b}
	require.True(t, kernels.GEMMPackedFits(h.G, pw, x, ep))
	before := kernelcount.Calls(v, kernels.PrecisionInt8Channel)
	got := h.Compute(kernels.GEMMPacked(h.G, pw, x, ep))[0]
	assert.Greater(t, kernelcount.Calls(v, kernels.PrecisionInt8Channel), before, "the int8c kernels ran")

	want := int8ChannelRef(wd, xv, bv, K, N, M)
	require.Len(t, got, len(want))
	mismatches := 0
	for i := range want {
		if got[i] != want[i] {
			if mismatches < 5 {
				t.Errorf("row %d column %d: got %g, want %g", i/N, i%N, got[i], want[i])
			}
			mismatches++
		}
	}
	assert.Zero(t, mismatches, "outputs differing from the same quantization computed exactly")

	// Against the float64 product of the unquantized operands: int8's error,
	// each output within the bound of its operands' roundings.
	bound := int8ChannelBound(wd, xv, bv, K, N, M)
	var num, den float64
	outside := 0
	for m := range M {
		for n := range N {
			s := float64(bv[n])
			for k := range K {
				s += float64(xv[m*K+k]) * float64(wd[n*K+k])
			}
			d := float64(got[m*N+n]) - s
			num += d * d
			den += s * s
			if math.Abs(d) > bound[m*N+n] {
				if outside < 5 {
					t.Errorf("row %d column %d: error %g beyond the quantization bound %g", m, n, d, bound[m*N+n])
				}
				outside++
			}
		}
	}
	assert.Zero(t, outside, "outputs beyond the quantization bound")
	// Each operand's rounding error is about (max|v|/127)/√12, 0.7 % of a
	// Gaussian row's spread at K = 768, more with an outlier: 0.7–1.4 % for
	// these products.
	assert.Less(t, math.Sqrt(num/den), 2e-2, "relative Frobenius error against the f32 product")
}

// int8ChannelBound is, per output of int8ChannelRef, the most the
// quantization can move it from the exact product: with the rounding steps
// e_x = s_x/2 and e_w = s_w/2 (each value moves by at most half a step,
// clamping included), Σ_k |x_k|·e_w + e_x·|w_k| + e_x·e_w, plus f32's
// rounding of the sum and the scaling (relative 2⁻²² of Σ|x·w| and |b|).
func int8ChannelBound(w, x, b []float32, K, N, M int) []float64 {
	scale := func(v []float32) float64 {
		var amax float64
		for _, f := range v {
			amax = max(amax, math.Abs(float64(f)))
		}
		return amax / 127
	}
	out := make([]float64, M*N)
	for m := range M {
		xr := x[m*K : (m+1)*K]
		ex := scale(xr) / 2
		for n := range N {
			wr := w[n*K : (n+1)*K]
			ew := scale(wr) / 2
			var e, mag float64
			for k := range K {
				ax, aw := math.Abs(float64(xr[k])), math.Abs(float64(wr[k]))
				e += ax*ew + ex*aw + ex*ew
				mag += ax * aw
			}
			out[m*N+n] = e + 0x1p-22*(mag+math.Abs(float64(b[n])))
		}
	}
	return out
}

// quantizeRow is the symmetric int8 quantization of x with one scale,
// max|x|/127, rounded to nearest (ties to even) as the kernels do it in f32.
func quantizeRow(x []float32) ([]int32, float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	q := make([]int32, len(x))
	for i, v := range x {
		q[i] = int32(max(-127, min(127, math.RoundToEven(float64(v*id)))))
	}
	return q, d
}

// int8ChannelRef is x·wᵀ + b with w quantized per row (channel) and x per
// row, the integer sums exact and each output scaled once in f32
// (f32(Σ)·(s_x·s_w), then the bias): what the int8c kernel computes.
func int8ChannelRef(w, x, b []float32, K, N, M int) []float32 {
	qw, sw := make([][]int32, N), make([]float32, N)
	for n := range N {
		qw[n], sw[n] = quantizeRow(w[n*K : (n+1)*K])
	}
	out := make([]float32, M*N)
	for m := range M {
		qx, sx := quantizeRow(x[m*K : (m+1)*K])
		for n := range N {
			var s int64
			for k := range K {
				s += int64(qx[k]) * int64(qw[n][k])
			}
			out[m*N+n] = float32(s)*(sx*sw[n]) + b[n]
		}
	}
	return out
}

// TestInt8ChannelPolicy checks which products take int8c: weights packed
// at load of the types it quantizes; not a weight packed for another
// precision; and that the precision parses and is refused where the
// variant cannot compute it.
func TestInt8ChannelPolicy(t *testing.T) {
	p, err := kernels.ParsePrecision("int8c")
	require.NoError(t, err)
	assert.Equal(t, kernels.PrecisionInt8Channel, p)
	assert.Equal(t, "int8c", p.String())
	assert.False(t, kernels.PrecisionRuns(kernels.VariantPortable, kernels.PrecisionInt8Channel))
	assert.Equal(t, kernels.VariantAVX2.Runs(), kernels.PrecisionRuns(kernels.VariantAVX2, kernels.PrecisionInt8Channel),
		"every AVX2 CPU (no VNNI needed)")
	assert.False(t, kernels.PrecisionRuns(kernels.VariantAVX2, kernels.PrecisionInt8), "q8_0 int8 stays AVX-512")
	assert.Equal(t, kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionInt8),
		kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionInt8Channel), "the same CPU features as int8")
	err = kernels.Policy{GEMM: true, Variant: kernels.VariantPortable, Precision: kernels.PrecisionInt8Channel}.Check()
	require.ErrorIs(t, err, kernels.ErrPrecision)
	assert.Contains(t, err.Error(), "AVX512_VNNI")
	_, ok := kernels.PackedShape(kernels.VariantAVX512, kernels.PrecisionInt8Channel, 768, 96)
	assert.Equal(t, kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionInt8Channel), ok)
	_, ok = kernels.PackedShape(kernels.VariantAVX512, kernels.PrecisionInt8Channel, 1<<17, 96)
	assert.False(t, ok, "a depth whose int32 sums could overflow")
	if kernels.PrecisionRuns(kernels.VariantAVX2, kernels.PrecisionInt8Channel) {
		shape, ok := kernels.PackedShape(kernels.VariantAVX2, kernels.PrecisionInt8Channel, 770, 48)
		require.True(t, ok)
		assert.Equal(t, []int{16 * (193 + 2), 3}, shape, "avx2: 16-column panels of ⌈K/4⌉ quads, a scale and an excess")
		_, ok = kernels.PackedShape(kernels.VariantAVX2, kernels.PrecisionInt8Channel, 1<<17, 48)
		assert.False(t, ok, "a depth whose int32 sums could overflow")
		err = kernels.Policy{GEMM: true, Variant: kernels.VariantAVX2, Precision: kernels.PrecisionInt8Channel}.Check()
		assert.NoError(t, err)
	}
	assert.True(t, strings.Contains(kernels.Describe(kernels.Policy{GEMM: true, Variant: kernels.VariantAVX512,
		Precision: kernels.PrecisionInt8Channel}), "int8c") || !kernels.PrecisionRuns(kernels.VariantAVX512, kernels.PrecisionInt8Channel))
}

// TestInt8ChannelVariantsApart checks that weights packed for int8c in one
// variant are never read by the other's kernels (their panels differ: 32
// columns with an excess per column in avx512, 16 without in avx2): a graph
// of the other variant does not take them, and the kernel refuses their
// shape if handed them anyway.
func TestInt8ChannelVariantsApart(t *testing.T) {
	vs := []kernels.Variant{kernels.VariantAVX512, kernels.VariantAVX2}
	for _, v := range vs {
		if !kernels.Available().GEMM || !kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
			t.Skipf("needs int8c in both variants (%s has none here)", v)
		}
	}
	const K, N, M = 64, 96, 5
	for i, v := range vs {
		other := vs[1-i]
		t.Run(v.String(), func(t *testing.T) {
			h := optest.NewHarness(t, 16)
			rng := optest.RNG(7)
			wv := optest.Randn(rng, K*N, 1)
			w := h.Input(ggml.TypeF32, wv, K, N)
			x := h.Input(ggml.TypeF32, optest.Randn(rng, K*M, 1), K, M)
			pol := kernels.Policy{GEMM: true, Variant: v, Precision: kernels.PrecisionInt8Channel}
			set, err := kernels.PackWeights(pol, []*ggml.Tensor{w}, func(*ggml.Tensor) ([]byte, error) {
				return unsafe.Slice((*byte)(unsafe.Pointer(&wv[0])), 4*len(wv)), nil
			}, nil)
			require.NoError(t, err)
			defer set.Close()
			pw := set.Weights()[w]
			require.NotNil(t, pw)
			assert.Equal(t, v, pw.Variant)
			kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Variant: other, Precision: kernels.PrecisionInt8Channel})
			assert.False(t, kernels.GEMMPackedFits(h.G, pw, x, kernels.Epilogue{}), "a %s graph takes no %s panels", other, v)
			kernels.SetPolicy(h.G, pol)
			require.True(t, kernels.GEMMPackedFits(h.G, pw, x, kernels.Epilogue{}))
			y := kernels.GEMMPacked(h.G, pw, x, kernels.Epilogue{})
			kernels.SetPolicy(h.G, kernels.Policy{GEMM: true, Variant: other, Precision: kernels.PrecisionInt8Channel})
			forged := h.G.Custom(kernels.OpGEMM, ggml.TypeF32, []int{N, M, 1, 1}, []*ggml.Tensor{pw.T, x},
				uintptr(kernels.PrecisionInt8Channel)<<8|uintptr(other)<<16|1<<24)
			before := kernels.Faults()
			h.Compute(y, forged)
			assert.Greater(t, kernels.Faults(), before, "the %s kernel refuses %s panels", other, v)
		})
	}
}

// BenchmarkGEMMInt8Channel compares the products of weights packed at load
// in f32, bf16, int8 (q8_0 blocks) and int8c (one scale per channel) on the
// linear layers of a ViT-B block at 504×336 (865 tokens: 36·24 patches and
// the class token), the first MLP product also with its GELU (the
// difference is the GELU's cost), in each variant this CPU runs (avx512,
// avx2). Run it under taskset -c 0 for one thread.
func BenchmarkGEMMInt8Channel(b *testing.B) {
	if !kernels.Available().GEMM {
		b.Skip("the CPU kernels are off in this build")
	}
	for _, s := range []struct {
		K, N, M int
		act     kernels.Act
	}{{768, 2304, 865, kernels.ActNone}, {768, 768, 865, kernels.ActNone}, {768, 3072, 865, kernels.ActNone},
		{768, 3072, 865, kernels.ActGELU}, {3072, 768, 865, kernels.ActNone}} {
		for _, v := range []kernels.Variant{kernels.VariantAVX512, kernels.VariantAVX2} {
			for _, p := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8, kernels.PrecisionInt8Channel} {
				if !v.Runs() || !kernels.PrecisionRuns(v, p) {
					continue
				}
				for _, form := range precisionForms(b, v, p) {
					benchGEMMPacked(b, v, p, form, s.K, s.N, s.M, s.act)
				}
			}
		}
	}
}

// benchGEMMPacked is one product of BenchmarkGEMMInt8Channel: variant v,
// precision p (in form), the weight [K, N] packed at load, M rows, and the
// activation act in its epilogue.
func benchGEMMPacked(b *testing.B, v kernels.Variant, p kernels.Precision, form int8ChannelForm, K, N, M int, act kernels.Act) {
	name := fmt.Sprintf("%s/%s%s/K%d_N%d_M%d", v, p, form.sub(), K, N, M)
	if act == kernels.ActGELU {
		name += "_gelu"
	}
	b.Run(name, func(b *testing.B) {
		form.set(b)
		h := optest.NewHarness(b, 16)
		rng := optest.RNG(1)
		typ := ggml.TypeF32
		if p == kernels.PrecisionInt8 {
			typ = ggml.TypeQ8_0
		}
		wd := optest.Randn(rng, K*N, 1)
		data := unsafe.Slice((*byte)(unsafe.Pointer(&wd[0])), 4*len(wd))
		if typ == ggml.TypeQ8_0 {
			var err error
			data, err = ggml.QuantizeChunk(typ, wd, N, K, nil)
			require.NoError(b, err)
		}
		w := h.Input(typ, wd, K, N)
		x := h.Input(ggml.TypeF32, optest.Randn(rng, K*M, 1), K, M)
		pol := kernels.CPUKernels(v)
		pol.Precision = p
		kernels.SetPolicy(h.G, pol)
		set, err := kernels.PackWeights(pol, []*ggml.Tensor{w}, func(*ggml.Tensor) ([]byte, error) { return data, nil }, nil)
		require.NoError(b, err)
		b.Cleanup(func() { set.Close() })
		pw := set.Weights()[w]
		require.NotNil(b, pw)
		require.Equal(b, p, pw.Precision)
		h.Bench(b, kernels.GEMMPacked(h.G, pw, x, kernels.Epilogue{Act: act}), 2*float64(K*N*M))
	})
}

// TestConv2DPackedInt8Channel checks the convolutions whose kernels are
// packed at load for int8 (int8c with narrow convolutions on the VNNI
// tiles: a DPT head's 3×3 stride-2 resize): Conv2D then computes each
// output exactly as the per-channel product of the input's im2col rows
// (each quantized over the kernel's whole depth) by the kernel's rows (each
// output channel quantized over its own), with the bias and activation, for
// two images, a stride of 2 and padding; and within the quantization bound
// of the float64 convolution. Without narrow convolutions the kernel is not
// packed.
func TestConv2DPackedInt8Channel(t *testing.T) {
	for _, v := range variants {
		if !v.Runs() || !kernels.PrecisionRuns(v, kernels.PrecisionInt8) {
			continue // the VNNI tiles (convsPacked)
		}
		for _, norm := range []bool{false, true} { // the im2col rows by ggml's kernel, or by Im2Col
			t.Run(fmt.Sprintf("%s/norm=%v", v, norm), func(t *testing.T) { testConv2DPackedInt8Channel(t, v, norm) })
		}
	}
}

func testConv2DPackedInt8Channel(t *testing.T, v kernels.Variant, norm bool) {
	const KW, KH, IC, OC, W, H, N = 3, 3, 24, 64, 13, 9, 2
	const K = KW * KH * IC
	p := ggml.Conv2DParams{Stride: 2, Pad: 1}
	OW, OH := p.OutSize(W, H, KW, KH)
	h := optest.NewHarness(t, 32)
	pol := kernels.Policy{GEMM: true, Winograd: true, Norm: norm, Variant: v, Precision: kernels.PrecisionInt8Channel, Convs: kernels.ConvsNarrow}
	kernels.SetPolicy(h.G, pol)
	rng := optest.RNG(11)
	kv, xv, bv := optest.Randn(rng, K*OC, 1), optest.Randn(rng, W*H*IC*N, 1), optest.Randn(rng, OC, 1)
	w := h.Input(ggml.TypeF32, kv, KW, KH, IC, OC)
	x := h.Input(ggml.TypeF32, xv, W, H, IC, N)
	b := h.Input(ggml.TypeF32, bv, OC)
	read := func(*ggml.Tensor) ([]byte, error) {
		return unsafe.Slice((*byte)(unsafe.Pointer(&kv[0])), 4*len(kv)), nil
	}

	f32 := pol
	f32.Convs = kernels.ConvsF32
	none, err := kernels.PackWeights(f32, []*ggml.Tensor{w}, read, nil)
	require.NoError(t, err)
	assert.Nil(t, none.Weights()[w], "f32 convolutions: the kernel is not packed")
	none.Close()

	set, err := kernels.PackWeights(pol, []*ggml.Tensor{w}, read, nil)
	require.NoError(t, err)
	defer set.Close()
	pw := set.Weights()[w]
	require.NotNil(t, pw, "the kernel is packed as %d rows of %d", OC, K)
	assert.Equal(t, [3]any{K, OC, kernels.PrecisionInt8Channel}, [3]any{pw.K, pw.N, pw.Precision})
	kernels.SetPacked(h.G, set.Weights())
	before := kernelcount.Calls(v, kernels.PrecisionInt8Channel)
	got := h.Compute(kernels.Conv2D(h.G, w, x, p, kernels.Epilogue{Bias: b, Act: kernels.ActReLU}))[0]
	assert.Greater(t, kernelcount.Calls(v, kernels.PrecisionInt8Channel), before, "the int8c kernels ran")
	require.Len(t, got, OW*OH*OC*N)

	// the im2col rows: pixel m = (n·OH + oy)·OW + ox, depth k = (ic·KH + ky)·KW + kx
	rows := make([]float32, OW*OH*N*K)
	for n := range N {
		for oy := range OH {
			for ox := range OW {
				m := (n*OH+oy)*OW + ox
				for ic := range IC {
					for ky := range KH {
						for kx := range KW {
							iy, ix := oy*2-1+ky, ox*2-1+kx
							if iy >= 0 && iy < H && ix >= 0 && ix < W {
								rows[m*K+(ic*KH+ky)*KW+kx] = xv[((n*IC+ic)*H+iy)*W+ix]
							}
						}
					}
				}
			}
		}
	}
	want := int8ChannelRef(kv, rows, bv, K, OC, OW*OH*N)
	bound := int8ChannelBound(kv, rows, bv, K, OC, OW*OH*N)
	mismatches, outside := 0, 0
	for m := range OW * OH * N {
		n, pix := m/(OW*OH), m%(OW*OH)
		for oc := range OC {
			g := got[(n*OC+oc)*OW*OH+pix]
			if e := max(want[m*OC+oc], 0); g != e {
				if mismatches < 5 {
					t.Errorf("image %d pixel %d channel %d: got %g, want %g", n, pix, oc, g, e)
				}
				mismatches++
			}
			s := float64(bv[oc])
			for k := range K {
				s += float64(rows[m*K+k]) * float64(kv[oc*K+k])
			}
			if d := math.Abs(float64(g) - max(s, 0)); d > bound[m*OC+oc] {
				if outside < 5 {
					t.Errorf("image %d pixel %d channel %d: error %g beyond the quantization bound %g", n, pix, oc, d, bound[m*OC+oc])
				}
				outside++
			}
		}
	}
	assert.Zero(t, mismatches, "outputs differing from the same quantization computed exactly")
	assert.Zero(t, outside, "outputs beyond the quantization bound of the float64 convolution")
}
