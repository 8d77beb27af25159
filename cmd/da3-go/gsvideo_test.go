package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
)

// probeVideo is ffprobe's codec, pixel format, size and frame count of a
// video's first stream, or nil without ffprobe.
func probeVideo(t *testing.T, path string) map[string]string {
	t.Helper()
	p, err := exec.LookPath("ffprobe")
	if err != nil {
		return nil
	}
	out, err := exec.Command(p, "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
		"stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate", "-of", "default=noprint_wrappers=1", path).CombinedOutput()
	require.NoError(t, err, string(out))
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// reconstruct -format gs_video on the tiny Gaussian model: three views
// follow upstream's default path (extend: 47 interpolated and smoothed
// frames, a wander of 38 and a dolly zoom of 36), the image and its depth
// side by side at the processed size; one view wanders (122 frames), here
// without the depth at a size of its own.
func TestGaussianVideoCLI(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("no ffmpeg")
	}
	m := convertFixture(t, "da3-tiny-gs", convert.Options{})[0]
	var imgs []string
	for _, v := range []string{"view0", "view1", "view2"} {
		imgs = append(imgs, fixtureImage(t, "da3-tiny-gs/three-cam/images/"+v+".png"))
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "gs_video,gs_ply", "-gs-quality", "low", "-o", out}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	path := filepath.Join(out, "gs_video", "0000_extend.mp4")
	assert.Contains(t, stdout, "wrote "+path)
	assert.Contains(t, stderr, "gs_video: 121 frames (extend path) of 92x28 at 24 fps")
	head := make([]byte, 12)
	fh, err := os.Open(path)
	require.NoError(t, err)
	_, err = fh.Read(head)
	fh.Close()
	require.NoError(t, err)
	assert.Equal(t, "ftyp", string(head[4:8]), "an MP4 (ISO base media) file")
	if info := probeVideo(t, path); info != nil {
		assert.Equal(t, map[string]string{"codec_name": "h264", "pix_fmt": "yuv420p", "width": "92", "height": "28",
			"nb_read_frames": "121", "r_frame_rate": "24/1"}, info)
	}
	assert.FileExists(t, filepath.Join(out, "gs_ply", "0000.ply"))

	out = t.TempDir()
	code, stdout, stderr = runCLI("reconstruct", "-model", m, "-process-res", "42", "-format", "gs_video", "-gs-trj", "interpolate",
		"-gs-depth", "none", "-gs-size", "32x24", "-o", out, imgs[0])
	require.Equal(t, 0, code, stderr)
	path = filepath.Join(out, "gs_video", "0000_wander.mp4")
	assert.Contains(t, stdout, "wrote "+path)
	if info := probeVideo(t, path); info != nil {
		assert.Equal(t, "122", info["nb_read_frames"])
		assert.Equal(t, [2]string{"32", "24"}, [2]string{info["width"], info["height"]})
	}

	// Not in windows: the Gaussians are not merged across them.
	out = t.TempDir()
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "gs_video", "-stream", "-o", out}, imgs...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "-format gs_video: the 3D Gaussians are not merged across windows")
	assert.NoDirExists(t, filepath.Join(out, "gs_video"))
}

// gs_video is refused before anything runs: without ffmpeg, with bad
// settings, with a model without the Gaussian head (nothing written).
func TestGaussianVideoCLIRefusals(t *testing.T) {
	img := fixtureImage(t, "da3-tiny-gs/one/images/view0.png")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-gs-trj", "spiral"}, "-gs-trj"},
		{[]string{"-gs-depth", "side"}, "-gs-depth"},
		{[]string{"-gs-quality", "best"}, "-gs-quality"},
		{[]string{"-gs-size", "32"}, "-gs-size"},
		{[]string{"-align-depth", "x.npy"}, "does not rescale the 3D Gaussians"},
	} {
		out := t.TempDir()
		code, _, stderr := runCLI(append(append([]string{"reconstruct", "-model", "m.gguf", "-format", "gs_video", "-o", out}, tc.args...), img)...)
		assert.NotEqual(t, 0, code, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}

	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runCLI("reconstruct", "-model", "m.gguf", "-format", "gs_video", "-o", t.TempDir(), img)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "needs the ffmpeg program")
}
