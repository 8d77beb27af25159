package gsvideo

import (
	"fmt"
	"math"
	"slices"
)

// Pose is one camera of a path: its camera-to-world rotation (columns: the
// camera's x, y, z axes in the world, OpenCV axes), its centre, and its
// intrinsics normalised by the image size (row 0 divided by the width,
// row 1 by the height).
type Pose struct {
	R [3][3]float64
	C [3]float64
	K [3][3]float64
}

// Mode is a camera path (depth_anything_3's trj_mode).
type Mode string

// The paths of run_renderer_in_chunk_w_trj_mode.
const (
	// Original: the input cameras.
	Original Mode = "original"
	// Smooth: the input cameras smoothed (render_stabilization_path).
	Smooth Mode = "smooth"
	// Interpolate: between consecutive input cameras, eased frames turning
	// about the point their optical axes come closest to.
	Interpolate Mode = "interpolate"
	// InterpolateSmooth: Interpolate, smoothed.
	InterpolateSmooth Mode = "interpolate_smooth"
	// Wander: around the first camera, an ellipse in its image plane.
	Wander Mode = "wander"
	// DollyZoom: the first camera moving back and forth along its axis
	// while its focal length keeps the subject's size.
	DollyZoom Mode = "dolly_zoom"
	// Extend: InterpolateSmooth with a wander and a dolly zoom inserted at
	// the middle frame (the export's default).
	Extend Mode = "extend"
	// WobbleInter: between every third input camera, interpolated frames
	// circling about the path.
	WobbleInter Mode = "wobble_inter"
)

// Modes are the paths Path knows, in upstream's order.
func Modes() []Mode {
	return []Mode{Original, Smooth, Interpolate, InterpolateSmooth, Wander, DollyZoom, Extend, WobbleInter}
}

// Path is the camera path mode makes of the input views (at least one;
// Wander and DollyZoom use the first only, every other mode needs two, or
// four for WobbleInter). w is the input views' width in pixels (the
// wander's amplitude is 24 pixels of it).
//
// The frame counts are upstream's: Interpolate makes inter frames per
// pair of consecutive views (8, or 48/(V−1) when that gives under 2 s at
// 24 fps, or 240/(V−1) when 8 would give over 18 s; the views themselves
// when inter ≤ 2), eased by (1 − cos πt)/2, the pairs sharing their end
// frames: (V−1)·(inter−1)+1 frames. Wander makes 122, DollyZoom 120;
// Extend adds to the InterpolateSmooth path of L frames, at its middle
// frame, a wander of n+2 and a dolly zoom of n frames, n = clamp(L/4, 36,
// 60) (L/2/2 in integers).
func Path(views []Pose, mode Mode, w int) ([]Pose, error) {
	need := 2
	switch mode {
	case Wander, DollyZoom:
		need = 1
	case WobbleInter:
		need = 4
	case Original, Smooth, Interpolate, InterpolateSmooth, Extend:
	default:
		return nil, fmt.Errorf("unknown camera path %q (%s)", mode, modeList())
	}
	if len(views) < need {
		return nil, fmt.Errorf("camera path %s needs at least %d views, got %d", mode, need, len(views))
	}
	switch mode {
	case Original:
		return slices.Clone(views), nil
	case Smooth:
		return stabilize(views, smoothKernel), nil
	case Wander:
		return wander(views[0], w, 120, 24), nil
	case DollyZoom:
		return dollyZoom(views[0], 120, 2, 30), nil
	case WobbleInter:
		return wobbleInter(views, 10, 3), nil
	}
	path := interpolatePath(views)
	if mode == Interpolate {
		return path, nil
	}
	path = stabilize(path, smoothKernel)
	if mode == InterpolateSmooth {
		return path, nil
	}
	mid := len(path) / 2
	n := max(36, min(60, mid/2))
	out := slices.Clone(path[:mid])
	out = append(out, wander(path[mid], w, n, 24)...)
	out = append(out, dollyZoom(path[mid], n, 0.1, 10)...)
	return append(out, path[mid:]...), nil
}

func modeList() string {
	s := ""
	for i, m := range Modes() {
		if i > 0 {
			s += ", "
		}
		s += string(m)
	}
	return s
}

// smoothKernel is the smoothing's kernel size (k_size=50, made odd: 51).
const smoothKernel = 50

// interLen is the number of frames per pair of consecutive views of
// Interpolate (inter_len).
func interLen(views int) int {
	n := 8
	total := (views - 1) * n
	if total > 24*18 {
		n = max(1, 24*10/(views-1))
	}
	if total < 24*2 {
		n = max(1, 24*2/(views-1))
	}
	return n
}

