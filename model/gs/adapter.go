// Package gs turns the raw output of DA3-GIANT's Gaussian head (GSDPT) into
// world-space 3D Gaussians (depth_anything_3's GaussianAdapter) and writes
// them as the package's gs_ply file. Pure Go on host slices; the head itself
// is a ggml graph in model/dpt.
package gs

import (
	"errors"
	"fmt"
	"math"

	"github.com/da3-go/da3-go/model/camera"
)

// Config is the GaussianAdapter's configuration (DA3-GIANT:
// sh_degree 2, scales in [1e-5, 30], depth and xy offsets predicted, SH
// coefficients rather than colours).
type Config struct {
	SHDegree           int
	ScaleMin, ScaleMax float64
	OffsetDepth        bool
	OffsetXY           bool
}

// GiantConfig is DA3-GIANT's adapter.
var GiantConfig = Config{SHDegree: 2, ScaleMin: 1e-5, ScaleMax: 30, OffsetDepth: true, OffsetXY: true}

// Channels is the number of raw channels the head predicts for cfg, the
// opacity logit included: offsets (2), scales (3), quaternion (4), SH
// (3·(d+1)²), depth offset (1), opacity (1).
func (c Config) Channels() int {
	n := 3 + 4 + 3*c.shDim() + 1
	if c.OffsetXY {
		n += 2
	}
	if c.OffsetDepth {
		n++
	}
	return n
}

func (c Config) shDim() int { return (c.SHDegree + 1) * (c.SHDegree + 1) }

// SHDim is the number of SH coefficients per colour channel, (degree+1)².
func (c Config) SHDim() int { return c.shDim() }

// Gaussians are 3D Gaussians in world space, N = views·H·W in view, row,
// column order.
type Gaussians struct {
	Views, Height, Width int
	SHDim                int
	Means                []float32 // N×3
	Scales               []float32 // N×3 (standard deviations)
	// Rotations holds per Gaussian the 4 values of the world rotation as the
	// package stores them: mat_to_quat's x, y, z, w (w ≥ 0), although its
	// field is documented as wxyz.
	Rotations []float32 // N×4
	Harmonics []float32 // N×3×SHDim, colour-major
	Opacities []float32 // N
	// Depth is the predicted depth of each Gaussian's pixel (N), in the
	// scale of the run's depth output: gs_ply prunes by it.
	Depth []float32
}

// View is one view's input to Adapt.
type View struct {
	// Raw holds the head's Channels() planes of H×W values, row-major
	// (offsets, scales, quaternion, SH, depth offset, opacity logit).
	Raw []float32
	// Depth is the predicted depth (H×W).
	Depth []float32
	// Extrinsics (world-to-camera) and Intrinsics (pixels of the W×H image)
	// are the predicted camera.
	Extrinsics camera.Extrinsics
	Intrinsics [3][3]float64
}

// ErrInput reports inconsistent adapter input.
var ErrInput = errors.New("gaussian adapter input")

// Adapt is depth_anything_3's GaussianAdapter.forward (with
// map_pdf_to_opacity at global step 0) for views of W×H pixels. given, when
// not nil, are the (normalised) world-to-camera poses the network was
// conditioned on: as upstream, the predicted camera centres are then aligned
// to them by Umeyama and the scale, clamped to [1/3, 3] (1 when evo's
// alignment is degenerate, fewer than three non-collinear centres), multiplies
// the camera translations and the Gaussian depths.
//
// Per pixel (row i, column j): g = depth + raw_depth_offset;
// (u, v) = ((j+0.5)/W + raw₀/W, (i+0.5)/H + raw₁/H); the ray through
// Kn⁻¹·(u, v, 1) (Kn: K with rows divided by W and H), normalised and turned
// to the world by the camera-to-world rotation, gives mean = centre + ray·g;
// scale = (min + (max−min)·sigmoid(raw)) · g · 0.1·Σ(Kn[:2,:2]⁻¹·(1/W, 1/H));
// rotation: the unit quaternion q (xyzw) is read as (w, x, y, z) by the
// xyzw quat_to_mat (the package's historical quirk), multiplied by the
// camera-to-world rotation and converted back with mat_to_quat; SH bands l ≥ 1
// are damped by 0.1·0.25^l and rotated with Wigner D matrices of the
// camera-to-world rotation (rotate_sh); opacity = sigmoid(raw_opacity).
// Computed in float64, upstream in float32.
func Adapt(cfg Config, views []View, w, h int, given []camera.Extrinsics) (*Gaussians, error) {
	if err := checkInput(cfg, views, w, h, given); err != nil {
		return nil, err
	}
	a := newAdapter(cfg, w, h, len(views), givenScale(given, views))
	for vi, v := range views {
		a.view(vi, v)
	}
	return a.g, nil
}

