package model

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/internal/sky"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/gs"
)

// RefView is the reference-view strategy for three or more views.
type RefView string

const (
	RefSaddleBalanced RefView = "saddle_balanced"
	RefSaddleSimRange RefView = "saddle_sim_range"
	RefFirst          RefView = "first"
	RefMiddle         RefView = "middle"
)

// ResizeMethod is the DA3 process_res_method: which side of the image
// becomes RunOptions.ProcessRes, and how the sides then become multiples of
// the patch size.
type ResizeMethod int

const (
	UpperBoundResize ResizeMethod = iota // "upper_bound_resize" (default): longest side → ProcessRes, sides rounded to patch multiples by resizing
	LowerBoundResize                     // "lower_bound_resize": shortest side → ProcessRes, sides rounded by resizing
	UpperBoundCrop                       // "upper_bound_crop": longest side → ProcessRes, sides floored by a centre crop
	LowerBoundCrop                       // "lower_bound_crop": shortest side → ProcessRes, sides floored by a centre crop
)

var resizeMethodNames = [...]string{"upper_bound_resize", "lower_bound_resize", "upper_bound_crop", "lower_bound_crop"}

// String returns the reference name (process_res_method).
func (m ResizeMethod) String() string {
	if m < 0 || int(m) >= len(resizeMethodNames) {
		return fmt.Sprintf("ResizeMethod(%d)", int(m))
	}
	return resizeMethodNames[m]
}

// ParseResizeMethod parses a reference method name such as "upper_bound_resize".
func ParseResizeMethod(s string) (ResizeMethod, error) {
	for i, n := range resizeMethodNames {
		if s == n {
			return ResizeMethod(i), nil
		}
	}
	return 0, fmt.Errorf("unknown resize method %q (want one of upper_bound_resize, lower_bound_resize, upper_bound_crop, lower_bound_crop)", s)
}

// RunOptions tune one inference call. The zero value uses the model's
// defaults: process resolution 504 (DA3) or 518 (DA2), upper_bound_resize
// (DA3), output at the original image size, saddle_balanced reference view,
// head chunks of 8 views.
type RunOptions struct {
	ProcessRes int
	Method     ResizeMethod
	// ProcessedSize returns maps at the network's processed size instead of
	// resizing them back to the input image size.
	ProcessedSize bool
	RefView       RefView
	ChunkSize     int
	// Taps returns the named intermediate tensors (see vit and dpt Forward).
	Taps func(name string) bool
	// Intrinsics is the camera of the input images, in pixels of the
	// original images. DA3METRIC-LARGE needs it for depth in metres (see
	// DepthUnit); other models refuse it.
	Intrinsics *Intrinsics
	// Strict makes non-finite (NaN or Inf) outputs an error (*NonFiniteError)
	// instead of a note in Result.NonFinite.
	Strict bool

	// RayPose estimates the cameras from DA3's auxiliary ray head instead of
	// its camera decoder (the package's use_ray_pose): a weighted RANSAC
	// homography per view, decomposed into rotation and intrinsics, the
	// confidence-weighted ray origin as the centre. The file needs the ray
	// head (`da3-go convert -with-aux`).
	RayPose bool
	// RaySeed seeds the ray solver's RANSAC samples; the poses equal the
	// package's after torch.manual_seed(RaySeed) on the CPU.
	RaySeed uint64
	// Extrinsics and ViewIntrinsics are known cameras of the images, one of
	// each per image: world-to-camera [R | t] (OpenCV axes) and pinhole
	// intrinsics in pixels of each original image. The DA3 any-view model is
	// then conditioned on them (the camera encoder's tokens replace the
	// learned camera tokens; no reference view is chosen), and the results
	// are in the given frame and scale: Result.Camera holds the given
	// cameras and the depth is divided by the Umeyama scale between the
	// predicted and the given camera centres (Result.AlignScale).
	Extrinsics     [][3][4]float64
	ViewIntrinsics []Intrinsics
	// Gaussians also predicts DA3-GIANT's 3D Gaussians (Result.Gaussians).
	Gaussians bool
	// MaxMemory, when positive, refuses requests whose estimated memory
	// (MemoryEstimate.Total) exceeds it. Every request is also refused when
	// it would not fit in the memory left (see EstimateMemory).
	MaxMemory int64
	// Progress, when set, is told how far the run has got, from another
	// goroutine, about ten times a second while a graph computes.
	Progress func(Progress)
}

