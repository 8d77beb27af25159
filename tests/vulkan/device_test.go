package vulkan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/model"
)

// Every weight a model binds lives in a device buffer, for each family
// (the CPU is left the host inputs and the results).
func TestWeightsOnDevice(t *testing.T) {
	need(t)
	for _, tc := range []struct {
		name, src string
		opts      convert.Options
	}{
		{"da3-tiny", "da3-tiny", convert.Options{}},
		{"da3-tiny-pose", "da3-tiny-pose", convert.Options{WithAux: true}},
		{"da3-tiny-gs", "da3-tiny-gs", convert.Options{WithAux: true}},
		{"da3-tiny-mono", "da3-tiny-mono", convert.Options{}},
		{"da2-tiny", "da2-tiny/model.pth", da2Options(t, "da2-tiny")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, gguf(t, tc.src, tc.opts), device)
			bufs := m.WeightBuffers()
			require.NotEmpty(t, bufs)
			for name, b := range bufs {
				assert.False(t, b.Host, "weight %s is in host memory (%s)", name, b.Name)
				assert.Equal(t, device, b.Name, "weight %s", name)
			}
			t.Logf("%d weights in %s buffers", len(bufs), device)
		})
	}
}

// What the models compute on the host for a grid and a set of views (the
// interpolated position embedding, RoPE positions, camera tokens, the UV
// embedding of the head) is fed as graph inputs on every call: one device
// model run on sizes and view counts in turn, each result equal to the
// CPU's, and the first size again at the end.
func TestHostInputsPerCall(t *testing.T) {
	need(t)
	ctx := context.Background()
	t.Run("da3-tiny", func(t *testing.T) {
		cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
		views := images(t, "da3-tiny/four/images/view0.png", "da3-tiny/four/images/view1.png", "da3-tiny/four/images/view2.png")
		for _, tc := range []struct {
			views, res int
		}{{1, 56}, {2, 42}, {1, 70}, {3, 28}, {1, 56}} {
			t.Run(fmt.Sprintf("%d views at %d", tc.views, tc.res), func(t *testing.T) {
				opt := model.RunOptions{ProcessRes: tc.res, ProcessedSize: true}
				want, err := cpu.MultiView(ctx, views[:tc.views], opt)
				require.NoError(t, err)
				got, err := vk.MultiView(ctx, views[:tc.views], opt)
				require.NoError(t, err)
				compare(t, want, got, relF32, "depth", "conf", "extrinsics")
			})
		}
	})
	t.Run("da2-tiny", func(t *testing.T) {
		cpu, vk := pair(t, gguf(t, "da2-tiny/model.pth", da2Options(t, "da2-tiny")))
		img := images(t, "da2-tiny/image.png")[0]
		for _, res := range []int{70, 42, 98, 70} {
			t.Run(fmt.Sprint(res), func(t *testing.T) {
				opt := model.RunOptions{ProcessRes: res, ProcessedSize: true}
				want, err := cpu.Depth(ctx, img, opt)
				require.NoError(t, err)
				got, err := vk.Depth(ctx, img, opt)
				require.NoError(t, err)
				compare(t, []model.Result{*want}, []model.Result{*got}, relF32, "depth")
			})
		}
	})
}

// Regression: RoPE over several views on a GPU backend. ggml's RoPE takes
// one position per row of its third axis, so the views' tokens go through
// it as one axis with the positions repeated per view; before that the
// device rotated every view after the first with wrong positions. Each
// view's depth and the last backbone features must equal the CPU's, view by
// view, for two views and for four (whose reference view is not the first).
func TestMultiViewRoPE(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
	for _, tc := range []string{"two", "four"} {
		t.Run(tc, func(t *testing.T) {
			px := fixtureInput(t, fixtureDir("da3-tiny/"+tc))
			opt := model.RunOptions{Taps: func(name string) bool { return name == "vit.feat.3" }}
			want, err := cpu.Forward(context.Background(), px, opt)
			require.NoError(t, err)
			got, err := vk.Forward(context.Background(), px, opt)
			require.NoError(t, err)
			onDevice(t, vk)
			require.Len(t, got, px.Views)
			for v := range want {
				require.Equal(t, want[v].Position, got[v].Position, "view %d position", v)
				gate(t, fmt.Sprintf("view %d depth", v), want[v].Depth, got[v].Depth, relF32)
			}
			wf, gf := want[0].Taps["vit.feat.3"].Data, got[0].Taps["vit.feat.3"].Data
			per := len(wf) / px.Views
			for p := range px.Views {
				gate(t, fmt.Sprintf("position %d feat.3", p), wf[p*per:(p+1)*per], gf[p*per:(p+1)*per], relF32)
			}
		})
	}
}

