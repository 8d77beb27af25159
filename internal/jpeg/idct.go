package jpeg

// The accurate integer inverse DCT of libjpeg (jidctint.c, jpeg_idct_islow: the Loeffler–Ligtenberg–
// Moschytz algorithm with 13-bit fixed-point constants, two passes, PASS1_BITS = 2), libjpeg-turbo's
// default dct_method. Dequantization happens inside, as in the C code. The C version clamps its output
// through a wrapping 1024-entry table; libjpeg-turbo's x86-64 and Arm SIMD versions (what the reference
// wheels run) saturate instead, which is what clampSample does. The two agree for every output within
// ±384 of mid-grey.

const (
	constBits = 13
	pass1Bits = 2

	fix0298631336 = 2446  // FIX(0.298631336)
	fix0390180644 = 3196  // FIX(0.390180644)
	fix0541196100 = 4433  // FIX(0.541196100)
	fix0765366865 = 6270  // FIX(0.765366865)
	fix0899976223 = 7373  // FIX(0.899976223)
	fix1175875602 = 9633  // FIX(1.175875602)
	fix1501321110 = 12299 // FIX(1.501321110)
	fix1847759065 = 15137 // FIX(1.847759065)
	fix1961570560 = 16069 // FIX(1.961570560)
	fix2053119869 = 16819 // FIX(2.053119869)
	fix2562915447 = 20995 // FIX(2.562915447)
	fix3072711026 = 25172 // FIX(3.072711026)
)

// clampSample level-shifts an inverse-DCT output by +128 and saturates it to a sample.
func clampSample(x int) byte {
	return byte(min(max(x+128, 0), 255))
}

// idctDC writes the block whose only non-zero coefficient is the dequantized DC value dc: the
// all-zero-AC shortcuts of both passes of jpeg_idct_islow.
func idctDC(dc int32, dst []byte, stride int) {
	v := clampSample((int(dc)<<pass1Bits + 1<<(pass1Bits+2)) >> (pass1Bits + 3))
	for y := range 8 {
		row := dst[y*stride : y*stride+8]
		for x := range row {
			row[x] = v
		}
	}
}

// islow1D is one one-dimensional pass of jpeg_idct_islow over dequantized inputs x0..x7: the even part
// (rotator sqrt(2)·c(-6)) gives e10..e13, the odd part (its figure 8) o0..o3; the outputs are
// e10±o3, e11±o2, e12±o1, e13±o0 (before descaling), for positions 0/7, 1/6, 2/5, 3/4.
func islow1D(x0, x1, x2, x3, x4, x5, x6, x7 int) (e10, e11, e12, e13, o0, o1, o2, o3 int) {
	z1 := (x2 + x6) * fix0541196100
	t2 := z1 - x6*fix1847759065
	t3 := z1 + x2*fix0765366865
	t0 := (x0 + x4) << constBits
	t1 := (x0 - x4) << constBits
	e10, e13 = t0+t3, t0-t3
	e11, e12 = t1+t2, t1-t2

	z1 = x7 + x1
	z2 := x5 + x3
	z3 := x7 + x3
	z4 := x5 + x1
	z5 := (z3 + z4) * fix1175875602
	z1 *= -fix0899976223
	z2 *= -fix2562915447
	z3 = z3*-fix1961570560 + z5
	z4 = z4*-fix0390180644 + z5
	o0 = x7*fix0298631336 + z1 + z3
	o1 = x5*fix2053119869 + z2 + z4
	o2 = x3*fix3072711026 + z2 + z3
	o3 = x1*fix1501321110 + z1 + z4
	return
}

// idctIslow transforms the quantized coefficients in (natural order) with quantization table q into
// the 8×8 samples at dst (row stride stride).
func idctIslow(in *[blockSize]int32, q *[blockSize]int32, dst []byte, stride int) {
	var ws [blockSize]int

	// Pass 1: columns, results scaled up by sqrt(8)·2^PASS1_BITS.
	for c := range 8 {
		if in[8+c] == 0 && in[16+c] == 0 && in[24+c] == 0 && in[32+c] == 0 &&
			in[40+c] == 0 && in[48+c] == 0 && in[56+c] == 0 {
			dc := int(in[c]*q[c]) << pass1Bits
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			ws[32+c], ws[40+c], ws[48+c], ws[56+c] = dc, dc, dc, dc
			continue
		}
		e10, e11, e12, e13, o0, o1, o2, o3 := islow1D(
			int(in[c]*q[c]), int(in[8+c]*q[8+c]), int(in[16+c]*q[16+c]), int(in[24+c]*q[24+c]),
			int(in[32+c]*q[32+c]), int(in[40+c]*q[40+c]), int(in[48+c]*q[48+c]), int(in[56+c]*q[56+c]))
		const sh, rnd = constBits - pass1Bits, 1 << (constBits - pass1Bits - 1)
		ws[c] = (e10 + o3 + rnd) >> sh
		ws[56+c] = (e10 - o3 + rnd) >> sh
		ws[8+c] = (e11 + o2 + rnd) >> sh
		ws[48+c] = (e11 - o2 + rnd) >> sh
		ws[16+c] = (e12 + o1 + rnd) >> sh
		ws[40+c] = (e12 - o1 + rnd) >> sh
		ws[24+c] = (e13 + o0 + rnd) >> sh
		ws[32+c] = (e13 - o0 + rnd) >> sh
	}

	// Pass 2: rows, descaled by 8·2^PASS1_BITS.
	for r := range 8 {
		w := (*[8]int)(ws[8*r:])
		out := dst[r*stride : r*stride+8]
		if w[1] == 0 && w[2] == 0 && w[3] == 0 && w[4] == 0 && w[5] == 0 && w[6] == 0 && w[7] == 0 {
			v := clampSample((w[0] + 1<<(pass1Bits+2)) >> (pass1Bits + 3))
			for x := range out {
				out[x] = v
			}
			continue
		}
		e10, e11, e12, e13, o0, o1, o2, o3 := islow1D(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
		const sh, rnd = constBits + pass1Bits + 3, 1 << (constBits + pass1Bits + 2)
		out[0] = clampSample((e10 + o3 + rnd) >> sh)
		out[7] = clampSample((e10 - o3 + rnd) >> sh)
		out[1] = clampSample((e11 + o2 + rnd) >> sh)
		out[6] = clampSample((e11 - o2 + rnd) >> sh)
		out[2] = clampSample((e12 + o1 + rnd) >> sh)
		out[5] = clampSample((e12 - o1 + rnd) >> sh)
		out[3] = clampSample((e13 + o0 + rnd) >> sh)
		out[4] = clampSample((e13 - o0 + rnd) >> sh)
	}
}
