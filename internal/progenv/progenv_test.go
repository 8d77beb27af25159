package progenv

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml/kernels"
)

// TestEnvironment: DA3_DEVICE is the default device, DA3_BACKEND_PATH keeps
// its absolute folders and warns about the others, DA3_KERNELS sets the
// variant and DA3_AVX2_INT8 the avx2 int8 step, or say why they cannot.
func TestEnvironment(t *testing.T) {
	t.Setenv(Device, "cpu")
	assert.Equal(t, "cpu", DeviceOr(""))
	assert.Equal(t, "Vulkan0", DeviceOr("Vulkan0"))

	t.Setenv(BackendPath, strings.Join([]string{"/opt/a", "rel/b"}, string(os.PathListSeparator)))
	var logs bytes.Buffer
	assert.Equal(t, []string{"/opt/a"}, BackendDirs(slog.New(slog.NewTextHandler(&logs, nil))))
	assert.Contains(t, logs.String(), "rel/b")

	t.Cleanup(func() { require.NoError(t, kernels.SetDefaultVariant(kernels.VariantAuto)) })
	t.Setenv(Kernels, "portable")
	require.NoError(t, ApplyKernels())
	assert.Equal(t, kernels.VariantPortable, kernels.DefaultVariant())
	t.Setenv(Kernels, "fastest")
	err := ApplyKernels()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DA3_KERNELS=fastest")
	assert.Equal(t, kernels.VariantPortable, kernels.DefaultVariant(), "the variant stays")

	t.Setenv(Kernels, "")

	before, _ := kernels.SetAVX2Int8Form(-1)
	t.Cleanup(func() { kernels.SetAVX2Int8Form(before) })
	t.Setenv(AVX2Int8, "vpmaddubsw")
	if !kernels.VariantAVX2.Runs() {
		require.Error(t, ApplyKernels(), "no AVX2: no step to set")
		return
	}
	require.NoError(t, ApplyKernels())
	now, _ := kernels.SetAVX2Int8Form(-1)
	assert.Equal(t, kernels.AVX2Int8Maddubs, now)
	t.Setenv(AVX2Int8, "vpdpbsud")
	err = ApplyKernels()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DA3_AVX2_INT8=vpdpbsud")
	assert.Contains(t, err.Error(), "stays vpmaddubsw")
	if !strings.Contains(strings.Join(kernels.CPUFeatures(), " "), "avx_vnni") {
		t.Setenv(AVX2Int8, "vpdpbusd-avx-vnni")
		err = ApplyKernels()
		require.Error(t, err, "a step this CPU lacks")
		assert.Contains(t, err.Error(), "cannot run vpdpbusd-avx-vnni")
	}
}
