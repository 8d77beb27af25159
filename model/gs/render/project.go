package render

import (
	"math"

	"github.com/da3-go/da3-go/model/gs"
)

// projector projects Gaussians for one camera (gsplat's
// fully_fused_projection with the pinhole model, then the SH colours).
type projector struct {
	g                *gs.Gaussians
	deg              int
	r                [3][3]float64 // world-to-camera rotation
	t                [3]float64
	campos           [3]float64 // the camera centre in the world
	fx, fy, cx, cy   float64
	w, h             float64
	limXPos, limXNeg float64 // the Jacobian's clamp of x/z
	limYPos, limYNeg float64
}

func newProjector(cam Camera, g *gs.Gaussians, deg int) *projector {
	p := &projector{g: g, deg: deg, fx: cam.Fx, fy: cam.Fy, cx: cam.Cx, cy: cam.Cy, w: float64(cam.Width), h: float64(cam.Height)}
	for i := range 3 {
		for j := range 3 {
			p.r[i][j] = cam.Extrinsics[i][j]
		}
		p.t[i] = cam.Extrinsics[i][3]
	}
	for i := range 3 {
		p.campos[i] = -(p.r[0][i]*p.t[0] + p.r[1][i]*p.t[1] + p.r[2][i]*p.t[2])
	}
	// persp_proj: the Jacobian is taken at x/z clamped to 1.3 times the
	// half field of view (beyond it a Gaussian would be stretched without
	// bound).
	tanX, tanY := 0.5*p.w/p.fx, 0.5*p.h/p.fy
	p.limXPos, p.limXNeg = (p.w-p.cx)/p.fx+0.3*tanX, p.cx/p.fx+0.3*tanX
	p.limYPos, p.limYNeg = (p.h-p.cy)/p.fy+0.3*tanY, p.cy/p.fy+0.3*tanY
	return p
}

// project fills s with Gaussian i (world covariance cov) as the camera sees
// it and returns the number of tiles it touches, 0 when it is culled:
// centre outside [Near, Far], degenerate 2D covariance, opacity below
// AlphaThreshold, or a bounding box off the image.
func (p *projector) project(s *splat, i int, cov []float32, tw, th int) int32 {
	g := p.g
	m := [3]float64{float64(g.Means[3*i]), float64(g.Means[3*i+1]), float64(g.Means[3*i+2])}
	var mc [3]float64
	for a := range 3 {
		mc[a] = p.r[a][0]*m[0] + p.r[a][1]*m[1] + p.r[a][2]*m[2] + p.t[a]
	}
	z := mc[2]
	if !(z >= Near && z <= Far) {
		return 0
	}
	op := float64(g.Opacities[i])
	if !(op >= AlphaThreshold) {
		return 0
	}
	rz := 1 / z
	tx := z * min(p.limXPos, max(-p.limXNeg, mc[0]*rz))
	ty := z * min(p.limYPos, max(-p.limYNeg, mc[1]*rz))
	// M = J·R, J = [[fx/z, 0, −fx·tx/z²], [0, fy/z, −fy·ty/z²]].
	var m0, m1 [3]float64
	j02, j12 := -p.fx*tx*rz*rz, -p.fy*ty*rz*rz
	for a := range 3 {
		m0[a] = p.fx*rz*p.r[0][a] + j02*p.r[2][a]
		m1[a] = p.fy*rz*p.r[1][a] + j12*p.r[2][a]
	}
	c := [3][3]float64{
		{float64(cov[0]), float64(cov[1]), float64(cov[2])},
		{float64(cov[1]), float64(cov[3]), float64(cov[4])},
		{float64(cov[2]), float64(cov[4]), float64(cov[5])},
	}
	var cm0, cm1 [3]float64 // C·M0ᵀ, C·M1ᵀ
	for a := range 3 {
		cm0[a] = c[a][0]*m0[0] + c[a][1]*m0[1] + c[a][2]*m0[2]
		cm1[a] = c[a][0]*m1[0] + c[a][1]*m1[1] + c[a][2]*m1[2]
	}
	c00 := m0[0]*cm0[0] + m0[1]*cm0[1] + m0[2]*cm0[2] + LowPass
	c01 := m0[0]*cm1[0] + m0[1]*cm1[1] + m0[2]*cm1[2]
	c11 := m1[0]*cm1[0] + m1[1]*cm1[1] + m1[2]*cm1[2] + LowPass
	det := c00*c11 - c01*c01
	if !(det > 0) {
		return 0
	}
	lnop := math.Log(op / AlphaThreshold)
	extend := min(extendCap, math.Sqrt(2*lnop))
	rx, ry := math.Ceil(extend*math.Sqrt(c00)), math.Ceil(extend*math.Sqrt(c11))
	if rx <= 0 && ry <= 0 {
		return 0
	}
	mx, my := p.fx*mc[0]*rz+p.cx, p.fy*mc[1]*rz+p.cy
	if mx+rx <= 0 || mx-rx >= p.w || my+ry <= 0 || my-ry >= p.h {
		return 0
	}
	// isect_tiles: tiles from ⌊(x−r)/16⌋ to ⌈(x+r)/16⌉ (exclusive), clamped.
	tx0 := clampTile(math.Floor((mx-rx)/TileSize), tw)
	tx1 := clampTile(math.Ceil((mx+rx)/TileSize), tw)
	ty0 := clampTile(math.Floor((my-ry)/TileSize), th)
	ty1 := clampTile(math.Ceil((my+ry)/TileSize), th)
	n := (tx1 - tx0) * (ty1 - ty0)
	if n <= 0 {
		return 0
	}
	*s = splat{x: float32(mx), y: float32(my), a: float32(c11 / det), b: float32(-c01 / det), c: float32(c00 / det),
		op: float32(op), lnop: float32(lnop), z: float32(z), rx: float32(rx), ry: float32(ry), tx0: tx0, tx1: tx1, ty0: ty0, ty1: ty1}
	s.rgb = p.colour(i, m)
	return n
}

