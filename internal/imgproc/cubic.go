package imgproc

import (
	"math"

	"github.com/da3-go/da3-go/internal/par"
)

// This file reproduces OpenCV's own INTER_CUBIC code (modules/imgproc/src/resize.cpp: resize(),
// interpolateCubic, HResizeCubic, VResizeCubic and the SSE2 baseline vector ops) as compiled into the
// x86-64 opencv-python wheels.
//
// Common to all depths:
//   scale = 1/(dst/src) in double; src coordinate fx = (float)((d+0.5)*scale - 0.5); sx = floor(fx);
//   fx -= sx; taps sx-1 … sx+2 clamped to the image (replicated border); Keys kernel a = -0.75 evaluated in
//   float32 by interpolateCubic, the last coefficient being 1 - c0 - c1 - c2.
// 8 bit: coefficients become int16 round(c·2048) (no renormalisation: their sum can be 2047 or 2049); the
//   horizontal pass accumulates in int32; the vertical pass is FixedPtCast (v + 2^21) >> 22, except that the
//   SSE vector op handles the first ⌊width·cn/8⌋·8 values of every row in float32:
//   round_half_even(S0·b0 + (S1·b1 + (S2·b2 + S3·b3))) with b = beta/2^22.
// float32: float accumulation; the vertical SSE op (4 lanes) sums S0b0 + (S1b1 + (S2b2 + S3b3)), the scalar
//   tail ((S0b0 + S1b1) + S2b2) + S3b3.
// float64: double accumulation with float32 coefficients, scalar left-to-right sums.
//
// Every product feeding a sum is wrapped in an explicit conversion: Go may otherwise fuse x*y+z into an FMA
// (arm64, GOAMD64=v3), which OpenCV's SSE2 baseline never does.

const (
	resizeCoefBits  = 11
	resizeCoefScale = 1 << resizeCoefBits
	cubicA          = float32(-0.75)
)

// cubicCoeffs is interpolateCubic(x, coeffs) in float32.
func cubicCoeffs(x float32) [4]float32 {
	const a = cubicA
	x1 := x + 1
	c0 := float32(a*x1) - 5*a // ((A*(x+1) - 5A)*(x+1) + 8A)*(x+1) - 4A
	c0 = float32(c0*x1) + 8*a
	c0 = float32(c0*x1) - 4*a
	c1 := float32((a+2)*x) - (a + 3) // ((A+2)*x - (A+3))*x*x + 1
	c1 = float32(c1 * x)
	c1 = float32(c1*x) + 1
	y := 1 - x
	c2 := float32((a+2)*y) - (a + 3) // ((A+2)*(1-x) - (A+3))*(1-x)*(1-x) + 1
	c2 = float32(c2 * y)
	c2 = float32(c2*y) + 1
	c3 := 1 - c0 - c1 - c2
	return [4]float32{c0, c1, c2, c3}
}

// cubicAxis returns, for each output index, floor of the source coordinate and the four float32
// coefficients, exactly as cv::resize builds xofs/alpha (or yofs/beta).
func cubicAxis(sin, sout int) ([]int, [][4]float32) {
	scale := 1 / (float64(sout) / float64(sin))
	ofs := make([]int, sout)
	coef := make([][4]float32, sout)
	for d := 0; d < sout; d++ {
		f := float32(float64((float64(d)+0.5)*scale) - 0.5)
		s := int(math.Floor(float64(f)))
		f -= float32(s)
		ofs[d] = s
		coef[d] = cubicCoeffs(f)
	}
	return ofs, coef
}

// fixedCoeffs is saturate_cast<short>(c * INTER_RESIZE_COEF_SCALE) for the four coefficients.
func fixedCoeffs(c [4]float32) [4]int32 {
	var out [4]int32
	for k, v := range c {
		r := math.RoundToEven(float64(v * resizeCoefScale))
		out[k] = int32(max(math.MinInt16, min(math.MaxInt16, r)))
	}
	return out
}

