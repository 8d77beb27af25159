package server

// engine.go is the server's only contact with the model packages: loading,
// capabilities and one run. Everything else works on the plain types below.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"image"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/align"
	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/gsvideo"
	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
	"github.com/da3-go/da3-go/model/tile"
)

// ModelSpec names one model to serve.
type ModelSpec struct {
	// Name is how requests select the model; empty means the name in the
	// file's metadata, else the file's base name.
	Name string
	// Path of the GGUF file (names of published models are resolved by the
	// caller). With MetricPath it is the any-view half of a nested model.
	Path string
	// MetricPath, when set, is the metric half of a nested model
	// (DA3NESTED-GIANT-LARGE): depth in metres.
	MetricPath string
	// Licence (an SPDX id) and Source (the official checkpoint's page) of
	// the weights, shown by GET /v1/models; empty means the file's
	// general.license and general.source.url.
	Licence, Source string
}

// ModelInfo describes a loaded model (GET /v1/models).
type ModelInfo struct {
	Name        string   `json:"id"`
	File        string   `json:"file"`
	Arch        string   `json:"arch"`
	Nested      bool     `json:"nested"`
	Metric      bool     `json:"metric"`
	Unit        string   `json:"unit"` // of depth without intrinsics: relative, disparity, focal-normalised, metres
	Intrinsics  bool     `json:"intrinsics"`
	Camera      bool     `json:"camera"`
	Confidence  bool     `json:"confidence"`
	Sky         bool     `json:"sky"`
	MultiView   bool     `json:"multi_view"`
	WeightBytes uint64   `json:"weight_bytes"`
	Device      string   `json:"device"`
	Instances   int      `json:"instances"`
	Exports     []string `json:"exports"` // scene export names
	// RayPose: poses from the auxiliary ray head on request (ray_pose).
	RayPose bool `json:"ray_pose"`
	// Gaussians: DA3-GIANT's 3D Gaussians (the gs_ply export).
	Gaussians bool `json:"gaussians"`
	// ExifRotate: JPEGs are turned upright by their Exif orientation unless a
	// request says otherwise (DA2 models, whose reference reads images with
	// cv2.imread; DA3's reads them with PIL's Image.open, which does not).
	ExifRotate bool `json:"exif_rotate"`
	// ProcessRes is the processed resolution a request's process_res 0
	// stands for (the model's default: 504 for DA3, 518 for DA2).
	ProcessRes int `json:"process_res"`
	// Licence is the SPDX id of the weights' licence ("" when unknown);
	// NonCommercial marks licences that forbid commercial use.
	Licence       string `json:"licence"`
	NonCommercial bool   `json:"non_commercial"`
	// Source is the page of the official checkpoint ("" when unknown).
	Source string `json:"source"`
}

// runOptions are the model options of one request.
type runOptions struct {
	processRes    int
	method        string
	refView       string
	processedSize bool
	intrinsics    []float64 // fx, fy, cx, cy of the input images, or nil
	rayPose       bool
	raySeed       uint64
	cameras       []GivenCamera // known cameras, one per image, or nil
	gaussians     bool
	align         []align.Samples // metric measurements, one set per image, or nil
	tile          string          // on, auto, off or ""
	tileSize      int
	// lens undistorts the images (camera_model), nil for pinhole images;
	// keepUndistorted leaves the outputs in the undistorted pinhole view
	// instead of mapping them back to the images' pixels.
	lens            *lens.Undistorters
	keepUndistorted bool
}

// camera is one view's camera: world-to-camera extrinsics (3×4, OpenCV axes)
// and intrinsics for the processed and the original image.
type camera struct {
	Extrinsics         [3][4]float64
	Intrinsics         [3][3]float64
	IntrinsicsOriginal [3][3]float64
}

// view is one view's output.
type view struct {
	Depth, Conf, Sky       []float32
	Width, Height          int // of the maps
	ProcessedW, ProcessedH int
	Unit                   string
	Camera                 *camera
	AlignScale             float64 // with given cameras: the depth was divided by it
	Alignment              *align.Alignment
	// Undistorter undistorted the image (camera_model), else nil; MappedBack:
	// the maps and camera were mapped back to the image's pixels.
	Undistorter *lens.Undistorter
	MappedBack  bool
}

// output is one run's result.
type output struct {
	views []view
	// scene is the views at the processed size for package export.
	scene []export.View
	// gaussians is the 3D Gaussians' PLY (gaussians asked for), else nil;
	// splats are those Gaussians and cams the views' cameras, for gs_video.
	gaussians []byte
	splats    *gs.Gaussians
	cams      []gsvideo.Camera
}

// instance is one loaded copy of a model; a pool holds one per concurrent
// run.
type instance struct {
	r da3.Runner
}

func loadInstance(ctx context.Context, spec ModelSpec, opts model.Options) (*instance, error) {
	r, err := da3.Open(ctx, da3.Spec{Path: spec.Path, MetricPath: spec.MetricPath}, opts)
	if err != nil {
		return nil, err
	}
	return &instance{r: r}, nil
}

