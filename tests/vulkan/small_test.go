package vulkan

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// Real architectures at a small input size: DA3-SMALL and Depth Anything V2
// Small (ViT-S/14, twelve blocks of width 384, and their full heads) on
// random weights with the statistics of tests/oracle's seeded checkpoints.
// The weights (some 100 MB) are not committed: tests/fixtures/specs holds
// each checkpoint's spec (per tensor its dtype, shape, mean and standard
// deviation, small tensors verbatim; written by `scripts/validate_gpu.py
// spec`) and its config.json, and the test draws the weights again
// (testutil.Spec), converts them and runs the CPU and the device on the
// same GGUF. Each test computes one graph shape.

// specGGUF draws the checkpoint of tests/fixtures/specs/NAME.json (with
// NAME.config.json as its config.json), converts it and returns the GGUF's
// path; the files go when t ends.
func specGGUF(t *testing.T, name string) string {
	t.Helper()
	specs := fixtureDir("specs")
	src := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(src, 0o755))
	testutil.SynthCheckpoint(t, filepath.Join(specs, name+".json"), src)
	cfg, err := os.ReadFile(filepath.Join(specs, name+".config.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), cfg, 0o644))
	dst := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, convert.Options{}), "convert %s", name)
	return dst
}

// DA3-SMALL on one view at process resolution 112 (the longer side; 8×6
// patches): depth, confidence and the camera decoder's pose.
func TestParityDA3Small(t *testing.T) {
	need(t)
	cpu, vk := pair(t, specGGUF(t, "da3-small"))
	require.Equal(t, 384, vk.Config().ViT.EmbedDim, "ViT-S")
	imgs := images(t, "da3-tiny/one/images/view0.png")
	opt := model.RunOptions{ProcessRes: 112, ProcessedSize: true}
	want, err := cpu.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	got, err := vk.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	onDevice(t, vk)
	require.Equal(t, [2]int{112, 84}, [2]int{got[0].ProcessedWidth, got[0].ProcessedHeight}, "processed size")
	compare(t, want, got, relF32, "depth", "conf", "extrinsics", "intrinsics")
}

// Depth Anything V2 Small (transformers' layout and config.json) at input
// size 112 (the shorter side; 11×8 patches): relative depth (disparity).
func TestParityDA2Small(t *testing.T) {
	need(t)
	cpu, vk := pair(t, specGGUF(t, "da2-small"))
	require.Equal(t, model.DA2, vk.Config().Arch)
	require.Equal(t, 384, vk.Config().ViT.EmbedDim, "ViT-S")
	imgs := images(t, "da2-tiny/image.png")
	opt := model.RunOptions{ProcessRes: 112, ProcessedSize: true}
	want, err := cpu.Depth(context.Background(), imgs[0], opt)
	require.NoError(t, err)
	got, err := vk.Depth(context.Background(), imgs[0], opt)
	require.NoError(t, err)
	onDevice(t, vk)
	require.Equal(t, [2]int{154, 112}, [2]int{got.ProcessedWidth, got.ProcessedHeight}, "processed size")
	compare(t, []model.Result{*want}, []model.Result{*got}, relF32, "depth")
}
