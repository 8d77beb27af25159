package camera

import (
	"errors"
	"fmt"
	"math"
)

// RayMap is one view's output of DA3's auxiliary ray head on its h×w grid
// (h = 8·ph, w = 8·pw): for every cell a ray direction and origin, and the
// ray confidence exp(logit)+1.
type RayMap struct {
	H, W int
	// Ray holds 6 planes of H×W values, row-major: direction x, y, z, then
	// origin x, y, z.
	Ray []float32
	// Conf is the H×W confidence.
	Conf []float32
}

// RayFit is one view's ray → pose solution with the solver's stages.
type RayFit struct {
	// Homography is the refitted weighted DLT homography from the identity
	// camera's plane to the ray directions, normalised by its (2,2) entry and
	// negated if its determinant is negative.
	Homography Mat3
	// Q, L are its QL decomposition, L normalised by L₂₂.
	Q, L Mat3
	// R is the camera-to-world rotation (= Q), T the confidence-weighted mean
	// ray origin (the camera centre).
	R Mat3
	T [3]float64
	// Focal (1/L₀₀, 1/L₁₁) and PP (L₂₀+1, L₂₁+1) in units of half the image.
	Focal, PP [2]float64
	// Inliers is the number of RANSAC inliers of the winning sample, and
	// RefitPoints the number the homography was refitted on (at most 8000).
	Inliers, RefitPoints int
	// Pose is the world-to-camera pose and the intrinsics for the image the
	// ray map belongs to.
	Pose Pose
}

// Constants of depth_anything_3's get_params_for_ransac and
// compute_optimal_rotation_intrinsics_batch.
const (
	rayIters      = 100
	rayPick       = 8
	raySampleFrac = 0.3
	rayZMin       = 1e-4
	rayReproj     = 0.2
	rayMaxInliers = 8000
)

// ErrRayPose reports ray maps from which no pose can be solved.
var ErrRayPose = errors.New("ray pose")

// SolveRays recovers each view's camera from its ray map exactly as
// depth_anything_3's use_ray_pose path does (get_extrinsic_from_camray and
// DepthAnything3Net._process_ray_pose_estimation), for an image of imgW×imgH
// pixels:
//
//  1. The identity camera's plane points (x, y) = (linspace(1/w, 2−1/w) − 1,
//     linspace(1/h, 2−1/h) − 1) (float32, as unproject_depth computes them)
//     are matched with the ray directions divided by their z; cells with
//     |z| ≤ 1e-4 get weight 0, and the confidences are zeroed there for
//     step 5 too (in place upstream).
//  2. RANSAC: the candidates are the n = max(8, int(0.3·N)) cells of largest
//     weight (in torch.argsort's order, equal weights included: argsortDesc);
//     one 100×8 matrix of sample positions,
//     randperm(n)[:8] per iteration, is shared by all views. Each sample gives
//     a weighted DLT homography (rows scaled by √w, last right singular
//     vector, divided by H₂₂); inliers reproject within 0.2; the iteration
//     with the largest inlier weight wins (the first on ties).
//  3. The refit uses the winning inliers; above 8000 of them, the 95 % of
//     largest weight (at least 8000, argsortDesc again) are kept and 8000
//     drawn by randperm.
//     If det < 0 the homography is negated.
//  4. QL decomposition A = Q·L, L /= L₂₂: R = Q, f = (L₀₀, L₁₁), pp = (L₂₀, L₂₁).
//  5. T = Σ origin·conf / Σ conf; [R | T] is camera-to-world, the pose is its
//     inverse; K = [[(1/f_x)/2·W, 0, (pp_x+1)·W/2], [0, (1/f_y)/2·H, (pp_y+1)·H/2], [0, 0, 1]].
//
// Upstream samples with torch's global generator: here a Mersenne Twister
// reproduces torch's CPU generator and randperm, so the result equals the
// package's after torch.manual_seed(seed) right before the forward call on
// the CPU (CUDA draws other samples). The package computes in float32, this
// in float64.
func SolveRays(maps []RayMap, imgW, imgH int, seed uint64) ([]RayFit, error) {
	if len(maps) == 0 {
		return nil, fmt.Errorf("%w: no ray maps", ErrRayPose)
	}
	h, w := maps[0].H, maps[0].W
	n := h * w
	for i, m := range maps {
		if m.H != h || m.W != w || len(m.Ray) != 6*n || len(m.Conf) != n {
			return nil, fmt.Errorf("%w: ray map %d is not %dx%d with 6 ray planes and a confidence", ErrRayPose, i, w, h)
		}
	}
	if n < rayPick {
		return nil, fmt.Errorf("%w: a %dx%d ray map has fewer than %d cells", ErrRayPose, w, h, rayPick)
	}
	rng := newMT19937(seed)
	nSample, samples := ransacSamples(rng, n)
	s := raySolver{xs: planeGrid(w), ys: planeGrid(h), nSample: nSample, samples: samples, rng: rng}
	out := make([]RayFit, len(maps))
	for v, m := range maps {
		fit, err := s.solve(m)
		if err != nil {
			return nil, fmt.Errorf("view %d: %w", v, err)
		}
		fit.Pose = rayPose(fit, imgW, imgH)
		out[v] = fit
	}
	return out, nil
}

