package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
)

func tinyDA2(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "tests", "fixtures", "da2-tiny", "model.pth")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	dst := filepath.Join(t.TempDir(), "da2-tiny.gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, convert.Options{Heads: 2, OutLayers: []int{0, 1, 2, 3}}))
	return dst
}

func fixtureImage(t *testing.T, rel string) string {
	p := filepath.Join("..", "..", "tests", "fixtures", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not present", p)
	}
	return p
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestDepthWritesEveryFormat(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	out := t.TempDir()
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "56", "-format", "png,png16,pfm,npy", "-conf", "-o", out, img)
	require.Equal(t, 0, code, stderr)
	for _, name := range []string{"view0_depth.png", "view0_depth_16.png", "view0_depth.pfm", "view0_depth.npy", "view0_conf.png", "view0_conf.npy"} {
		assert.FileExists(t, filepath.Join(out, name))
		assert.Contains(t, stdout, name)
	}
	f, err := os.Open(filepath.Join(out, "view0_depth.png"))
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err)
	src, err := imgio.Decode(img)
	require.NoError(t, err)
	assert.Equal(t, src.Bounds().Dx(), cfg.Width, "depth at the input image size")
	assert.Equal(t, src.Bounds().Dy(), cfg.Height)
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "tmp", "no temporary files left")
	}
}

func TestDepthSingleOutputFile(t *testing.T) {
	m := tinyDA2(t)
	img := fixtureImage(t, "da2-tiny/image.png")
	out := filepath.Join(t.TempDir(), "d.pfm")
	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-format", "pfm", "-quiet", "-o", out, img)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("Pf\n160 120\n-1.0\n")), "PFM header at the image size")
}

func TestPoseJSON(t *testing.T) {
	m := tinyDA3(t)
	a := fixtureImage(t, "da3-tiny/two/images/view0.png")
	b := fixtureImage(t, "da3-tiny/two/images/view1.png")
	code, stdout, stderr := runCLI("pose", "-model", m, "-process-res", "42", a, b)
	require.Equal(t, 0, code, stderr)
	var doc PoseOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
	require.Len(t, doc.Views, 2)
	for _, v := range doc.Views {
		assert.Greater(t, v.Intrinsics[0][0], 0.0)
		assert.Equal(t, 1.0, v.Intrinsics[2][2])
		assert.InDelta(t, float64(v.ProcessedWidth)/2, v.Intrinsics[0][2], 1e-9)
		assert.NotZero(t, v.Width)
	}
	out := filepath.Join(t.TempDir(), "pose.json")
	code, _, stderr = runCLI("pose", "-model", m, "-process-res", "42", "-o", out, a)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, out)
}

func TestBadInputs(t *testing.T) {
	da3 := tinyDA3(t)
	da2 := tinyDA2(t)
	img := fixtureImage(t, "da2-tiny/image.png")
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "not.gguf")
	require.NoError(t, os.WriteFile(notGGUF, []byte("this is not a model file at all, just text"), 0o644))
	full, err := os.ReadFile(da2)
	require.NoError(t, err)
	truncated := filepath.Join(dir, "trunc.gguf")
	require.NoError(t, os.WriteFile(truncated, full[:len(full)/2], 0o644))
	garbageImg := filepath.Join(dir, "bad.jpg")
	require.NoError(t, os.WriteFile(garbageImg, []byte("\xff\xd8\xff garbage"), 0o644))
	emptyImg := filepath.Join(dir, "empty.png")
	require.NoError(t, os.WriteFile(emptyImg, nil, 0o644))
	huge := filepath.Join(dir, "huge.png")
	writeHugeHeaderPNG(t, huge)

	out := filepath.Join(dir, "out")
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing model", []string{"depth", "-model", filepath.Join(dir, "nope.gguf"), img}, 1, "nope.gguf"},
		{"not gguf", []string{"depth", "-model", notGGUF, img}, 1, "not a GGUF"},
		{"truncated", []string{"depth", "-model", truncated, img}, 1, "trunc.gguf"},
		{"undecodable image", []string{"depth", "-model", da2, "-o", out, garbageImg}, 1, "bad.jpg"},
		{"empty image", []string{"depth", "-model", da2, "-o", out, emptyImg}, 1, "empty.png"},
		{"huge image", []string{"depth", "-model", da2, "-o", out, huge}, 1, "huge.png"},
		{"missing image", []string{"depth", "-model", da2, filepath.Join(dir, "none.jpg")}, 1, "none.jpg"},
		{"no -model", []string{"depth", img}, 2, "-model is required"},
		{"bad format", []string{"depth", "-model", da2, "-format", "gif", img}, 2, "unknown -format"},
		{"pose on V2", []string{"pose", "-model", da2, img}, 1, "no camera head"},
		{"conf on V2", []string{"depth", "-model", da2, "-conf", "-o", out, img}, 1, "no confidence"},
		{"bad method", []string{"depth", "-model", da3, "-process-res-method", "stretch", img}, 2, "stretch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.msg)
			assert.NotContains(t, stderr, "panic")
		})
	}
	entries, _ := os.ReadDir(out)
	assert.Empty(t, entries, "failed runs leave no output")
}

// writeHugeHeaderPNG writes a valid PNG whose header claims 50000×50000 pixels.
func writeHugeHeaderPNG(t *testing.T, path string) {
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1))))
	data := b.Bytes()
	// IHDR width/height live at bytes 16..23; the CRC is not checked by DecodeConfig.
	for _, off := range []int{16, 20} {
		data[off], data[off+1], data[off+2], data[off+3] = 0, 0, 0xc3, 0x50
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// TestExifRotate runs a JPEG stored sideways (24×16, Exif orientation 6: rotate 90° clockwise) through
// both model families: by default DA2 turns it upright (as cv2.imread does) and DA3 does not (as PIL
// does); -exif-rotate overrides either way. The depth map has the size of the image the model saw.
func TestExifRotate(t *testing.T) {
	img := filepath.Join("..", "..", "internal", "jpeg", "testdata", "exif_o6.jpg")
	da2, da3 := tinyDA2(t), tinyDA3(t)
	for _, tc := range []struct {
		name  string
		model string
		flags []string
		want  image.Point
	}{
		{"da2 default", da2, nil, image.Pt(16, 24)},
		{"da2 off", da2, []string{"-exif-rotate=false"}, image.Pt(24, 16)},
		{"da3 default", da3, nil, image.Pt(24, 16)},
		{"da3 on", da3, []string{"-exif-rotate"}, image.Pt(16, 24)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "d.png")
			args := append([]string{"depth", "-model", tc.model, "-process-res", "28", "-o", out}, tc.flags...)
			code, _, stderr := runCLI(append(args, img)...)
			require.Equal(t, 0, code, stderr)
			f, err := os.Open(out)
			require.NoError(t, err)
			defer f.Close()
			cfg, err := png.DecodeConfig(f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, image.Pt(cfg.Width, cfg.Height))
		})
	}
	code, _, stderr := runCLI("depth", "-model", da2, "-exif-rotate=maybe", img)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "exif-rotate")
}
