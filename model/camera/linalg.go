package camera

import "math"

// Mat3 is a 3×3 matrix, row-major.
type Mat3 = [3][3]float64

func mul3(a, b Mat3) Mat3 {
	var c Mat3
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j] + a[i][2]*b[2][j]
		}
	}
	return c
}

func transpose3(a Mat3) Mat3 {
	var t Mat3
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			t[i][j] = a[j][i]
		}
	}
	return t
}

func det3(a Mat3) float64 {
	return a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) -
		a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) +
		a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
}

func mulVec3(a Mat3, v [3]float64) [3]float64 {
	return [3]float64{
		a[0][0]*v[0] + a[0][1]*v[1] + a[0][2]*v[2],
		a[1][0]*v[0] + a[1][1]*v[1] + a[1][2]*v[2],
		a[2][0]*v[0] + a[2][1]*v[1] + a[2][2]*v[2],
	}
}

// inv3 inverts a 3×3 matrix by its adjugate (callers pass well-conditioned
// matrices: intrinsics).
func inv3(a Mat3) Mat3 {
	d := det3(a)
	var r Mat3
	r[0][0] = (a[1][1]*a[2][2] - a[1][2]*a[2][1]) / d
	r[0][1] = (a[0][2]*a[2][1] - a[0][1]*a[2][2]) / d
	r[0][2] = (a[0][1]*a[1][2] - a[0][2]*a[1][1]) / d
	r[1][0] = (a[1][2]*a[2][0] - a[1][0]*a[2][2]) / d
	r[1][1] = (a[0][0]*a[2][2] - a[0][2]*a[2][0]) / d
	r[1][2] = (a[0][2]*a[1][0] - a[0][0]*a[1][2]) / d
	r[2][0] = (a[1][0]*a[2][1] - a[1][1]*a[2][0]) / d
	r[2][1] = (a[0][1]*a[2][0] - a[0][0]*a[2][1]) / d
	r[2][2] = (a[0][0]*a[1][1] - a[0][1]*a[1][0]) / d
	return r
}

// householderR reduces the m×n matrix a (row-major, m ≥ n, overwritten) to
// its n×n upper-triangular factor R of a = Q·R by Householder reflections.
func householderR(a []float64, m, n int) []float64 {
	for k := 0; k < n; k++ {
		var norm float64
		for i := k; i < m; i++ {
			norm = math.Hypot(norm, a[i*n+k])
		}
		if norm == 0 {
			continue
		}
		if a[k*n+k] > 0 {
			norm = -norm
		}
		// v = x − norm·e_k, stored in place; beta = 1/(norm·(norm − x_k)).
		a[k*n+k] -= norm
		beta := -1 / (norm * a[k*n+k])
		for j := k + 1; j < n; j++ {
			var s float64
			for i := k; i < m; i++ {
				s += a[i*n+k] * a[i*n+j]
			}
			s *= beta
			for i := k; i < m; i++ {
				a[i*n+j] -= s * a[i*n+k]
			}
		}
		a[k*n+k] = norm
		for i := k + 1; i < m; i++ {
			a[i*n+k] = 0
		}
	}
	r := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(r[i*n+i:(i+1)*n], a[i*n+i:(i+1)*n])
	}
	return r
}

// jacobiSVD returns the singular values and the right singular vectors
// (columns of v, n×n row-major) of the n×n matrix a by one-sided Jacobi
// rotations (Hestenes), accurate to rounding for every singular value.
func jacobiSVD(a []float64, n int) (sv []float64, v []float64) {
	u := append([]float64(nil), a...)
	v = make([]float64, n*n)
	for i := 0; i < n; i++ {
		v[i*n+i] = 1
	}
	for sweep := 0; sweep < 60; sweep++ {
		rotated := false
		for p := 0; p < n-1; p++ {
			for q := p + 1; q < n; q++ {
				var alpha, beta, gamma float64
				for i := 0; i < n; i++ {
					up, uq := u[i*n+p], u[i*n+q]
					alpha += up * up
					beta += uq * uq
					gamma += up * uq
				}
				if gamma == 0 || math.Abs(gamma) <= 1e-15*math.Sqrt(alpha*beta) {
					continue
				}
				rotated = true
				zeta := (beta - alpha) / (2 * gamma)
				t := math.Copysign(1, zeta) / (math.Abs(zeta) + math.Sqrt(1+zeta*zeta))
				c := 1 / math.Sqrt(1+t*t)
				s := c * t
				for i := 0; i < n; i++ {
					up, uq := u[i*n+p], u[i*n+q]
					u[i*n+p], u[i*n+q] = c*up-s*uq, s*up+c*uq
					vp, vq := v[i*n+p], v[i*n+q]
					v[i*n+p], v[i*n+q] = c*vp-s*vq, s*vp+c*vq
				}
			}
		}
		if !rotated {
			break
		}
	}
	sv = make([]float64, n)
	for j := 0; j < n; j++ {
		var s float64
		for i := 0; i < n; i++ {
			s += u[i*n+j] * u[i*n+j]
		}
		sv[j] = math.Sqrt(s)
	}
	return sv, v
}

// smallestRightSingular returns the unit right singular vector of the m×n
// matrix a (m ≥ n) for its smallest singular value: the last row of Vᴴ that
// torch.linalg.svd returns, up to sign. a is overwritten.
func smallestRightSingular(a []float64, m, n int) []float64 {
	r := householderR(a, m, n)
	sv, v := jacobiSVD(r, n)
	k := 0
	for j := range sv {
		if sv[j] < sv[k] {
			k = j
		}
	}
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		out[i] = v[i*n+k]
	}
	return out
}

// qr3 is the QR decomposition of a 3×3 matrix (any sign convention; the
// callers fix signs).
func qr3(a Mat3) (q, r Mat3) {
	// Modified Gram–Schmidt on the columns, twice for orthogonality.
	var cols [3][3]float64
	for j := 0; j < 3; j++ {
		for i := 0; i < 3; i++ {
			cols[j][i] = a[i][j]
		}
	}
	var qc [3][3]float64
	for j := 0; j < 3; j++ {
		x := cols[j]
		for pass := 0; pass < 2; pass++ {
			for k := 0; k < j; k++ {
				d := qc[k][0]*x[0] + qc[k][1]*x[1] + qc[k][2]*x[2]
				r[k][j] += d
				for i := 0; i < 3; i++ {
					x[i] -= d * qc[k][i]
				}
			}
		}
		n := math.Sqrt(x[0]*x[0] + x[1]*x[1] + x[2]*x[2])
		r[j][j] = n
		for i := 0; i < 3; i++ {
			qc[j][i] = x[i] / n
		}
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			q[i][j] = qc[j][i]
		}
	}
	return q, r
}

// QL is depth_anything_3's ql_decomposition: with P the anti-diagonal
// permutation, Q̃·R̃ = qr(A·P), Q = Q̃·P and L = P·R̃·P (lower triangular),
// then column k of Q and row k of L are multiplied by sign(L_kk), so that L
// has a positive diagonal and A = Q·L.
func QL(a Mat3) (q, l Mat3) {
	p := Mat3{{0, 0, 1}, {0, 1, 0}, {1, 0, 0}}
	qt, rt := qr3(mul3(a, p))
	q = mul3(qt, p)
	l = mul3(mul3(p, rt), p)
	for k := 0; k < 3; k++ {
		s := sign(l[k][k])
		for i := 0; i < 3; i++ {
			q[i][k] *= s
			l[k][i] *= s
		}
	}
	return q, l
}

// sign is torch.sign: −1, 0 or 1.
func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
