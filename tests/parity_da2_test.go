package tests

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/kernelcount"
	"github.com/da3-go/da3-go/model"
)

// Parity of the V2 graph against the PyTorch reference (transformers
// DepthAnythingForDepthEstimation with the original DINOv2 position-embedding
// interpolation), stage by stage, on the committed tiny fixtures.
func TestParityDA2(t *testing.T) {
	cases := []struct {
		name, fixture, src string
	}{
		{"tiny-pth", "da2-tiny", "model.pth"},
		{"tiny-pth-strips", "da2-tiny", "model.pth"}, // the head in strips (stripsPolicy)
		{"tiny-hf", "da2-tiny", "hf"},
		{"tiny-metric-hf", "da2-tiny-metric", "hf"},
		{"tiny-square-hf", "da2-tiny-square", "hf"},
	}
	cases = append(cases, oracleCases(t, "da2-vit")...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t, tc.fixture)
			meta := readMeta(t, dir+"/meta.json")
			opts := convert.Options{Heads: int(meta["heads"].(float64)), OutLayers: metaInts(meta, "out_layers")}
			if md, _ := meta["max_depth"].(float64); md > 0 {
				opts.MaxDepth = float32(md)
			}
			var policy kernels.Policy
			if strings.HasSuffix(tc.name, "-strips") {
				policy = stripsPolicy()
				calls := kernelcount.WindowCalls()
				t.Cleanup(func() { assert.Greater(t, kernelcount.WindowCalls(), calls, "the head ran in strips") })
			}
			m, err := model.Load(context.Background(), convertFixture(t, dir+"/"+tc.src, opts), model.Options{Options: backend.Options{Device: "cpu", Kernels: policy}})
			require.NoError(t, err)
			t.Cleanup(func() { m.Close() })
			require.Equal(t, model.DA2, m.Config().Arch)
			ref := refTensors(t, dir+"/ref.safetensors")
			in := ref["input"]
			h, w := in.Shape[2], in.Shape[3]
			res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: 1}, model.RunOptions{Taps: func(string) bool { return true }})
			require.NoError(t, err)
			r := res[0]
			stages := [][2]string{{"embed", "vit.embed"}}
			for k := 0; k < 4; k++ {
				stages = append(stages, [2]string{"feat." + strconv.Itoa(k), "vit.feat." + strconv.Itoa(k)})
			}
			for s := 0; s < 4; s++ {
				stages = append(stages, [2]string{"reassemble." + strconv.Itoa(s), "head.reassemble." + strconv.Itoa(s)}, [2]string{"rn." + strconv.Itoa(s), "head.rn." + strconv.Itoa(s)})
			}
			for k := 4; k >= 1; k-- {
				stages = append(stages, [2]string{"fusion." + strconv.Itoa(k), "head.fusion." + strconv.Itoa(k)})
			}
			stages = append(stages, [2]string{"out1", "head.out1"}, [2]string{"logit", "head.logits"})
			for _, st := range stages {
				want, ok := ref[st[0]]
				if !ok {
					continue
				}
				got, ok := r.Taps[st[1]]
				require.True(t, ok, "tap %s missing", st[1])
				gate(t, st[0], want.Data, got.Data, 0.99999, 1e-4)
			}
			gate(t, "depth (end to end)", ref["depth"].Data, r.Depth, 0.99999, 1e-4)
			unit := model.Disparity
			if opts.MaxDepth > 0 || strings.Contains(tc.fixture, "metric") {
				unit = model.Metres // sigmoid · max_depth
			}
			require.Equal(t, unit, r.Unit)
		})
	}
}

// oracleCases lists full-size oracle outputs (tests/oracle/*.py --out DIR)
// under $DA3_ORACLE_OUT whose directory names start with prefix, e.g.
// da2-vits or da3-small. They are generated on demand, never committed.
func oracleCases(t *testing.T, prefix string) []struct{ name, fixture, src string } {
	root := os.Getenv("DA3_ORACLE_OUT")
	if root == "" {
		t.Logf("DA3_ORACLE_OUT not set: full-size parity cases (%s*) skipped; generate them with tests/oracle and set it", prefix)
		return nil
	}
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	var out []struct{ name, fixture, src string }
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			abs, _ := filepath.Abs(filepath.Join(root, e.Name()))
			out = append(out, struct{ name, fixture, src string }{e.Name(), abs, "model.pth"})
		}
	}
	return out
}
