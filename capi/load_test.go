package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/testutil"
)

// loadWithOptions calls da3go_load_with; the strings of o are C copies
// freed when it returns. It returns the handle (freed when the test ends)
// or the error text.
func loadWithOptions(t *testing.T, o loadOptions) (_Ctype_da3go_model, string) {
	t.Helper()
	str := func(s string) *_Ctype_char {
		if s == "" {
			return nil
		}
		p := cString(s)
		t.Cleanup(func() { da3go_free_string(p) })
		return p
	}
	opt := _Ctype_da3go_load_options{model: str(o.model), metric_model: str(o.metricModel), device: str(o.device),
		threads: _Ctype_int(o.threads), precision: str(o.precision), cache_dir: str(o.cacheDir)}
	if o.narrowConvs != kernels.ConvsAuto {
		opt.narrow_convs = map[kernels.Convs]_Ctype_int{kernels.ConvsNarrow: 1, kernels.ConvsF32: -1}[o.narrowConvs]
	}
	if o.noDownload {
		opt.no_download = 1
	}
	var h _Ctype_da3go_model
	var cerr *_Ctype_char
	if rc := da3go_load_with(&opt, &h, &cerr); rc != 0 {
		assert.Zero(t, int(h), "a failed load returns no handle")
		return 0, errText(cerr)
	}
	t.Cleanup(func() { da3go_free(h, nil) })
	return h, ""
}

// tinyGGUF converts the tiny DA3 fixture into dir/name.
func tinyGGUF(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", path, convert.Options{}))
	return path
}

// depthRGB runs the fixture image through da3go_depth_rgb.
func depthRGB(t *testing.T, h _Ctype_da3go_model) []float32 {
	t.Helper()
	rgb, w, ht := fixtureRGB(t, "two/images/view0.png")
	var out *_Ctype_float
	var ow, oh _Ctype_int
	var cerr *_Ctype_char
	rc := da3go_depth_rgb(h, (*_Ctype_uchar)(unsafe.Pointer(&rgb[0])), _Ctype_int(w), _Ctype_int(ht),
		&_Ctype_da3go_options{process_res: 56}, &out, &ow, &oh, &cerr)
	require.Zero(t, int(rc), "da3go_depth_rgb: %s", errText(cerr))
	defer da3go_free_buffer(unsafe.Pointer(out))
	return append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(out)), int(ow*oh))...)
}

// TestLoadWithPublishedName: a published name resolves to the verified copy
// in the given cache folder (no download), and with downloads off a name
// missing from the cache is a clear error naming the model and the folder.
func TestLoadWithPublishedName(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the tiny model: skipped in -short mode")
	}
	m, ok := fetch.Lookup("da3-small")
	require.True(t, ok)
	cache := t.TempDir()
	path := tinyGGUF(t, cache, m.File)
	// The marker of a verified download (the tiny file stands in for the published one).
	require.NoError(t, os.WriteFile(path+".sha256", []byte(m.SHA256+"  "+m.File+"\n"), 0o644))

	byName, msg := loadWithOptions(t, loadOptions{model: m.Name, device: "cpu", threads: 1, cacheDir: cache, noDownload: true})
	require.Empty(t, msg)
	byPath, msg := loadWithOptions(t, loadOptions{model: path, device: "cpu", threads: 1})
	require.Empty(t, msg)
	assert.Equal(t, depthRGB(t, byPath), depthRGB(t, byName), "the name loads the cached file")

	empty := t.TempDir()
	_, msg = loadWithOptions(t, loadOptions{model: m.Name, device: "cpu", cacheDir: empty, noDownload: true})
	assert.Contains(t, msg, m.File)
	assert.Contains(t, msg, empty)
	assert.Contains(t, msg, "downloads are off")

	_, msg = loadWithOptions(t, loadOptions{model: "da3-smal", device: "cpu", cacheDir: empty})
	assert.Contains(t, msg, "did you mean da3-small")
}

// TestLoadWithPrecision: bf16 products give depth close to f32's but not
// equal to it (the precision reaches the kernels); a bad precision or
// narrow_convs without bf16/int8 is refused with the library's message.
func TestLoadWithPrecision(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the tiny model: skipped in -short mode")
	}
	gguf := tinyGGUF(t, t.TempDir(), "da3-tiny.gguf")
	_, msg := loadWithOptions(t, loadOptions{model: gguf, device: "cpu", precision: "f16"})
	assert.Contains(t, msg, `precision "f16": want f32, bf16, int8 or int8c`)
	_, msg = loadWithOptions(t, loadOptions{model: gguf, device: "cpu", narrowConvs: kernels.ConvsNarrow})
	assert.NotEmpty(t, msg, "narrow_convs needs bf16 or int8")
	_, msg = loadWithOptions(t, loadOptions{model: gguf, device: "cpu", threads: -1})
	assert.Contains(t, msg, "must not be negative")

	if !kernels.PrecisionRuns(kernels.DefaultVariant(), kernels.PrecisionBF16) {
		t.Skip("this CPU has no AVX512_BF16: the bf16 comparison needs it")
	}
	f32, msg := loadWithOptions(t, loadOptions{model: gguf, device: "cpu", threads: 1})
	require.Empty(t, msg)
	bf16, msg := loadWithOptions(t, loadOptions{model: gguf, device: "cpu", threads: 1, precision: "bf16"})
	require.Empty(t, msg)
	a, b := depthRGB(t, f32), depthRGB(t, bf16)
	assert.NotEqual(t, a, b, "bf16 products must change the last bits")
	_, _, corr := testutil.Stats(a, b)
	assert.Greater(t, corr, 0.999)
}