func clampIndex(i, n int) int {
	return max(0, min(n-1, i))
}

func satU8(v int32) uint8 {
	return uint8(max(0, min(255, v)))
}

// ResizeCubicU8 is cv2.resize(src, (w, h), interpolation=cv2.INTER_CUBIC) on a uint8 RGB image with
// OpenCV's own 11-bit fixed-point code (IPP disabled, or a source side < 4). A same-size resize copies.
func ResizeCubicU8(src *RGB8, w, h int) *RGB8 {
	src.check("ResizeCubicU8")
	mustPositive("ResizeCubicU8", w, h)
	if w == src.W && h == src.H {
		return src.Clone()
	}
	out := &RGB8{W: w, H: h, Pix: resizeCubicU8(src.Pix, src.W, src.H, 3, w, h)}
	return out
}

// resizeCubicU8 works on an interleaved image with cn channels.
func resizeCubicU8(src []uint8, sw, sh, cn, dw, dh int) []uint8 {
	xofs, xcoef := cubicAxis(sw, dw)
	yofs, ycoef := cubicAxis(sh, dh)
	width := dw * cn

	// Horizontal pass over every source row (OpenCV computes the same rows lazily).
	rows := make([]int32, sh*width)
	xa := make([][4]int32, dw)
	for d := range dw {
		xa[d] = fixedCoeffs(xcoef[d])
	}
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
				r[d*cn+c] = int32(s[i[0]+c])*a[0] + int32(s[i[1]+c])*a[1] + int32(s[i[2]+c])*a[2] + int32(s[i[3]+c])*a[3]
			}
		}
	}

	dst := make([]uint8, dh*width)
	simdEnd := width / 8 * 8 // VResizeCubicVec_32s8u: 8 values per SSE iteration
	const fscale = float32(1.0 / (resizeCoefScale * resizeCoefScale))
	for dy := range dh {
		b := fixedCoeffs(ycoef[dy])
		var S [4][]int32
		for k := range 4 {
			y := clampIndex(yofs[dy]-1+k, sh)
			S[k] = rows[y*width : (y+1)*width]
		}
		var bf [4]float32
		for k := range 4 {
			bf[k] = float32(b[k]) * fscale
		}
		o := dst[dy*width : (dy+1)*width]
		for x := 0; x < simdEnd; x++ {
			t := float32(float32(S[3][x]) * bf[3])
			t = float32(float32(float32(S[2][x])*bf[2]) + t)
			t = float32(float32(float32(S[1][x])*bf[1]) + t)
			t = float32(float32(float32(S[0][x])*bf[0]) + t)
			o[x] = satU8(int32(math.RoundToEven(float64(t))))
		}
		for x := simdEnd; x < width; x++ {
			v := S[0][x]*b[0] + S[1][x]*b[1] + S[2][x]*b[2] + S[3][x]*b[3]
			o[x] = satU8((v + 1<<(2*resizeCoefBits-1)) >> (2 * resizeCoefBits))
		}
	}
	return dst
}

