package main

import (
	"context"
	"image"
	"math"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// batchFixture loads the tiny DA3 model through da3go_load (CPU, one thread)
// and returns its handle and a C-string maker; both freed when the test ends.
func batchFixture(t *testing.T) _Ctype_da3go_model {
	t.Helper()
	gguf := filepath.Join(t.TempDir(), "da3-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), "../tests/fixtures/da3-tiny", gguf, convert.Options{}))
	path, dev := cString(gguf), cString("cpu")
	defer da3go_free_string(path)
	defer da3go_free_string(dev)
	var h _Ctype_da3go_model
	var cerr *_Ctype_char
	rc := da3go_load((*_Ctype_da3go_cchar)(unsafe.Pointer(path)), nil, (*_Ctype_da3go_cchar)(unsafe.Pointer(dev)), 1, &h, &cerr)
	require.Zero(t, int(rc), "da3go_load: %s", errText(cerr))
	t.Cleanup(func() { da3go_free(h, nil) })
	return h
}

// errText returns and frees an error string of the library.
func errText(e *_Ctype_char) string {
	if e == nil {
		return ""
	}
	defer da3go_free_string(e)
	return goString((*_Ctype_da3go_cchar)(unsafe.Pointer(e)))
}

// rgbOf returns img's pixels as interleaved 8-bit RGB.
func rgbOf(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			out = append(out, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return out
}

// fixtureRGB decodes a fixture image into RGB pixels and their image.
func fixtureRGB(t *testing.T, name string) ([]byte, int, int) {
	t.Helper()
	img, err := imgio.Decode(filepath.Join("../tests/fixtures/da3-tiny", name))
	require.NoError(t, err)
	return rgbOf(img), img.Bounds().Dx(), img.Bounds().Dy()
}

// takeViews copies n views of the library into results and frees them.
func takeViews(views *_Ctype_da3go_view, n int) []model.Result {
	defer da3go_free_views(views, _Ctype_int(n))
	out := make([]model.Result, n)
	for i, v := range unsafe.Slice(views, n) {
		px := int(v.width * v.height)
		r := model.Result{Width: int(v.width), Height: int(v.height), Depth: slices32(unsafe.Pointer(v.depth), px)}
		if v.conf != nil {
			r.Conf = slices32(unsafe.Pointer(v.conf), px)
		}
		if v.has_camera != 0 {
			r.Camera = &model.Camera{}
			for j, e := range v.extrinsics {
				r.Camera.Extrinsics[j/4][j%4] = float64(e)
			}
			for j := range 9 {
				r.Camera.Intrinsics[j/3][j%3] = float64(v.intrinsics[j])
				r.Camera.IntrinsicsOriginal[j/3][j%3] = float64(v.intrinsics_original[j])
			}
		}
		out[i] = r
	}
	return out
}

// TestDepthBatch: da3go_depth_batch's n images equal the Go library's
// Independent run bit for bit, and each equals a da3go_depth_rgb call on
// that image within float rounding (the batched graph sums in another
// order); every buffer is freed by da3go_free_views.
func TestDepthBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model: skipped in -short mode")
	}
	h := batchFixture(t)
	base, w, ht := fixtureRGB(t, "two/images/view0.png")
	// Three different images of one size: the fixture, its negative, its mirror.
	neg, mirror := make([]byte, len(base)), make([]byte, len(base))
	for i, v := range base {
		neg[i] = 255 - v
	}
	for y := range ht {
		for x := range w {
			copy(mirror[3*(y*w+x):3*(y*w+x)+3], base[3*(y*w+w-1-x):3*(y*w+w-1-x)+3])
		}
	}
	batch := append(append(append([]byte(nil), base...), neg...), mirror...)
	opt := &_Ctype_da3go_options{process_res: 56}

	before := liveCount()
	var views *_Ctype_da3go_view
	var n _Ctype_int
	var cerr *_Ctype_char
	rc := da3go_depth_batch(h, (*_Ctype_uchar)(&batch[0]), 3, _Ctype_int(w), _Ctype_int(ht), opt, &views, &n, &cerr)
	require.Zero(t, int(rc), "da3go_depth_batch: %s", errText(cerr))
	require.Equal(t, 3, int(n))
	got := takeViews(views, 3)
	assert.Equal(t, before, liveCount(), "da3go_free_views freed the array and every map")

	s, err := lookup(h)
	require.NoError(t, err)
	imgs := []image.Image{rgbImage(base, w, ht), rgbImage(neg, w, ht), rgbImage(mirror, w, ht)}
	want, err := s.Independent(context.Background(), imgs, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	for i := range want {
		assert.Equal(t, [2]int{want[i].Width, want[i].Height}, [2]int{got[i].Width, got[i].Height}, "view %d", i)
		assert.Equal(t, want[i].Depth, got[i].Depth, "view %d: depth equals Model.Independent bit for bit", i)
		assert.Equal(t, want[i].Conf, got[i].Conf, "view %d: conf", i)
		assert.Equal(t, want[i].Camera.Extrinsics, got[i].Camera.Extrinsics, "view %d: extrinsics", i)
	}
	assert.NotEqual(t, got[0].Depth, got[1].Depth, "the images are different, so are their maps")

	for i, px := range [][]byte{base, neg, mirror} {
		var d *_Ctype_float
		var ow, oh _Ctype_int
		rc := da3go_depth_rgb(h, (*_Ctype_uchar)(&px[0]), _Ctype_int(w), _Ctype_int(ht), opt, &d, &ow, &oh, &cerr)
		require.Zero(t, int(rc), "da3go_depth_rgb: %s", errText(cerr))
		single := slices32(unsafe.Pointer(d), int(ow*oh))
		da3go_free_buffer(unsafe.Pointer(d))
		require.Len(t, single, len(got[i].Depth))
		maxAbs, _, corr := testutil.Stats(single, got[i].Depth)
		var ref float64
		for _, v := range single {
			ref = math.Max(ref, math.Abs(float64(v)))
		}
		assert.GreaterOrEqual(t, corr, 0.999999, "view %d: correlation with the single call", i)
		assert.LessOrEqual(t, maxAbs, 1e-5*ref, "view %d: max|d| against the single call", i)
	}
}

// TestDepthBatchErrors: bad arguments are errors with a message, never a crash,
// and leave the outputs empty.
func TestDepthBatchErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the tiny model: skipped in -short mode")
	}
	h := batchFixture(t)
	px := make([]byte, 3*8*8)
	rgb := (*_Ctype_uchar)(&px[0])
	var views *_Ctype_da3go_view
	var n _Ctype_int
	for _, c := range []struct {
		name    string
		call    func(e **_Ctype_char) _Ctype_int
		message string
	}{
		{"n = 0", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h, rgb, 0, 8, 8, nil, &views, &n, e) }, "1 to 1024 images, got 0"},
		{"n < 0", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h, rgb, -2, 8, 8, nil, &views, &n, e) }, "got -2"},
		{"NULL pixels", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h, nil, 1, 8, 8, nil, &views, &n, e) }, "need RGB pixels"},
		{"zero width", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h, rgb, 1, 0, 8, nil, &views, &n, e) }, "positive size, got 0x8"},
		{"huge size", func(e **_Ctype_char) _Ctype_int {
			return da3go_depth_batch(h, rgb, 1, 1<<30, 1<<30, nil, &views, &n, e)
		}, "da3go_depth_batch:"},
		{"NULL out", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h, rgb, 1, 8, 8, nil, nil, &n, e) }, "out_views and out_n"},
		{"bad handle", func(e **_Ctype_char) _Ctype_int { return da3go_depth_batch(h+1000, rgb, 1, 8, 8, nil, &views, &n, e) }, "invalid model handle"},
		{"bad option", func(e **_Ctype_char) _Ctype_int {
			return da3go_depth_batch(h, rgb, 1, 8, 8, &_Ctype_da3go_options{process_res: -1}, &views, &n, e)
		}, "process_res -1"},
	} {
		var cerr *_Ctype_char
		views, n = nil, 7
		rc := c.call(&cerr)
		assert.Equal(t, -1, int(rc), c.name)
		assert.Contains(t, errText(cerr), c.message, c.name)
		if c.name != "NULL out" {
			assert.Nil(t, views, c.name)
			assert.Zero(t, int(n), c.name)
		}
	}
}