// checkInput checks the sizes of the views' raw channels and depths, and the number of given poses.
func checkInput(cfg Config, views []View, w, h int, given []camera.Extrinsics) error {
	n := w * h
	nc := cfg.Channels()
	for i, v := range views {
		if len(v.Raw) != nc*n || len(v.Depth) != n {
			return fmt.Errorf("%w: view %d has %d raw values and %d depths, want %d×%d×%d and %d", ErrInput, i, len(v.Raw), len(v.Depth), nc, h, w, n)
		}
	}
	if given != nil && len(given) != len(views) {
		return fmt.Errorf("%w: %d given poses for %d views", ErrInput, len(given), len(views))
	}
	return nil
}

// givenScale is the scale of the predicted camera centres aligned to the given poses by Umeyama, clamped
// to [1/3, 3]; 1 without given poses, when they are the predicted ones, or when the alignment is
// degenerate.
func givenScale(given []camera.Extrinsics, views []View) float64 {
	scale := 1.0
	if given != nil && !samePoses(given, views) {
		pred := make([]camera.Extrinsics, len(views))
		for i, v := range views {
			pred[i] = v.Extrinsics
		}
		if sim, err := camera.Umeyama(given, pred); err == nil {
			scale = math.Min(math.Max(sim.S, 1/3.0), 3)
		}
	}
	return scale
}

// adapter is the state of one Adapt call: what its views share and the Gaussians it fills.
type adapter struct {
	cfg     Config
	w, h, n int
	W, H    float64
	scale   float64
	mask    []float64 // the SH coefficients' damping, by coefficient
	g       *Gaussians
}

// newAdapter allocates the Gaussians of views of w×h pixels.
func newAdapter(cfg Config, w, h, views int, scale float64) *adapter {
	n := w * h
	dsh := cfg.shDim()
	N := views * n
	g := &Gaussians{Views: views, Height: h, Width: w, SHDim: dsh,
		Means: make([]float32, 3*N), Scales: make([]float32, 3*N), Rotations: make([]float32, 4*N),
		Harmonics: make([]float32, 3*dsh*N), Opacities: make([]float32, N), Depth: make([]float32, 0, N)}
	return &adapter{cfg: cfg, w: w, h: h, n: n, W: float64(w), H: float64(h), scale: scale, mask: shMask(cfg), g: g}
}

// shMask damps the SH bands l ≥ 1 by 0.1·0.25^l.
func shMask(cfg Config) []float64 {
	mask := make([]float64, cfg.shDim())
	for l := 0; l <= cfg.SHDegree; l++ {
		for k := l * l; k < (l+1)*(l+1); k++ {
			mask[k] = 1
			if l > 0 {
				mask[k] = 0.1 * math.Pow(0.25, float64(l))
			}
		}
	}
	return mask
}

// viewCamera is one view's camera as the adapter uses it.
type viewCamera struct {
	R    [3][3]float64 // the camera-to-world rotation
	ctr  [3]float64    // the camera centre, times the scale
	kinv [3][3]float64 // Kn⁻¹
	mult float64       // the scales' factor 0.1·Σ(Kn[:2,:2]⁻¹·(1/W, 1/H))
	rot  [][]float64   // the Wigner D matrices of R, by band
}

