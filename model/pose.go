package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/gs"
	"github.com/da3-go/da3-go/model/vit"
)

// Errors of the optional DA3 outputs and inputs: the model file lacks the
// part a run option needs.
var (
	// ErrNoRayHead: RunOptions.RayPose with a file without the auxiliary
	// ray head.
	ErrNoRayHead = errors.New("model has no auxiliary ray head")
	// ErrNoCameraEncoder: given cameras with a file without the camera
	// encoder.
	ErrNoCameraEncoder = errors.New("model has no camera encoder")
	// ErrNoGaussianHead: RunOptions.Gaussians with a model other than
	// DA3-GIANT.
	ErrNoGaussianHead = errors.New("model has no Gaussian head")
)

// extras are the optional parts of one run: the ray head, given cameras
// and the Gaussian head, with what the graphs need for them.
type extras struct {
	ray, gs bool
	// Given cameras, per view in input order: the user's world-to-camera
	// poses, intrinsics in processed and original pixels, the normalised
	// poses and their encodings [9·S] for the camera encoder.
	user     []camera.Extrinsics
	procK    [][3][3]float64
	origK    [][3][3]float64
	norm     []camera.Extrinsics
	poseEnc  []float32
	raySeed  uint64
	hasGiven bool
}

// checkExtras refuses options the model cannot honour or inputs that do not
// fit n images.
func (m *Model) checkExtras(n int, opt RunOptions) (err error) {
	defer func() { err = invalid(err) }()
	anyView := m.cfg.Arch == DA3 && !m.cfg.NestedMetric
	if opt.RayPose && (!anyView || !m.cfg.Head.Aux) {
		return fmt.Errorf("%w: %s cannot estimate poses from rays: ray pose needs a DA3 any-view file converted with the auxiliary ray head", ErrNoRayHead, m.describe())
	}
	if opt.Gaussians && m.gsHead == nil {
		return fmt.Errorf("%w: %s cannot predict 3D Gaussians; they need DA3-GIANT (or the any-view file of the nested model)", ErrNoGaussianHead, m.describe())
	}
	if opt.Extrinsics == nil && opt.ViewIntrinsics == nil {
		return nil
	}
	if !anyView || m.camEnc == nil {
		return fmt.Errorf("%w: %s cannot take given cameras; they need a DA3 any-view file converted by this version of the converter (older files and the C++ engine's lack the camera encoder: re-convert)", ErrNoCameraEncoder, m.describe())
	}
	if len(opt.Extrinsics) != n || len(opt.ViewIntrinsics) != n {
		return fmt.Errorf("given cameras: %d extrinsics and %d intrinsics for %d images (one of each per image)", len(opt.Extrinsics), len(opt.ViewIntrinsics), n)
	}
	for i, e := range opt.Extrinsics {
		if err := checkPose(e); err != nil {
			return fmt.Errorf("given camera %d: %w", i, err)
		}
		k := opt.ViewIntrinsics[i]
		if !(k.Fx > 0) || !(k.Fy > 0) || math.IsInf(k.Fx, 0) || math.IsInf(k.Fy, 0) || !finite64(k.Cx, k.Cy) {
			return fmt.Errorf("given camera %d: intrinsics fx %g, fy %g, cx %g, cy %g are not a camera (positive focal lengths, finite principal point, in pixels)", i, k.Fx, k.Fy, k.Cx, k.Cy)
		}
	}
	return nil
}

// checkPose accepts a world-to-camera [R | t] whose R is a rotation.
func checkPose(e [3][4]float64) error {
	for i := range e {
		if !finite64(e[i][:]...) {
			return fmt.Errorf("extrinsics %v are not finite", e)
		}
	}
	r := camera.Rotation(e)
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			var d float64
			for k := 0; k < 3; k++ {
				d += r[i][k] * r[j][k]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(d-want) > 1e-3 {
				return fmt.Errorf("extrinsics rotation %v is not orthonormal (R·Rᵀ differs from I by %.2g)", r, math.Abs(d-want))
			}
		}
	}
	if d := r[0][0]*(r[1][1]*r[2][2]-r[1][2]*r[2][1]) - r[0][1]*(r[1][0]*r[2][2]-r[1][2]*r[2][0]) + r[0][2]*(r[1][0]*r[2][1]-r[1][1]*r[2][0]); d < 0 {
		return fmt.Errorf("extrinsics rotation %v is a reflection (det %.3g)", r, d)
	}
	return nil
}

