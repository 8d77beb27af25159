package gs

import (
	"math"
	"math/cmplx"
)

// so3Generators returns e3nn's real-basis generators X_x, X_y of the degree-l
// representation of SO(3) ((2l+1)² row-major each): X = Qᴴ·J·Q with J the
// complex su(2) generators and Q e3nn's change_basis_real_to_complex (with
// its (−i)^l factor).
func so3Generators(l int) (x, y []float64) {
	n := 2*l + 1
	jx, jz := su2Generators(l)
	q := realToComplex(l)
	qh := conjTranspose(q, n)
	toReal := func(a []complex128) []float64 {
		out := make([]float64, n*n)
		for i, v := range cmatMul(cmatMul(qh, a, n), q, n) {
			out[i] = real(v)
		}
		return out
	}
	// so3_generators stacks (x, z-labelled, −y-labelled) su(2) generators;
	// e3nn's wigner_D uses X[0] about x and X[1] (the diag(i·m) one) about y.
	return toReal(jx), toReal(jz)
}

// su2Generators returns e3nn's su2_generators(l) J_x (from the raising and
// lowering operators) and the diagonal one, diag(i·m), m = −l..l
// ((2l+1)² row-major each).
func su2Generators(l int) (jx, jz []complex128) {
	n := 2*l + 1
	// su2_generators(l): raising/lowering from m = −l..l.
	raising := make([]complex128, n*n)
	lowering := make([]complex128, n*n)
	for k := 0; k < n-1; k++ {
		m := float64(k - l)
		raising[(k+1)*n+k] = complex(-math.Sqrt(float64(l*(l+1))-m*(m+1)), 0)
	}
	for k := 1; k < n; k++ {
		m := float64(k - l)
		lowering[(k-1)*n+k] = complex(math.Sqrt(float64(l*(l+1))-m*(m-1)), 0)
	}
	jx = make([]complex128, n*n)
	for i := range jx {
		jx[i] = 0.5 * (raising[i] + lowering[i])
	}
	jz = make([]complex128, n*n)
	for k := 0; k < n; k++ {
		jz[k*n+k] = complex(0, float64(k-l))
	}
	return jx, jz
}

// realToComplex is e3nn's change_basis_real_to_complex(l), with its (−i)^l
// factor ((2l+1)² row-major).
func realToComplex(l int) []complex128 {
	n := 2*l + 1
	idx := func(i, j int) int { return i*n + j }
	q := make([]complex128, n*n)
	s := 1 / math.Sqrt2
	for m := -l; m < 0; m++ {
		q[idx(l+m, l-m)] = complex(s, 0)
		q[idx(l+m, l+m)] = complex(0, -s)
	}
	q[idx(l, l)] = 1
	for m := 1; m <= l; m++ {
		sg := 1.0
		if m%2 == 1 {
			sg = -1
		}
		q[idx(l+m, l+m)] = complex(sg*s, 0)
		q[idx(l+m, l-m)] = complex(0, sg*s)
	}
	f := cmplx.Pow(complex(0, -1), complex(float64(l), 0))
	for i := range q {
		q[i] *= f
	}
	return q
}

// conjTranspose is Aᴴ of the n×n complex matrix a (row-major).
func conjTranspose(a []complex128, n int) []complex128 {
	out := make([]complex128, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			out[i*n+j] = cmplx.Conj(a[j*n+i])
		}
	}
	return out
}

// cmatMul is the product of n×n complex matrices (row-major).
func cmatMul(a, b []complex128, n int) []complex128 {
	out := make([]complex128, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var v complex128
			for k := 0; k < n; k++ {
				v += a[i*n+k] * b[k*n+j]
			}
			out[i*n+j] = v
		}
	}
	return out
}

// expm is the matrix exponential of the n×n matrix a (row-major) by scaling
// and squaring of its Taylor series (a is a rotation generator times an
// angle: entries of order 2π at most).
func expm(a []float64, n int) []float64 {
	var norm float64
	for _, v := range a {
		norm = math.Max(norm, math.Abs(v))
	}
	sq := 0
	for norm*float64(n) > 0.5 {
		norm /= 2
		sq++
	}
	scale := math.Ldexp(1, -sq)
	x := make([]float64, n*n)
	for i, v := range a {
		x[i] = v * scale
	}
	out := make([]float64, n*n)
	term := make([]float64, n*n)
	for i := 0; i < n; i++ {
		out[i*n+i] = 1
		term[i*n+i] = 1
	}
	for k := 1; k <= 20; k++ {
		term = matMul(term, x, n)
		for i := range term {
			term[i] /= float64(k)
			out[i] += term[i]
		}
	}
	for ; sq > 0; sq-- {
		out = matMul(out, out, n)
	}
	return out
}

