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
	n := w * h
	nc := cfg.Channels()
	for i, v := range views {
		if len(v.Raw) != nc*n || len(v.Depth) != n {
			return nil, fmt.Errorf("%w: view %d has %d raw values and %d depths, want %d×%d×%d and %d", ErrInput, i, len(v.Raw), len(v.Depth), nc, h, w, n)
		}
	}
	if given != nil && len(given) != len(views) {
		return nil, fmt.Errorf("%w: %d given poses for %d views", ErrInput, len(given), len(views))
	}
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
	dsh := cfg.shDim()
	N := len(views) * n
	g := &Gaussians{Views: len(views), Height: h, Width: w, SHDim: dsh,
		Means: make([]float32, 3*N), Scales: make([]float32, 3*N), Rotations: make([]float32, 4*N),
		Harmonics: make([]float32, 3*dsh*N), Opacities: make([]float32, N), Depth: make([]float32, 0, N)}
	mask := make([]float64, dsh)
	for l := 0; l <= cfg.SHDegree; l++ {
		for k := l * l; k < (l+1)*(l+1); k++ {
			mask[k] = 1
			if l > 0 {
				mask[k] = 0.1 * math.Pow(0.25, float64(l))
			}
		}
	}
	W, H := float64(w), float64(h)
	for vi, v := range views {
		g.Depth = append(g.Depth, v.Depth...)
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
		rot := shRotations(R, cfg.SHDegree)
		ch := 0
		plane := func() []float32 { p := v.Raw[ch*n : (ch+1)*n]; ch++; return p }
		var offX, offY []float32
		if cfg.OffsetXY {
			offX, offY = plane(), plane()
		}
		sc := [3][]float32{plane(), plane(), plane()}
		qt := [4][]float32{plane(), plane(), plane(), plane()}
		var sh [3][][]float32
		for c := 0; c < 3; c++ {
			sh[c] = make([][]float32, dsh)
			for k := 0; k < dsh; k++ {
				sh[c][k] = plane()
			}
		}
		var offD []float32
		if cfg.OffsetDepth {
			offD = plane()
		}
		opa := plane()
		for i := 0; i < n; i++ {
			row, col := i/w, i%w
			o := vi*n + i
			gd := float64(v.Depth[i])
			if offD != nil {
				gd += float64(offD[i])
			}
			gd *= scale
			// Mean.
			u, vv := (float64(col)+0.5)/W, (float64(row)+0.5)/H
			if offX != nil {
				u += float64(offX[i]) / W
				vv += float64(offY[i]) / H
			}
			d := [3]float64{
				kinv[0][0]*u + kinv[0][1]*vv + kinv[0][2],
				kinv[1][0]*u + kinv[1][1]*vv + kinv[1][2],
				kinv[2][0]*u + kinv[2][1]*vv + kinv[2][2],
			}
			dn := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
			for a := 0; a < 3; a++ {
				dw := (R[a][0]*d[0] + R[a][1]*d[1] + R[a][2]*d[2]) / dn
				g.Means[3*o+a] = float32(ctr[a] + dw*gd)
				s := cfg.ScaleMin + (cfg.ScaleMax-cfg.ScaleMin)*sigmoid(float64(sc[a][i]))
				g.Scales[3*o+a] = float32(s * gd * mult)
			}
			// Rotation.
			q := [4]float64{float64(qt[0][i]), float64(qt[1][i]), float64(qt[2][i]), float64(qt[3][i])}
			qn := math.Sqrt(q[0]*q[0]+q[1]*q[1]+q[2]*q[2]+q[3]*q[3]) + 1e-8
			m := camera.QuatToMat([4]float64{q[3] / qn, q[0] / qn, q[1] / qn, q[2] / qn})
			wq := camera.MatToQuat(mat3Mul(R, m))
			for a := 0; a < 4; a++ {
				g.Rotations[4*o+a] = float32(wq[a])
			}
			// Spherical harmonics.
			for c := 0; c < 3; c++ {
				base := (o*3 + c) * dsh
				g.Harmonics[base] = float32(float64(sh[c][0][i]) * mask[0])
				for l := 1; l <= cfg.SHDegree; l++ {
					lo, nl := l*l, 2*l+1
					for a := 0; a < nl; a++ {
						var acc float64
						for b := 0; b < nl; b++ {
							acc += rot[l][a*nl+b] * float64(sh[c][lo+b][i]) * mask[lo+b]
						}
						g.Harmonics[base+lo+a] = float32(acc)
					}
				}
			}
			// Opacity: map_pdf_to_opacity(p) = 0.5·(1 − (1−p) + p) at global
			// step 0, in float32 as upstream.
			p := float32(sigmoid(float64(opa[i])))
			g.Opacities[o] = 0.5 * ((1 - (1 - p)) + p)
		}
	}
	return g, nil
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
