package tests

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
	"github.com/da3-go/da3-go/model"
)

// toOriginal maps per-view data in network position order to the original
// view order: out[order[p]] = in[p].
func toOriginal(in []float32, order []int, per int) []float32 {
	out := make([]float32, len(in))
	for p, src := range order {
		copy(out[src*per:(src+1)*per], in[p*per:(p+1)*per])
	}
	return out
}

// Parity of the DA3 any-view graph against the official depth-anything-3
// package (the network called directly in float32), stage by stage, for one
// view at a non-square size, two views, and four views where saddle_balanced
// picks a non-zero reference view.
func TestParityDA3(t *testing.T) {
	// Every attention path and ggml's own ops on the committed fixture; the
	// default (the fastest kernels of this build) everywhere.
	flash, scores, chunked := kernels.Default(true), kernels.Default(true), kernels.Default(true)
	flash.Attention, flash.Flash = false, true
	scores.Attention = false
	chunked.Attention, chunked.ScoreBytes = false, 64 // one or two queries per chunk of scores
	t.Run("da3-tiny", func(t *testing.T) { parityDA3(t, "da3-tiny", kernels.Policy{}) })
	t.Run("da3-tiny/flash", func(t *testing.T) { parityDA3(t, "da3-tiny", flash) })
	t.Run("da3-tiny/scores", func(t *testing.T) { parityDA3(t, "da3-tiny", scores) })
	t.Run("da3-tiny/chunked", func(t *testing.T) { parityDA3(t, "da3-tiny", chunked) })
	t.Run("da3-tiny/ggml-only", func(t *testing.T) { parityDA3(t, "da3-tiny", kernels.Policy{Explicit: true}) })
	t.Run("da3-tiny/strips", func(t *testing.T) {
		calls := kernelcount.WindowCalls()
		parityDA3(t, "da3-tiny", stripsPolicy())
		assert.Greater(t, kernelcount.WindowCalls(), calls, "the head ran in strips")
	})
	for _, c := range oracleCases(t, "da3-") {
		t.Run(filepath.Base(c.fixture), func(t *testing.T) { parityDA3(t, c.fixture, kernels.Policy{}) })
	}
}

// stripsPolicy is the default kernel policy with strips of two rows, so
// that the tiny fixtures' heads run in strips (the default strip size holds
// a tiny map whole).
func stripsPolicy() kernels.Policy {
	p := kernels.Default(true)
	p.StripBytes = 1
	return p
}

// parityDA3 runs the cases of fixture name with the kernel policy p (nil:
// the default).
func parityDA3(t *testing.T, name string, p kernels.Policy) {
	dir := fixture(t, name)
	opts := model.Options{Options: backend.Options{Device: "cpu", Kernels: p}}
	m, err := model.Load(context.Background(), convertFixture(t, dir, convert.Options{}), opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.Equal(t, model.DA3, m.Config().Arch)
	require.True(t, m.Config().HasCamera)
	for _, tc := range []string{"one", "two", "four"} {
		t.Run(tc, func(t *testing.T) {
			if _, err := os.Stat(dir + "/" + tc + "/ref.safetensors"); err != nil {
				t.Skipf("case %s not generated in %s", tc, dir)
			}
			meta := readMeta(t, dir+"/"+tc+"/meta.json")
			ref := refTensors(t, dir+"/"+tc+"/ref.safetensors")
			in := ref["input"]
			S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
			res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, model.RunOptions{Taps: func(string) bool { return true }})
			require.NoError(t, err)
			refView := -1
			if rv, ok := meta["ref_view"].(float64); ok {
				refView = int(rv)
			}
			compareDA3Stages(t, ref, "", res, refView)
		})
	}
}