func clampTile(v float64, n int) int32 { return int32(min(max(v, 0), float64(n))) }

// The real SH basis constants (gsplat's sh_coeffs_to_color_fast).
const (
	shC0 = 0.2820947917738781
	shC1 = 0.48860251190292
)

// colour is Gaussian i's colour seen from the camera: its SH evaluated in
// the direction from the camera centre to the mean m, +0.5, clamped at 0.
func (p *projector) colour(i int, m [3]float64) [3]float32 {
	g, dsh := p.g, p.g.SHDim
	var basis [16]float64
	basis[0] = shC0
	if p.deg >= 1 {
		dx, dy, dz := m[0]-p.campos[0], m[1]-p.campos[1], m[2]-p.campos[2]
		inv := 1 / math.Sqrt(dx*dx+dy*dy+dz*dz)
		shBasis(&basis, p.deg, dx*inv, dy*inv, dz*inv)
	}
	var rgb [3]float32
	for c := range 3 {
		sh := g.Harmonics[(3*i+c)*dsh : (3*i+c+1)*dsh]
		var v float64
		for k, coef := range sh {
			v += basis[k] * float64(coef)
		}
		rgb[c] = float32(max(v+0.5, 0))
	}
	return rgb
}

// shBasis fills the real SH basis of bands 1 … deg at the unit direction
// (x, y, z), in gsplat's (and 3DGS's) order and signs.
func shBasis(b *[16]float64, deg int, x, y, z float64) {
	b[1], b[2], b[3] = -shC1*y, shC1*z, -shC1*x
	if deg < 2 {
		return
	}
	z2 := z * z
	t0 := -1.092548430592079 * z
	fc1, fs1 := x*x-y*y, 2*x*y
	b[4] = 0.5462742152960395 * fs1
	b[5] = t0 * y
	b[6] = 0.9461746957575601*z2 - 0.3153915652525201
	b[7] = t0 * x
	b[8] = 0.5462742152960395 * fc1
	if deg < 3 {
		return
	}
	t0c := -2.285228997322329*z2 + 0.4570457994644658
	t1b := 1.445305721320277 * z
	fc2, fs2 := x*fc1-y*fs1, x*fs1+y*fc1
	b[9] = -0.5900435899266435 * fs2
	b[10] = t1b * fs1
	b[11] = t0c * y
	b[12] = z * (1.865881662950577*z2 - 1.119528997770346)
	b[13] = t0c * x
	b[14] = t1b * fc1
	b[15] = -0.5900435899266435 * fc2
}
