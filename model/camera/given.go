package camera

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
)

// Extrinsics is a 3×4 world-to-camera matrix [R | t], row-major.
type Extrinsics = [3][4]float64

// Invert returns the inverse rigid transform [Rᵀ | −Rᵀt] (affine_inverse).
func Invert(e Extrinsics) Extrinsics {
	var o Extrinsics
	for i := 0; i < 3; i++ {
		for k := 0; k < 3; k++ {
			o[i][k] = e[k][i]
			o[i][3] -= e[k][i] * e[k][3]
		}
	}
	return o
}

// Compose returns a·b for rigid transforms (4×4 products with the implicit
// last row 0 0 0 1).
func Compose(a, b Extrinsics) Extrinsics {
	var o Extrinsics
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			for k := 0; k < 3; k++ {
				o[i][j] += a[i][k] * b[k][j]
			}
		}
		o[i][3] += a[i][3]
	}
	return o
}

// Rotation returns the 3×3 part of e.
func Rotation(e Extrinsics) Mat3 {
	return Mat3{{e[0][0], e[0][1], e[0][2]}, {e[1][0], e[1][1], e[1][2]}, {e[2][0], e[2][1], e[2][2]}}
}

// MatToQuat converts a rotation matrix to a quaternion (x, y, z, w) with
// w ≥ 0, as DA3's mat_to_quat (pytorch3d's matrix_to_quaternion): of the
// four candidates built from √max(0, 1 ± m00 ± m11 ± m22) the one with the
// largest such term is used, divided by 2·max(term, 0.1).
func MatToQuat(m Mat3) [4]float64 {
	m00, m01, m02 := m[0][0], m[0][1], m[0][2]
	m10, m11, m12 := m[1][0], m[1][1], m[1][2]
	m20, m21, m22 := m[2][0], m[2][1], m[2][2]
	sq := func(x float64) float64 {
		if x > 0 {
			return math.Sqrt(x)
		}
		return 0
	}
	qa := [4]float64{sq(1 + m00 + m11 + m22), sq(1 + m00 - m11 - m22), sq(1 - m00 + m11 - m22), sq(1 - m00 - m11 + m22)}
	cands := [4][4]float64{ // (r, i, j, k) per candidate
		{qa[0] * qa[0], m21 - m12, m02 - m20, m10 - m01},
		{m21 - m12, qa[1] * qa[1], m10 + m01, m02 + m20},
		{m02 - m20, m10 + m01, qa[2] * qa[2], m12 + m21},
		{m10 - m01, m20 + m02, m21 + m12, qa[3] * qa[3]},
	}
	best := 0
	for k := 1; k < 4; k++ {
		if qa[k] > qa[best] {
			best = k
		}
	}
	d := 2 * math.Max(qa[best], 0.1)
	c := cands[best]
	q := [4]float64{c[1] / d, c[2] / d, c[3] / d, c[0] / d}
	if q[3] < 0 {
		for i := range q {
			q[i] = -q[i]
		}
	}
	return q
}

// EncodePose is DA3's extri_intri_to_pose_encoding for one view: from a
// camera-to-world pose and pixel intrinsics of a w×h image, the 9 values
// [t (3), quaternion xyzw of R (4), fov_h, fov_w] with
// fov_h = 2·atan((h/2)/fy), fov_w = 2·atan((w/2)/fx). It is the inverse of
// Decode.
func EncodePose(c2w Extrinsics, k Mat3, w, h int) [9]float32 {
	q := MatToQuat(Rotation(c2w))
	fovH := 2 * math.Atan((float64(h)/2)/k[1][1])
	fovW := 2 * math.Atan((float64(w)/2)/k[0][0])
	return [9]float32{float32(c2w[0][3]), float32(c2w[1][3]), float32(c2w[2][3]),
		float32(q[0]), float32(q[1]), float32(q[2]), float32(q[3]), float32(fovH), float32(fovW)}
}

// NormalizeExtrinsics is DepthAnything3._normalize_extrinsics: every
// world-to-camera pose is expressed relative to the first camera
// (ext_i·ext_0⁻¹), then the translations are divided by the median distance
// of the camera centres from the first camera (torch.median: the lower of
// the two middle values for an even count), at least 0.1.
func NormalizeExtrinsics(w2c []Extrinsics) []Extrinsics {
	if len(w2c) == 0 {
		return nil
	}
	inv0 := Invert(w2c[0])
	out := make([]Extrinsics, len(w2c))
	dists := make([]float64, len(w2c))
	for i, e := range w2c {
		out[i] = Compose(e, inv0)
		c := Invert(out[i])
		dists[i] = math.Sqrt(c[0][3]*c[0][3] + c[1][3]*c[1][3] + c[2][3]*c[2][3])
	}
	slices.Sort(dists)
	med := math.Max(dists[(len(dists)-1)/2], 0.1)
	for i := range out {
		for r := 0; r < 3; r++ {
			out[i][r][3] /= med
		}
	}
	return out
}