// Progress is how far a run has got (RunOptions.Progress). A run computes
// one or more graphs, each a stage or a part of one; within a graph the
// count is of its nodes, which moves node by node on the CPU and at the
// graph's end on other devices.
type Progress struct {
	// Stage is what the graph computes: "reference view" (the first blocks
	// of every view, to choose the reference view), "network" (backbone,
	// heads and cameras in one graph), "backbone", "heads" (in chunks of
	// views), "batch" (independent images) or "metric" (the nested pair's
	// metric branch, a graph per view); package tile reports each run of a
	// tiled image as "tiles", its Part the run (1 the global pass).
	Stage string
	// Part and Parts number the graphs of a stage computed in pieces
	// (1-based); Parts is 1 for a stage in one graph.
	Part, Parts int
	// Done and Total are the graph's nodes computed and to compute.
	Done, Total int
}

// graph runs one graph of a run, telling opt.Progress about it as at
// (Stage, Part, Parts; the counts are filled in as it computes).
func (m *Model) graph(ctx context.Context, ro backend.RunOptions, opt RunOptions, at Progress,
	build func(b *backend.Builder) error) (map[string]backend.Tensor, error) {
	if tell := opt.Progress; tell != nil {
		ro.Progress = func(done, total int) {
			p := at
			p.Done, p.Total = done, total
			tell(p)
		}
	}
	return m.rt.Run(ctx, ro, build)
}

// Intrinsics are a pinhole camera's focal lengths and principal point in
// pixels.
type Intrinsics struct {
	Fx, Fy, Cx, Cy float64
}

// MetricFocalBase is DA3METRIC-LARGE's focal normalisation: metres =
// focal · output / 300, focal in pixels of the processed image (the
// official README's FAQ; depth_anything_3's apply_metric_scaling).
const MetricFocalBase = 300

// DepthUnit says what Result.Depth measures.
type DepthUnit int

const (
	// Relative is depth up to an unknown scale (DA3 any-view and mono).
	Relative DepthUnit = iota
	// Disparity is DA2's relative output: inverse depth up to scale and
	// shift, larger = nearer.
	Disparity
	// FocalNormalised is DA3METRIC-LARGE's output without a focal length:
	// metres = focal · depth / 300, focal = (fx+fy)/2 in pixels of the
	// processed image.
	FocalNormalised
	// Metres is metric depth (DA2 metric models, DA3METRIC-LARGE given the
	// camera intrinsics, the nested model).
	Metres
)

func (u DepthUnit) String() string {
	switch u {
	case Relative:
		return "relative"
	case Disparity:
		return "disparity"
	case FocalNormalised:
		return "focal-normalised"
	case Metres:
		return "metres"
	}
	return fmt.Sprintf("DepthUnit(%d)", int(u))
}

// ErrInvalidInput marks errors caused by a call's images or options (no
// images, a size the model cannot process, intrinsics or given cameras that
// are not cameras, tensors of the wrong shape) rather than by the model file
// or the machine: errors.Is(err, ErrInvalidInput) tells a caller (a server
// answering 4xx, say) that the same call will fail again. The error's text
// is the underlying error's.
var ErrInvalidInput = errors.New("invalid input")

// inputError is an error of the call's input; see ErrInvalidInput.
type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{e.err, ErrInvalidInput} }

// invalid marks err (nil stays nil) as an error of the call's input.
func invalid(err error) error {
	if err == nil || errors.Is(err, ErrInvalidInput) {
		return err
	}
	return inputError{err}
}