// RansacSamples returns the 100×8 RANSAC sample positions SolveRays draws
// for maps of n cells with this seed (the same matrix for every view).
func RansacSamples(n int, seed uint64) [][]int {
	_, s := ransacSamples(newMT19937(seed), n)
	return s
}

// ransacSamples draws get_params_for_ransac's sample matrix for n cells:
// the number of candidates n_sample = max(8, int(0.3·n)) and 100 rows of
// randperm(n_sample)[:8].
func ransacSamples(rng *mt19937, n int) (int, [][]int) {
	nSample := max(rayPick, int(float64(n)*raySampleFrac))
	s := make([][]int, rayIters)
	for i := range s {
		s[i] = rng.randperm(nSample)[:rayPick]
	}
	return nSample, s
}

// planeGrid is the identity camera's plane coordinate along one axis of n
// cells: float32(linspace(1/n, 2−1/n, n)) − 1 in float32, as torch computes it.
func planeGrid(n int) []float64 {
	lo := float32(-(1 - 1/float64(n)) + 1)
	hi := float32((1 - 1/float64(n)) + 1)
	out := make([]float64, n)
	if n == 1 {
		out[0] = float64(lo - 1)
		return out
	}
	step := (hi - lo) / float32(n-1)
	for i := range out {
		var g float32
		if i < n/2 {
			g = lo + step*float32(i)
		} else {
			g = hi - step*float32(n-1-i)
		}
		out[i] = float64(g - 1)
	}
	return out
}

// raySolver is what the views' solves share: the identity camera's plane
// grid, RANSAC's candidate count and sample matrix, and the generator the
// refits draw from.
type raySolver struct {
	xs, ys  []float64
	nSample int
	samples [][]int
	rng     *mt19937
}

// solve recovers one view's camera from its ray map (steps 1 to 5 of
// SolveRays).
func (s *raySolver) solve(m RayMap) (RayFit, error) {
	c := s.correspondences(m)
	order := argsortDesc(c.wt)
	mask := c.ransac(order[:s.nSample], s.samples)
	inl, nInliers := c.refitPoints(mask, s.rng)
	if len(inl) < 4 {
		return RayFit{}, fmt.Errorf("%w: RANSAC kept %d inliers, at least 4 are needed (the rays do not look like a camera)", ErrRayPose, len(inl))
	}
	A, ok := dlt(c.src, c.dst, c.wt, inl)
	if !ok {
		return RayFit{}, fmt.Errorf("%w: the refitted homography is degenerate", ErrRayPose)
	}
	fit := homographyFit(A)
	fit.Inliers, fit.RefitPoints = nInliers, len(inl)
	fit.T = rayCentre(m, c.wt)
	if !finite(fit.T[:]) || !finite(fit.Focal[:]) || !finite(fit.PP[:]) {
		return RayFit{}, fmt.Errorf("%w: the solution is not finite", ErrRayPose)
	}
	return fit, nil
}

