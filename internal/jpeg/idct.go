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
		// Even part.
		z2 := int(in[16+c] * q[16+c])
		z3 := int(in[48+c] * q[48+c])
		z1 := (z2 + z3) * fix0541196100
		tmp2 := z1 - z3*fix1847759065
		tmp3 := z1 + z2*fix0765366865
		z2 = int(in[c] * q[c])
		z3 = int(in[32+c] * q[32+c])
		tmp0 := (z2 + z3) << constBits
		tmp1 := (z2 - z3) << constBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		// Odd part.
		tmp0 = int(in[56+c] * q[56+c])
		tmp1 = int(in[40+c] * q[40+c])
		tmp2 = int(in[24+c] * q[24+c])
		tmp3 = int(in[8+c] * q[8+c])
		z1 = tmp0 + tmp3
		z2 = tmp1 + tmp2
		z3 = tmp0 + tmp2
		z4 := tmp1 + tmp3
		z5 := (z3 + z4) * fix1175875602
		tmp0 *= fix0298631336
		tmp1 *= fix2053119869
		tmp2 *= fix3072711026
		tmp3 *= fix1501321110
		z1 *= -fix0899976223
		z2 *= -fix2562915447
		z3 = z3*-fix1961570560 + z5
		z4 = z4*-fix0390180644 + z5
		tmp0 += z1 + z3
		tmp1 += z2 + z4
		tmp2 += z2 + z3
		tmp3 += z1 + z4

		const sh, rnd = constBits - pass1Bits, 1 << (constBits - pass1Bits - 1)
		ws[c] = (tmp10 + tmp3 + rnd) >> sh
		ws[56+c] = (tmp10 - tmp3 + rnd) >> sh
		ws[8+c] = (tmp11 + tmp2 + rnd) >> sh
		ws[48+c] = (tmp11 - tmp2 + rnd) >> sh
		ws[16+c] = (tmp12 + tmp1 + rnd) >> sh
		ws[40+c] = (tmp12 - tmp1 + rnd) >> sh
		ws[24+c] = (tmp13 + tmp0 + rnd) >> sh
		ws[32+c] = (tmp13 - tmp0 + rnd) >> sh
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
		z2, z3 := w[2], w[6]
		z1 := (z2 + z3) * fix0541196100
		tmp2 := z1 - z3*fix1847759065
		tmp3 := z1 + z2*fix0765366865
		tmp0 := (w[0] + w[4]) << constBits
		tmp1 := (w[0] - w[4]) << constBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		tmp0, tmp1, tmp2, tmp3 = w[7], w[5], w[3], w[1]
		z1 = tmp0 + tmp3
		z2 = tmp1 + tmp2
		z3 = tmp0 + tmp2
		z4 := tmp1 + tmp3
		z5 := (z3 + z4) * fix1175875602
		tmp0 *= fix0298631336
		tmp1 *= fix2053119869
		tmp2 *= fix3072711026
		tmp3 *= fix1501321110
		z1 *= -fix0899976223
		z2 *= -fix2562915447
		z3 = z3*-fix1961570560 + z5
		z4 = z4*-fix0390180644 + z5
		tmp0 += z1 + z3
		tmp1 += z2 + z4
		tmp2 += z2 + z3
		tmp3 += z1 + z4

		const sh, rnd = constBits + pass1Bits + 3, 1 << (constBits + pass1Bits + 2)
		out[0] = clampSample((tmp10 + tmp3 + rnd) >> sh)
		out[7] = clampSample((tmp10 - tmp3 + rnd) >> sh)
		out[1] = clampSample((tmp11 + tmp2 + rnd) >> sh)
		out[6] = clampSample((tmp11 - tmp2 + rnd) >> sh)
		out[2] = clampSample((tmp12 + tmp1 + rnd) >> sh)
		out[5] = clampSample((tmp12 - tmp1 + rnd) >> sh)
		out[3] = clampSample((tmp13 + tmp0 + rnd) >> sh)
		out[4] = clampSample((tmp13 - tmp0 + rnd) >> sh)
	}
}