// ErrNeedsFocal reports a request for metres from DA3METRIC-LARGE without
// the camera's focal length.
var ErrNeedsFocal = errors.New("metric depth in metres needs the camera's focal length")

// Camera is one view's camera, in the processed image and in the original.
type Camera struct {
	// Extrinsics: 3×4 world-to-camera [R | t], OpenCV axes, row-major.
	Extrinsics [3][4]float64
	// Intrinsics for the processed image (network input) in pixels.
	Intrinsics [3][3]float64
	// IntrinsicsOriginal for the original image.
	IntrinsicsOriginal [3][3]float64
	// PoseEncoding is the raw camera decoder output [t, q(xyzw), fov_h, fov_w].
	PoseEncoding [9]float32
}

// Result is one view's output.
type Result struct {
	// Depth in the unit Unit says: DA3 any-view and mono relative depth,
	// DA2 relative disparity (larger = nearer), DA2 metric depth in metres,
	// DA3METRIC-LARGE focal-normalised depth, or metres when
	// RunOptions.Intrinsics gave the focal length.
	Depth []float32
	// Unit is what Depth measures.
	Unit DepthUnit
	// Conf is DA3's per-pixel confidence (≥ 1), nil for other models.
	Conf []float32
	// Sky is the mono/metric models' sky map (relu logit), else nil.
	Sky []float32
	// Width, Height of the maps (the original image size unless
	// ProcessedSize was asked for or the view was cropped).
	Width, Height int
	// ProcessedWidth, ProcessedHeight are the network input size.
	ProcessedWidth, ProcessedHeight int
	// OrigWidth, OrigHeight are the input image size.
	OrigWidth, OrigHeight int
	// Cropped: the processed view is a centre crop of the resized image
	// (crop methods, or views of different sizes in one scene), so its maps
	// stay at the processed size.
	Cropped bool
	// Camera is set for DA3 any-view models.
	Camera *Camera
	// RGB is the processed uint8 RGB image (HWC), for colour exports.
	RGB []uint8
	// Taps holds requested intermediate tensors.
	Taps map[string]backend.Tensor
	// NonFinite is empty when every output value is finite; otherwise it
	// names the first stage of the network (a tap name such as
	// "vit.feat.2", or the output) whose values hold NaN or Inf.
	NonFinite string
	// Gaussians are this view's 3D Gaussians (RunOptions.Gaussians), one
	// per processed pixel, in world space.
	Gaussians *gs.Gaussians
	// AlignScale is the scale the depth was divided by to bring it to the
	// given cameras' scale (RunOptions.Extrinsics), else 0.
	AlignScale float64
	// Position is the view's place in the order the network processed the
	// scene: DA3 any-view models put the reference view first (RefView) and
	// the others after it; the intermediate tensors of Taps are in that
	// order. 0 for single views.
	Position int

	// rayRaw, gsRaw are the raw ray and Gaussian head outputs of the view,
	// depthProc its depth at the processed size, until the run's parts
	// finish.
	rayRaw, gsRaw, depthProc []float32

	// probe is the first finiteness probe (probeNames) that saw NaN or Inf.
	probe string
}

// probeNames are the finiteness probes of the graphs in graph order: the
// backbone features, then the head's last features before the ReLU of its
// output convolutions (where NaN would be masked).
var probeNames = []string{"vit.feat.0", "vit.feat.1", "vit.feat.2", "vit.feat.3", "head.out1_up"}

// firstProbe returns the first probe whose value in out is not finite.
func firstProbe(out map[string]backend.Tensor) string {
	for _, p := range probeNames {
		if t, ok := out[backend.CheckPrefix+p]; ok && nonFinite(t.Data) {
			return p
		}
	}
	return ""
}