// ErrDegenerate is evo's refusal to align fewer than three non-collinear
// camera centres ("Degenerate covariance rank").
var ErrDegenerate = errors.New("degenerate covariance rank, Umeyama alignment is not possible")

// Sim3 is a similarity transform x ↦ s·R·x + t.
type Sim3 struct {
	R Mat3
	T [3]float64
	S float64
}

// Umeyama aligns the camera centres of the poses est to those of ref
// (world-to-camera extrinsics; the centres are the translations of their
// inverses), as evo's umeyama_alignment with scale: the Sim3 minimising
// Σ‖ref_i − (s·R·est_i + t)‖². Like evo it returns ErrDegenerate when the
// covariance has fewer than two singular values above machine epsilon.
func Umeyama(ref, est []Extrinsics) (Sim3, error) {
	x, y := centres(est), centres(ref)
	return umeyama(x, y)
}

func centres(es []Extrinsics) [][3]float64 {
	out := make([][3]float64, len(es))
	for i, e := range es {
		c := Invert(e)
		out[i] = [3]float64{c[0][3], c[1][3], c[2][3]}
	}
	return out
}

// moments are the means of x and y, the variance of x (σx, biased) and
// the cross-covariance Σ (y_i − ȳ)(x_i − x̄)ᵀ / n of Umeyama's method.
func moments(x, y [][3]float64) (mx, my [3]float64, sigma float64, cov Mat3) {
	n := float64(len(x))
	for i := range x {
		for k := 0; k < 3; k++ {
			mx[k] += x[i][k] / n
			my[k] += y[i][k] / n
		}
	}
	for i := range x {
		for a := 0; a < 3; a++ {
			dx := x[i][a] - mx[a]
			sigma += dx * dx / n
			for b := 0; b < 3; b++ {
				cov[a][b] += (y[i][a] - my[a]) * (x[i][b] - mx[b]) / n
			}
		}
	}
	return mx, my, sigma, cov
}

func umeyama(x, y [][3]float64) (Sim3, error) {
	if len(x) == 0 || len(x) != len(y) {
		return Sim3{}, ErrDegenerate
	}
	mx, my, sigma, cov := moments(x, y)
	u, d, vt := svd3(cov)
	nz := 0
	for _, s := range d {
		if s > 2.220446049250313e-16 {
			nz++
		}
	}
	if nz < 2 {
		return Sim3{}, ErrDegenerate
	}
	sm := Mat3{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	if det3(u)*det3(vt) < 0 {
		sm[2][2] = -1
	}
	r := mul3(mul3(u, sm), vt)
	s := (d[0]*sm[0][0] + d[1]*sm[1][1] + d[2]*sm[2][2]) / sigma
	rx := mulVec3(r, mx)
	return Sim3{R: r, S: s, T: [3]float64{my[0] - s*rx[0], my[1] - s*rx[1], my[2] - s*rx[2]}}, nil
}

// svd3 is the SVD of a 3×3 matrix, a = u·diag(d)·vt, d descending.
func svd3(a Mat3) (u Mat3, d [3]float64, vt Mat3) {
	flat := make([]float64, 9)
	for i := 0; i < 3; i++ {
		copy(flat[i*3:], a[i][:])
	}
	// One-sided Jacobi on a: the rotated columns are u·diag(d).
	sv, v := jacobiSVD(flat, 3)
	av := make([]float64, 9)
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 3; k++ {
				av[i*3+j] += a[i][k] * v[k*3+j]
			}
		}
	}
	order := []int{0, 1, 2}
	slices.SortFunc(order, func(p, q int) int {
		switch {
		case sv[p] > sv[q]:
			return -1
		case sv[p] < sv[q]:
			return 1
		}
		return 0
	})
	for c, j := range order {
		d[c] = sv[j]
		for i := 0; i < 3; i++ {
			vt[c][i] = v[i*3+j]
		}
	}
	// u's columns are a·v/d; where d vanishes (rank < 3) they are completed
	// to an orthonormal basis instead.
	for c, j := range order {
		if d[c] > 1e-12*d[0] {
			for i := 0; i < 3; i++ {
				u[i][c] = av[i*3+j] / d[c]
			}
		} else {
			u = completeBasis(u, c)
		}
	}
	return u, d, vt
}

// completeBasis fills column c of u with a unit vector orthogonal to the
// previous columns.
func completeBasis(u Mat3, c int) Mat3 {
	for _, e := range [][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
		x := e
		for k := 0; k < c; k++ {
			d := u[0][k]*x[0] + u[1][k]*x[1] + u[2][k]*x[2]
			for i := 0; i < 3; i++ {
				x[i] -= d * u[i][k]
			}
		}
		n := math.Sqrt(x[0]*x[0] + x[1]*x[1] + x[2]*x[2])
		if n > 1e-6 {
			for i := 0; i < 3; i++ {
				u[i][c] = x[i] / n
			}
			return u
		}
	}
	return u
}

