package vulkan

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
)

// Device memory: what a run allocates on the device is what was planned
// before it ran; a budget smaller than the weights refuses the model; a
// budget that the default head chunk exceeds runs the head in smaller chunks
// with the same results; a budget nothing fits in refuses the request with
// the figures and the options that lower them.
func TestDeviceMemory(t *testing.T) {
	need(t)
	path := gguf(t, "da3-tiny", convert.Options{})
	imgs, _ := caseImages(t, "da3-tiny", "four")
	opt := model.RunOptions{ProcessRes: 112}
	ctx := context.Background()

	vk := load(t, path, device)
	ref, err := vk.MultiView(ctx, imgs, opt)
	require.NoError(t, err)
	dm := vk.DeviceMemory()
	require.True(t, dm.Device)
	b := imgs[0].Bounds()
	e, err := vk.EstimateMemory(opt, len(imgs), b.Dx(), b.Dy())
	require.NoError(t, err)
	assert.Equal(t, vk.WeightBytes(), dm.Weights)
	assert.Equal(t, uint64(e.DeviceCompute), dm.Compute, "the device compute buffer is the planned one")
	t.Logf("weights %d B, compute %d B (planned %d B), device %d/%d MiB free", dm.Weights, dm.Compute, e.DeviceCompute, dm.Free>>20, dm.Total>>20)

	_, err = model.Load(ctx, path, model.Options{Options: backend.Options{Device: device, Logger: quiet}, MaxDeviceMemory: int64(dm.Weights) / 2})
	require.Error(t, err)
	assert.ErrorIs(t, err, model.ErrNotEnoughMemory)
	assert.Contains(t, err.Error(), "-max-device-memory")

	// Between what one view at a time needs and what all four at once do.
	one := opt
	one.ChunkSize = 1
	e1, err := vk.EstimateMemory(one, len(imgs), b.Dx(), b.Dy())
	require.NoError(t, err)
	require.Less(t, e1.DeviceCompute, e.DeviceCompute, "chunking the head lowers the device compute buffer")
	budget := int64(dm.Weights) + (e1.DeviceCompute+e.DeviceCompute)/2
	small, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: device, Logger: quiet}, MaxDeviceMemory: budget})
	require.NoError(t, err)
	t.Cleanup(func() { small.Close() })
	got, err := small.MultiView(ctx, imgs, opt)
	require.NoError(t, err)
	assert.LessOrEqual(t, int64(small.DeviceMemory().Compute), budget-int64(dm.Weights))
	compare(t, ref, got, relF32, "depth", "conf")

	tiny, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: device, Logger: quiet}, MaxDeviceMemory: int64(dm.Weights) + 1<<10})
	require.NoError(t, err)
	t.Cleanup(func() { tiny.Close() })
	_, err = tiny.MultiView(ctx, imgs, opt)
	var me *model.MemoryError
	require.True(t, errors.As(err, &me), "want a MemoryError, got %v", err)
	assert.Contains(t, err.Error(), "-max-device-memory")
	assert.Contains(t, err.Error(), "-process-res")
}