// rayPlane is plane c of a ray map's six (directions, then origins).
func rayPlane(m RayMap, c int) []float32 {
	n := m.H * m.W
	return m.Ray[c*n : (c+1)*n]
}

// rayPoints are the correspondences of a view: the identity camera's plane
// points, the ray directions divided by their z, and their weights.
type rayPoints struct {
	src, dst [][2]float64
	wt       []float64
}

// correspondences matches the plane grid with the ray directions; cells
// with |z| ≤ 1e-4 get weight 0.
func (s *raySolver) correspondences(m RayMap) rayPoints {
	n := m.H * m.W
	dx, dy, dz := rayPlane(m, 0), rayPlane(m, 1), rayPlane(m, 2)
	c := rayPoints{src: make([][2]float64, n), dst: make([][2]float64, n), wt: make([]float64, n)}
	for i := 0; i < n; i++ {
		c.src[i] = [2]float64{s.xs[i%m.W], s.ys[i/m.W]}
		z := float64(dz[i])
		u, v := float64(dx[i]), float64(dy[i])
		if math.Abs(z) > rayZMin {
			u, v = u/z, v/z
			c.wt[i] = float64(m.Conf[i])
		}
		c.dst[i] = [2]float64{u, v}
	}
	return c
}

// ransac returns the inlier mask of the sample, among the candidates cand,
// whose homography has the largest inlier weight (the first on ties).
func (c *rayPoints) ransac(cand []int, samples [][]int) []bool {
	bestScore := math.Inf(-1)
	var bestMask []bool
	pts := make([]int, rayPick)
	for _, s := range samples {
		for k, p := range s {
			pts[k] = cand[p]
		}
		mask, score := c.inliers(pts)
		if score > bestScore {
			bestScore, bestMask = score, mask
		}
	}
	return bestMask
}

// inliers fits a homography on the points pts and returns the points it
// reprojects within rayReproj, and their weight.
func (c *rayPoints) inliers(pts []int) ([]bool, float64) {
	n := len(c.wt)
	src, dst, wt := c.src, c.dst, c.wt
	// A degenerate sample has no inliers (upstream: NaN errors).
	H, ok := dlt(src, dst, wt, pts)
	mask := make([]bool, n)
	var score float64
	for i := 0; ok && i < n; i++ {
		x, y := src[i][0], src[i][1]
		pz := H[2][0]*x + H[2][1]*y + H[2][2]
		px := (H[0][0]*x + H[0][1]*y + H[0][2]) / pz
		py := (H[1][0]*x + H[1][1]*y + H[1][2]) / pz
		e := math.Sqrt((px-dst[i][0])*(px-dst[i][0]) + (py-dst[i][1])*(py-dst[i][1]))
		if e < rayReproj {
			mask[i] = true
			score += wt[i]
		}
	}
	return mask, score
}

// refitPoints returns the points the homography is refitted on, and the
// number of inliers: the inliers of mask; above rayMaxInliers of them, the
// 95 % of largest weight (at least rayMaxInliers) are kept and rayMaxInliers
// drawn from them by randperm.
func (c *rayPoints) refitPoints(mask []bool, rng *mt19937) ([]int, int) {
	var inl []int
	for i, in := range mask {
		if in {
			inl = append(inl, i)
		}
	}
	nInliers := len(inl)
	if len(inl) > rayMaxInliers {
		iw := make([]float64, len(inl))
		for k, i := range inl {
			iw[k] = c.wt[i]
		}
		sorted := argsortDesc(iw)
		keep := max(int(float64(len(sorted))*0.95), rayMaxInliers)
		sorted = sorted[:keep]
		perm := rng.randperm(keep)[:rayMaxInliers]
		sub := make([]int, rayMaxInliers)
		for k, p := range perm {
			sub[k] = inl[sorted[p]]
		}
		inl = sub
	}
	return inl, nInliers
}

