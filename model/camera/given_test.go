package camera

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatToQuat(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for k := 0; k < 200; k++ {
		// Include rotations near 180° (w ≈ 0), where the other candidates win.
		maxAngle := math.Pi
		R := randomRotation(r, maxAngle)
		q := MatToQuat(R)
		assert.GreaterOrEqual(t, q[3], 0.0, "w ≥ 0")
		assert.InDelta(t, 1, q[0]*q[0]+q[1]*q[1]+q[2]*q[2]+q[3]*q[3], 1e-12, "unit quaternion")
		assertMat3(t, R, QuatToMat(q), 1e-12, "round trip")
	}
	assert.Equal(t, [4]float64{0, 0, 0, 1}, MatToQuat(Mat3{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}))
	// 180° about x: w = 0, x = 1.
	q := MatToQuat(Mat3{{1, 0, 0}, {0, -1, 0}, {0, 0, -1}})
	assert.InDeltaSlice(t, []float64{1, 0, 0, 0}, q[:], 1e-15)
}

func randomPose(r *rand.Rand) Extrinsics {
	R := randomRotation(r, math.Pi)
	var e Extrinsics
	for i := 0; i < 3; i++ {
		copy(e[i][:3], R[i][:])
		e[i][3] = 3 * r.NormFloat64()
	}
	return e
}

// EncodePose is the inverse of Decode (the camera decoder's output format).
func TestEncodePoseInvertsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 20 {
		w2c := randomPose(r)
		k := Mat3{{40 + 30*r.Float64(), 0, 21}, {0, 35 + 30*r.Float64(), 14}, {0, 0, 1}}
		enc := EncodePose(Invert(w2c), k, 42, 28)
		p := Decode(enc, 42, 28)
		for i := 0; i < 3; i++ {
			assert.InDeltaSlice(t, w2c[i][:], p.Extrinsics[i][:], 1e-5)
		}
		assert.InDelta(t, k[0][0], p.Intrinsics[0][0], 1e-3)
		assert.InDelta(t, k[1][1], p.Intrinsics[1][1], 1e-3)
	}
}

func TestNormalizeExtrinsics(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 2, 3, 4, 5} {
		var es []Extrinsics
		for range n {
			es = append(es, randomPose(r))
		}
		out := NormalizeExtrinsics(es)
		require.Len(t, out, n)
		// The first camera becomes the identity.
		for i := 0; i < 3; i++ {
			for j := 0; j < 4; j++ {
				assert.InDelta(t, b2f(i == j), out[0][i][j], 1e-12)
			}
		}
		// Relative poses are kept up to the common scale: rotations exactly.
		for v := 1; v < n; v++ {
			rel := Compose(es[v], Invert(es[0]))
			assertMat3(t, Rotation(rel), Rotation(out[v]), 1e-12, "rotation")
		}
		// The lower median of the centre distances (the first camera's 0
		// included) becomes 1, unless it is below 0.1: one and two views,
		// whose lower median is the first camera's 0, are divided by 0.1.
		var d []float64
		for _, e := range out {
			c := Invert(e)
			d = append(d, math.Sqrt(c[0][3]*c[0][3]+c[1][3]*c[1][3]+c[2][3]*c[2][3]))
		}
		sortFloat(d)
		switch n {
		case 1:
			assert.InDelta(t, 0, d[0], 1e-12)
		case 2:
			c := Invert(Compose(es[1], Invert(es[0])))
			assert.InDelta(t, math.Sqrt(c[0][3]*c[0][3]+c[1][3]*c[1][3]+c[2][3]*c[2][3])/0.1, d[1], 1e-9)
		default:
			assert.InDelta(t, 1, d[(n-1)/2], 1e-12, "lower median")
		}
	}
}

func sortFloat(v []float64) {
	for i := range v {
		for j := i + 1; j < len(v); j++ {
			if v[j] < v[i] {
				v[i], v[j] = v[j], v[i]
			}
		}
	}
}

// transformPoses maps world-to-camera poses through a similarity of the
// world: centres c ↦ s·R·c + t, orientations rotated by R.
func transformPoses(es []Extrinsics, sim Sim3) []Extrinsics {
	out := make([]Extrinsics, len(es))
	for i, e := range es {
		c2w := Invert(e)
		var n Extrinsics
		rot := mul3(sim.R, Rotation(c2w))
		ctr := apply(sim, [3]float64{c2w[0][3], c2w[1][3], c2w[2][3]})
		for a := 0; a < 3; a++ {
			copy(n[a][:3], rot[a][:])
			n[a][3] = ctr[a]
		}
		out[i] = Invert(n)
	}
	return out
}

func TestUmeyamaAndAlignScale(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	sim := Sim3{R: randomRotation(r, 2), T: [3]float64{1, -2, 0.5}, S: 0.37}
	var est []Extrinsics
	for range 6 {
		est = append(est, randomPose(r))
	}
	ref := transformPoses(est, sim)
	got, err := Umeyama(ref, est)
	require.NoError(t, err)
	assert.InDelta(t, sim.S, got.S, 1e-12)
	assertMat3(t, sim.R, got.R, 1e-12, "rotation")
	assert.InDeltaSlice(t, sim.T[:], got.T[:], 1e-12)
	// AlignScale(pred, given) maps the given centres onto the predicted.
	assert.InDelta(t, sim.S, AlignScale(ref, est), 1e-12)

	// Two views: evo refuses (rank 1); the scale is the distance ratio.
	_, err = Umeyama(ref[:2], est[:2])
	require.ErrorIs(t, err, ErrDegenerate)
	assert.InDelta(t, sim.S, AlignScale(ref[:2], est[:2]), 1e-12)
	// One view: no scale.
	assert.Equal(t, 1.0, AlignScale(ref[:1], est[:1]))

	// Ten views or more: RANSAC; one far outlier does not change the scale.
	est = est[:0]
	for range 12 {
		est = append(est, randomPose(r))
	}
	ref = transformPoses(est, sim)
	bad := Invert(ref[4])
	bad[0][3] += 50
	ref[4] = Invert(bad)
	assert.InDelta(t, sim.S, AlignScale(ref, est), 1e-9)
}