func (in *instance) close() error { return in.r.Close() }

// info describes the model; the name comes from the spec, the metadata or
// the file name.
func (in *instance) info(spec ModelSpec) ModelInfo {
	cfg := in.r.Config()
	name := spec.Name
	if name == "" {
		name = cfg.Name
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(spec.Path), filepath.Ext(spec.Path))
	}
	caps := in.r.Capabilities()
	file := filepath.Base(spec.Path)
	if caps.Nested {
		file += "+" + filepath.Base(spec.MetricPath)
	}
	return ModelInfo{
		Name: name, File: file, Arch: cfg.Arch.String(), Nested: caps.Nested, Metric: caps.Unit == model.Metres || caps.NeedsIntrinsics,
		Unit: caps.Unit.String(), Intrinsics: caps.NeedsIntrinsics,
		Camera: caps.Camera, Confidence: caps.Confidence, Sky: caps.Sky,
		MultiView: caps.MultiView, WeightBytes: in.r.WeightBytes(), Device: in.r.Device(), ExifRotate: caps.ExifRotate,
		RayPose: caps.RayPose, Gaussians: caps.Gaussians, ProcessRes: cfg.ResizeTarget,
		Licence: cmp.Or(spec.Licence, cfg.Licence), Source: cmp.Or(spec.Source, cfg.Source),
		NonCommercial: licence.NonCommercial(cmp.Or(spec.Licence, cfg.Licence)),
	}
}

func (o runOptions) modelOptions() (model.RunOptions, error) {
	// The maps are computed at the processed size (the point cloud needs
	// them there) and resized to the image size afterwards when asked.
	opt := model.RunOptions{ProcessRes: o.processRes, ProcessedSize: true}
	if o.method != "" {
		m, err := model.ParseResizeMethod(o.method)
		if err != nil {
			return opt, err
		}
		opt.Method = m
	}
	switch rv := model.RefView(o.refView); rv {
	case "":
	case model.RefSaddleBalanced, model.RefFirst, model.RefMiddle:
		opt.RefView = rv
	default:
		return opt, fmt.Errorf("unknown ref_view %q (saddle_balanced, first, middle)", o.refView)
	}
	if k := o.intrinsics; k != nil {
		if len(k) != 4 {
			return opt, fmt.Errorf("intrinsics: want [fx, fy, cx, cy], got %d numbers", len(k))
		}
		opt.Intrinsics = &model.Intrinsics{Fx: k[0], Fy: k[1], Cx: k[2], Cy: k[3]}
	}
	opt.RayPose, opt.RaySeed, opt.Gaussians = o.rayPose, o.raySeed, o.gaussians
	for _, c := range o.cameras {
		k := c.Intrinsics
		opt.Extrinsics = append(opt.Extrinsics, c.Extrinsics)
		opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: k[0], Fy: k[1], Cx: k[2], Cy: k[3]})
	}
	return opt, nil
}

// run runs the images as views of one scene (DA3 any-view and nested
// models), or one by one when independent is set or the model takes one
// view at a time. The views' maps are at the image size unless
// processedSize; the export views, named by names, at the processed size.
// With a lens the images are undistorted first and the outputs mapped back
// to their pixels unless keepUndistorted.
func (in *instance) run(ctx context.Context, imgs []image.Image, names []string, o runOptions, independent bool) (*output, error) {
	opt, err := o.modelOptions()
	if err != nil {
		return nil, err
	}
	imgs, us, err := undistort(ctx, imgs, o.lens)
	if err != nil {
		return nil, err
	}
	ks := in.lensIntrinsics(us, o)
	var res []model.Result
	if independent {
		for i, im := range imgs {
			one := opt
			if opt.Extrinsics != nil {
				one.Extrinsics, one.ViewIntrinsics = opt.Extrinsics[i:i+1], opt.ViewIntrinsics[i:i+1]
			}
			if ks != nil {
				one.Intrinsics = ks[i]
			}
			r, err := in.depthOne(ctx, im, one, o)
			if err != nil {
				return nil, err
			}
			res = append(res, *r)
		}
	} else {
		if ks != nil {
			opt.Intrinsics = ks[0] // as the command: the first image's pinhole view
		}
		if res, err = in.r.MultiView(ctx, imgs, opt); err != nil {
			return nil, err
		}
	}
	fits, err := alignResults(res, o.align, independent)
	if err != nil {
		return nil, err
	}
	back := us
	if o.keepUndistorted {
		back = nil
	}
	out := &output{views: make([]view, len(res))}
	if out.scene, err = model.Views(res, names); err != nil {
		return nil, err
	}
	if err := model.DistortViews(out.scene, res, back); err != nil {
		return nil, lensError(err)
	}
	if o.gaussians {
		parts := make([]*gs.Gaussians, len(res))
		for i := range res {
			if parts[i] = res[i].Gaussians; parts[i] == nil {
				return nil, fmt.Errorf("view %d has no Gaussians", i)
			}
		}
		out.splats = gs.Concat(parts...)
		var buf bytes.Buffer
		if err := gs.WritePLY(&buf, out.splats); err != nil {
			return nil, err
		}
		out.gaussians = buf.Bytes()
		for i := range res {
			if c := res[i].Camera; c != nil {
				out.cams = append(out.cams, gsvideo.Camera{Extrinsics: c.Extrinsics, Intrinsics: c.Intrinsics})
			}
		}
	}
	for i := range res {
		r := &res[i]
		if !o.processedSize {
			r.ToOriginalSize() // new slices: the export views keep the processed maps
		}
		v := view{Width: r.Width, Height: r.Height,
			ProcessedW: r.ProcessedWidth, ProcessedH: r.ProcessedHeight, Unit: r.Unit.String(), AlignScale: r.AlignScale,
			Alignment: fits[i], Undistorter: us[i]}
		if i < len(back) && back[i] != nil {
			if err := r.MapBack(back[i]); err != nil {
				return nil, lensError(err)
			}
			v.MappedBack = true
		}
		v.Depth, v.Conf, v.Sky = r.Depth, r.Conf, r.Sky
		if c := r.Camera; c != nil {
			v.Camera = &camera{Extrinsics: c.Extrinsics, Intrinsics: c.Intrinsics, IntrinsicsOriginal: c.IntrinsicsOriginal}
		}
		out.views[i] = v
	}
	return out, nil
}

