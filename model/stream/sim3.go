package stream

import (
	"errors"
	"fmt"
	"math"
)

// Sim3 is a similarity transform of 3D points, x ↦ S·R·x + T, with S > 0 and R a rotation.
type Sim3 struct {
	S float64
	R [3][3]float64
	T [3]float64
}

// Identity is the identity transform.
func Identity() Sim3 { return Sim3{S: 1, R: [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}} }

// Apply maps a point.
func (a Sim3) Apply(p [3]float64) [3]float64 {
	var q [3]float64
	for i := range 3 {
		q[i] = a.S*(a.R[i][0]*p[0]+a.R[i][1]*p[1]+a.R[i][2]*p[2]) + a.T[i]
	}
	return q
}

// Compose returns a∘b: the transform that applies b, then a.
func (a Sim3) Compose(b Sim3) Sim3 {
	out := Sim3{S: a.S * b.S, R: mul33(a.R, b.R)}
	t := a.Apply(b.T)
	out.T = t
	return out
}

// Inverse returns the transform that undoes a.
func (a Sim3) Inverse() Sim3 {
	rt := transpose33(a.R)
	out := Sim3{S: 1 / a.S, R: rt}
	for i := range 3 {
		out.T[i] = -(rt[i][0]*a.T[0] + rt[i][1]*a.T[1] + rt[i][2]*a.T[2]) / a.S
	}
	return out
}

// Camera moves a camera by the transform: given the world-to-camera extrinsics [Rc | tc] of a camera in
// the source frame, it returns the extrinsics of the same camera in the target frame, where every point
// X of the source frame is at a.Apply(X). Distances grow by S, so depths along the optical axis do too:
// the camera's depth map in the target frame is S times its depth map in the source frame.
//
// The camera centre C = −Rcᵀ·tc moves to a.Apply(C), the camera-to-world rotation Rcᵀ becomes R·Rcᵀ (the
// scale is not part of the rotation, as depth_anything_3's da3_streaming normalises it out of the moved
// camera-to-world matrix).
func (a Sim3) Camera(e [3][4]float64) [3][4]float64 {
	rc := [3][3]float64{{e[0][0], e[0][1], e[0][2]}, {e[1][0], e[1][1], e[1][2]}, {e[2][0], e[2][1], e[2][2]}}
	rct := transpose33(rc)
	var c [3]float64
	for i := range 3 {
		c[i] = -(rct[i][0]*e[0][3] + rct[i][1]*e[1][3] + rct[i][2]*e[2][3])
	}
	c = a.Apply(c)
	r := mul33(rc, transpose33(a.R)) // world-to-camera rotation (R·Rcᵀ)ᵀ
	var out [3][4]float64
	for i := range 3 {
		copy(out[i][:3], r[i][:])
		out[i][3] = -(r[i][0]*c[0] + r[i][1]*c[1] + r[i][2]*c[2])
	}
	return out
}

// Matrix returns the transform as a row-major 4×4 matrix [S·R | T; 0 0 0 1].
func (a Sim3) Matrix() [4][4]float64 {
	var m [4][4]float64
	for i := range 3 {
		for j := range 3 {
			m[i][j] = a.S * a.R[i][j]
		}
		m[i][3] = a.T[i]
	}
	m[3][3] = 1
	return m
}

// Sim3FromMatrix is the inverse of Matrix: it checks that the upper 3×3 block is a positive multiple of a
// rotation (to 1e-6) and the last row is 0 0 0 1.
func Sim3FromMatrix(m [4][4]float64) (Sim3, error) {
	if m[3] != [4]float64{0, 0, 0, 1} {
		return Sim3{}, fmt.Errorf("sim3: last row %v is not 0 0 0 1", m[3])
	}
	var sr [3][3]float64
	for i := range 3 {
		copy(sr[i][:], m[i][:3])
	}
	det := det33(sr)
	if !(det > 0) || math.IsInf(det, 0) {
		return Sim3{}, fmt.Errorf("sim3: the linear part has determinant %g, not a positive scale times a rotation", det)
	}
	s := math.Cbrt(det)
	a := Sim3{S: s, T: [3]float64{m[0][3], m[1][3], m[2][3]}}
	for i := range 3 {
		for j := range 3 {
			a.R[i][j] = sr[i][j] / s
		}
	}
	rrt := mul33(a.R, transpose33(a.R))
	for i := range 3 {
		for j := range 3 {
			want := 0.0
			if i == j {
				want = 1
			}
			if d := math.Abs(rrt[i][j] - want); !(d <= 1e-6) {
				return Sim3{}, fmt.Errorf("sim3: the linear part is not a scaled rotation (R·Rᵀ off identity by %.2g)", d)
			}
		}
	}
	for _, x := range a.T {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Sim3{}, errors.New("sim3: translation is not finite")
		}
	}
	return a, nil
}

// ErrDegenerate reports point sets that do not determine a similarity: too few points or weights, all
// points at one place, or all on one line (the rotation about it is free).
var ErrDegenerate = errors.New("degenerate point set")