func finite64(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// prepareExtras builds a run's extras for the preprocessed views (input
// order). Given intrinsics are mapped to the processed images as the
// package's InputProcessor does.
func (m *Model) prepareExtras(views []*preprocess.View, opt RunOptions) *extras {
	ex := &extras{ray: opt.RayPose, gs: opt.Gaussians, raySeed: opt.RaySeed}
	if opt.Extrinsics == nil {
		return ex
	}
	ex.hasGiven = true
	for i, v := range views {
		k := opt.ViewIntrinsics[i]
		orig := [3][3]float64{{k.Fx, 0, k.Cx}, {0, k.Fy, k.Cy}, {0, 0, 1}}
		ex.user = append(ex.user, opt.Extrinsics[i])
		ex.origK = append(ex.origK, orig)
		ex.procK = append(ex.procK, camera.ProcessIntrinsics(orig, v.ScaleX, v.ScaleY, v.CropX, v.CropY))
	}
	ex.norm = camera.NormalizeExtrinsics(ex.user)
	W, H := views[0].Width, views[0].Height
	for i, e := range ex.norm {
		enc := camera.EncodePose(camera.Invert(e), ex.procK[i], W, H)
		ex.poseEnc = append(ex.poseEnc, enc[:]...)
	}
	return ex
}

// resultExtras copies view i's raw ray and Gaussian outputs (position p of
// S in the graph outputs) into r.
func (ex *extras) result(r *Result, out map[string]backend.Tensor, p, S int) {
	take := func(name string) []float32 {
		t, ok := out[name]
		if !ok {
			return nil
		}
		per := len(t.Data) / S
		return append([]float32(nil), t.Data[p*per:(p+1)*per]...)
	}
	if ex.ray {
		r.rayRaw = take("aux")
	}
	if ex.gs {
		r.gsRaw = take("gs")
		r.depthProc = take("depth") // at the processed size, whatever r.Depth's size
	}
}

// finish completes the results of a run (input order) with its extras, in
// the order of DepthAnything3Net.forward and DepthAnything3.inference: the
// ray pose replaces the camera decoder's; the Gaussians are built from the
// predicted depth and cameras (aligned to the given cameras, if any); with
// given cameras the depth is divided by the Umeyama scale between the
// predicted and the given camera centres and the cameras are the given ones.
func (m *Model) finishExtras(res []Result, views []*preprocess.View, ex *extras) error {
	W, H := views[0].Width, views[0].Height
	if ex.ray {
		maps := make([]camera.RayMap, len(res))
		ps := m.cfg.ViT.PatchSize
		h, w := 8*(H/ps), 8*(W/ps)
		for i := range res {
			raw := res[i].rayRaw
			if len(raw) != 7*h*w {
				return fmt.Errorf("ray head output of view %d has %d values, want 7×%d×%d", i, len(raw), h, w)
			}
			conf := make([]float32, h*w)
			for j, l := range raw[6*h*w:] {
				conf[j] = float32(math.Exp(float64(l))) + 1
			}
			maps[i] = camera.RayMap{H: h, W: w, Ray: raw[:6*h*w], Conf: conf}
		}
		fits, err := camera.SolveRays(maps, W, H, ex.raySeed)
		if err != nil {
			return err
		}
		for i, f := range fits {
			v := views[i]
			res[i].Camera = &Camera{Extrinsics: f.Pose.Extrinsics, Intrinsics: f.Pose.Intrinsics,
				IntrinsicsOriginal: camera.ScaleIntrinsics(f.Pose.Intrinsics, v.ScaleX, v.ScaleY, v.CropX, v.CropY)}
			res[i].rayRaw = nil
		}
	}
	if ex.gs {
		gv := make([]gs.View, len(res))
		for i, r := range res {
			gv[i] = gs.View{Raw: r.gsRaw, Depth: r.depthProc, Extrinsics: r.Camera.Extrinsics, Intrinsics: r.Camera.Intrinsics}
		}
		var given []camera.Extrinsics
		if ex.hasGiven {
			given = ex.norm
		}
		g, err := gs.Adapt(m.cfg.GSAdapter, gv, W, H, given)
		if err != nil {
			return err
		}
		for i := range res {
			res[i].Gaussians = g.View(i)
			res[i].gsRaw, res[i].depthProc = nil, nil
		}
	}
	if ex.hasGiven {
		pred := make([]camera.Extrinsics, len(res))
		for i, r := range res {
			pred[i] = r.Camera.Extrinsics
		}
		s := camera.AlignScale(pred, ex.user)
		for i := range res {
			r := &res[i]
			for j := range r.Depth {
				r.Depth[j] = float32(float64(r.Depth[j]) / s)
			}
			if g := r.Gaussians; g != nil { // gs_ply prunes by the aligned depth
				for j := range g.Depth {
					g.Depth[j] = float32(float64(g.Depth[j]) / s)
				}
			}
			r.Camera = &Camera{Extrinsics: ex.user[i], Intrinsics: ex.procK[i], IntrinsicsOriginal: ex.origK[i],
				PoseEncoding: r.Camera.PoseEncoding}
			r.AlignScale = s
		}
	}
	return nil
}

// givenTokens adds the camera encoder for the given cameras to the graph
// and returns their camera tokens [C, S]; nil without given cameras.
func (m *Model) givenTokens(b *backend.Builder, ex *extras) *ggml.Tensor {
	if !ex.hasGiven {
		return nil
	}
	enc := b.Input("cam_enc.pose_enc", ex.poseEnc, 9, len(ex.poseEnc)/9)
	b.Tap("cam_enc.pose_enc", enc)
	return m.camEnc.Forward(b.G, b, enc)
}

// extraHeads adds the ray head and the Gaussian head to a head graph as
// the outputs "aux" and "gs" when the run asks for them.
func (m *Model) extraHeads(b *backend.Builder, ex *extras, h dpt.Outputs, feats [4]*ggml.Tensor, px *ggml.Tensor, grid vit.Grid) {
	if ex.ray {
		b.Output("aux", m.head.Ray(b.G, b, h.Levels, grid.PH, grid.PW))
	}
	if ex.gs {
		b.Output("gs", m.gsHead.ForwardGS(b.G, b, feats, px, grid.PH, grid.PW))
	}
}