// camera is view v's camera: its centre, rotation, normalised intrinsics and SH rotations.
func (a *adapter) camera(v View) viewCamera {
	W, H, scale := a.W, a.H, a.scale
	c2w := camera.Invert(v.Extrinsics)
	R := camera.Rotation(c2w)
	ctr := [3]float64{c2w[0][3] * scale, c2w[1][3] * scale, c2w[2][3] * scale}
	kn := v.Intrinsics
	for j := 0; j < 3; j++ {
		kn[0][j] /= W
		kn[1][j] /= H
	}
	kinv := inv3(kn)
	k2 := [3][3]float64{{kn[0][0], kn[0][1], 0}, {kn[1][0], kn[1][1], 0}, {0, 0, 1}}
	k2inv := inv3(k2)
	mult := 0.1 * ((k2inv[0][0]/W + k2inv[0][1]/H) + (k2inv[1][0]/W + k2inv[1][1]/H))
	rot := shRotations(R, a.cfg.SHDegree)
	return viewCamera{R: R, ctr: ctr, kinv: kinv, mult: mult, rot: rot}
}

// rawPlanes are one view's raw channels, H×W values each.
type rawPlanes struct {
	offX, offY []float32 // nil without xy offsets
	sc         [3][]float32
	qt         [4][]float32
	sh         [3][][]float32 // by colour, then coefficient
	offD       []float32      // nil without depth offsets
	opa        []float32
}

// planes splits a view's raw values into its channels, in the head's order.
func (a *adapter) planes(raw []float32) rawPlanes {
	c := planeCursor{raw: raw, n: a.n}
	var p rawPlanes
	if a.cfg.OffsetXY {
		p.offX, p.offY = c.next(), c.next()
	}
	p.sc = [3][]float32{c.next(), c.next(), c.next()}
	p.qt = [4][]float32{c.next(), c.next(), c.next(), c.next()}
	dsh := a.cfg.shDim()
	for col := 0; col < 3; col++ {
		p.sh[col] = make([][]float32, dsh)
		for k := 0; k < dsh; k++ {
			p.sh[col][k] = c.next()
		}
	}
	if a.cfg.OffsetDepth {
		p.offD = c.next()
	}
	p.opa = c.next()
	return p
}

// planeCursor hands out consecutive planes of n values.
type planeCursor struct {
	raw   []float32
	n, ch int
}

// next is the next plane.
func (c *planeCursor) next() []float32 {
	p := c.raw[c.ch*c.n : (c.ch+1)*c.n]
	c.ch++
	return p
}

// view adapts the pixels of view vi into the Gaussians vi·n … (vi+1)·n − 1.
func (a *adapter) view(vi int, v View) {
	a.g.Depth = append(a.g.Depth, v.Depth...)
	va := viewAdapter{adapter: a, cam: a.camera(v), raw: a.planes(v.Raw), depth: v.Depth, first: vi * a.n}
	for i := 0; i < a.n; i++ {
		va.pixel(i)
	}
}

// viewAdapter turns one view's pixels into Gaussians.
type viewAdapter struct {
	*adapter
	cam   viewCamera
	raw   rawPlanes
	depth []float32
	first int // the index of the view's first Gaussian
}

// pixel sets the Gaussian of pixel i.
func (va *viewAdapter) pixel(i int) {
	o := va.first + i
	gd := float64(va.depth[i])
	if va.raw.offD != nil {
		gd += float64(va.raw.offD[i])
	}
	gd *= va.scale
	va.meanAndScale(i, o, gd)
	va.rotation(i, o)
	va.harmonics(i, o)
	// Opacity: map_pdf_to_opacity(p) = 0.5·(1 − (1−p) + p) at global
	// step 0, in float32 as upstream.
	p := float32(sigmoid(float64(va.raw.opa[i])))
	va.g.Opacities[o] = 0.5 * ((1 - (1 - p)) + p)
}