// ScaleMethod selects how Umeyama estimates the scale.
type ScaleMethod int

const (
	// ScaleAuto is ScaleRMS for Umeyama; the alignment of windows (Align via Run) uses ScaleFixed for
	// windows whose depth is in metres and ScaleRMS otherwise.
	ScaleAuto ScaleMethod = iota
	// ScaleRMS is the ratio of the weighted RMS spreads about the centroids, S = σ_dst/σ_src, as
	// depth_anything_3's da3_streaming (weighted_estimate_sim3) estimates it: symmetric in the two point
	// sets, so equal noise on both sides does not bias it, which matters when scales are chained over
	// many windows. Noise-free it equals the least-squares scale.
	ScaleRMS
	// ScaleLeastSquares is Umeyama's least-squares scale, S = tr(D·E)/σ²_src: the exact minimiser of the
	// weighted squared residuals. Noise in the source points biases it low by σ²/(σ² + σ²_noise).
	ScaleLeastSquares
	// ScaleFixed keeps S = 1 (a rigid transform), for windows whose depth is already in metres.
	ScaleFixed
)

// Umeyama returns the similarity that maps src onto dst with the least weighted squared error
// Σ wᵢ·|dstᵢ − (S·R·srcᵢ + T)|² (Umeyama 1991, the rotation from Horn's quaternion method on the weighted
// cross-covariance), with the scale chosen by method. src and dst hold x, y, z per point; w holds one
// non-negative weight per point, or is nil for equal weights. It returns ErrDegenerate when the weighted
// points do not determine the transform.
func Umeyama(src, dst, w []float64, method ScaleMethod) (Sim3, error) {
	n := len(src) / 3
	if len(src) != 3*n || len(dst) != len(src) || (w != nil && len(w) != n) {
		return Sim3{}, fmt.Errorf("umeyama: %d source and %d target coordinates, %d weights", len(src), len(dst), len(w))
	}
	p := pointPairs{src: src, dst: dst, w: w, n: n}
	c, err := p.centroids()
	if err != nil {
		return Sim3{}, err
	}
	m := p.moments(c)
	if err := m.check(); err != nil {
		return Sim3{}, err
	}
	q, lambda := hornRotation(m.cross)
	out := Sim3{R: quatToRot(q)}
	switch method {
	case ScaleFixed:
		out.S = 1
	case ScaleLeastSquares:
		// Σ w·bᵀ·R·a = λ_max.
		out.S = lambda / m.vs
	default:
		out.S = math.Sqrt(m.vd / m.vs)
	}
	if !(out.S > 0) || math.IsInf(out.S, 0) {
		return Sim3{}, fmt.Errorf("umeyama: scale %g (the point sets are not related by a similarity): %w", out.S, ErrDegenerate)
	}
	rm := out.Apply(c.ms) // S·R·μ_src, T still 0
	for k := range 3 {
		out.T[k] = c.md[k] - rm[k]
	}
	return out, nil
}

// pointPairs are Umeyama's n weighted correspondences (w nil: equal weights).
type pointPairs struct {
	src, dst, w []float64
	n           int
}

func (p pointPairs) weight(i int) float64 {
	if p.w == nil {
		return 1
	}
	return p.w[i]
}

// centroids are the weighted means of the source and target points and the total weight.
type centroids struct {
	ms, md [3]float64
	sw     float64
}

// centroids checks the weights and returns the weighted centroids.
func (p pointPairs) centroids() (centroids, error) {
	var c centroids
	for i := range p.n {
		wi := p.weight(i)
		if !(wi >= 0) || math.IsInf(wi, 0) {
			return c, fmt.Errorf("umeyama: weight %d is %g", i, wi)
		}
		c.sw += wi
		for k := range 3 {
			c.ms[k] += wi * p.src[3*i+k]
			c.md[k] += wi * p.dst[3*i+k]
		}
	}
	if p.n < 3 || !(c.sw > 0) {
		return c, fmt.Errorf("umeyama: %d points, total weight %g: %w", p.n, c.sw, ErrDegenerate)
	}
	for k := range 3 {
		c.ms[k] /= c.sw
		c.md[k] /= c.sw
	}
	return c, nil
}

// moments are the weighted covariances about the centroids: cross (src × dstᵀ) and of the source alone,
// and the variances of both point sets.
type moments struct {
	cross, css [3][3]float64
	vs, vd     float64
}

// moments returns the weighted covariances about the centroids.
func (p pointPairs) moments(mean centroids) moments {
	var m moments
	for i := range p.n {
		wi := p.weight(i) / mean.sw
		if wi == 0 {
			continue
		}
		var a, b [3]float64
		for k := range 3 {
			a[k], b[k] = p.src[3*i+k]-mean.ms[k], p.dst[3*i+k]-mean.md[k]
		}
		for r := range 3 {
			for c := range 3 {
				m.cross[r][c] += wi * a[r] * b[c]
				m.css[r][c] += wi * a[r] * a[c]
			}
		}
		m.vs += wi * (a[0]*a[0] + a[1]*a[1] + a[2]*a[2])
		m.vd += wi * (b[0]*b[0] + b[1]*b[1] + b[2]*b[2])
	}
	return m
}

