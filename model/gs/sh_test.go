package gs

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// e3nn.o3.wigner_D(l, 0.7, −1.1, 2.3) with float64 angles. e3nn builds its
// generators in the default float32 (so3_generators), so its matrices carry
// float32 rounding: the bound is 1e-6 (a wrong generator sign or basis order
// is off by O(1)).
func TestWignerDMatchesE3nn(t *testing.T) {
	d1 := []float64{-0.727501816117, -0.574131606185, 0.375651442598, -0.66457815943, 0.453595846094, -0.593790096258, 0.17051972776, -0.681633117729, -0.711547127926}
	d2 := []float64{0.581708044002, 0.39798872701, 0.677832755753, 0.152465375395, -0.143240319915, 0.182333769468, 0.051563190669, -0.451067394606, 0.511307297556, -0.706539940038, 0.683501430579, -0.522126870663, -0.191375757565, -0.466512118086, -0.077143297983, 0.371625921703, 0.530345126884, -0.535526125332, 0.081991819159, 0.535833305597, 0.151954324614, -0.533913652067, 0.116910432619, 0.700687478154, 0.432683607351}
	assert.InDeltaSlice(t, d1, wignerD(1, 0.7, -1.1, 2.3), 1e-6)
	assert.InDeltaSlice(t, d2, wignerD(2, 0.7, -1.1, 2.3), 1e-6)
}

func randRot(r *rand.Rand) [3][3]float64 {
	q := [4]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	x, y, z, w := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - z*w), 2 * (x*z + y*w)},
		{2 * (x*y + z*w), 1 - 2*(x*x+z*z), 2 * (y*z - x*w)},
		{2 * (x*z - y*w), 2 * (y*z + x*w), 1 - 2*(x*x+y*y)},
	}
}

// The SH rotations are a representation: rotating by R1·R2 is rotating by
// R2, then by R1; each is orthogonal.
func TestSHRotationsRepresentation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		a, b := randRot(r), randRot(r)
		da, db, dab := shRotations(a, 2), shRotations(b, 2), shRotations(mat3Mul(a, b), 2)
		for l := 1; l <= 2; l++ {
			n := 2*l + 1
			assert.InDeltaSlice(t, dab[l], matMul(da[l], db[l], n), 1e-9, "band %d", l)
			var dt []float64
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					dt = append(dt, da[l][j*n+i])
				}
			}
			id := matMul(da[l], dt, n)
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					want := 0.0
					if i == j {
						want = 1
					}
					assert.InDelta(t, want, id[i*n+j], 1e-9)
				}
			}
		}
	}
	// The identity rotates nothing.
	id := shRotations([3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, 2)
	for l := 1; l <= 2; l++ {
		n := 2*l + 1
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				want := 0.0
				if i == j {
					want = 1
				}
				assert.InDelta(t, want, id[l][i*n+j], 1e-12)
			}
		}
	}
}
