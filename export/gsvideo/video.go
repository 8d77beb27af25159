// Package gsvideo is depth_anything_3's gs_video export: a fly-through
// video of DA3-GIANT's 3D Gaussians (package gs) along a camera path made
// from the input views' cameras (Path), rendered by package render
// (gsplat's rasteriser) and encoded by the ffmpeg program as H.264 MP4
// (EncodeMP4).
//
// As upstream (export_to_gs_video with its defaults): the path is Extend
// (Wander for one view), 24 frames per second, frames the size of the
// views unless asked otherwise, a black background, every Gaussian (gs_ply
// prunes, the video does not), and next to each rendered image its
// expected depth coloured with matplotlib's Spectral (log depth between
// the whole video's 1st percentile of positive depths and 99th percentile
// of all depths, near red, far blue) after a white gap of 8 pixels.
//
// Differences: the camera of every frame has its principal point at the
// image centre and the focal lengths of the field of view across the
// image's middle row and column, as upstream's render_3dgs makes them, but
// the intrinsics are normalised by the views' size rather than by the
// frame's (the same unless the frame size is changed); the smoothed paths'
// rotations are orthonormalised; frames of odd sides are padded by a black
// row or column for yuv420p.
package gsvideo

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/tmath"
	"github.com/da3-go/da3-go/model/gs"
	"github.com/da3-go/da3-go/model/gs/render"
)

// FPS is the videos' frame rate.
const FPS = 24

// Layout is where the coloured depth goes (vis_depth).
type Layout string

// The layouts.
const (
	// HCat: to the right of the image (the default).
	HCat Layout = "hcat"
	// VCat: below it.
	VCat Layout = "vcat"
	// NoDepth: the image alone.
	NoDepth Layout = "none"
)

// gap is the white band between the image and its depth (pixels).
const gap = 8

// Camera is an input view's camera: world-to-camera extrinsics (OpenCV
// axes) and intrinsics in pixels of the views' images.
type Camera struct {
	Extrinsics [3][4]float64
	Intrinsics [3][3]float64
}

// Options are a video's settings; the zero value is upstream's defaults.
type Options struct {
	// Mode is the camera path ("": Extend). One view always wanders.
	Mode Mode
	// Width, Height are the rendered images' size (0: the views').
	Width, Height int
	// Depth is where the coloured depth goes ("": HCat).
	Depth Layout
	// Background is the colour behind the Gaussians (black).
	Background [3]float32
	// Workers render each frame (0: GOMAXPROCS).
	Workers int
}

// Video is a video of Gaussians, ready to render.
type Video struct {
	r      *render.Renderer
	cams   []render.Camera
	mode   Mode
	layout Layout
	w, h   int // the rendered images' size
}

// New prepares the video of g seen along the path opt.Mode makes of the
// views' cameras, whose intrinsics are in pixels of g's views (g.Width ×
// g.Height).
func New(g *gs.Gaussians, views []Camera, opt Options) (*Video, error) {
	if g == nil || g.Width < 1 || g.Height < 1 {
		return nil, fmt.Errorf("gs_video: %w: no view size", render.ErrInput)
	}
	if len(views) == 0 {
		return nil, fmt.Errorf("gs_video: no cameras")
	}
	mode := opt.Mode
	if mode == "" {
		mode = Extend
	}
	if len(views) == 1 {
		mode = Wander
	}
	layout := opt.Depth
	switch layout {
	case "":
		layout = HCat
	case HCat, VCat, NoDepth:
	default:
		return nil, fmt.Errorf("gs_video: unknown depth layout %q (hcat, vcat, none)", layout)
	}
	w, h := opt.Width, opt.Height
	if w == 0 && h == 0 {
		w, h = g.Width, g.Height
	}
	if w < 1 || h < 1 || w > 8192 || h > 8192 {
		return nil, fmt.Errorf("gs_video: frame size %dx%d: sides 1 to 8192", w, h)
	}
	poses := make([]Pose, len(views))
	for i, v := range views {
		poses[i] = poseOf(v, g.Width, g.Height)
	}
	path, err := Path(poses, mode, g.Width)
	if err != nil {
		return nil, fmt.Errorf("gs_video: %w", err)
	}
	r, err := render.New(g, render.Options{Background: opt.Background, Workers: opt.Workers})
	if err != nil {
		return nil, fmt.Errorf("gs_video: %w", err)
	}
	v := &Video{r: r, mode: mode, layout: layout, w: w, h: h}
	for _, p := range path {
		v.cams = append(v.cams, RenderCamera(p, w, h))
	}
	return v, nil
}

// poseOf is a view's camera as a Pose, its intrinsics normalised by the
// view size w × h.
func poseOf(c Camera, w, h int) Pose {
	var p Pose
	for i := range 3 {
		for j := range 3 {
			p.R[i][j] = c.Extrinsics[j][i]
		}
	}
	t := [3]float64{c.Extrinsics[0][3], c.Extrinsics[1][3], c.Extrinsics[2][3]}
	p.C = scale3(mulVec(p.R, t), -1)
	p.K = c.Intrinsics
	for j := range 3 {
		p.K[0][j] /= float64(w)
		p.K[1][j] /= float64(h)
	}
	return p
}