// Regression: ggml-vulkan's matrix product with small tiles (m or n ≤ 32)
// raced between warps (ggml/patches/vulkan). Products of such shapes on the
// device (the matrix a weight in a device buffer, as the models' are) are
// identical run after run and equal to the CPU's.
func TestSmallTileMulMat(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, sh := range [][3]int{{64, 20, 24}, {64, 32, 7}, {128, 8, 40}, {96, 17, 33}} {
		k, m, n := sh[0], sh[1], sh[2]
		t.Run(fmt.Sprintf("%dx%d·%dx%d", k, m, k, n), func(t *testing.T) {
			a, b := randn(k*m), randn(k*n)
			path := testutil.WriteGGUF(t, nil, []loader.WriterTensor{testutil.F32Tensor(t, "a", a, uint64(k), uint64(m))})
			mul := func(dev string) func() ([]float32, backend.Stats) {
				rt, err := backend.Open(backend.Options{Device: dev, Threads: 2, Logger: quiet})
				require.NoError(t, err)
				t.Cleanup(func() { rt.Close() })
				f, err := loader.Open(path)
				require.NoError(t, err)
				w, err := rt.UploadWeights(context.Background(), f, nil, nil, backend.CopyWeights())
				require.NoError(t, err)
				t.Cleanup(func() { w.Close(); f.Close() })
				return func() ([]float32, backend.Stats) {
					out, err := rt.Run(context.Background(), backend.RunOptions{}, func(bd *backend.Builder) error {
						bd.Output("c", w.Tensor("a").MulMat(bd.G, bd.Input("b", b, k, n))) // [m, n]
						return nil
					})
					require.NoError(t, err)
					return out["c"].Data, rt.LastStats()
				}
			}
			want, _ := mul("cpu")()
			vk := mul(device)
			first, st := vk()
			assert.Empty(t, st.Fallbacks, "the product ran on the CPU")
			assert.Equal(t, map[string]int{"MUL_MAT": 1}, st.Ops)
			for i := range 8 {
				got, _ := vk()
				require.Equal(t, first, got, "run %d differs from the first", i+2)
			}
			gate(t, "product", want, first, relF32)
		})
	}
}

// growthChild marks the child process of TestGraphGrowth.
const growthChild = "DA3_VULKAN_TEST_GROWTH"

// Regression: graphs that grow in one process. A larger graph makes the
// scheduler reallocate its device compute buffer, and ggml-vulkan reuses
// its descriptor sets, whose bindings past a pipeline's own still named the
// destroyed buffer; lavapipe resolves those too, and used the freed buffer
// ('double free or corruption' aborts, segfaults; ggml/patches/vulkan). A
// device model runs one view, two, then four (the reference view chosen on
// a graph of its own first: each run's graphs are larger than the last's),
// three models in turn; every round's results must equal the first's. A
// heap corruption aborts the process, so this runs in a child process and
// fails with its output.
func TestGraphGrowth(t *testing.T) {
	need(t)
	if os.Getenv(growthChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGraphGrowth$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), growthChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("growing graphs, child process:\n%s", out)
		require.NoError(t, err, "the child process failed")
		require.Contains(t, string(out), "--- PASS: TestGraphGrowth", "the child ran the test")
		return
	}
	path := gguf(t, "da3-tiny", convert.Options{})
	var first []outputs
	for round := range 3 {
		vk := load(t, path, device)
		for i, tc := range []string{"one", "two", "four"} {
			imgs, meta := caseImages(t, "da3-tiny", tc)
			opt := model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true}
			res, err := vk.MultiView(context.Background(), imgs, opt)
			require.NoError(t, err, "round %d, %s", round, tc)
			onDevice(t, vk)
			o := collect(t, res)
			if round == 0 {
				first = append(first, o)
				continue
			}
			for _, name := range sortedKeys(first[i]) {
				gate(t, fmt.Sprintf("round %d %s %s", round, tc, name), first[i][name], o[name], relF32)
			}
		}
		require.NoError(t, vk.Close())
	}
}
