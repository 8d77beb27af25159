package main

import (
	"context"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// da3go_export's gs_video: the tiny Gaussian model's three views make
// upstream's default video, an MP4 file at the path given.
func TestExportGaussianVideo(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("no ffmpeg")
	}
	src := "../tests/fixtures/da3-tiny-gs"
	if _, err := os.Stat(filepath.Join(src, "model.safetensors")); err != nil {
		t.Skip("fixture not present")
	}
	dir := t.TempDir()
	gguf := filepath.Join(dir, "gs.gguf")
	require.NoError(t, convert.Convert(context.Background(), src, gguf, convert.Options{}))
	m, err := model.Load(context.Background(), gguf, model.Options{Options: backend.Options{Device: "cpu"}})
	require.NoError(t, err)
	defer m.Close()
	var imgs []image.Image
	for _, v := range []string{"view0", "view1", "view2"} {
		img, err := imgio.Decode(filepath.Join(src, "three-cam", "images", v+".png"))
		require.NoError(t, err)
		imgs = append(imgs, img)
	}
	res, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 42, ProcessedSize: true, Gaussians: true})
	require.NoError(t, err)
	out := filepath.Join(dir, "v.mp4")
	require.NoError(t, writeExport("gs_video", out, res, nil))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Greater(t, len(b), 12)
	assert.Equal(t, "ftyp", string(b[4:8]), "an MP4 file")

	res[0].Gaussians = nil
	assert.ErrorContains(t, writeExport("gs_video", filepath.Join(dir, "w.mp4"), res, nil), "no Gaussians")
	assert.NoFileExists(t, filepath.Join(dir, "w.mp4"))
}