// interpolatePath is Interpolate's path: the views themselves when
// interLen ≤ 2.
func interpolatePath(views []Pose) []Pose {
	n := interLen(len(views))
	if n <= 2 {
		return slices.Clone(views)
	}
	ts := make([]float64, n)
	for i := range ts {
		t := float64(i) / float64(n-1)
		ts[i] = (math.Cos(math.Pi*(t+1)) + 1) / 2
	}
	var out []Pose
	for i := 0; i+1 < len(views); i++ {
		seg := interpolate(views[i], views[i+1], ts)
		if i > 0 {
			seg = seg[1:]
		}
		out = append(out, seg...)
	}
	return out
}

// interpolate is the poses between a and b at ts: extrinsics by
// interpolateRigid, intrinsics linearly.
func interpolate(a, b Pose, ts []float64) []Pose {
	out := interpolateRigid(a, b, ts)
	for i, t := range ts {
		for r := range 3 {
			for c := range 3 {
				out[i].K[r][c] = a.K[r][c] + (b.K[r][c]-a.K[r][c])*t
			}
		}
	}
	return out
}

// interpolateRigid is interpolate_extrinsics: the cameras turn about a
// pivot, the least-squares intersection of the two optical axes (their
// centres' midpoint when the axes are parallel), in the plane of the two
// axes; the pose is 3 distances to the pivot, an angle about the plane's
// normal and a twist about the optical axis, interpolated linearly (the
// angles the short way round). t = 0 and 1 give a and b.
func interpolateRigid(a, b Pose, ts []float64) []Pose {
	const eps = 1e-4
	la, lb := col(a.R, 2), col(b.R, 2)
	pivot := scale3(add3(a.C, b.C), 0.5)
	if math.Abs(math.Abs(dot3(la, lb))-1) >= eps {
		if p, ok := intersectRays(a.C, la, b.C, lb); ok {
			pivot = p
		}
	}
	frame := rotationFrame(la, lb, eps)
	pa, pb := pivotParams(a, frame, pivot), pivotParams(b, frame, pivot)
	out := make([]Pose, len(ts))
	for i, t := range ts {
		var p [5]float64
		for k := range 3 {
			p[k] = pa[k] + (pb[k]-pa[k])*t
		}
		p[3], p[4] = lerpAngle(pa[3], pb[3], t), lerpAngle(pa[4], pb[4], t)
		out[i] = fromPivotParams(p, frame, pivot)
	}
	return out
}

// intersectRays is the point nearest, in least squares, to the lines
// o1 + s·d1 and o2 + s·d2.
func intersectRays(o1, d1, o2, d2 [3]float64) ([3]float64, bool) {
	var lhs [3][3]float64
	var rhs [3]float64
	for _, l := range [][2][3]float64{{o1, d1}, {o2, d2}} {
		o, d := l[0], l[1]
		for i := range 3 {
			for j := range 3 {
				n := d[i] * d[j]
				if i == j {
					n--
				}
				lhs[i][j] += n
				rhs[i] += n * o[j]
			}
		}
	}
	inv, ok := inv3(lhs)
	if !ok {
		return [3]float64{}, false
	}
	return mulVec(inv, rhs), true
}

// rotationFrame is generate_rotation_coordinate_frame: columns y × a, y, a
// with y the unit normal of a and b (b replaced by z, then y, when
// parallel to a).
func rotationFrame(a, b [3]float64, eps float64) [3][3]float64 {
	for _, alt := range [][3]float64{{0, 0, 1}, {0, 1, 0}} {
		if math.Abs(math.Abs(dot3(a, b))-1) < eps {
			b = alt
		}
	}
	y := normalize(cross3(a, b))
	return coordinateFrame(y, a)
}

// coordinateFrame is the matrix of columns y × z, y, z.
func coordinateFrame(y, z [3]float64) [3][3]float64 {
	return fromCols(cross3(y, z), y, z)
}

// pivotParams is extrinsics_to_pivot_parameters: the pivot's offset from
// the camera centre in the frame (axis × look, axis, look), and the
// rotation's Y and Z angles in the pivot frame (intrinsic YXZ Euler angles;
// the X angle is 0 for axes in the plane).
func pivotParams(p Pose, frame [3][3]float64, pivot [3]float64) [5]float64 {
	axis := col(frame, 1)
	tf := coordinateFrame(axis, col(p.R, 2))
	d := sub3(pivot, p.C)
	var out [5]float64
	for j := range 3 {
		out[j] = tf[0][j]*d[0] + tf[1][j]*d[1] + tf[2][j]*d[2]
	}
	inv, _ := inv3(frame)
	m := mul3(inv, p.R)
	out[3] = math.Atan2(m[0][2], m[2][2])
	out[4] = math.Atan2(m[1][0], m[1][1])
	return out
}

