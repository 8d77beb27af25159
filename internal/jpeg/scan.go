// Copyright 2012 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// Forked from Go's image/jpeg (scan.go): planes sized per component for any integral sampling, the
// quantization table latched at a component's first scan (libjpeg's latch_quant_tables), coefficients
// kept as int16 like libjpeg's JCOEF, and libjpeg-turbo's inverse DCT.

package jpeg

import "fmt"

// scanComp is one component of a scan.
type scanComp struct {
	c      *component
	dc, ac *huffman
	pred   int32 // DC predictor
}

// processSOS decodes one scan (section B.2.3).
func (d *decoder) processSOS(seg []byte) error {
	if len(seg) < 1 {
		return FormatError("SOS has wrong length")
	}
	n := int(seg[0])
	if n < 1 || n > d.nComp || len(seg) != 4+2*n {
		return FormatError("SOS has wrong length")
	}
	var sc [maxComponents]scanComp
	totalHV := 0
	for i := range n {
		id := seg[1+2*i]
		idx := -1
		for j := range d.nComp {
			if d.comp[j].id == id {
				idx = j
			}
		}
		if idx < 0 {
			return FormatError("unknown component selector")
		}
		for j := range i {
			if sc[j].c == &d.comp[idx] {
				return FormatError("repeated component selector")
			}
		}
		c := &d.comp[idx]
		sc[i].c = c
		totalHV += c.h * c.v
		td, ta := seg[2+2*i]>>4, seg[2+2*i]&0x0f
		if td > maxTh || ta > maxTh || (d.baseline && (td > 1 || ta > 1)) {
			return FormatError("bad Td/Ta value")
		}
		sc[i].dc, sc[i].ac = &d.huff[0][td], &d.huff[1][ta]
	}
	if n > 1 && totalHV > 10 {
		return FormatError("total sampling factors too large")
	}

	ss, se := int32(0), int32(blockSize-1)
	ah, al := uint(0), uint(0)
	if d.progressive {
		ss, se = int32(seg[1+2*n]), int32(seg[2+2*n])
		ah, al = uint(seg[3+2*n]>>4), uint(seg[3+2*n]&0x0f)
		if (ss == 0 && se != 0) || ss > se || se >= blockSize {
			return FormatError("bad spectral selection bounds")
		}
		if ss != 0 && n != 1 {
			return FormatError("progressive AC coefficients for more than one component")
		}
		if (ah != 0 && ah != al+1) || al > 13 {
			return FormatError("bad successive approximation values")
		}
	}
	// The Huffman tables this scan will use must exist.
	for i := range n {
		needDC := ss == 0 && ah == 0
		needAC := se > 0
		if (needDC && !sc[i].dc.defined) || (needAC && !sc[i].ac.defined) {
			return FormatError("uninitialized Huffman table")
		}
	}

	// Latch quantization tables and allocate planes on a component's first scan.
	for i := range n {
		c := sc[i].c
		if c.seen {
			continue
		}
		if !d.qSet[c.tq] {
			return FormatError(fmt.Sprintf("missing quantization table %d", c.tq))
		}
		c.seen = true
		c.q = d.quant[c.tq]
		rows := 8 * c.v * d.mcusY
		c.pix = make([]byte, c.stride*rows)
		if d.progressive {
			c.coef = make([]int16, c.stride*rows)
		}
	}

	d.bits.reset(d.data, d.pos)
	d.eobRun = 0
	var err error
	if n == 1 {
		err = d.scanNonInterleaved(&sc[0], ss, se, ah, al)
	} else {
		err = d.scanInterleaved(sc[:n], ss, se, ah, al)
	}
	if err != nil {
		return err
	}
	if d.bits.overrun() {
		return FormatError("truncated scan data")
	}
	// Continue at the marker that ended the scan (data left before it is skipped by the marker search).
	d.pos = d.bits.pos
	return nil
}