// depthOne runs one image alone, tiled when o asks for it and the image is
// worth it.
func (in *instance) depthOne(ctx context.Context, im image.Image, opt model.RunOptions, o runOptions) (*model.Result, error) {
	if o.tiles(im.Bounds().Dx(), im.Bounds().Dy(), in.r.Config().ResizeTarget) {
		return tile.Depth(ctx, in.r, im, tile.Options{Size: o.tileSize, Run: opt})
	}
	return in.r.Depth(ctx, im, opt)
}

// tiles reports whether an image of w×h runs tiled; defaultRes is the
// model's process resolution.
func (o runOptions) tiles(w, h, defaultRes int) bool {
	switch o.tile {
	case "on":
		return true
	case "auto":
		return tile.Worth(w, h, cmp.Or(o.processRes, defaultRes))
	}
	return false
}

// undistort undistorts each image whose size the lens has an undistorter for
// (all but pinhole lenses); us holds the undistorter of each image (nil: left
// as it is). Without a lens the images are returned as they are.
func undistort(ctx context.Context, imgs []image.Image, ls *lens.Undistorters) (out []image.Image, us []*lens.Undistorter, err error) {
	us = make([]*lens.Undistorter, len(imgs))
	if ls == nil {
		return imgs, us, nil
	}
	out = make([]image.Image, len(imgs))
	for i, img := range imgs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		b := img.Bounds()
		u, err := ls.For(b.Dx(), b.Dy())
		if err != nil {
			return nil, nil, fmt.Errorf("%w: image %d: camera_model: %w", model.ErrInvalidInput, i, err)
		}
		out[i] = img
		if u == nil {
			continue
		}
		if out[i], err = u.Image(img); err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i, err)
		}
		us[i] = u
	}
	return out, us, nil
}

// lensIntrinsics are, for a model that needs intrinsics (DA3 metric-large)
// run with a lens and without given intrinsics, the intrinsics of each
// image's view as the model sees it: the undistorted pinhole view's, or the
// lens's own pinhole camera; nil otherwise.
func (in *instance) lensIntrinsics(us []*lens.Undistorter, o runOptions) []*model.Intrinsics {
	caps := in.r.Capabilities()
	if o.lens == nil || o.intrinsics != nil || !caps.NeedsIntrinsics || caps.Nested {
		return nil
	}
	ks := make([]*model.Intrinsics, len(us))
	for i, u := range us {
		k := o.lens.Camera().K()
		if u != nil {
			k = u.Pinhole.K()
		}
		ks[i] = &model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]}
	}
	return ks
}

// lensError names what to change when undistorted views cannot be mapped back.
func lensError(err error) error {
	if errors.Is(err, model.ErrCroppedLens) {
		return fmt.Errorf("%w: use upper_bound_resize or lower_bound_resize, images of one size, or keep_undistorted", err)
	}
	return err
}

// isInputError reports errors caused by the request's images or options
// (answered 422) rather than by the server.
func isInputError(err error) bool {
	return errors.Is(err, model.ErrInvalidInput) || errors.Is(err, model.ErrNoCamera) || errors.Is(err, model.ErrNeedsFocal) ||
		errors.Is(err, model.ErrNoRayHead) || errors.Is(err, model.ErrNoCameraEncoder) || errors.Is(err, model.ErrNoGaussianHead)
}
