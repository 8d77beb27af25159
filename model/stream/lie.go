package stream

import (
	"fmt"
	"math"
)

// Vec7 is an element of the Lie algebra sim(3): ω (rotation, radians, as an axis times an angle), υ
// (translation part) and σ (log scale), in that order. Its 4×4 matrix is [[ω^ + σ·I, υ], [0, 0]], and
// Exp maps it to the similarity exp of that matrix: scale e^σ, rotation exp(ω^), translation V·υ with
// V = Σₖ (ω^ + σ·I)ᵏ/(k+1)!.
type Vec7 [7]float64

// Exp is the exponential of sim(3).
func Exp(x Vec7) Sim3 {
	w := [3]float64{x[0], x[1], x[2]}
	v := [3]float64{x[3], x[4], x[5]}
	vm := expV(w, x[6])
	return Sim3{S: math.Exp(x[6]), R: expSO3(w), T: mulVec33(vm, v)}
}

// Log is the inverse of Exp, for rotations of less than π (at π the axis' sign is arbitrary).
func Log(a Sim3) Vec7 {
	w := logSO3(a.R)
	sigma := math.Log(a.S)
	vm := expV(w, sigma)
	v, ok := solve33(vm, a.T)
	if !ok {
		panic(fmt.Sprintf("stream: sim(3) log of %+v: V is singular", a)) // V is invertible for |ω| < 2π
	}
	return Vec7{w[0], w[1], w[2], v[0], v[1], v[2], sigma}
}

// expV is V(ω, σ) = Σₖ Aᵏ/(k+1)!, A = ω^ + σ·I, summed until the terms vanish.
func expV(w [3]float64, sigma float64) [3][3]float64 {
	a := hat(w)
	for i := range 3 {
		a[i][i] += sigma
	}
	v := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	term := v
	for k := 1; k < 80; k++ {
		term = mul33(term, a)
		f := 1 / float64(k+1)
		big := 0.0
		for i := range 3 {
			for j := range 3 {
				term[i][j] *= f
				v[i][j] += term[i][j]
				big = max(big, math.Abs(term[i][j]))
			}
		}
		if big < 1e-18 {
			break
		}
	}
	return v
}

// expSO3 is Rodrigues' formula.
func expSO3(w [3]float64) [3][3]float64 {
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	k := hat(w)
	k2 := mul33(k, k)
	var a, b float64
	if th < 1e-6 {
		a, b = 1-th*th/6, 0.5-th*th/24
	} else {
		a, b = math.Sin(th)/th, (1-math.Cos(th))/(th*th)
	}
	r := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	for i := range 3 {
		for j := range 3 {
			r[i][j] += a*k[i][j] + b*k2[i][j]
		}
	}
	return r
}

// logSO3 is the axis times the angle of a rotation.
func logSO3(r [3][3]float64) [3]float64 {
	c := max(-1, min(1, (r[0][0]+r[1][1]+r[2][2]-1)/2))
	th := math.Acos(c)
	vee := [3]float64{r[2][1] - r[1][2], r[0][2] - r[2][0], r[1][0] - r[0][1]}
	switch {
	case th < 1e-6:
		return [3]float64{vee[0] / 2, vee[1] / 2, vee[2] / 2}
	case math.Pi-th < 1e-4:
		// R ≈ 2·n·nᵀ − I: the axis from the largest diagonal entry, its sign from vee.
		k := 0
		for i := 1; i < 3; i++ {
			if r[i][i] > r[k][k] {
				k = i
			}
		}
		var n [3]float64
		n[k] = math.Sqrt(max(0, (r[k][k]+1)/2))
		for i := range 3 {
			if i != k {
				n[i] = (r[i][k] + r[k][i]) / (4 * n[k])
			}
		}
		nn := math.Sqrt(n[0]*n[0] + n[1]*n[1] + n[2]*n[2])
		if n[0]*vee[0]+n[1]*vee[1]+n[2]*vee[2] < 0 {
			nn = -nn
		}
		return [3]float64{th * n[0] / nn, th * n[1] / nn, th * n[2] / nn}
	}
	f := th / (2 * math.Sin(th))
	return [3]float64{f * vee[0], f * vee[1], f * vee[2]}
}

