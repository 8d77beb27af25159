package tests

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/kernelcount"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// The opt-in precisions of the CPU kernels, gated end to end on the
// committed tiny fixtures against the same model in f32: depth correlation
// ≥ 0.9999 for bf16 (the f32 file, every product in bf16) and ≥ 0.999 for
// int8 (the default q8_0 file, its q8_0 matrices in int8 and the rest in
// bf16).
const (
	bf16Gate = 0.9999
	int8Gate = 0.999
)

// runPrecision loads path with precision p, runs it on img and closes it.
func runPrecision(t *testing.T, path string, p kernels.Precision, img model.Image, opts model.RunOptions) *model.Result {
	t.Helper()
	m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Kernels: kernels.Policy{Precision: p}}})
	require.NoError(t, err, "load %s in %s", path, p)
	defer m.Close()
	require.Equal(t, p, m.Kernels().Precision)
	r, err := m.Depth(context.Background(), img, opts)
	require.NoError(t, err)
	return r
}

func TestPrecisionAccuracy(t *testing.T) {
	v := kernels.DefaultVariant()
	for _, fx := range quantFixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img, err := imgio.Decode(fx.image)
			require.NoError(t, err)
			f32 := fx.gguf(t)
			ref := runPrecision(t, f32, kernels.PrecisionF32, img, fx.opts)
			for _, tc := range []struct {
				prec  kernels.Precision
				quant ggml.Type // the file's matrices
				gate  float64
			}{
				{kernels.PrecisionBF16, ggml.TypeF32, bf16Gate},
				{kernels.PrecisionInt8, ggml.TypeQ8_0, int8Gate},
				{kernels.PrecisionInt8Channel, ggml.TypeQ8_0, int8Gate},
			} {
				t.Run(tc.prec.String(), func(t *testing.T) {
					if !kernels.PrecisionRuns(v, tc.prec) {
						// The precision is refused, not silently run in f32.
						_, err := model.Load(context.Background(), f32, model.Options{Options: backend.Options{Device: "cpu", Kernels: kernels.Policy{Precision: tc.prec}}})
						require.ErrorIs(t, err, kernels.ErrPrecision)
						t.Skipf("%s needs AVX-512 with %s (kernels %s, CPU features %v)", tc.prec,
							map[kernels.Precision]string{kernels.PrecisionBF16: "AVX512_BF16", kernels.PrecisionInt8: "AVX512_VNNI", kernels.PrecisionInt8Channel: "AVX512_VNNI or the avx2 kernels"}[tc.prec],
							v, kernels.CPUFeatures())
					}
					path := f32
					if tc.quant != ggml.TypeF32 {
						path, _ = quantizeFile(t, f32, tc.quant, ggml.TypeF32)
					}
					before := kernelcount.Calls(v, tc.prec)
					got := runPrecision(t, path, tc.prec, img, fx.opts)
					assert.Greater(t, kernelcount.Calls(v, tc.prec), before, "the %s kernels ran", tc.prec)
					maxAbs, _, corr := testutil.Stats(ref.Depth, got.Depth)
					t.Logf("%s %s: depth corr %.7f, max|d| %.3g (%.2g%% of max)", fx.name, tc.prec, corr, maxAbs, 100*maxAbs/maxOf(ref.Depth))
					assert.GreaterOrEqual(t, corr, tc.gate, "depth correlation with the f32 model")
				})
			}
		})
	}
}

// TestNarrowConvs checks kernels.ConvsNarrow: refused in f32; in bf16 the
// convolutions then run in bf16 too, which changes the depth (a little:
// still within the bf16 gate of the f32 model).
func TestNarrowConvs(t *testing.T) {
	fx := quantFixtures()[0]
	f32 := fx.gguf(t)
	_, err := model.Load(context.Background(), f32, model.Options{Options: backend.Options{Device: "cpu", Kernels: kernels.Policy{Convs: kernels.ConvsNarrow}}})
	require.ErrorIs(t, err, kernels.ErrPrecision, "narrow convolutions in f32")
	if !kernels.PrecisionRuns(kernels.DefaultVariant(), kernels.PrecisionBF16) {
		t.Skipf("bf16 needs AVX-512 with AVX512_BF16 (CPU features %v)", kernels.CPUFeatures())
	}
	img, err := imgio.Decode(fx.image)
	require.NoError(t, err)
	ref := runPrecision(t, f32, kernels.PrecisionF32, img, fx.opts)
	wide := runPrecision(t, f32, kernels.PrecisionBF16, img, fx.opts)
	m, err := model.Load(context.Background(), f32, model.Options{Options: backend.Options{Device: "cpu", Kernels: kernels.Policy{Precision: kernels.PrecisionBF16, Convs: kernels.ConvsNarrow}}})
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, kernels.ConvsNarrow, m.Kernels().Convs)
	narrow, err := m.Depth(context.Background(), img, fx.opts)
	require.NoError(t, err)
	assert.NotEqual(t, wide.Depth, narrow.Depth, "the convolutions ran in bf16")
	_, _, cw := testutil.Stats(ref.Depth, wide.Depth)
	_, _, cn := testutil.Stats(ref.Depth, narrow.Depth)
	t.Logf("%s depth corr with f32: bf16 %.7f, bf16 with narrow convolutions %.7f", fx.name, cw, cn)
	assert.GreaterOrEqual(t, cn, bf16Gate)
}

