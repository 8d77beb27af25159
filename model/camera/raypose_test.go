package camera

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// torch.manual_seed(0); torch.randperm(10), torch.randperm(10), torch.randperm(1000)[:8];
// torch.manual_seed(67280421310721) (torch's default seed); torch.randperm(7).
func TestRandpermMatchesTorch(t *testing.T) {
	g := newMT19937(0)
	assert.Equal(t, []int{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, g.randperm(10))
	assert.Equal(t, []int{3, 9, 4, 2, 7, 8, 6, 0, 5, 1}, g.randperm(10))
	assert.Equal(t, []int{794, 643, 622, 324, 231, 484, 584, 78}, g.randperm(1000)[:8])
	assert.Equal(t, []int{4, 3, 0, 1, 2, 6, 5}, newMT19937(67280421310721).randperm(7))
}

func TestQL(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		var a Mat3
		for i := range a {
			for j := range a[i] {
				a[i][j] = r.NormFloat64()
			}
		}
		q, l := QL(a)
		qa := mul3(q, l)
		qtq := mul3(transpose3(q), q)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				assert.InDelta(t, a[i][j], qa[i][j], 1e-12, "Q·L = A")
				assert.InDelta(t, b2f(i == j), qtq[i][j], 1e-12, "QᵀQ = I")
				if j > i {
					assert.Zero(t, l[i][j], "L is lower triangular")
				}
			}
			assert.Greater(t, l[i][i], 0.0, "positive diagonal")
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestSmallestRightSingular(t *testing.T) {
	// A 12×9 matrix whose rows are orthogonal to a known unit vector n:
	// n spans the null space, so it is the smallest right singular vector.
	r := rand.New(rand.NewPCG(5, 6))
	var n [9]float64
	var nn float64
	for i := range n {
		n[i] = r.NormFloat64()
		nn += n[i] * n[i]
	}
	for i := range n {
		n[i] /= math.Sqrt(nn)
	}
	a := make([]float64, 12*9)
	for row := 0; row < 12; row++ {
		var v [9]float64
		var d float64
		for i := range v {
			v[i] = r.NormFloat64()
			d += v[i] * n[i]
		}
		for i := range v {
			a[row*9+i] = v[i] - d*n[i]
		}
	}
	got := smallestRightSingular(a, 12, 9)
	s := math.Copysign(1, got[0]*n[0])
	for i := range n {
		assert.InDelta(t, n[i], s*got[i], 1e-12)
	}
}

// synthRays is a camera's ray map on an h×w grid: directions R·(x/fx, y/fy, 1)
// scaled by random lengths, origins at the centre c; fx, fy in units of half
// the image, principal point at the centre (the cameras the package's solver
// recovers exactly).
func synthRays(h, w int, R Mat3, c [3]float64, fx, fy float64, r *rand.Rand, noise float64) RayMap {
	n := h * w
	m := RayMap{H: h, W: w, Ray: make([]float32, 6*n), Conf: make([]float32, n)}
	xs, ys := planeGrid(w), planeGrid(h)
	for i := 0; i < n; i++ {
		d := mulVec3(R, [3]float64{xs[i%w] / fx, ys[i/w] / fy, 1})
		l := 0.5 + r.Float64()
		for k := 0; k < 3; k++ {
			m.Ray[k*n+i] = float32(d[k]*l + noise*r.NormFloat64())
			m.Ray[(3+k)*n+i] = float32(c[k] + noise*r.NormFloat64())
		}
		m.Conf[i] = float32(1 + 4*r.Float64())
	}
	return m
}

func randomRotation(r *rand.Rand, maxAngle float64) Mat3 {
	n := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	l := math.Sqrt(n[0]*n[0] + n[1]*n[1] + n[2]*n[2])
	for i := range n {
		n[i] /= l
	}
	return rodrigues(n, (2*r.Float64()-1)*maxAngle)
}

// Rays synthesised from known cameras recover those cameras: exactly without
// noise (to the float32 rounding of the stored rays), closely with noise,
// outliers and masked rays, on maps below and above the 8000-inlier refit
// limit.
func TestSolveRaysRecoversCameras(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name       string
		h, w       int
		noise, tol float64
		outliers   float64
	}{
		{"exact 24x32", 24, 32, 0, 1e-7, 0},
		{"exact 96x128 (subsampled refit)", 96, 128, 0, 1e-7, 0},
		{"noisy with outliers 48x64", 48, 64, 1e-3, 2e-3, 0.15},
		{"noisy with outliers 96x128", 96, 128, 1e-3, 2e-3, 0.15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imgW, imgH := 14*tc.w/8, 14*tc.h/8
			var maps []RayMap
			var want []Pose
			for v := 0; v < 3; v++ {
				R := randomRotation(r, 1.2)
				c := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
				fx, fy := 0.6+r.Float64(), 0.6+r.Float64()
				m := synthRays(tc.h, tc.w, R, c, fx, fy, r, tc.noise)
				n := tc.h * tc.w
				for i := 0; i < n; i++ {
					if r.Float64() < tc.outliers {
						for k := 0; k < 3; k++ {
							m.Ray[k*n+i] = float32(r.NormFloat64())
						}
						m.Conf[i] = float32(1 + r.Float64())
					}
				}
				if tc.outliers > 0 {
					m.Ray[2*n+5] = 1e-5 // masked: |z| ≤ 1e-4
				}
				maps = append(maps, m)
				var p Pose
				for i := 0; i < 3; i++ {
					for k := 0; k < 3; k++ {
						p.Extrinsics[i][k] = R[k][i]
						p.Extrinsics[i][3] -= R[k][i] * c[k]
					}
				}
				p.Intrinsics = Mat3{{fx / 2 * float64(imgW), 0, float64(imgW) / 2}, {0, fy / 2 * float64(imgH), float64(imgH) / 2}, {0, 0, 1}}
				want = append(want, p)
			}
			fits, err := SolveRays(maps, imgW, imgH, 0)
			require.NoError(t, err)
			for v, f := range fits {
				for i := 0; i < 3; i++ {
					for j := 0; j < 4; j++ {
						assert.InDelta(t, want[v].Extrinsics[i][j], f.Pose.Extrinsics[i][j], tc.tol*10, "view %d extrinsics [%d][%d]", v, i, j)
					}
					for j := 0; j < 3; j++ {
						assert.InDelta(t, want[v].Intrinsics[i][j], f.Pose.Intrinsics[i][j], tc.tol*float64(imgW), "view %d intrinsics [%d][%d]", v, i, j)
					}
				}
				assert.LessOrEqual(t, f.RefitPoints, 8000)
				assert.GreaterOrEqual(t, f.Inliers, f.RefitPoints)
			}
		})
	}
}

