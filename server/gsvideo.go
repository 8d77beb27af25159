package server

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/export/gsvideo"
)

// gaussianExport reports the exports made from DA3-GIANT's Gaussians.
func gaussianExport(name string) bool { return name == "gs_ply" || name == "gs_video" }

// haveFFmpeg reports whether gs_video can be encoded here.
func haveFFmpeg() bool {
	_, err := gsvideo.FindFFmpeg("")
	return err == nil
}

// gsVideoFrames bounds the frames of a fly-through of views views (upstream's paths: 122 for two views,
// growing with the views), for the memory budget.
func gsVideoFrames(views int) int64 { return int64(max(122, 40*views)) }

// writeGSVideo renders the scene's Gaussians along upstream's camera path and encodes the MP4 (ffmpeg
// writes it to a temporary folder, removed afterwards, as MP4 needs a seekable file).
func writeGSVideo(w io.Writer, sc *scene) error {
	v, err := gsvideo.New(sc.splats, sc.cams, gsvideo.Options{})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "da3-go-gs-video-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gs_video.mp4")
	fw, fh := v.Size()
	ctx := sc.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := gsvideo.EncodeMP4(ctx, path, fw, fh, gsvideo.EncodeOptions{}, func(pipe io.Writer) error {
		return v.WriteRaw(ctx, pipe, nil)
	}); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
