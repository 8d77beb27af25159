package model

import (
	"fmt"
	"math"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/preprocess"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/gs"
)

// parts are the optional parts of a run, nil when not asked for: each adds
// to the graphs (see network) and completes the results (finish).
type parts struct {
	ray   *rayPose
	gs    *gaussians
	given *givenCameras
}

// newParts are the parts opt asks for, for the preprocessed views (input
// order).
func (m *Model) newParts(views []*preprocess.View, opt RunOptions) parts {
	var p parts
	if opt.RayPose {
		p.ray = &rayPose{seed: opt.RaySeed}
	}
	if opt.Gaussians {
		p.gs = &gaussians{}
	}
	if opt.Extrinsics != nil {
		p.given = newGivenCameras(views, opt)
	}
	return p
}

// poseEnc is the given cameras' pose encodings for the camera encoder, nil
// without given cameras.
func (p parts) poseEnc() []float32 {
	if p.given == nil {
		return nil
	}
	return p.given.poseEnc
}

// keep copies the raw outputs the parts finish with, of the view at
// position pos of S in the graph outputs, into r.
func (p parts) keep(r *Result, out map[string]backend.Tensor, pos, S int) {
	take := func(name string) []float32 {
		t, ok := out[name]
		if !ok {
			return nil
		}
		per := len(t.Data) / S
		return append([]float32(nil), t.Data[pos*per:(pos+1)*per]...)
	}
	if p.ray != nil {
		r.rayRaw = take("aux")
	}
	if p.gs != nil {
		r.gsRaw = take("gs")
		r.depthProc = take("depth") // at the processed size, whatever r.Depth's size
	}
}

// finish completes the results of a run (input order) with the parts, in
// the order of DepthAnything3Net.forward and DepthAnything3.inference: the
// ray pose replaces the camera decoder's; the Gaussians are built from the
// predicted depth and cameras (aligned to the given cameras, if any); with
// given cameras the depth is divided by the Umeyama scale between the
// predicted and the given camera centres and the cameras are the given ones.
func (p parts) finish(m *Model, res []Result, views []*preprocess.View) error {
	if p.ray != nil {
		if err := p.ray.finish(res, views, m.cfg.ViT.PatchSize); err != nil {
			return err
		}
	}
	if p.gs != nil {
		var given []camera.Extrinsics
		if p.given != nil {
			given = p.given.norm
		}
		if err := p.gs.finish(res, views, m.cfg.GSAdapter, given); err != nil {
			return err
		}
	}
	if p.given != nil {
		p.given.finish(res)
	}
	return nil
}

// rayPose estimates the cameras from the auxiliary ray head's output
// (RunOptions.RayPose).
type rayPose struct{ seed uint64 }

// finish replaces the results' cameras with those solved from their rays.
func (rp *rayPose) finish(res []Result, views []*preprocess.View, patch int) error {
	W, H := views[0].Width, views[0].Height
	h, w := 8*(H/patch), 8*(W/patch)
	maps := make([]camera.RayMap, len(res))
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
	fits, err := camera.SolveRays(maps, W, H, rp.seed)
	if err != nil {
		return err
	}
	for i, f := range fits {
		v := views[i]
		res[i].Camera = &Camera{Extrinsics: f.Pose.Extrinsics, Intrinsics: f.Pose.Intrinsics,
			IntrinsicsOriginal: camera.ScaleIntrinsics(f.Pose.Intrinsics, v.ScaleX, v.ScaleY, v.CropX, v.CropY)}
		res[i].rayRaw = nil
	}
	return nil
}

// gaussians builds DA3-GIANT's 3D Gaussians from the Gaussian head's output
// (RunOptions.Gaussians).
type gaussians struct{}

// finish sets the results' Gaussians, from their depth and cameras, aligned
// to the normalised given cameras when there are any.
func (*gaussians) finish(res []Result, views []*preprocess.View, adapter gs.Config, given []camera.Extrinsics) error {
	gv := make([]gs.View, len(res))
	for i, r := range res {
		gv[i] = gs.View{Raw: r.gsRaw, Depth: r.depthProc, Extrinsics: r.Camera.Extrinsics, Intrinsics: r.Camera.Intrinsics}
	}
	g, err := gs.Adapt(adapter, gv, views[0].Width, views[0].Height, given)
	if err != nil {
		return err
	}
	for i := range res {
		res[i].Gaussians = g.View(i)
		res[i].gsRaw, res[i].depthProc = nil, nil
	}
	return nil
}

// givenCameras condition the network on known cameras (RunOptions.Extrinsics
// and ViewIntrinsics), per view in input order: the user's world-to-camera
// poses, intrinsics in processed and original pixels, the normalised poses
// and their encodings [9·S] for the camera encoder.
type givenCameras struct {
	user         []camera.Extrinsics
	procK, origK [][3][3]float64
	norm         []camera.Extrinsics
	poseEnc      []float32
}

// newGivenCameras maps opt's cameras to the preprocessed views as the
// package's InputProcessor does.
func newGivenCameras(views []*preprocess.View, opt RunOptions) *givenCameras {
	gc := &givenCameras{}
	for i, v := range views {
		k := opt.ViewIntrinsics[i]
		orig := [3][3]float64{{k.Fx, 0, k.Cx}, {0, k.Fy, k.Cy}, {0, 0, 1}}
		gc.user = append(gc.user, opt.Extrinsics[i])
		gc.origK = append(gc.origK, orig)
		gc.procK = append(gc.procK, camera.ProcessIntrinsics(orig, v.ScaleX, v.ScaleY, v.CropX, v.CropY))
	}
	gc.norm = camera.NormalizeExtrinsics(gc.user)
	W, H := views[0].Width, views[0].Height
	for i, e := range gc.norm {
		enc := camera.EncodePose(camera.Invert(e), gc.procK[i], W, H)
		gc.poseEnc = append(gc.poseEnc, enc[:]...)
	}
	return gc
}

// finish brings the results to the given cameras' frame and scale: the
// depth (and the Gaussians' depth, by which gs_ply prunes) divided by the
// Umeyama scale between the predicted and the given camera centres, the
// cameras the given ones.
func (gc *givenCameras) finish(res []Result) {
	pred := make([]camera.Extrinsics, len(res))
	for i, r := range res {
		pred[i] = r.Camera.Extrinsics
	}
	s := camera.AlignScale(pred, gc.user)
	for i := range res {
		r := &res[i]
		for j := range r.Depth {
			r.Depth[j] = float32(float64(r.Depth[j]) / s)
		}
		if g := r.Gaussians; g != nil {
			for j := range g.Depth {
				g.Depth[j] = float32(float64(g.Depth[j]) / s)
			}
		}
		r.Camera = &Camera{Extrinsics: gc.user[i], Intrinsics: gc.procK[i], IntrinsicsOriginal: gc.origK[i],
			PoseEncoding: r.Camera.PoseEncoding}
		r.AlignScale = s
	}
}