// fromPivotParams is pivot_parameters_to_extrinsics.
func fromPivotParams(p [5]float64, frame [3][3]float64, pivot [3]float64) Pose {
	rot := mul3(frame, mul3(rotY(p[3]), rotZ(p[4])))
	tf := coordinateFrame(col(frame, 1), col(rot, 2))
	d := mulVec(tf, [3]float64{p[0], p[1], p[2]})
	return Pose{R: rot, C: sub3(pivot, d)}
}

// lerpAngle is interpolate_circular: from a to b the short way round.
func lerpAngle(a, b, t float64) float64 {
	const tau = 2 * math.Pi
	a, b = pmod(a, tau), pmod(b, tau)
	d, dl, dr := math.Abs(b-a), math.Abs(b-(a-tau)), math.Abs(b-(a+tau))
	switch {
	case d < dl && d < dr:
	case dl < dr:
		a -= tau
	default:
		a += tau
	}
	return a + (b-a)*t
}

// pmod is Python's a % m (the sign of m).
func pmod(a, m float64) float64 {
	r := math.Mod(a, m)
	if r < 0 {
		r += m
	}
	return r
}

// stabilize is render_stabilization_path: the camera x and y axes and the
// centres filtered along the path by a Gaussian kernel (OpenCV's
// getGaussianKernel with its default sigma; k made odd, at most the number
// of poses, at least 3), reflected at the ends; the axes renormalised and
// z = x × y. Upstream leaves the filtered x and y slightly non-orthogonal;
// here y is made orthogonal to x (Gram–Schmidt) so that every rotation is
// one. Intrinsics are kept.
func stabilize(poses []Pose, k int) []Pose {
	n := len(poses)
	if n <= 1 {
		return slices.Clone(poses)
	}
	k = max(k, 1)
	if k%2 == 0 {
		k++
	}
	maxOdd := n
	if n%2 == 0 {
		maxOdd = n - 1
	}
	k = min(k, max(maxOdd, 1))
	if n >= 3 && k < 3 {
		k = 3
	}
	kern := gaussianKernel(k)
	pad := k / 2
	reflect := func(i int) int {
		if i < 0 {
			return -i
		}
		if i >= n {
			return 2*(n-1) - i
		}
		return i
	}
	out := make([]Pose, n)
	for i := range n {
		var x, y, c [3]float64
		for j, w := range kern {
			p := poses[reflect(i+j-pad)]
			x = add3(x, scale3(col(p.R, 0), w))
			y = add3(y, scale3(col(p.R, 1), w))
			c = add3(c, scale3(p.C, w))
		}
		x = normalize(x)
		y = normalize(sub3(y, scale3(x, dot3(x, y))))
		out[i] = Pose{R: fromCols(x, y, cross3(x, y)), C: c, K: poses[i].K}
	}
	return out
}

