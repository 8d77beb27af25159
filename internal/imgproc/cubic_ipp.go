package imgproc

import "math"

// ResizeCubicU8IPP emulates cv2.resize(src, (w, h), interpolation=cv2.INTER_CUBIC) on a uint8 RGB image as
// the default x86-64 opencv-python wheels (5.0.0 measured) execute it: through the Intel IPP HAL whenever
// both source sides are at least 4 pixels, through OpenCV's fixed-point code (ResizeCubicU8) otherwise.
//
// The IPP arithmetic is not documented; the model fitted to cv2's output is: Keys coefficients (a = -0.75)
// evaluated in double at the double source coordinate (d+0.5)·in/out − 0.5 and rounded to float32,
// replicated border, horizontal pass first into float32 with fused multiply-adds
// (fma(p3,c3, fma(p2,c2, fma(p1,c1, p0·c0)))), vertical pass fma(p0,c0, fma(p1,c1, fma(p2,c2, p3·c3))),
// round half to even, saturate. It reproduces cv2 except for values whose exact result is a .5 tie or lies
// within float32 rounding of one, which IPP's own operation order decides (measured: 2.4e-5 of the values
// of random-noise images differ by 1, about 4e-6 on smooth images; OpenCV's fixed-point code differs in 4%).
// That order is the CPU's: IPP's SSE4.2, AVX2 and AVX-512 code (OPENCV_IPP=sse42|avx2|avx512) disagree
// with one another on 1.0–1.6e-5 of the values of noise images, so no emulation equals cv2 on every CPU.
func ResizeCubicU8IPP(src *RGB8, w, h int) *RGB8 {
	src.check("ResizeCubicU8IPP")
	mustPositive("ResizeCubicU8IPP", w, h)
	if w == src.W && h == src.H {
		return src.Clone()
	}
	if src.W < 4 || src.H < 4 {
		return ResizeCubicU8(src, w, h)
	}
	return &RGB8{W: w, H: h, Pix: resizeCubicU8IPP(src.Pix, src.W, src.H, 3, w, h)}
}

// keysCubic is the Keys kernel with a = -0.75 in double precision.
func keysCubic(t float64) float64 {
	const a = -0.75
	t = math.Abs(t)
	t2 := t * t
	t3 := float64(t2 * t)
	switch {
	case t < 1:
		return float64(float64((a+2)*t3)-float64((a+3)*t2)) + 1
	case t < 2:
		return float64(float64(float64(a*t3)-float64(5*a*t2))+float64(8*a*t)) - 4*a
	}
	return 0
}

func ippAxis(sin, sout int) ([]int, [][4]float32) {
	scale := float64(sin) / float64(sout)
	ofs := make([]int, sout)
	coef := make([][4]float32, sout)
	for d := range sout {
		f := float64((float64(d)+0.5)*scale) - 0.5
		s := math.Floor(f)
		fx := f - s
		ofs[d] = int(s)
		coef[d] = [4]float32{
			float32(keysCubic(fx + 1)), float32(keysCubic(fx)),
			float32(keysCubic(1 - fx)), float32(keysCubic(2 - fx)),
		}
	}
	return ofs, coef
}

func resizeCubicU8IPP(src []uint8, sw, sh, cn, dw, dh int) []uint8 {
	xofs, xa := ippAxis(sw, dw)
	yofs, yb := ippAxis(sh, dh)
	width := dw * cn
	rows := make([]float32, sh*width)
	for y := range sh {
		s := src[y*sw*cn : (y+1)*sw*cn]
		r := rows[y*width : (y+1)*width]
		for d := range dw {
			a := xa[d]
			var i [4]int
			for j := range 4 {
				i[j] = clampIndex(xofs[d]-1+j, sw) * cn
			}
			for c := range cn {
				v := float32(float32(s[i[0]+c]) * a[0])
				v = fma32(float32(s[i[1]+c]), a[1], v)
				v = fma32(float32(s[i[2]+c]), a[2], v)
				r[d*cn+c] = fma32(float32(s[i[3]+c]), a[3], v)
			}
		}
	}
	dst := make([]uint8, dh*width)
	for dy := range dh {
		b := yb[dy]
		var S [4][]float32
		for k := range 4 {
			y := clampIndex(yofs[dy]-1+k, sh)
			S[k] = rows[y*width : (y+1)*width]
		}
		o := dst[dy*width : (dy+1)*width]
		for x := range width {
			v := float32(S[3][x] * b[3])
			v = fma32(S[2][x], b[2], v)
			v = fma32(S[1][x], b[1], v)
			v = fma32(S[0][x], b[0], v)
			o[x] = uint8(max(0, min(255, math.RoundToEven(float64(v)))))
		}
	}
	return dst
}

// fma32 returns a·b + c rounded once to float32 (IEEE 754 fusedMultiplyAdd in single precision).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 significant bits
	s := p + float64(c)
	// TwoSum: e is the exact rounding error of s, so that p + c = s + e.
	bv := s - p
	e := (p - (s - bv)) + (float64(c) - bv)
	if e != 0 && isFloat32Midpoint(s) {
		// s sits on a float32 tie but the exact sum does not: step towards the exact value so that the
		// final rounding goes the way a single rounding would.
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

// isFloat32Midpoint reports whether the float64 s lies exactly halfway between two adjacent float32 values.
func isFloat32Midpoint(s float64) bool {
	if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return false
	}
	a := math.Abs(s)
	if a < 0x1p-126 { // float32 subnormal range: fixed spacing 2^-149
		m := a * 0x1p150
		return m == math.Trunc(m) && math.Mod(m, 2) == 1
	}
	const low = 1<<29 - 1 // float64 mantissa bits below float32 precision
	return math.Float64bits(s)&low == 1<<28
}