// meanAndScale sets Gaussian o's mean (the pixel's ray at depth gd) and scales.
func (va *viewAdapter) meanAndScale(i, o int, gd float64) {
	W, H, kinv, R, cfg := va.W, va.H, &va.cam.kinv, &va.cam.R, &va.cfg
	row, col := i/va.w, i%va.w
	u, vv := (float64(col)+0.5)/W, (float64(row)+0.5)/H
	if va.raw.offX != nil {
		u += float64(va.raw.offX[i]) / W
		vv += float64(va.raw.offY[i]) / H
	}
	d := [3]float64{
		kinv[0][0]*u + kinv[0][1]*vv + kinv[0][2],
		kinv[1][0]*u + kinv[1][1]*vv + kinv[1][2],
		kinv[2][0]*u + kinv[2][1]*vv + kinv[2][2],
	}
	dn := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	for a := 0; a < 3; a++ {
		dw := (R[a][0]*d[0] + R[a][1]*d[1] + R[a][2]*d[2]) / dn
		va.g.Means[3*o+a] = float32(va.cam.ctr[a] + dw*gd)
		s := cfg.ScaleMin + (cfg.ScaleMax-cfg.ScaleMin)*sigmoid(float64(va.raw.sc[a][i]))
		va.g.Scales[3*o+a] = float32(s * gd * va.cam.mult)
	}
}

// rotation sets Gaussian o's rotation: the raw quaternion, read as (w, x, y, z), turned to the world.
func (va *viewAdapter) rotation(i, o int) {
	qt := &va.raw.qt
	q := [4]float64{float64(qt[0][i]), float64(qt[1][i]), float64(qt[2][i]), float64(qt[3][i])}
	qn := math.Sqrt(q[0]*q[0]+q[1]*q[1]+q[2]*q[2]+q[3]*q[3]) + 1e-8
	m := camera.QuatToMat([4]float64{q[3] / qn, q[0] / qn, q[1] / qn, q[2] / qn})
	wq := camera.MatToQuat(mat3Mul(va.cam.R, m))
	for a := 0; a < 4; a++ {
		va.g.Rotations[4*o+a] = float32(wq[a])
	}
}

// harmonics sets Gaussian o's SH coefficients: damped, and rotated to the world band by band.
func (va *viewAdapter) harmonics(i, o int) {
	dsh, mask, rot := va.g.SHDim, va.mask, va.cam.rot
	for c := 0; c < 3; c++ {
		sh := va.raw.sh[c]
		base := (o*3 + c) * dsh
		va.g.Harmonics[base] = float32(float64(sh[0][i]) * mask[0])
		for l := 1; l <= va.cfg.SHDegree; l++ {
			lo, nl := l*l, 2*l+1
			for a := 0; a < nl; a++ {
				var acc float64
				for b := 0; b < nl; b++ {
					acc += rot[l][a*nl+b] * float64(sh[lo+b][i]) * mask[lo+b]
				}
				va.g.Harmonics[base+lo+a] = float32(acc)
			}
		}
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// samePoses is torch.equal(extrinsics, gt_extrinsics) on the 3×4 poses.
func samePoses(given []camera.Extrinsics, views []View) bool {
	for i, v := range views {
		if given[i] != v.Extrinsics {
			return false
		}
	}
	return true
}

// View returns view v's Gaussians (a copy of its part, Views = 1).
func (g *Gaussians) View(v int) *Gaussians {
	n := g.Height * g.Width
	part := func(s []float32, per int) []float32 { return append([]float32(nil), s[v*n*per:(v+1)*n*per]...) }
	return &Gaussians{Views: 1, Height: g.Height, Width: g.Width, SHDim: g.SHDim,
		Means: part(g.Means, 3), Scales: part(g.Scales, 3), Rotations: part(g.Rotations, 4),
		Harmonics: part(g.Harmonics, 3*g.SHDim), Opacities: part(g.Opacities, 1), Depth: part(g.Depth, 1)}
}

// Concat joins the Gaussians of views of the same size (view order kept).
func Concat(gs ...*Gaussians) *Gaussians {
	out := &Gaussians{}
	for i, g := range gs {
		if i == 0 {
			out.Height, out.Width, out.SHDim = g.Height, g.Width, g.SHDim
		}
		out.Views += g.Views
		out.Means = append(out.Means, g.Means...)
		out.Scales = append(out.Scales, g.Scales...)
		out.Rotations = append(out.Rotations, g.Rotations...)
		out.Harmonics = append(out.Harmonics, g.Harmonics...)
		out.Opacities = append(out.Opacities, g.Opacities...)
		out.Depth = append(out.Depth, g.Depth...)
	}
	return out
}
