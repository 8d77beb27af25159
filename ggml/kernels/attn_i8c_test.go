package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/internal/optest"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
)

// TestAttentionInt8Channel checks Attention in int8c precision twice over:
// against a float64 model of its quantization (q and k per token, v per head
// dim, the probabilities exp(s − max) as bytes round(255·p), exact integer
// sums; the kernel's exponential and float32 sums may move a byte whose
// 255·p lies within 0.01 of a rounding tie, and the bound allows exactly
// those), and against the exact attention within the error its
// quantization can make: the scores within e = scale·(s_k·Σ|q| + s_q·Σ|k| +
// s_k·s_q·hd/2)/2, which scales the probabilities by at most exp(±2e), the
// bytes within 1/510 of max p, and v within s_v/2.
//
// It runs in each variant and form that has the int8 attention: avx512 with
// AVX512_VNNI, and the avx2 variant's vpdpbusd forms (EVEX, AVX-VNNI).
func TestAttentionInt8Channel(t *testing.T) {
	ran := 0
	for _, v := range []kernels.Variant{kernels.VariantAVX512, kernels.VariantAVX2} {
		if !kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
			t.Logf("variant %s: no int8c on this CPU (features %v)", v, kernels.CPUFeatures())
			continue
		}
		for _, form := range int8ChannelForms(t, v) {
			if v == kernels.VariantAVX2 && form.name == " "+kernels.AVX2Int8Maddubs.String() {
				continue // no int8 attention: the attention stays f32
			}
			ran++
			before := kernelcount.Calls(v, kernels.PrecisionInt8Channel)
			for _, s := range []struct {
				hd, H, n, nk int
				sharp        float64 // the queries' scale: larger is a peakier softmax
			}{{64, 2, 33, 33, 1}, {20, 2, 7, 300, 1}, {64, 1, 70, 129, 3}, {40, 3, 32, 1370, 2}, {17, 1, 5, 6, 1}, {64, 2, 1, 1, 1}, {128, 1, 3, 9, 1}} {
				t.Run(fmt.Sprintf("%s%s/hd%d_H%d_n%d_nk%d", v, form.name, s.hd, s.H, s.n, s.nk), func(t *testing.T) {
					form.set(t)
					testAttentionInt8Channel(t, v, s.hd, s.H, s.n, s.nk, s.sharp)
				})
			}
			assert.Greater(t, kernelcount.Calls(v, kernels.PrecisionInt8Channel), before, "the int8c attention ran")
		}
	}
	if ran == 0 {
		t.Skipf("no int8 attention on this CPU (features %v)", kernels.CPUFeatures())
	}
}

// TestAttentionInt8ChannelAVX2Maddubs checks that the avx2 variant's
// vpmaddubsw form, which has no int8 attention, computes the int8c
// attention in f32: equal to the f32 attention.
func TestAttentionInt8ChannelAVX2Maddubs(t *testing.T) {
	v := kernels.VariantAVX2
	if !kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
		t.Skipf("no avx2 int8c on this CPU (features %v)", kernels.CPUFeatures())
	}
	before, _ := kernels.SetAVX2Int8Form(-1)
	t.Cleanup(func() { kernels.SetAVX2Int8Form(before) })
	_, ok := kernels.SetAVX2Int8Form(kernels.AVX2Int8Maddubs)
	require.True(t, ok)
	run := func(p kernels.Precision) []float32 {
		h := optest.NewHarness(t, 16)
		kernels.SetPolicy(h.G, kernels.Policy{Attention: true, Variant: v, Precision: p})
		rng := optest.RNG(5)
		q, _ := h.Rand(rng, 40, 2, 19, 1)
		k, _ := h.Rand(rng, 40, 2, 70, 1)
		vt, _ := h.Rand(rng, 40, 2, 70, 1)
		return h.Compute(kernels.Attention(h.G, q, k, vt, 0.15))[0]
	}
	assert.Equal(t, run(kernels.PrecisionF32), run(kernels.PrecisionInt8Channel))
}