// restart handles a restart marker after every ri MCUs (section F.1.2.3): the remaining bits of the
// byte are dropped, the marker is read, and the predictors and the EOB run are reset.
func (d *decoder) restart(sc []scanComp, expected *uint8) error {
	b := &d.bits
	p := b.pos
	// Skip data left before the marker, then fill bytes.
	for p < len(d.data) && d.data[p] != 0xff {
		p++
	}
	for p < len(d.data) && d.data[p] == 0xff {
		p++
	}
	if p >= len(d.data) {
		return FormatError("truncated scan data")
	}
	if m := d.data[p]; m != *expected {
		return FormatError(fmt.Sprintf("bad RST marker 0x%02x (want 0x%02x)", m, *expected))
	}
	*expected = rst0Marker + (*expected-rst0Marker+1)&7
	b.reset(d.data, p+1)
	for i := range sc {
		sc[i].pred = 0
	}
	d.eobRun = 0
	return nil
}

// scanInterleaved decodes a scan of several components, MCU by MCU.
func (d *decoder) scanInterleaved(sc []scanComp, ss, se int32, ah, al uint) error {
	var blk [blockSize]int32
	expected := uint8(rst0Marker)
	for my := range d.mcusY {
		for mx := range d.mcusX {
			if mcu := my*d.mcusX + mx; d.ri > 0 && mcu > 0 && mcu%d.ri == 0 {
				if err := d.restart(sc, &expected); err != nil {
					return err
				}
			}
			for i := range sc {
				s := &sc[i]
				c := s.c
				for by := my * c.v; by < (my+1)*c.v; by++ {
					for bx := mx * c.h; bx < (mx+1)*c.h; bx++ {
						if err := d.block(s, &blk, bx, by, ss, se, ah, al); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

// scanNonInterleaved decodes a single-component scan: its blocks row by row, only those inside the
// component (section A.2.2), one block per MCU.
func (d *decoder) scanNonInterleaved(s *scanComp, ss, se int32, ah, al uint) error {
	var blk [blockSize]int32
	expected := uint8(rst0Marker)
	c := s.c
	sc := []scanComp{*s}
	s = &sc[0]
	for by := range c.bh {
		for bx := range c.bw {
			if mcu := by*c.bw + bx; d.ri > 0 && mcu > 0 && mcu%d.ri == 0 {
				if err := d.restart(sc, &expected); err != nil {
					return err
				}
			}
			if err := d.block(s, &blk, bx, by, ss, se, ah, al); err != nil {
				return err
			}
		}
	}
	return nil
}

// block decodes one block of a scan. Sequential blocks are transformed into the plane at once,
// progressive ones update the stored coefficients.
func (d *decoder) block(s *scanComp, blk *[blockSize]int32, bx, by int, ss, se int32, ah, al uint) error {
	c := s.c
	b := &d.bits
	if !d.progressive {
		*blk = [blockSize]int32{}
		last, err := d.decodeSequential(s, blk)
		if err != nil {
			return err
		}
		off := 8*by*c.stride + 8*bx
		if last == 0 {
			idctDC(blk[0]*c.q[0], c.pix[off:], c.stride)
		} else {
			idctIslow(blk, &c.q, c.pix[off:], c.stride)
		}
		return nil
	}
	// Blocks are stored row-major, 64 coefficients each: block (bx, by) at (by·stride/8 + bx)·64.
	coef := c.coef[(by*c.stride/8+bx)*blockSize:][:blockSize]
	switch {
	case ss == 0 && ah == 0:
		// DC first scan (section G.1.2.1).
		t, err := b.decodeHuffman(s.dc)
		if err != nil {
			return err
		}
		var diff int32
		if t != 0 {
			diff = b.receiveExtend(uint(t))
		}
		s.pred += diff
		coef[0] = int16(s.pred << al)
	case ss == 0:
		// DC refinement: one bit.
		if b.bits(1) != 0 {
			coef[0] |= int16(1 << al)
		}
	case ah == 0:
		return d.acFirst(s, coef, ss, se, al)
	default:
		return d.acRefine(s, coef, ss, se, al)
	}
	return nil
}

// decodeSequential decodes a sequential block into blk (natural order) and returns the zig-zag index of
// its last non-zero AC coefficient (0 when only DC is present).
func (d *decoder) decodeSequential(s *scanComp, blk *[blockSize]int32) (int, error) {
	b := &d.bits
	t, err := b.decodeHuffman(s.dc)
	if err != nil {
		return 0, err
	}
	if t != 0 {
		s.pred += b.receiveExtend(uint(t))
	}
	blk[0] = int32(int16(s.pred))
	h := s.ac
	last := 0
	for k := 1; k < blockSize; k++ {
		if b.n < 32 {
			b.fill()
		}
		look := b.acc >> (64 - lutBits)
		if e := h.ac[look]; e != 0 {
			k += int(e>>8) & 0xff
			b.consume(uint(e & 0xff))
			blk[unzig[k]] = e >> 16
			last = k
			continue
		}
		rs, err := b.decodeHuffman(h)
		if err != nil {
			return 0, err
		}
		r, sz := int(rs>>4), uint(rs&15)
		if sz != 0 {
			k += r
			blk[unzig[k]] = b.receiveExtend(sz)
			last = k
			continue
		}
		if r != 15 {
			break
		}
		k += 15
	}
	return min(last, 63), nil
}

// acFirst decodes the first scan of a spectral band (section G.1.2.2).
func (d *decoder) acFirst(s *scanComp, coef []int16, ss, se int32, al uint) error {
	if d.eobRun > 0 {
		d.eobRun--
		return nil
	}
	b := &d.bits
	for k := ss; k <= se; k++ {
		rs, err := b.decodeHuffman(s.ac)
		if err != nil {
			return err
		}
		r, sz := int32(rs>>4), uint(rs&15)
		if sz != 0 {
			k += r
			coef[unzig[k]] = int16(b.receiveExtend(sz) << al)
			continue
		}
		if r != 15 {
			d.eobRun = 1 << r
			if r != 0 {
				d.eobRun += b.bits(uint(r))
			}
			d.eobRun--
			break
		}
		k += 15
	}
	return nil
}

// acRefine decodes a successive-approximation refinement of a spectral band (section G.1.2.3).
func (d *decoder) acRefine(s *scanComp, coef []int16, ss, se int32, al uint) error {
	b := &d.bits
	p1 := int16(1) << al
	m1 := int16(-1) << al
	k := ss
	if d.eobRun == 0 {
		for ; k <= se; k++ {
			rs, err := b.decodeHuffman(s.ac)
			if err != nil {
				return err
			}
			r, sz := int32(rs>>4), rs&15
			var z int16
			if sz != 0 {
				if sz != 1 {
					return FormatError("bad refinement code")
				}
				z = m1
				if b.bits(1) != 0 {
					z = p1
				}
			} else if r != 15 {
				d.eobRun = 1 << r
				if r != 0 {
					d.eobRun += b.bits(uint(r))
				}
				break
			}
			// Advance over already-nonzero coefficients (refining them) and r zero ones.
			for ; k <= se; k++ {
				p := &coef[unzig[k]]
				if *p != 0 {
					if b.bits(1) != 0 && *p&p1 == 0 {
						if *p >= 0 {
							*p += p1
						} else {
							*p += m1
						}
					}
				} else {
					if r == 0 {
						break
					}
					r--
				}
			}
			if z != 0 && k <= se {
				coef[unzig[k]] = z
			}
		}
	}
	if d.eobRun > 0 {
		// Refine the remaining non-zero coefficients of the band.
		for ; k <= se; k++ {
			p := &coef[unzig[k]]
			if *p != 0 && b.bits(1) != 0 && *p&p1 == 0 {
				if *p >= 0 {
					*p += p1
				} else {
					*p += m1
				}
			}
		}
		d.eobRun--
	}
	return nil
}

// reconstructProgressive runs the inverse DCT over every block of a progressive component.
func (d *decoder) reconstructProgressive(c *component) {
	var blk [blockSize]int32
	bpr := c.stride / 8
	for by := range len(c.pix) / (8 * c.stride) {
		for bx := range bpr {
			coef := c.coef[(by*bpr+bx)*blockSize:][:blockSize]
			acZero := true
			for i := 1; i < blockSize; i++ {
				blk[i] = int32(coef[i])
				if coef[i] != 0 {
					acZero = false
				}
			}
			blk[0] = int32(coef[0])
			off := 8*by*c.stride + 8*bx
			if acZero {
				idctDC(blk[0]*c.q[0], c.pix[off:], c.stride)
			} else {
				idctIslow(&blk, &c.q, c.pix[off:], c.stride)
			}
		}
	}
	c.coef = nil
}