// RenderCamera is the camera render_3dgs renders pose p with in a w × h
// image: world-to-camera [Rᵀ | −Rᵀ·C]; the focal lengths of the fields of
// view between the rays of p's normalised intrinsics through the middles
// of the image's left and right edges, and top and bottom edges (get_fov);
// the principal point at the image centre.
func RenderCamera(p Pose, w, h int) render.Camera {
	rt := transpose(p.R)
	t := scale3(mulVec(rt, p.C), -1)
	var e [3][4]float64
	for i := range 3 {
		e[i] = [4]float64{rt[i][0], rt[i][1], rt[i][2], t[i]}
	}
	kinv, _ := inv3(p.K)
	ray := func(u, v float64) [3]float64 { return normalize(mulVec(kinv, [3]float64{u, v, 1})) }
	fovX := math.Acos(min(1, dot3(ray(0, 0.5), ray(1, 0.5))))
	fovY := math.Acos(min(1, dot3(ray(0.5, 0), ray(0.5, 1))))
	return render.Camera{Width: w, Height: h, Extrinsics: e,
		Fx: float64(w) / (2 * math.Tan(fovX/2)), Fy: float64(h) / (2 * math.Tan(fovY/2)),
		Cx: float64(w) / 2, Cy: float64(h) / 2}
}

// Mode is the camera path the video follows.
func (v *Video) Mode() Mode { return v.mode }

// Cameras are the frames' cameras.
func (v *Video) Cameras() []render.Camera { return v.cams }

// Frames is the number of frames.
func (v *Video) Frames() int { return len(v.cams) }

// Size is the frames' size: the rendered image's, with the depth beside or
// below it.
func (v *Video) Size() (w, h int) {
	switch v.layout {
	case HCat:
		return 2*v.w + gap, v.h
	case VCat:
		return v.w, 2*v.h + gap
	}
	return v.w, v.h
}

// WriteRaw renders the frames and writes them to w as raw 8-bit RGB,
// Size() each, row-major. progress, when not nil, is told the steps done
// of total: one per frame rendered, and with a depth layout (the frames
// are written once all are rendered: the depth's colours depend on every
// frame) one per frame written.
func (v *Video) WriteRaw(ctx context.Context, w io.Writer, progress func(done, total int)) error {
	n := len(v.cams)
	total := n
	if v.layout != NoDepth {
		total = 2 * n
	}
	tell := func(done int) {
		if progress != nil {
			progress(done, total)
		}
	}
	var rgbs [][]byte
	var depths [][]float32
	for i, cam := range v.cams {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := v.r.Render(cam)
		if err != nil {
			return fmt.Errorf("gs_video: frame %d: %w", i, err)
		}
		if v.layout == NoDepth {
			if _, err := w.Write(f.RGB8(nil)); err != nil {
				return err
			}
		} else {
			rgbs, depths = append(rgbs, f.RGB8(nil)), append(depths, f.Depth)
		}
		tell(i + 1)
	}
	if v.layout == NoDepth {
		return nil
	}
	near, far := depthRange(depths)
	fw, fh := v.Size()
	frame := make([]byte, 3*fw*fh)
	for i := range rgbs {
		if err := ctx.Err(); err != nil {
			return err
		}
		v.compose(frame, rgbs[i], depths[i], near, far)
		if _, err := w.Write(frame); err != nil {
			return err
		}
		rgbs[i], depths[i] = nil, nil
		tell(n + i + 1)
	}
	return nil
}

// maxQuantile is the number of values vis_depth_map_tensor takes its
// quantiles of (the first, in frame order).
const maxQuantile = 16_000_000

// depthRange is the colouring's range (vis_depth_map_tensor over the whole
// video): near = log of the 1st percentile of the positive depths (0 when
// there are none), far = log of the 99th percentile of all depths, in
// float32 as torch computes them.
func depthRange(depths [][]float32) (near, far float32) {
	var all, pos []float32
	for _, d := range depths {
		for _, x := range d {
			if len(all) < maxQuantile {
				all = append(all, x)
			}
			if x > 0 && len(pos) < maxQuantile {
				pos = append(pos, x)
			}
		}
		if len(all) >= maxQuantile && len(pos) >= maxQuantile {
			break
		}
	}
	far = float32(math.Log(float64(tmath.Quantile(all, 0.99))))
	if len(pos) > 0 {
		near = float32(math.Log(float64(tmath.Quantile(pos, 0.01))))
	}
	return near, far
}

// compose writes into frame the image and, per the layout, the coloured
// depth after a white gap.
func (v *Video) compose(frame, rgb []byte, depth []float32, near, far float32) {
	fw, _ := v.Size()
	dx, dy := 0, 0
	switch v.layout {
	case HCat:
		dx = v.w + gap
	case VCat:
		dy = v.h + gap
	}
	for i := range frame {
		frame[i] = 255
	}
	for y := range v.h {
		copy(frame[3*y*fw:3*(y*fw+v.w)], rgb[3*y*v.w:3*(y+1)*v.w])
		for x := range v.w {
			d := depth[y*v.w+x]
			t := (float32(math.Log(float64(d))) - near) / (far - near)
			c := export.Spectral(t)
			o := 3 * ((y+dy)*fw + x + dx)
			frame[o], frame[o+1], frame[o+2] = c[0], c[1], c[2]
		}
	}
}