func matMul(a, b []float64, n int) []float64 {
	out := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for k := 0; k < n; k++ {
			aik := a[i*n+k]
			for j := 0; j < n; j++ {
				out[i*n+j] += aik * b[k*n+j]
			}
		}
	}
	return out
}

// wignerD is e3nn's wigner_D(l, α, β, γ) = exp(α·X_y)·exp(β·X_x)·exp(γ·X_y).
func wignerD(l int, alpha, beta, gamma float64) []float64 {
	x, y := so3Generators(l)
	n := 2*l + 1
	sc := func(m []float64, t float64) []float64 {
		out := make([]float64, len(m))
		for i, v := range m {
			out[i] = v * t
		}
		return out
	}
	return matMul(matMul(expm(sc(y, alpha), n), expm(sc(x, beta), n), n), expm(sc(y, gamma), n), n)
}

// matrixToAngles is e3nn's matrix_to_angles: α, β from R·(0, 1, 0), γ from
// the remaining rotation about y.
func matrixToAngles(r [3][3]float64) (alpha, beta, gamma float64) {
	x := [3]float64{r[0][1], r[1][1], r[2][1]}
	n := math.Sqrt(x[0]*x[0] + x[1]*x[1] + x[2]*x[2])
	for i := range x {
		x[i] = math.Max(-1, math.Min(1, x[i]/n))
	}
	beta = math.Acos(x[1])
	alpha = math.Atan2(x[0], x[2])
	// angles_to_matrix(α, β, 0) = Y(α)·X(β); its transpose times r.
	m := mat3Mul(matY(alpha), matX(beta))
	var rr [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 3; k++ {
				rr[i][j] += m[k][i] * r[k][j]
			}
		}
	}
	gamma = math.Atan2(rr[0][2], rr[0][0])
	return alpha, beta, gamma
}

func matX(a float64) [3][3]float64 {
	c, s := math.Cos(a), math.Sin(a)
	return [3][3]float64{{1, 0, 0}, {0, c, -s}, {0, s, c}}
}

func matY(a float64) [3][3]float64 {
	c, s := math.Cos(a), math.Sin(a)
	return [3][3]float64{{c, 0, s}, {0, 1, 0}, {-s, 0, c}}
}

func mat3Mul(a, b [3][3]float64) [3][3]float64 {
	var c [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j] + a[i][2]*b[2][j]
		}
	}
	return c
}

// projectSO3 is sh_helpers.project_to_so3_strict for a matrix that is a
// rotation up to rounding: the orthogonal polar factor U·Vᵀ (by Newton's
// iteration X ← (X + X⁻ᵀ)/2), scaled by det^(−1/3).
func projectSO3(m [3][3]float64) [3][3]float64 {
	x := m
	for it := 0; it < 8; it++ {
		inv := inv3(x)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				x[i][j] = (x[i][j] + inv[j][i]) / 2
			}
		}
	}
	d := math.Cbrt(1 / det3(x))
	for i := range x {
		for j := range x[i] {
			x[i][j] *= d
		}
	}
	return x
}

func det3(a [3][3]float64) float64 {
	return a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) -
		a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) +
		a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
}

func inv3(a [3][3]float64) [3][3]float64 {
	d := det3(a)
	return [3][3]float64{
		{(a[1][1]*a[2][2] - a[1][2]*a[2][1]) / d, (a[0][2]*a[2][1] - a[0][1]*a[2][2]) / d, (a[0][1]*a[1][2] - a[0][2]*a[1][1]) / d},
		{(a[1][2]*a[2][0] - a[1][0]*a[2][2]) / d, (a[0][0]*a[2][2] - a[0][2]*a[2][0]) / d, (a[0][2]*a[1][0] - a[0][0]*a[1][2]) / d},
		{(a[1][0]*a[2][1] - a[1][1]*a[2][0]) / d, (a[0][1]*a[2][0] - a[0][0]*a[2][1]) / d, (a[0][0]*a[1][1] - a[0][1]*a[1][0]) / d},
	}
}

// shRotations returns, for each band l = 1..degree, the (2l+1)² matrix that
// rotates band l of real SH coefficients by the camera-to-world rotation r,
// as sh_helpers.rotate_sh: R' = P⁻¹·r·P (P: yzx → xyz), projected to SO(3),
// angles (α, β, γ) = matrix_to_angles(R'), D_l(α, −β, γ). Band 0 is unchanged.
func shRotations(r [3][3]float64, degree int) [][]float64 {
	p := [3][3]float64{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}}
	var pt [3][3]float64 // P⁻¹ = Pᵀ
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			pt[i][j] = p[j][i]
		}
	}
	rp := projectSO3(mat3Mul(mat3Mul(pt, r), p))
	a, b, g := matrixToAngles(rp)
	out := make([][]float64, degree+1)
	for l := 1; l <= degree; l++ {
		out[l] = wignerD(l, a, -b, g)
	}
	return out
}