// AlignScale is the scale of DepthAnything3._align_to_input_extrinsics_intrinsics:
// align_poses_umeyama(predicted, given), the Umeyama scale mapping the given
// camera centres onto the predicted ones; the predicted depth divided by it
// is in the given cameras' scale. From ten views on, upstream runs evo's
// Umeyama inside a 10-iteration RANSAC (subsets of ⌈N/2⌉ ≥ 3 views, inlier
// threshold the median nearest-centre distance after a first alignment,
// refit on the best inliers): so does this, with its own seeded sampler
// (upstream draws with numpy's default_rng(42); the result is the same
// whenever both find the same inlier set).
//
// Where evo raises (fewer than three non-collinear centres: upstream's
// inference() fails), the same formula without evo's rank check is used: for
// two views it is the ratio of the distances between the centres. With one
// view, or when all given centres coincide, there is no scale and 1 is
// returned.
func AlignScale(pred, given []Extrinsics) float64 {
	if len(given) >= 10 {
		if s, err := ransacScale(centres(given), centres(pred)); err == nil {
			return s
		}
	}
	x, y := centres(given), centres(pred)
	sim, err := umeyama(x, y)
	if err == nil {
		return sim.S
	}
	return umeyamaScaleUnchecked(x, y)
}

// umeyamaScaleUnchecked is Umeyama's scale trace(D·S)/σx without evo's
// rank check; 1 when σx = 0.
func umeyamaScaleUnchecked(x, y [][3]float64) float64 {
	_, _, sigma, cov := moments(x, y)
	if sigma == 0 {
		return 1
	}
	u, d, vt := svd3(cov)
	s3 := 1.0
	if det3(u)*det3(vt) < 0 {
		s3 = -1
	}
	return (d[0] + d[1] + s3*d[2]) / sigma
}

// ransacScale is pose_align._ransac_align_sim3's scale (x: estimate, y:
// reference centres).
func ransacScale(x, y [][3]float64) (float64, error) {
	n := len(x)
	sub := max(3, (n+1)/2)
	s0, err := umeyama(x, y)
	if err != nil {
		return 0, err
	}
	thr := nearestThreshold(s0, x, y)
	rng := rand.New(rand.NewPCG(42, 0))
	best := s0
	bestK, bestErr := -1, math.Inf(1)
	var bestIn []bool
	for it := 0; it < 10; it++ {
		idx := rng.Perm(n)[:sub]
		xs, ys := make([][3]float64, sub), make([][3]float64, sub)
		for k, i := range idx {
			xs[k], ys[k] = x[i], y[i]
		}
		s, err := umeyama(xs, ys)
		if err != nil {
			continue
		}
		in, k, mean := centreInliers(s, x, y, thr)
		if k > bestK || (k == bestK && mean < bestErr) {
			bestK, bestErr, best, bestIn = k, mean, s, in
		}
	}
	if bestK >= 3 {
		return refitScale(x, y, bestIn)
	}
	return best.S, nil
}

// nearestThreshold is the inlier threshold: the median over the aligned
// estimates of the distance to the nearest reference.
func nearestThreshold(s0 Sim3, x, y [][3]float64) float64 {
	near := make([]float64, len(x))
	for i := range x {
		p := apply(s0, x[i])
		near[i] = math.Inf(1)
		for j := range y {
			near[i] = math.Min(near[i], dist(p, y[j]))
		}
	}
	return median(near)
}

// centreInliers are the centres that s aligns within thr of their reference:
// their mask, their number and their mean error (+Inf for none).
func centreInliers(s Sim3, x, y [][3]float64, thr float64) ([]bool, int, float64) {
	in := make([]bool, len(x))
	k, sum := 0, 0.0
	for i := range x {
		e := dist(apply(s, x[i]), y[i])
		if e <= thr {
			in[i] = true
			k++
			sum += e
		}
	}
	mean := math.Inf(1)
	if k > 0 {
		mean = sum / float64(k)
	}
	return in, k, mean
}

// refitScale is the scale of the similarity refitted on the inliers.
func refitScale(x, y [][3]float64, in []bool) (float64, error) {
	var xs, ys [][3]float64
	for i, ok := range in {
		if ok {
			xs, ys = append(xs, x[i]), append(ys, y[i])
		}
	}
	if s, err := umeyama(xs, ys); err == nil {
		return s.S, nil
	}
	return 0, ErrDegenerate
}

func apply(s Sim3, p [3]float64) [3]float64 {
	r := mulVec3(s.R, p)
	return [3]float64{s.S*r[0] + s.T[0], s.S*r[1] + s.T[1], s.S*r[2] + s.T[2]}
}

func dist(a, b [3]float64) float64 {
	return math.Sqrt((a[0]-b[0])*(a[0]-b[0]) + (a[1]-b[1])*(a[1]-b[1]) + (a[2]-b[2])*(a[2]-b[2]))
}

// median is numpy's median (the mean of the two middle values for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
