package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/kernelcount"
	"github.com/da3-go/da3-go/internal/sky"
	"github.com/da3-go/da3-go/model"
)

// Parity of the DA3 mono/metric graph (DPT head with sky, no UV, no camera)
// against the official package, including the sky fill with the 0.99
// quantile of the non-sky depth.
func TestParityDA3Mono(t *testing.T) {
	t.Run("default", func(t *testing.T) { parityDA3Mono(t, kernels.Policy{}) })
	t.Run("strips", func(t *testing.T) {
		calls := kernelcount.WindowCalls()
		parityDA3Mono(t, stripsPolicy())
		assert.Greater(t, kernelcount.WindowCalls(), calls, "the head ran in strips")
	})
}

// parityDA3Mono runs TestParityDA3Mono with the kernel policy p (zero: the default).
func parityDA3Mono(t *testing.T, p kernels.Policy) {
	dir := fixture(t, "da3-tiny-mono")
	m, err := model.Load(context.Background(), convertFixture(t, dir, convert.Options{}), model.Options{Options: backend.Options{Device: "cpu", Kernels: p}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.Equal(t, model.DA3Mono, m.Config().Arch)
	ref := refTensors(t, dir+"/one/ref.safetensors")
	in := ref["input"]
	h, w := in.Shape[3], in.Shape[4]
	res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: 1}, model.RunOptions{Taps: func(string) bool { return true }})
	require.NoError(t, err)
	r := res[0]
	compareMonoStages(t, ref, "", r.Taps)
	gate(t, "sky (end to end)", ref["sky"].Data, r.Sky, 0.99999, 1e-4)
	gate(t, "depth after sky fill", ref["depth"].Data, r.Depth, 0.99999, 1e-4)
	nSky := 0
	for i, s := range ref["sky"].Data {
		if (s >= sky.Threshold) != (r.Sky[i] >= sky.Threshold) {
			t.Errorf("pixel %d classified differently: ref sky %g, got %g", i, s, r.Sky[i])
		}
		if s >= sky.Threshold {
			nSky++
		}
	}
	assert.Greater(t, nSky, 10, "the fixture exercises the fill")

	// And from the image file through the preprocessing.
	img, err := imgio.Decode(dir + "/one/images/view0.png")
	require.NoError(t, err)
	r2, err := m.Depth(context.Background(), img, model.RunOptions{ProcessRes: w, ProcessedSize: true})
	if h > w {
		r2, err = m.Depth(context.Background(), img, model.RunOptions{ProcessRes: h, ProcessedSize: true})
	}
	require.NoError(t, err)
	gate(t, "depth (from image)", ref["depth"].Data, r2.Depth, 0.99999, 1e-4)
}

// compareMonoStages gates every stage of a DA3 mono/metric run (the taps of
// Forward; several views' taps concatenated view after view) against the
// oracle tensors named prefix+stage.
func compareMonoStages(t *testing.T, ref map[string]refTensor, prefix string, taps map[string]backend.Tensor) {
	t.Helper()
	stages := [][2]string{{"embed", "vit.embed"}}
	for k := 0; k < 4; k++ {
		stages = append(stages, [2]string{fmt.Sprintf("feat.%d", k), fmt.Sprintf("vit.feat.%d", k)})
	}
	for s := 0; s < 4; s++ {
		stages = append(stages, [2]string{fmt.Sprintf("reassemble.%d", s), fmt.Sprintf("head.reassemble.%d", s)}, [2]string{fmt.Sprintf("rn.%d", s), fmt.Sprintf("head.rn.%d", s)})
	}
	for k := 4; k >= 1; k-- {
		stages = append(stages, [2]string{fmt.Sprintf("fusion.%d", k), fmt.Sprintf("head.fusion.%d", k)})
	}
	stages = append(stages, [2]string{"out1", "head.out1"}, [2]string{"out1_up", "head.out1_up"}, [2]string{"logits", "head.logits"}, [2]string{"sky_logits", "head.sky_logits"})
	for _, st := range stages {
		got, ok := taps[st[1]]
		require.True(t, ok, "tap %s", st[1])
		gate(t, prefix+st[0], ref[prefix+st[0]].Data, got.Data, 0.99999, 1e-4)
	}
}