func TestSolveRaysErrors(t *testing.T) {
	_, err := SolveRays(nil, 10, 10, 0)
	require.ErrorIs(t, err, ErrRayPose)
	_, err = SolveRays([]RayMap{{H: 2, W: 2, Ray: make([]float32, 24), Conf: make([]float32, 4)}}, 10, 10, 0)
	require.ErrorIs(t, err, ErrRayPose)
	_, err = SolveRays([]RayMap{{H: 4, W: 4, Ray: make([]float32, 10), Conf: make([]float32, 16)}}, 10, 10, 0)
	require.ErrorIs(t, err, ErrRayPose, "size mismatch")
	// Rays with no direction at all (every z masked): no inliers.
	m := RayMap{H: 8, W: 8, Ray: make([]float32, 6*64), Conf: make([]float32, 64)}
	for i := range m.Conf {
		m.Conf[i] = 2
	}
	_, err = SolveRays([]RayMap{m}, 56, 56, 0)
	require.ErrorIs(t, err, ErrRayPose)
}

// torch.argsort(x, descending=True) on the CPU, ties and NaN included
// (x from numpy's default_rng(5).integers(0, 7, 40), NaN at 3 and 17).
func TestArgsortDescMatchesTorch(t *testing.T) {
	nan := math.NaN()
	x := []float64{4, 5, 0, nan, 3, 3, 4, 2, 6, 0, 1, 2, 3, 2, 0, 0, 0, nan, 1, 6, 1, 4, 5, 1, 1, 3, 1, 6, 1, 6, 5, 5, 0, 2, 4, 3, 4, 4, 4, 0}
	want := []int{3, 17, 27, 29, 19, 8, 1, 30, 22, 31, 36, 34, 38, 37, 6, 0, 21, 12, 25, 35, 4, 5, 11, 7, 33, 13, 28, 20, 26, 24, 23, 18, 10, 32, 16, 15, 14, 9, 2, 39}
	assert.Equal(t, want, argsortDesc(x))
	// The heapsort fallback sorts too (forced by a zero depth limit).
	r := rand.New(rand.NewPCG(9, 9))
	v := make([]float64, 300)
	for i := range v {
		v[i] = float64(r.IntN(20))
	}
	s := &introSorter{v: v, idx: make([]int, len(v))}
	for i := range s.idx {
		s.idx[i] = i
	}
	s.introsortLoop(0, len(v), 0)
	s.finalInsertionSort(0, len(v))
	for i := 1; i < len(v); i++ {
		assert.GreaterOrEqual(t, v[s.idx[i-1]], v[s.idx[i]])
	}
}