// ResizeCubicF32 is cv2.resize on a float32 image (CV_32FC<C>, C = src.C) with INTER_CUBIC, OpenCV's own code
// (IPP disabled). The default x86-64 wheels use IPP here, which differs by a few float32 ulps.
func ResizeCubicF32(src *Planar32, w, h int) *Planar32 {
	checkPlanar("ResizeCubicF32", src.W, src.H, src.C, len(src.Pix))
	mustPositive("ResizeCubicF32", w, h)
	if w == src.W && h == src.H {
		return &Planar32{W: w, H: h, C: src.C, Pix: append([]float32(nil), src.Pix...)}
	}
	sw, sh, cn := src.W, src.H, src.C
	xofs, xa := cubicAxis(sw, w)
	yofs, yb := cubicAxis(sh, h)
	out := &Planar32{W: w, H: h, C: cn, Pix: make([]float32, w*h*cn)}
	rows := make([]float32, sh*w)
	simdEnd := w * cn / 4 * 4 // VResizeCubicVec_32f: 4 lanes, over the interleaved row
	for c := range cn {
		plane := src.Pix[c*sw*sh : (c+1)*sw*sh]
		for y := range sh {
			s := plane[y*sw : (y+1)*sw]
			r := rows[y*w : (y+1)*w]
			for d := range w {
				a := xa[d]
				v := float32(s[clampIndex(xofs[d]-1, sw)] * a[0])
				v = float32(v + float32(s[clampIndex(xofs[d], sw)]*a[1]))
				v = float32(v + float32(s[clampIndex(xofs[d]+1, sw)]*a[2]))
				v = float32(v + float32(s[clampIndex(xofs[d]+2, sw)]*a[3]))
				r[d] = v
			}
		}
		o := out.Pix[c*w*h : (c+1)*w*h]
		for dy := range h {
			b := yb[dy]
			var S [4][]float32
			for k := range 4 {
				y := clampIndex(yofs[dy]-1+k, sh)
				S[k] = rows[y*w : (y+1)*w]
			}
			for x := range w {
				p0 := float32(S[0][x] * b[0])
				p1 := float32(S[1][x] * b[1])
				p2 := float32(S[2][x] * b[2])
				p3 := float32(S[3][x] * b[3])
				if x*cn+c < simdEnd {
					o[dy*w+x] = p0 + float32(p1+float32(p2+p3))
				} else {
					o[dy*w+x] = float32(float32(p0+p1)+p2) + p3
				}
			}
		}
	}
	return out
}

// ResizeCubicF64 is cv2.resize on a float64 image (CV_64FC<C>) with INTER_CUBIC: double accumulation with
// float32 coefficients. IPP is never used for this depth, so it is bit-exact with every x86-64 build. This is
// the resize of Depth Anything V2's preprocessing (image/255.0 is float64).
func ResizeCubicF64(src *Planar64, w, h int) *Planar64 {
	checkPlanar("ResizeCubicF64", src.W, src.H, src.C, len(src.Pix))
	mustPositive("ResizeCubicF64", w, h)
	if w == src.W && h == src.H {
		return &Planar64{W: w, H: h, C: src.C, Pix: append([]float64(nil), src.Pix...)}
	}
	sw, sh, cn := src.W, src.H, src.C
	xofs, xa := cubicAxis(sw, w)
	yofs, yb := cubicAxis(sh, h)
	out := &Planar64{W: w, H: h, C: cn, Pix: make([]float64, w*h*cn)}
	par.For(cn, cn, func(c int) {
		rows := make([]float64, sh*w)
		plane := src.Pix[c*sw*sh : (c+1)*sw*sh]
		for y := range sh {
			s := plane[y*sw : (y+1)*sw]
			r := rows[y*w : (y+1)*w]
			for d := range w {
				a := xa[d]
				v := float64(s[clampIndex(xofs[d]-1, sw)] * float64(a[0]))
				v = float64(v + float64(s[clampIndex(xofs[d], sw)]*float64(a[1])))
				v = float64(v + float64(s[clampIndex(xofs[d]+1, sw)]*float64(a[2])))
				v = float64(v + float64(s[clampIndex(xofs[d]+2, sw)]*float64(a[3])))
				r[d] = v
			}
		}
		o := out.Pix[c*w*h : (c+1)*w*h]
		for dy := range h {
			b := yb[dy]
			var S [4][]float64
			for k := range 4 {
				y := clampIndex(yofs[dy]-1+k, sh)
				S[k] = rows[y*w : (y+1)*w]
			}
			for x := range w {
				v := float64(S[0][x] * float64(b[0]))
				v = float64(v + float64(S[1][x]*float64(b[1])))
				v = float64(v + float64(S[2][x]*float64(b[2])))
				o[dy*w+x] = float64(v + float64(S[3][x]*float64(b[3])))
			}
		}
	})
	return out
}
