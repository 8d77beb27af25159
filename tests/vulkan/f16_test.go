package vulkan

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

// ggml-vulkan's default products: f16 operands (f32 accumulation) where
// the device has f16 arithmetic. ggml reads GGML_VK_DISABLE_F16 once per
// process, so the test runs itself again in a child process without it
// (marked by f16Child) and gates a DA3 multi-view run and a DA2 run there,
// with the f16 bound (relF16).
func TestF16Products(t *testing.T) {
	need(t)
	if os.Getenv(f16Child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestF16Products$", "-test.v", "-test.count=1")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GGML_VK_DISABLE_F16=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, f16Child+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("f16 products, child process:\n%s", out)
		require.NoError(t, err, "the child process failed")
		require.Contains(t, string(out), "--- PASS: TestF16Products", "the child ran the test")
		return
	}
	ctx := context.Background()
	t.Run("da3-tiny four views", func(t *testing.T) {
		cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
		imgs, meta := caseImages(t, "da3-tiny", "four")
		opt := model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true}
		want, err := cpu.MultiView(ctx, imgs, opt)
		require.NoError(t, err)
		got, err := vk.MultiView(ctx, imgs, opt)
		require.NoError(t, err)
		onDevice(t, vk)
		compare(t, want, got, relF16, "depth", "conf", "extrinsics", "intrinsics")
	})
	t.Run("da2-tiny", func(t *testing.T) {
		cpu, vk := pair(t, gguf(t, "da2-tiny/model.pth", da2Options(t, "da2-tiny")))
		img := images(t, "da2-tiny/image.png")[0]
		opt := model.RunOptions{ProcessRes: 70, ProcessedSize: true}
		want, err := cpu.Depth(ctx, img, opt)
		require.NoError(t, err)
		got, err := vk.Depth(ctx, img, opt)
		require.NoError(t, err)
		onDevice(t, vk)
		compare(t, []model.Result{*want}, []model.Result{*got}, relF16, "depth")
	})
}