// TestRunScenes: one da3go_run_scenes call runs each scene as the Go
// library's MultiView does (bit for bit), the views of all scenes in one
// array; with independent set, each image as Depth does.
func TestRunScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model: skipped in -short mode")
	}
	h := batchFixture(t)
	a0, w0, h0 := fixtureRGB(t, "two/images/view0.png")
	a1, w1, h1 := fixtureRGB(t, "two/images/view1.png")
	b0, w2, h2 := fixtureRGB(t, "four/images/view3.png")
	rgbs := []*_Ctype_uchar{(*_Ctype_uchar)(&a0[0]), (*_Ctype_uchar)(&a1[0]), (*_Ctype_uchar)(&b0[0])}
	ws := []_Ctype_int{_Ctype_int(w0), _Ctype_int(w1), _Ctype_int(w2)}
	hs := []_Ctype_int{_Ctype_int(h0), _Ctype_int(h1), _Ctype_int(h2)}
	counts := []_Ctype_int{2, 1}
	s, err := lookup(h)
	require.NoError(t, err)
	imgs := []image.Image{rgbImage(a0, w0, h0), rgbImage(a1, w1, h1), rgbImage(b0, w2, h2)}
	ctx, opt := context.Background(), model.RunOptions{ProcessRes: 56}

	for _, independent := range []int{0, 1} {
		var want []model.Result
		if independent == 0 {
			first, err := s.MultiView(ctx, imgs[:2], opt)
			require.NoError(t, err)
			second, err := s.MultiView(ctx, imgs[2:], opt)
			require.NoError(t, err)
			want = append(first, second...)
		} else {
			for _, im := range imgs {
				r, err := s.Depth(ctx, im, opt)
				require.NoError(t, err)
				want = append(want, *r)
			}
		}
		before := liveCount()
		var views *_Ctype_da3go_view
		var n _Ctype_int
		var cerr *_Ctype_char
		copt := &_Ctype_da3go_options{process_res: 56, independent: _Ctype_int(independent)}
		rc := da3go_run_scenes(h, &rgbs[0], &ws[0], &hs[0], &counts[0], 2, copt, &views, &n, &cerr)
		require.Zero(t, int(rc), "da3go_run_scenes: %s", errText(cerr))
		require.Equal(t, 3, int(n))
		got := takeViews(views, 3)
		assert.Equal(t, before, liveCount(), "everything freed")
		for i := range want {
			assert.Equal(t, [2]int{want[i].Width, want[i].Height}, [2]int{got[i].Width, got[i].Height}, "independent %d view %d", independent, i)
			assert.Equal(t, want[i].Depth, got[i].Depth, "independent %d view %d: depth", independent, i)
			assert.Equal(t, want[i].Camera.Extrinsics, got[i].Camera.Extrinsics, "independent %d view %d: extrinsics", independent, i)
		}
	}

	// Bad input.
	zero := []_Ctype_int{0, 1}
	negW := []_Ctype_int{_Ctype_int(w0), -1, _Ctype_int(w2)}
	nilPix := []*_Ctype_uchar{rgbs[0], nil, rgbs[2]}
	var views *_Ctype_da3go_view
	var n _Ctype_int
	for _, c := range []struct {
		name    string
		call    func(e **_Ctype_char) _Ctype_int
		message string
	}{
		{"no scenes", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, &rgbs[0], &ws[0], &hs[0], &counts[0], 0, nil, &views, &n, e)
		}, "1 to 1024 scenes, got 0"},
		{"empty scene", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, &rgbs[0], &ws[0], &hs[0], &zero[0], 2, nil, &views, &n, e)
		}, "scene 0 has 0 images"},
		{"NULL image", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, &nilPix[0], &ws[0], &hs[0], &counts[0], 2, nil, &views, &n, e)
		}, "image 1: need RGB pixels"},
		{"negative width", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, &rgbs[0], &negW[0], &hs[0], &counts[0], 2, nil, &views, &n, e)
		}, "image 1: need RGB pixels and a positive size, got -1x"},
		{"NULL arrays", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, nil, &ws[0], &hs[0], &counts[0], 2, nil, &views, &n, e)
		}, "must not be NULL"},
		{"NULL out", func(e **_Ctype_char) _Ctype_int {
			return da3go_run_scenes(h, &rgbs[0], &ws[0], &hs[0], &counts[0], 2, nil, &views, nil, e)
		}, "out_views and out_n"},
	} {
		var cerr *_Ctype_char
		rc := c.call(&cerr)
		assert.Equal(t, -1, int(rc), c.name)
		assert.Contains(t, errText(cerr), c.message, c.name)
	}
}