// gaussianKernel is cv2.getGaussianKernel(k, -1): OpenCV's fixed tables
// for k ≤ 7, else exp(−(i−(k−1)/2)²/2σ²) with σ = 0.3·((k−1)/2 − 1) + 0.8,
// normalised to sum 1.
func gaussianKernel(k int) []float64 {
	switch k {
	case 1:
		return []float64{1}
	case 3:
		return []float64{0.25, 0.5, 0.25}
	case 5:
		return []float64{0.0625, 0.25, 0.375, 0.25, 0.0625}
	case 7:
		return []float64{0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125}
	}
	sigma := 0.3*((float64(k)-1)*0.5-1) + 0.8
	out := make([]float64, k)
	var sum float64
	for i := range out {
		x := float64(i) - float64(k-1)/2
		out[i] = math.Exp(-x * x / (2 * sigma * sigma))
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// wander is render_wander_path: the pose p, then n poses moved in its own
// frame by −(x, y, y), x = r·sin θ, y = r·cos θ/3, θ from 0 to 2π, r the
// displacement that shifts a point at unit depth by maxDisp pixels of an
// image w wide, then p again (n+2 poses).
func wander(p Pose, w, n int, maxDisp float64) []Pose {
	r := maxDisp / (p.K[0][0] * float64(w))
	out := []Pose{p}
	for i := range n {
		th := 2 * math.Pi * linspace(i, n)
		x, yz := r*math.Sin(th), r*math.Cos(th)/3
		q := p
		q.C = add3(p.C, mulVec(p.R, [3]float64{-x, -yz, -yz}))
		out = append(out, q)
	}
	return append(out, p)
}

// dollyZoom is render_dolly_zoom_path: n poses moved back along the
// optical axis by z = (1 − cos πt)/2·maxDisp, t from 0 to 2 (out and back),
// their focal lengths scaled by focus/(focus + z).
func dollyZoom(p Pose, n int, maxDisp, focus float64) []Pose {
	out := make([]Pose, n)
	for i := range n {
		t := 2 * linspace(i, n)
		z := 0.5 * (1 - math.Cos(math.Pi*t)) * maxDisp
		q := p
		q.C = add3(p.C, mulVec(p.R, [3]float64{0, 0, -z}))
		s := max(focus/(focus+z), 1e-6)
		q.K[0][0], q.K[1][1] = p.K[0][0]*s, p.K[1][1]*s
		out[i] = q
	}
	return out
}

// wobbleInter is render_wobble_inter_path: between views i and i+skip (i =
// 0, skip, … while i+skip < V... as upstream: i < V−skip), skip·inter
// interpolated poses (not eased) shifted in their own image plane along a
// circle, sin 2πt, −cos 2πt, of radius half the distance between the two
// centres (averaged with the previous pair's); the pairs share their ends.
func wobbleInter(views []Pose, inter, skip int) []Pose {
	m := skip * inter
	ts := make([]float64, m)
	for i := range ts {
		ts[i] = linspace(i, m)
	}
	var out []Pose
	var prev float64
	for i := 0; i < len(views)-skip; i += skip {
		d := norm3(sub3(views[i].C, views[i+skip].C))
		if i > 0 {
			d = (prev + d) / 2
		}
		prev = d
		seg := interpolate(views[i], views[i+skip], ts)
		for j, t := range ts {
			off := [3]float64{math.Sin(2*math.Pi*t) * d * 0.5, -math.Cos(2*math.Pi*t) * d * 0.5, 0}
			seg[j].C = add3(seg[j].C, mulVec(seg[j].R, off))
		}
		if i > 0 {
			seg = seg[1:]
		}
		out = append(out, seg...)
	}
	return out
}

// linspace is the i-th of n values evenly spaced from 0 to 1.
func linspace(i, n int) float64 {
	if n <= 1 {
		return 0
	}
	return float64(i) / float64(n-1)
}

func col(m [3][3]float64, j int) [3]float64 { return [3]float64{m[0][j], m[1][j], m[2][j]} }

func fromCols(a, b, c [3]float64) [3][3]float64 {
	return [3][3]float64{{a[0], b[0], c[0]}, {a[1], b[1], c[1]}, {a[2], b[2], c[2]}}
}

func add3(a, b [3]float64) [3]float64 { return [3]float64{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func sub3(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func scale3(a [3]float64, s float64) [3]float64 {
	return [3]float64{a[0] * s, a[1] * s, a[2] * s}
}
func dot3(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func norm3(a [3]float64) float64   { return math.Sqrt(dot3(a, a)) }
func normalize(a [3]float64) [3]float64 {
	n := norm3(a)
	if n == 0 {
		return a
	}
	return scale3(a, 1/n)
}
func cross3(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func mul3(a, b [3][3]float64) [3][3]float64 {
	var c [3][3]float64
	for i := range 3 {
		for j := range 3 {
			c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j] + a[i][2]*b[2][j]
		}
	}
	return c
}

func mulVec(a [3][3]float64, v [3]float64) [3]float64 {
	return [3]float64{dot3(a[0], v), dot3(a[1], v), dot3(a[2], v)}
}

func transpose(a [3][3]float64) [3][3]float64 {
	return fromCols(a[0], a[1], a[2])
}

func inv3(a [3][3]float64) ([3][3]float64, bool) {
	c0, c1, c2 := cross3(a[1], a[2]), cross3(a[2], a[0]), cross3(a[0], a[1])
	det := dot3(a[0], c0)
	if det == 0 || math.IsNaN(det) {
		return [3][3]float64{}, false
	}
	return fromCols(scale3(c0, 1/det), scale3(c1, 1/det), scale3(c2, 1/det)), true
}

func rotY(a float64) [3][3]float64 {
	c, s := math.Cos(a), math.Sin(a)
	return [3][3]float64{{c, 0, s}, {0, 1, 0}, {-s, 0, c}}
}

func rotZ(a float64) [3][3]float64 {
	c, s := math.Cos(a), math.Sin(a)
	return [3][3]float64{{c, -s, 0}, {s, c, 0}, {0, 0, 1}}
}