// Adjoint is the 7×7 matrix of a's adjoint action on sim(3): a·Exp(x)·a⁻¹ = Exp(Adjoint(a)·x).
func Adjoint(a Sim3) [7][7]float64 {
	var m [7][7]float64
	tr := mul33(hat(a.T), a.R)
	for i := range 3 {
		for j := range 3 {
			m[i][j] = a.R[i][j]
			m[3+i][j] = tr[i][j]
			m[3+i][3+j] = a.S * a.R[i][j]
		}
		m[3+i][6] = -a.T[i]
	}
	m[6][6] = 1
	return m
}

// ad is the adjoint of sim(3) on itself: ad(x)·y = [x, y] (the matrices' commutator).
func ad(x Vec7) [7][7]float64 {
	var m [7][7]float64
	w, v := hat([3]float64{x[0], x[1], x[2]}), hat([3]float64{x[3], x[4], x[5]})
	for i := range 3 {
		for j := range 3 {
			m[i][j] = w[i][j]
			m[3+i][j] = v[i][j]
			m[3+i][3+j] = w[i][j]
		}
		m[3+i][3+i] += x[6]
		m[3+i][6] = -x[3+i]
	}
	return m
}

// rightJacobianInv is J_r(x)⁻¹, the right Jacobian of Exp inverted: Log(Exp(x)·Exp(δ)) = x + J_r(x)⁻¹·δ
// to first order in δ. J_r(x) = Σₖ (−ad x)ᵏ/(k+1)!, summed until the terms vanish, then inverted.
func rightJacobianInv(x Vec7) [7][7]float64 {
	a := ad(x)
	var j, term [7][7]float64
	for i := range 7 {
		j[i][i], term[i][i] = 1, 1
	}
	for k := 1; k < 80; k++ {
		term = mul77(term, a)
		f := -1 / float64(k+1)
		big := 0.0
		for r := range 7 {
			for c := range 7 {
				term[r][c] *= f
				j[r][c] += term[r][c]
				big = max(big, math.Abs(term[r][c]))
			}
		}
		if big < 1e-18 {
			break
		}
	}
	inv, ok := invert77(j)
	if !ok {
		panic("stream: singular sim(3) right Jacobian") // only for rotations of 2π
	}
	return inv
}

func hat(w [3]float64) [3][3]float64 {
	return [3][3]float64{{0, -w[2], w[1]}, {w[2], 0, -w[0]}, {-w[1], w[0], 0}}
}

func mulVec33(m [3][3]float64, v [3]float64) [3]float64 {
	return [3]float64{
		m[0][0]*v[0] + m[0][1]*v[1] + m[0][2]*v[2],
		m[1][0]*v[0] + m[1][1]*v[1] + m[1][2]*v[2],
		m[2][0]*v[0] + m[2][1]*v[1] + m[2][2]*v[2],
	}
}

// solve33 solves m·x = b by Cramer's rule.
func solve33(m [3][3]float64, b [3]float64) ([3]float64, bool) {
	d := det33(m)
	if d == 0 || math.IsNaN(d) {
		return [3]float64{}, false
	}
	var x [3]float64
	for k := range 3 {
		mk := m
		for i := range 3 {
			mk[i][k] = b[i]
		}
		x[k] = det33(mk) / d
	}
	return x, true
}

func mul77(a, b [7][7]float64) [7][7]float64 {
	var c [7][7]float64
	for i := range 7 {
		for k := range 7 {
			if a[i][k] == 0 {
				continue
			}
			for j := range 7 {
				c[i][j] += a[i][k] * b[k][j]
			}
		}
	}
	return c
}

// invert77 inverts a 7×7 matrix by Gauss–Jordan elimination with partial pivoting.
func invert77(m [7][7]float64) ([7][7]float64, bool) {
	var inv [7][7]float64
	for i := range 7 {
		inv[i][i] = 1
	}
	for c := range 7 {
		p := c
		for r := c + 1; r < 7; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if m[p][c] == 0 {
			return inv, false
		}
		m[c], m[p] = m[p], m[c]
		inv[c], inv[p] = inv[p], inv[c]
		f := 1 / m[c][c]
		for j := range 7 {
			m[c][j] *= f
			inv[c][j] *= f
		}
		for r := range 7 {
			if r == c || m[r][c] == 0 {
				continue
			}
			g := m[r][c]
			for j := range 7 {
				m[r][j] -= g * m[c][j]
				inv[r][j] -= g * inv[c][j]
			}
		}
	}
	return inv, true
}