// homographyFit decomposes the refitted homography (negated if its
// determinant is negative): A = Q·L, L /= L₂₂, R = Q, the focal lengths and
// the principal point from L.
func homographyFit(A Mat3) RayFit {
	if det3(A) < 0 {
		for i := range A {
			for j := range A[i] {
				A[i][j] = -A[i][j]
			}
		}
	}
	fit := RayFit{Homography: A}
	fit.Q, fit.L = QL(A)
	l22 := fit.L[2][2]
	for i := range fit.L {
		for j := range fit.L[i] {
			fit.L[i][j] /= l22
		}
	}
	fit.R = fit.Q
	fit.Focal = [2]float64{1 / fit.L[0][0], 1 / fit.L[1][1]}
	fit.PP = [2]float64{fit.L[2][0] + 1, fit.L[2][1] + 1}
	return fit
}

// rayCentre is the confidence-weighted mean ray origin, the camera centre.
func rayCentre(m RayMap, wt []float64) [3]float64 {
	n := m.H * m.W
	var t [3]float64
	var sw float64
	for i := 0; i < n; i++ {
		c := wt[i] // the confidence, zeroed where |z| ≤ 1e-4
		sw += c
		for k := 0; k < 3; k++ {
			t[k] += float64(rayPlane(m, 3+k)[i]) * c
		}
	}
	for k := range t {
		t[k] /= sw
	}
	return t
}

// dlt is find_homography_least_squares_weighted_torch on the points pts:
// rows [−x√w, −y√w, −√w, 0, 0, 0, xu√w, yu√w, u√w] and
// [0, 0, 0, −x√w, −y√w, −√w, xv√w, yv√w, v√w] (all u rows, then all v rows),
// H = the last right singular vector as 3×3, divided by H₂₂.
func dlt(src, dst [][2]float64, wt []float64, pts []int) (Mat3, bool) {
	k := len(pts)
	rows := max(2*k, 9) // zero rows past 2k leave the singular vectors unchanged
	a := make([]float64, rows*9)
	for r, i := range pts {
		s := math.Sqrt(wt[i])
		x, y, u, v := src[i][0], src[i][1], dst[i][0], dst[i][1]
		copy(a[r*9:], []float64{-x * s, -y * s, -s, 0, 0, 0, x * u * s, y * u * s, u * s})
		copy(a[(k+r)*9:], []float64{0, 0, 0, -x * s, -y * s, -s, x * v * s, y * v * s, v * s})
	}
	h := smallestRightSingular(a, rows, 9)
	if h[8] == 0 || !finite(h) {
		return Mat3{}, false
	}
	var H Mat3
	for i := 0; i < 9; i++ {
		H[i/3][i%3] = h[i] / h[8]
	}
	return H, true
}

func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// rayPose turns a fit into the world-to-camera pose [Rᵀ | −RᵀT] and pixel
// intrinsics of a w×h image (_process_ray_pose_estimation).
func rayPose(f RayFit, w, h int) Pose {
	var p Pose
	for i := 0; i < 3; i++ {
		var t float64
		for k := 0; k < 3; k++ {
			p.Extrinsics[i][k] = f.R[k][i]
			t += f.R[k][i] * f.T[k]
		}
		p.Extrinsics[i][3] = -t
	}
	W, H := float64(w), float64(h)
	p.Intrinsics = Mat3{{f.Focal[0] / 2 * W, 0, f.PP[0] * W * 0.5}, {0, f.Focal[1] / 2 * H, f.PP[1] * H * 0.5}, {0, 0, 1}}
	return p
}