// Depth runs one image and returns its depth (and for DA3 any-view models
// confidence and camera).
func (m *Model) Depth(ctx context.Context, img Image, opt RunOptions) (*Result, error) {
	rs, err := m.MultiView(ctx, []Image{img}, opt)
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// DepthAndPose runs one image and fails if the model has no camera head.
func (m *Model) DepthAndPose(ctx context.Context, img Image, opt RunOptions) (*Result, error) {
	if !m.cfg.HasCamera {
		return nil, fmt.Errorf("%w: %s has no camera head; use a DA3 any-view model (small, base, large, giant)", ErrNoCamera, m.describe())
	}
	return m.Depth(ctx, img, opt)
}

// ErrNoCamera reports a pose request to a model without a camera decoder.
var ErrNoCamera = errors.New("model has no camera head")

// MultiView runs the images as views of one scene (DA3 any-view models): the
// backbone attends across views and the cameras share one world frame. Views
// of different sizes are centre-cropped to the smallest, as the reference
// does. Other models run each image independently. Results are in input order.
func (m *Model) MultiView(ctx context.Context, imgs []Image, opt RunOptions) ([]Result, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.runs.Done()
	return m.multiView(ctx, imgs, opt)
}

func (m *Model) multiView(ctx context.Context, imgs []Image, opt RunOptions) ([]Result, error) {
	if len(imgs) == 0 {
		return nil, invalid(errors.New("no images"))
	}
	if err := m.checkIntrinsics(opt.Intrinsics); err != nil {
		return nil, err
	}
	if err := m.checkParts(len(imgs), opt); err != nil {
		return nil, err
	}
	opt, err := m.checkViews(imgs, opt)
	if err != nil {
		return nil, err
	}
	if m.cfg.Arch != DA3 && len(imgs) > 1 {
		out := make([]Result, 0, len(imgs))
		for _, im := range imgs {
			r, err := m.multiView(ctx, []Image{im}, opt)
			if err != nil {
				return nil, err
			}
			out = append(out, r[0])
		}
		return out, nil
	}
	views, err := m.preprocess(ctx, imgs, opt)
	if err != nil {
		return nil, err
	}
	return m.newRun(ctx, views, opt).results()
}

func (m *Model) preprocess(ctx context.Context, imgs []Image, opt RunOptions) (_ []*preprocess.View, err error) {
	defer func() {
		if ctx.Err() == nil {
			err = invalid(err)
		}
	}()
	if opt.Method < UpperBoundResize || opt.Method > LowerBoundCrop {
		return nil, fmt.Errorf("invalid resize method %d", int(opt.Method))
	}
	res := opt.ProcessRes
	if res == 0 {
		res = m.cfg.ResizeTarget
	}
	ps := m.cfg.ViT.PatchSize
	if res < ps {
		return nil, fmt.Errorf("processing resolution %d is smaller than the model's %d-pixel patch", res, ps)
	}
	views := make([]*preprocess.View, len(imgs))
	for i, im := range imgs {
		if err := ctx.Err(); err != nil { // cancelled between images
			return nil, err
		}
		var p *preprocess.View
		var err error
		if m.cfg.Arch == DA2 {
			p, err = preprocess.DA2(im, res, ps, m.cfg.Mean, m.cfg.Std)
		} else {
			p, err = preprocess.DA3(im, preprocess.Options{ProcessRes: res, Patch: ps, Mean: m.cfg.Mean, Std: m.cfg.Std,
				Shortest: opt.Method == LowerBoundResize || opt.Method == LowerBoundCrop,
				Crop:     opt.Method == UpperBoundCrop || opt.Method == LowerBoundCrop})
		}
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		if p.Width < ps || p.Height < ps || p.Width%ps != 0 || p.Height%ps != 0 {
			return nil, fmt.Errorf("image %d: %dx%d preprocesses to %dx%d, not a multiple of the %d-pixel patch: the aspect ratio is too extreme for a processing resolution of %d",
				i, p.OrigWidth, p.OrigHeight, p.Width, p.Height, ps, res)
		}
		views[i] = p
	}
	if len(views) > 1 {
		preprocess.CropToSmallest(views)
	}
	return views, nil
}

// Pixels are preprocessed views, what the network takes: Views × 3 ×
// Height × Width normalised floats (CHW per view, views consecutive).
type Pixels struct {
	Data                 []float32
	Width, Height, Views int
}

// Preprocess resizes and normalises images as Depth and MultiView do before
// the network (for DA3 models the images are views of one scene: views of
// different sizes are centre-cropped to the smallest). Feed the result to a
// graph of Run, or to Forward.
func (m *Model) Preprocess(imgs []Image, opt RunOptions) (Pixels, error) {
	if len(imgs) == 0 {
		return Pixels{}, invalid(errors.New("no images"))
	}
	views, err := m.preprocess(context.Background(), imgs, opt)
	if err != nil {
		return Pixels{}, err
	}
	return Pixels{Data: stackPixels(views), Width: views[0].Width, Height: views[0].Height, Views: len(views)}, nil
}

func stackPixels(views []*preprocess.View) []float32 {
	n := len(views[0].Pixels)
	out := make([]float32, 0, n*len(views))
	for _, v := range views {
		out = append(out, v.Pixels...)
	}
	return out
}

// nodeBudget estimates the ggml graph size for a run.
func (m *Model) nodeBudget(views int) int {
	return 4096 + m.cfg.ViT.Depth*(120+8*views) + 2048
}

// result extracts view i from the graph outputs.
func (m *Model) result(out map[string]backend.Tensor, v *preprocess.View, i int, opt RunOptions) Result {
	W, H := v.Width, v.Height
	n := W * H
	slice := func(name string) []float32 {
		t, ok := out[name]
		if !ok {
			return nil
		}
		return append([]float32(nil), t.Data[i*n:(i+1)*n]...)
	}
	r := Result{Depth: slice("depth"), Conf: slice("conf"), Sky: slice("sky"), Width: W, Height: H,
		ProcessedWidth: W, ProcessedHeight: H, OrigWidth: v.OrigWidth, OrigHeight: v.OrigHeight, RGB: v.RGB,
		Cropped: v.CropX != 0 || v.CropY != 0, Unit: m.depthUnit()}
	if r.Sky != nil {
		sky.Fill(r.Depth, r.Sky)
	}
	if k := opt.Intrinsics; k != nil && r.Unit == FocalNormalised {
		// The focal length in pixels of the processed image: resizing
		// scales it, cropping does not.
		focal := (k.Fx*v.ScaleX + k.Fy*v.ScaleY) / 2
		s := float32(focal / MetricFocalBase)
		for i := range r.Depth {
			r.Depth[i] *= s
		}
		r.Unit = Metres
	}
	if pe, ok := out["pose_enc"]; ok {
		var enc [9]float32
		copy(enc[:], pe.Data[i*9:(i+1)*9])
		p := camera.Decode(enc, W, H)
		r.Camera = &Camera{Extrinsics: p.Extrinsics, Intrinsics: p.Intrinsics, PoseEncoding: enc,
			IntrinsicsOriginal: camera.ScaleIntrinsics(p.Intrinsics, v.ScaleX, v.ScaleY, v.CropX, v.CropY)}
	}
	return r
}

// ToOriginalSize resizes the maps (bilinear, align_corners, as the
// reference's output resize) from the processed size to the input image
// size. Results of Depth and MultiView are already there unless
// RunOptions.ProcessedSize was set; cropped views stay at the processed size.
func (r *Result) ToOriginalSize() {
	ow, oh, ok := r.originalSize()
	if !ok {
		return
	}
	r.Depth, _, _ = r.OriginalMap(r.Depth)
	r.Conf, _, _ = r.OriginalMap(r.Conf)
	r.Sky, _, _ = r.OriginalMap(r.Sky)
	r.Width, r.Height = ow, oh
}

// OriginalMap is d, one of r's maps (Depth, Conf or Sky), as ToOriginalSize
// would leave it, with its size; r is unchanged. Writing the maps one at a
// time through it holds one map at the image size instead of all of them.
func (r *Result) OriginalMap(d []float32) (data []float32, w, h int) {
	ow, oh, ok := r.originalSize()
	if !ok || len(d) != r.Width*r.Height {
		return d, r.Width, r.Height
	}
	return imgproc.BilinearAlignCorners(d, r.Width, r.Height, ow, oh), ow, oh
}

// originalSize is the size ToOriginalSize resizes the maps to, and whether
// it resizes them.
func (r *Result) originalSize() (w, h int, ok bool) {
	W, H, ow, oh := r.Width, r.Height, r.OrigWidth, r.OrigHeight
	if r.Cropped || (W == ow && H == oh) || ow < 1 || oh < 1 {
		return 0, 0, false
	}
	return ow, oh, true
}

// depthUnit is the unit of the model's raw depth output.
func (m *Model) depthUnit() DepthUnit { return m.cfg.Capabilities().Unit }

// checkIntrinsics refuses intrinsics that the model does not use or that
// are not a camera.
func (m *Model) checkIntrinsics(k *Intrinsics) (err error) {
	defer func() { err = invalid(err) }()
	if k == nil {
		return nil
	}
	if m.depthUnit() != FocalNormalised {
		return fmt.Errorf("%s does not use camera intrinsics: only the DA3 metric model (metric-large) converts its output to metres with them", m.describe())
	}
	for _, v := range []float64{k.Fx, k.Fy} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("intrinsics: focal lengths fx %g, fy %g must be positive pixels", k.Fx, k.Fy)
		}
	}
	if math.IsNaN(k.Cx) || math.IsNaN(k.Cy) || math.IsInf(k.Cx, 0) || math.IsInf(k.Cy, 0) {
		return fmt.Errorf("intrinsics: principal point (%g, %g) is not finite", k.Cx, k.Cy)
	}
	return nil
}