// compareDA3Stages gates every stage of a DA3 any-view run (res, from
// Forward with all taps) against the oracle tensors named prefix+stage:
// embed, features, camera tokens, head stages, depth, confidence, pose
// encoding, extrinsics and intrinsics. refView ≥ 0 is the reference view
// upstream chose (checked for three or more views).
func compareDA3Stages(t *testing.T, ref map[string]refTensor, prefix string, res []model.Result, refView int) {
	t.Helper()
	S := len(res)
	taps := res[0].Taps
	order := viewOrder(res)
	if refView >= 0 && S >= 3 {
		assert.Equal(t, refView, order[0], "reference view choice")
		t.Logf("reference view: %d (reference %d)", order[0], refView)
	}
	cmp := func(refName, tapName string, positionOrder bool) {
		want, ok := ref[prefix+refName]
		if !ok {
			t.Logf("reference has no %s", prefix+refName)
			return
		}
		got, ok := taps[tapName]
		if !assert.True(t, ok, "tap %s missing", tapName) {
			return
		}
		data := got.Data
		if positionOrder && S > 1 {
			data = toOriginal(data, order, len(data)/S)
		}
		gate(t, prefix+refName, want.Data, data, 0.99999, 1e-4)
	}
	cmp("embed", "vit.embed", false)
	for k := 0; k < 4; k++ {
		cmp(fmt.Sprintf("feat.%d", k), fmt.Sprintf("vit.feat.%d", k), true)
		cmp(fmt.Sprintf("cam_tok.%d", k), fmt.Sprintf("vit.cam_tok.%d", k), true)
	}
	for s := 0; s < 4; s++ {
		cmp(fmt.Sprintf("reassemble.%d", s), fmt.Sprintf("head.reassemble.%d", s), true)
		cmp(fmt.Sprintf("rn.%d", s), fmt.Sprintf("head.rn.%d", s), true)
	}
	for k := 4; k >= 1; k-- {
		cmp(fmt.Sprintf("fusion.%d", k), fmt.Sprintf("head.fusion.%d", k), true)
	}
	cmp("out1", "head.out1", true)
	cmp("out1_up", "head.out1_up", true)
	cmp("logits", "head.logits", true)

	var depth, conf, pose []float32
	for _, r := range res {
		require.Equal(t, model.Relative, r.Unit, "any-view depth is relative")
		depth = append(depth, r.Depth...)
		conf = append(conf, r.Conf...)
		require.NotNil(t, r.Camera)
		pose = append(pose, r.Camera.PoseEncoding[:]...)
	}
	gate(t, prefix+"depth (end to end)", ref[prefix+"depth"].Data, depth, 0.99999, 1e-4)
	gate(t, prefix+"conf (end to end)", ref[prefix+"conf"].Data, conf, 0.99999, 1e-4)
	gate(t, prefix+"pose_enc", ref[prefix+"pose_enc"].Data, pose, 0.99999, 1e-4)
	compareCameras(t, ref[prefix+"extrinsics"].Data, ref[prefix+"intrinsics"].Data, res)
}

// compareCameras checks the results' extrinsics (max|d| ≤ 1e-4) and
// intrinsics against the oracle's (S, 3, 4) and (S, 3, 3) tensors.
func compareCameras(t *testing.T, refExt, refIntr []float32, res []model.Result) {
	t.Helper()
	var ext, intr []float32
	for _, r := range res {
		require.NotNil(t, r.Camera)
		for i := 0; i < 3; i++ {
			for j := 0; j < 4; j++ {
				ext = append(ext, float32(r.Camera.Extrinsics[i][j]))
			}
			for j := 0; j < 3; j++ {
				intr = append(intr, float32(r.Camera.Intrinsics[i][j]))
			}
		}
	}
	maxAbs := func(a, b []float32) float64 {
		var m float64
		for i := range a {
			m = max(m, math.Abs(float64(a[i]-b[i])))
		}
		return m
	}
	require.Len(t, ext, len(refExt))
	require.Len(t, intr, len(refIntr))
	de, di := maxAbs(refExt, ext), maxAbs(refIntr, intr)
	// Intrinsics are in pixels (focal lengths of hundreds), where one
	// float32 ulp is already 3e-5..6e-5: their bound is relative, 1e-6
	// of the largest (about 8 ulps), the extrinsics' (O(1)) absolute.
	ki := 1e-6 * maxAbs(refIntr, make([]float32, len(intr)))
	t.Logf("extrinsics max|d| %.3g, intrinsics max|d| %.3g (bound %.3g)", de, di, ki)
	assert.LessOrEqual(t, de, 1e-4, "extrinsics")
	assert.LessOrEqual(t, di, ki, "intrinsics")
}
