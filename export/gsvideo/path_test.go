package gsvideo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func randRotation(r *rand.Rand) [3][3]float64 {
	q := [4]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

var testK = [3][3]float64{{0.9, 0, 0.5}, {0, 1.3, 0.48}, {0, 0, 1}}

// views is a camera moving along x and turning slowly, as a video's frames
// (plus a little noise).
func views(r *rand.Rand, n int) []Pose {
	out := make([]Pose, n)
	for i := range out {
		a := 0.08 * float64(i)
		out[i] = Pose{R: mul3(rotY(a), rotZ(0.02*r.NormFloat64())), C: [3]float64{0.3 * float64(i), 0.05 * r.NormFloat64(), 0.1 * math.Sin(float64(i))}, K: testK}
		out[i].K[0][0] += 0.01 * float64(i)
	}
	return out
}

func assertPoseEqual(t *testing.T, want, got Pose, tol float64, msg string) {
	t.Helper()
	for i := range 3 {
		assert.InDeltaSlice(t, want.R[i][:], got.R[i][:], tol, "%s: rotation row %d", msg, i)
		assert.InDeltaSlice(t, want.K[i][:], got.K[i][:], tol, "%s: intrinsics row %d", msg, i)
	}
	assert.InDeltaSlice(t, want.C[:], got.C[:], tol, "%s: centre", msg)
}

func assertRotation(t *testing.T, r [3][3]float64, msg string) {
	t.Helper()
	rrt := mul3(r, transpose(r))
	for i := range 3 {
		for j := range 3 {
			want := 0.0
			if i == j {
				want = 1
			}
			require.InDelta(t, want, rrt[i][j], 1e-9, "%s: R·Rᵀ", msg)
		}
	}
	require.InDelta(t, 1, dot3(r[0], cross3(r[1], r[2])), 1e-9, "%s: det", msg)
}

// interpolate_extrinsics starts and ends at its two poses, general or with
// parallel optical axes.
func TestInterpolateEndpoints(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for k := range 20 {
		a := Pose{R: randRotation(r), C: [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, K: testK}
		b := Pose{R: randRotation(r), C: [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, K: testK}
		if k%4 == 0 {
			b.R = mul3(a.R, rotZ(r.NormFloat64())) // the same optical axis, twisted
		}
		b.K[0][0] = 1.1
		ps := interpolate(a, b, []float64{0, 0.3, 1})
		assertPoseEqual(t, a, ps[0], 1e-9, "t = 0")
		assertPoseEqual(t, b, ps[2], 1e-9, "t = 1")
		assertRotation(t, ps[1].R, "t = 0.3")
		assert.InDelta(t, 0.9+0.3*0.2, ps[1].K[0][0], 1e-12, "intrinsics linear")
	}
}

// Two cameras on a circle of radius 2 about the origin, looking at it, 90°
// apart: the pivot is the origin, and the interpolated cameras stay on the
// circle looking at it, at the interpolated angle.
func TestInterpolateTurnsAboutThePivot(t *testing.T) {
	at := func(a float64) Pose {
		// Camera z towards the origin from (2 sin a, 0, −2 cos a), y down.
		c := [3]float64{2 * math.Sin(a), 0, -2 * math.Cos(a)}
		z := normalize(scale3(c, -1))
		y := [3]float64{0, 1, 0}
		return Pose{R: fromCols(cross3(y, z), y, z), C: c, K: testK}
	}
	ps := interpolate(at(0), at(math.Pi/2), []float64{0.25, 0.5})
	for i, want := range []float64{math.Pi / 8, math.Pi / 4} {
		assertPoseEqual(t, at(want), ps[i], 1e-9, "on the circle")
	}
}

func TestLerpAngleShortWay(t *testing.T) {
	deg := math.Pi / 180
	assert.InDelta(t, 0, lerpAngle(350*deg, 10*deg, 0.5), 1e-12, "through 0, not 180")
	assert.InDelta(t, 20*deg, lerpAngle(10*deg, 30*deg, 0.5), 1e-12)
	assert.InDelta(t, 350*deg, lerpAngle(10*deg, -30*deg, 0.5), 1e-12)
}

// The frame counts of upstream's paths.
func TestPathFrameCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		mode  Mode
		views int
		want  int
	}{
		{Original, 5, 5}, {Smooth, 5, 5},
		{Interpolate, 2, 48}, {Interpolate, 3, 47}, {Interpolate, 5, 45}, {Interpolate, 7, 43}, {Interpolate, 55, 379},
		{Interpolate, 56, 166}, {Interpolate, 121, 121},
		{InterpolateSmooth, 3, 47},
		{Extend, 2, 48 + 38 + 36}, {Extend, 7, 43 + 38 + 36}, {Extend, 55, 379 + 62 + 60},
		{Wander, 1, 122}, {DollyZoom, 3, 120}, {WobbleInter, 7, 30 + 29}, {WobbleInter, 4, 30},
	} {
		p, err := Path(views(r, tc.views), tc.mode, 504)
		require.NoError(t, err, tc.mode)
		assert.Len(t, p, tc.want, "%s of %d views", tc.mode, tc.views)
	}
	_, err := Path(views(r, 1), Interpolate, 504)
	assert.ErrorContains(t, err, "at least 2 views")
	_, err = Path(views(r, 3), WobbleInter, 504)
	assert.ErrorContains(t, err, "at least 4 views")
	_, err = Path(views(r, 3), "spiral", 504)
	assert.ErrorContains(t, err, "unknown camera path")
}

// Interpolate passes through every input camera (view i at frame
// i·(inter−1)); every path's rotations are rotations.
func TestPathCamerasAndRotations(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	vs := views(r, 5)
	p, err := Path(vs, Interpolate, 504)
	require.NoError(t, err)
	for i, v := range vs {
		assertPoseEqual(t, v, p[i*(interLen(5)-1)], 1e-9, "input view")
	}
	p, err = Path(vs, Original, 504)
	require.NoError(t, err)
	assert.Equal(t, vs, p)
	for _, m := range Modes() {
		p, err := Path(vs, m, 504)
		require.NoError(t, err, m)
		for i, q := range p {
			assertRotation(t, q.R, fmt.Sprintf("%s frame %d", m, i))
		}
	}
}

// The smoothing keeps a still camera still and a camera moving at constant
// speed along a line on its line (away from the ends, where the reflection
// pulls it back).
func TestStabilize(t *testing.T) {
	still := make([]Pose, 9)
	r := rand.New(rand.NewPCG(7, 7))
	p := Pose{R: randRotation(r), C: [3]float64{1, 2, 3}, K: testK}
	for i := range still {
		still[i] = p
	}
	for i, q := range stabilize(still, smoothKernel) {
		assertPoseEqual(t, p, q, 1e-12, fmt.Sprintf("still %d", i))
	}
	line := make([]Pose, 80)
	for i := range line {
		line[i] = Pose{R: p.R, C: [3]float64{0.1 * float64(i), -0.05 * float64(i), 1}, K: testK}
	}
	s := stabilize(line, smoothKernel)
	for i := 25; i < 55; i++ {
		assertPoseEqual(t, line[i], s[i], 1e-9, "the middle of a line")
	}
	assert.Greater(t, s[0].C[0], 0.5, "the first pose is pulled towards the next ones")
	k := gaussianKernel(51)
	var sum float64
	for _, v := range k {
		sum += v
	}
	assert.InDelta(t, 1, sum, 1e-12)
	assert.InDelta(t, math.Exp(-1/(2*64.0)), k[26]/k[25], 1e-12, "σ = 0.3·((51−1)/2 − 1) + 0.8 = 8")
}

// The wander starts and ends at its pose and moves the centre in the
// camera's image plane by the 24-pixel amplitude; the dolly zoom keeps
// focal·(focus + z) constant.
func TestWanderAndDollyZoom(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	p := Pose{R: randRotation(r), C: [3]float64{1, 0, 0}, K: testK}
	ws := wander(p, 504, 120, 24)
	require.Len(t, ws, 122)
	assert.Equal(t, p, ws[0])
	assert.Equal(t, p, ws[121])
	amp := 24 / (0.9 * 504)
	quarter := ws[1+30] // θ = 2π·30/119 ≈ π/2: x ≈ amp
	d := mulVec(transpose(p.R), sub3(quarter.C, p.C))
	th := 2 * math.Pi * 30 / 119
	assert.InDeltaSlice(t, []float64{-amp * math.Sin(th), -amp * math.Cos(th) / 3, -amp * math.Cos(th) / 3}, d[:], 1e-12)
	assert.Equal(t, p.R, quarter.R)

	ds := dollyZoom(p, 120, 2, 30)
	require.Len(t, ds, 120)
	for _, q := range ds {
		z := -dot3(col(p.R, 2), sub3(q.C, p.C))
		assert.InDelta(t, p.K[0][0]*30, q.K[0][0]*(30+z), 1e-12)
		assert.InDelta(t, p.K[1][1]*30, q.K[1][1]*(30+z), 1e-12)
	}
	assert.InDelta(t, 2, -dot3(col(p.R, 2), sub3(ds[60].C, p.C)), 1e-3, "fully back half-way")
}