// checkPixels checks Forward's input: px.Views items (what, e.g. "views")
// of 3×Height×Width values, sides multiples of the patch size.
func (m *Model) checkPixels(px Pixels, what string) error {
	n, w, h := px.Views, px.Width, px.Height
	if n < 1 || w < 1 || h < 1 || len(px.Data) != 3*w*h*n {
		return invalid(fmt.Errorf("forward: %d values are not %d %s of 3×%d×%d", len(px.Data), n, what, h, w))
	}
	if w%m.cfg.ViT.PatchSize != 0 || h%m.cfg.ViT.PatchSize != 0 {
		return invalid(fmt.Errorf("forward: size %dx%d is not a multiple of the patch size %d", w, h, m.cfg.ViT.PatchSize))
	}
	return nil
}

// Forward runs already preprocessed input (what Preprocess returns, or the
// reference networks' input tensor): px.Views views of 3×Height×Width
// normalised floats. Maps are returned at the processed size;
// RunOptions.Intrinsics and ViewIntrinsics are then in pixels of that
// input. Researchers use it to feed their own preprocessing; the parity
// tests use it to feed the reference's input tensor.
func (m *Model) Forward(ctx context.Context, px Pixels, opt RunOptions) ([]Result, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.runs.Done()
	pixels, w, h, views := px.Data, px.Width, px.Height, px.Views
	if err := m.checkPixels(px, "views"); err != nil {
		return nil, err
	}
	if views > 1 && m.cfg.Arch != DA3 {
		return nil, invalid(fmt.Errorf("forward: %s models take one view at a time", m.cfg.Arch))
	}
	if err := m.checkIntrinsics(opt.Intrinsics); err != nil {
		return nil, err
	}
	if err := m.checkParts(views, opt); err != nil {
		return nil, err
	}
	vs := make([]*preprocess.View, views)
	n := 3 * w * h
	for i := range vs {
		vs[i] = &preprocess.View{Pixels: pixels[i*n : (i+1)*n], Width: w, Height: h, OrigWidth: w, OrigHeight: h, ScaleX: 1, ScaleY: 1}
	}
	opt.ProcessedSize = true
	opt = m.fitChunk(opt, views, w, h)
	if err := m.checkMemory(opt, views, w, h, nil); err != nil {
		return nil, err
	}
	return m.newRun(ctx, vs, opt).results()
}