// TestConvsAuto checks the model's choice of the convolutions' precision
// (kernels.ConvsAuto): narrow under int8c for DA3's DualDPT head, the
// strided ones only for DA2's DPT head and in bf16, f32 in f32 and when f32
// is asked for. Where the CPU has bf16, DA2's strided convolution then runs
// in bf16 (the depth differs from the run with f32 convolutions, within
// the int8 gate); where the VNNI tiles compute them in int8, DA3's narrowed
// run differs from the one with f32 convolutions and keeps the int8 gate.
func TestConvsAuto(t *testing.T) {
	v := kernels.DefaultVariant()
	if !kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
		t.Skipf("int8c needs the avx2 kernels or AVX512_VNNI (kernels %s, CPU features %v)", v, kernels.CPUFeatures())
	}
	da2, da3 := quantFixtures()[0], quantFixtures()[1]
	load := func(path string, p kernels.Policy) *model.Model {
		m, err := model.Load(context.Background(), path, model.Options{Options: backend.Options{Device: "cpu", Kernels: p}})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	int8c := kernels.Policy{Precision: kernels.PrecisionInt8Channel}
	da2Path, da3Path := da2.gguf(t), da3.gguf(t)
	da2Auto := load(da2Path, int8c)
	assert.Equal(t, kernels.ConvsStrided, da2Auto.Kernels().Convs, "DA2 under int8c")
	assert.Equal(t, kernels.ConvsF32, load(da3Path, kernels.Policy{}).Kernels().Convs, "DA3 in f32")
	if kernels.PrecisionRuns(v, kernels.PrecisionBF16) {
		assert.Equal(t, kernels.ConvsStrided, load(da3Path, kernels.Policy{Precision: kernels.PrecisionBF16}).Kernels().Convs, "DA3 in bf16")
		assert.Contains(t, kernels.Describe(da2Auto.Kernels()), "narrow strided convolutions")
		da2Wide := int8c
		da2Wide.Convs = kernels.ConvsF32
		compareNarrowed(t, da2, da2Path, da2Auto, load(da2Path, da2Wide), "the strided one in bf16")
	}
	auto := load(da3Path, int8c)
	assert.Equal(t, kernels.ConvsNarrow, auto.Kernels().Convs, "DA3 under int8c")
	wide := int8c
	wide.Convs = kernels.ConvsF32
	f32Convs := load(da3Path, wide)
	assert.Equal(t, kernels.ConvsF32, f32Convs.Kernels().Convs, "DA3 under int8c, f32 asked for")
	if !kernels.PrecisionRuns(v, kernels.PrecisionInt8) {
		assert.NotContains(t, kernels.Describe(auto.Kernels()), "narrow", "the %s kernels narrow no convolution under int8c", v)
		t.Skipf("the 3×3 convolutions run in int8 on the avx512 kernels with AVX512_VNNI (kernels %s)", v)
	}
	assert.Contains(t, kernels.Describe(auto.Kernels()), "narrow convolutions")
	compareNarrowed(t, da3, da3Path, auto, f32Convs, "in int8")
}

// compareNarrowed runs fx's image through narrowed (int8c with some
// convolutions narrowed, as what says) and base (the same with f32
// convolutions): the depths must differ, and the narrowed one keep the int8
// gate against the file in f32.
func compareNarrowed(t *testing.T, fx quantFixture, path string, narrowed, base *model.Model, what string) {
	t.Helper()
	img, err := imgio.Decode(fx.image)
	require.NoError(t, err)
	ref := runPrecision(t, path, kernels.PrecisionF32, img, fx.opts)
	got, err := narrowed.Depth(context.Background(), img, fx.opts)
	require.NoError(t, err)
	wide, err := base.Depth(context.Background(), img, fx.opts)
	require.NoError(t, err)
	assert.NotEqual(t, wide.Depth, got.Depth, "the convolutions ran %s", what)
	_, _, cb := testutil.Stats(ref.Depth, wide.Depth)
	_, _, cg := testutil.Stats(ref.Depth, got.Depth)
	t.Logf("%s int8c depth corr with f32: f32 convolutions %.7f, %s %.7f", fx.name, cb, what, cg)
	assert.GreaterOrEqual(t, cg, int8Gate)
}

func maxOf(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		if float64(x) > m {
			m = float64(x)
		}
	}
	return m
}