func testAttentionInt8Channel(t *testing.T, v kernels.Variant, hd, H, n, nk int, sharp float64) {
	h := optest.NewHarness(t, 16)
	kernels.SetPolicy(h.G, kernels.Policy{Attention: true, Variant: v, Precision: kernels.PrecisionInt8Channel})
	rng := optest.RNG(uint64(nk*7 + hd))
	qv := optest.Randn(rng, hd*H*n, sharp)
	q := h.Input(ggml.TypeF32, qv, hd, H, n, 1)
	qr := optest.NDFrom(qv, hd, H, n, 1)
	k, kr := h.Rand(rng, hd, H, nk, 1)
	vt, vr := h.Rand(rng, hd, H, nk, 1)
	scale := 1 / math.Sqrt(float64(hd))
	got := h.Compute(kernels.Attention(h.G, q, k, vt, float32(scale)))[0]

	badModel, badExact, worstModel, worstExact := 0, 0, 0.0, 0.0
	for hh := range H {
		// v per head dim over the keys
		qvs, svs := make([][]int32, hd), make([]float32, hd)
		for d := range hd {
			col := make([]float32, nk)
			for j := range col {
				col[j] = float32(vr.At(d, hh, j, 0))
			}
			qvs[d], svs[d] = quantizeRow(col)
		}
		qks, sks := make([][]int32, nk), make([]float32, nk)
		for j := range nk {
			row := make([]float32, hd)
			for d := range row {
				row[d] = float32(kr.At(d, hh, j, 0))
			}
			qks[j], sks[j] = quantizeRow(row)
		}
		for i := range n {
			row := make([]float64, hd)
			rowf := make([]float32, hd)
			for d := range row {
				row[d] = qr.At(d, hh, i, 0)
				rowf[d] = float32(row[d])
			}
			qq, sq := quantizeRow(rowf)
			// the model: integer scores scaled in float32, bytes of exp(s − max)
			sc := make([]float32, nk)
			mx := float32(math.Inf(-1))
			for j := range nk {
				dot := int32(0)
				for d := range hd {
					dot += qks[j][d] * qq[d]
				}
				sc[j] = float32(dot) * (sks[j] * sq)
				mx = max(mx, sc[j])
			}
			m := float64(mx * float32(scale))
			bytes, sum, ambiguous := make([]float64, nk), 0.0, 0
			for j := range nk {
				e := 255 * math.Exp(float64(sc[j])*scale-m)
				bytes[j] = math.RoundToEven(e)
				sum += bytes[j]
				if f := e - math.Floor(e); math.Abs(f-0.5) < 0.01 {
					ambiguous++
				}
			}
			// the exact attention and its bound
			ex, emax := make([]float64, nk), 0.0
			exmax, exsum := math.Inf(-1), 0.0
			for j := range nk {
				dot, aq, ak := 0.0, 0.0, 0.0
				for d := range hd {
					dot += row[d] * kr.At(d, hh, j, 0)
					aq += math.Abs(row[d])
					ak += math.Abs(kr.At(d, hh, j, 0))
				}
				ex[j] = dot * scale
				exmax = max(exmax, ex[j])
				emax = max(emax, scale*(float64(sks[j])*aq+float64(sq)*ak+float64(sks[j]*sq)*float64(hd)/2)/2)
			}
			for j := range nk {
				ex[j] = math.Exp(ex[j] - exmax)
				exsum += ex[j]
			}
			for d := range hd {
				num, mag, want, vmax := 0.0, 0.0, 0.0, 0.0
				for j := range nk {
					num += bytes[j] * float64(qvs[d][j])
					vj := vr.At(d, hh, j, 0)
					want += ex[j] / exsum * vj
					mag += ex[j] / exsum * math.Abs(vj)
					vmax = max(vmax, math.Abs(vj))
				}
				model := float64(svs[d]) * num / sum
				g := float64(got[(i*H+hh)*hd+d])
				boundModel := float64(ambiguous)*(127*float64(svs[d])+math.Abs(model))/(sum-float64(ambiguous)) + 1e-6*(math.Abs(model)+vmax)
				if diff := math.Abs(g - model); diff > boundModel {
					badModel++
				} else {
					worstModel = max(worstModel, diff/boundModel)
				}
				boundExact := math.Expm1(2*emax)*mag + float64(nk)*vmax/255/exsum + float64(svs[d])/2 + 1e-6
				diff := math.Abs(g - want)
				worstExact = max(worstExact, diff/boundExact)
				if diff > boundExact {
					badExact++
				}
			}
		}
	}
	assert.Zero(t, badModel, "outputs off the model of the quantization")
	assert.Zero(t, badExact, "outputs over the quantization's bound of the exact attention")
	t.Logf("largest |d|/bound: model %.3f, exact %.3f", worstModel, worstExact)
}