// check refuses points that are not finite or do not determine a rotation.
func (m *moments) check() error {
	if math.IsNaN(m.vs) || math.IsInf(m.vs, 0) || math.IsNaN(m.vd) || math.IsInf(m.vd, 0) {
		return errors.New("umeyama: points are not finite")
	}
	// Spread: the source points must span at least a plane (two non-negligible principal axes).
	ev, _ := jacobiEigen(m.css)
	lo := 1e-12 * max(ev[0], ev[1], ev[2])
	spanned := 0
	for _, e := range ev {
		if e > lo {
			spanned++
		}
	}
	if !(m.vs > 0) || !(m.vd > 0) || spanned < 2 {
		return fmt.Errorf("umeyama: the points lie on a line or at one place: %w", ErrDegenerate)
	}
	return nil
}

// hornRotation returns the rotation that best maps the source onto the target points, given their
// weighted cross-covariance, as a unit quaternion (w, x, y, z), and the largest eigenvalue of Horn's
// matrix.
func hornRotation(cross [3][3]float64) ([4]float64, float64) {
	// Horn's symmetric 4×4 matrix; its top eigenvector is the rotation's unit quaternion (w, x, y, z).
	sx, sy, sz := cross[0], cross[1], cross[2]
	nm := [4][4]float64{
		{sx[0] + sy[1] + sz[2], sy[2] - sz[1], sz[0] - sx[2], sx[1] - sy[0]},
		{sy[2] - sz[1], sx[0] - sy[1] - sz[2], sx[1] + sy[0], sz[0] + sx[2]},
		{sz[0] - sx[2], sx[1] + sy[0], -sx[0] + sy[1] - sz[2], sy[2] + sz[1]},
		{sx[1] - sy[0], sz[0] + sx[2], sy[2] + sz[1], -sx[0] - sy[1] + sz[2]},
	}
	vals, vecs := jacobiEigen(nm)
	top := 0
	for i := range vals {
		if vals[i] > vals[top] {
			top = i
		}
	}
	return [4]float64{vecs[0][top], vecs[1][top], vecs[2][top], vecs[3][top]}, vals[top]
}

// quatToRot returns the rotation of a quaternion (w, x, y, z), normalised first.
func quatToRot(q [4]float64) [3][3]float64 {
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

// jacobiEigen diagonalises a symmetric matrix (3×3 or 4×4, given as the leading block of a [4][4] or a
// [3][3]) by cyclic Jacobi rotations: it returns the eigenvalues and the eigenvectors as columns.
func jacobiEigen[M [3][3]float64 | [4][4]float64](m M) (vals []float64, vecs [][]float64) {
	return jacobiRows(toRows(m), 64)
}

// jacobiRows diagonalises the symmetric matrix a (rows, overwritten) by at most sweeps cyclic Jacobi
// sweeps: it returns the eigenvalues and the eigenvectors as columns.
func jacobiRows(a [][]float64, sweeps int) (vals []float64, vecs [][]float64) {
	n := len(a)
	v := make([][]float64, n)
	for i := range v {
		v[i] = make([]float64, n)
		v[i][i] = 1
	}
	for range sweeps {
		off, diag := 0.0, 0.0
		for i := range n {
			diag += a[i][i] * a[i][i]
			for j := i + 1; j < n; j++ {
				off += a[i][j] * a[i][j]
			}
		}
		if off <= 1e-30*diag || off == 0 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				if a[p][q] == 0 {
					continue
				}
				theta := (a[q][q] - a[p][p]) / (2 * a[p][q])
				t := 1 / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				if theta < 0 {
					t = -t
				}
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range n {
					akp, akq := a[k][p], a[k][q]
					a[k][p], a[k][q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range n {
					apk, aqk := a[p][k], a[q][k]
					a[p][k], a[q][k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range n {
					vkp, vkq := v[k][p], v[k][q]
					v[k][p], v[k][q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	vals = make([]float64, n)
	for i := range n {
		vals[i] = a[i][i]
	}
	return vals, v
}

func toRows[M [3][3]float64 | [4][4]float64](m M) [][]float64 {
	switch x := any(m).(type) {
	case [3][3]float64:
		return [][]float64{x[0][:], x[1][:], x[2][:]}
	case [4][4]float64:
		return [][]float64{x[0][:], x[1][:], x[2][:], x[3][:]}
	}
	panic("unreachable")
}

func mul33(a, b [3][3]float64) [3][3]float64 {
	var c [3][3]float64
	for i := range 3 {
		for j := range 3 {
			c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j] + a[i][2]*b[2][j]
		}
	}
	return c
}

func transpose33(a [3][3]float64) [3][3]float64 {
	return [3][3]float64{{a[0][0], a[1][0], a[2][0]}, {a[0][1], a[1][1], a[2][1]}, {a[0][2], a[1][2], a[2][2]}}
}

func det33(m [3][3]float64) float64 {
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}
