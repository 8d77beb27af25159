package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/export/gsvideo"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
)

// gsVideoFlags are the settings of -format gs_video (export_to_gs_video's
// trj_mode, out_image_hw, vis_depth and video_quality).
type gsVideoFlags struct {
	trj, size, depth, quality string
	w, h                      int // parsed -gs-size, 0 for the views' size
}

func (f *gsVideoFlags) register(fs *flag.FlagSet) {
	modes := make([]string, 0, len(gsvideo.Modes()))
	for _, m := range gsvideo.Modes() {
		modes = append(modes, string(m))
	}
	fs.StringVar(&f.trj, "gs-trj", string(gsvideo.Extend), "gs_video: camera path through the views' cameras: "+strings.Join(modes, ", ")+
		" (one view always wanders)")
	fs.StringVar(&f.size, "gs-size", "", "gs_video: rendered image size WxH (default: the model's processed size)")
	fs.StringVar(&f.depth, "gs-depth", string(gsvideo.HCat), "gs_video: the rendered depth, coloured, beside the image (hcat), below it (vcat) or left out (none)")
	fs.StringVar(&f.quality, "gs-quality", string(gsvideo.High), "gs_video: H.264 quality: high (crf 18), medium (crf 23), low (crf 28)")
}

// check validates the flags and finds ffmpeg, before anything runs.
func (f *gsVideoFlags) check() error {
	if !slices.Contains(gsvideo.Modes(), gsvideo.Mode(f.trj)) {
		return fmt.Errorf("-gs-trj %q: want one of %v", f.trj, gsvideo.Modes())
	}
	switch gsvideo.Layout(f.depth) {
	case gsvideo.HCat, gsvideo.VCat, gsvideo.NoDepth:
	default:
		return fmt.Errorf("-gs-depth %q: want hcat, vcat or none", f.depth)
	}
	switch gsvideo.Quality(f.quality) {
	case gsvideo.High, gsvideo.Medium, gsvideo.Low:
	default:
		return fmt.Errorf("-gs-quality %q: want high, medium or low", f.quality)
	}
	if f.size != "" {
		w, h, err := parseSize(f.size)
		if err != nil || w > 8192 || h > 8192 {
			return fmt.Errorf("-gs-size %q: want WxH with sides 1 to 8192", f.size)
		}
		f.w, f.h = w, h
	}
	_, err := gsvideo.FindFFmpeg("")
	return err
}

// file is the video's name under gs_video/ for a scene of views views
// (upstream's 0000_<path>.mp4; one view wanders).
func (f *gsVideoFlags) file(views int) string {
	mode := f.trj
	if views == 1 {
		mode = string(gsvideo.Wander)
	}
	return fmt.Sprintf("0000_%s.mp4", mode)
}

// writeGaussianVideo renders the Gaussians of the results along the path
// of their cameras and encodes the video at path; progress is told the
// steps done. It returns a note on what was written.
func writeGaussianVideo(ctx context.Context, path string, res []model.Result, f *gsVideoFlags, progress func(done, total int)) (string, error) {
	var parts []*gs.Gaussians
	var cams []gsvideo.Camera
	for i := range res {
		if res[i].Gaussians == nil || res[i].Camera == nil {
			return "", fmt.Errorf("gs_video: view %d has no Gaussians or no camera", i)
		}
		parts = append(parts, res[i].Gaussians)
		cams = append(cams, gsvideo.Camera{Extrinsics: res[i].Camera.Extrinsics, Intrinsics: res[i].Camera.Intrinsics})
	}
	v, err := gsvideo.New(gs.Concat(parts...), cams, gsvideo.Options{Mode: gsvideo.Mode(f.trj), Width: f.w, Height: f.h,
		Depth: gsvideo.Layout(f.depth)})
	if err != nil {
		return "", err
	}
	w, h := v.Size()
	err = gsvideo.EncodeMP4(ctx, path, w, h, gsvideo.EncodeOptions{Quality: gsvideo.Quality(f.quality)}, func(pipe io.Writer) error {
		return v.WriteRaw(ctx, pipe, progress)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("gs_video: %d frames (%s path) of %dx%d at %d fps", v.Frames(), v.Mode(), w, h, gsvideo.FPS), nil
}

// errGSVideoCameras: with -cameras the results carry the given cameras
// while the Gaussians stay in the network's frame.
var errGSVideoCameras = errors.New("-format gs_video with -cameras: the 3D Gaussians are in the network's frame, not the given cameras'; drop -cameras or gs_video")
