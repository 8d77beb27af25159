// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// Forked from Go's image/jpeg (huffman.go): a 64-bit bit buffer over the in-memory scan data, a 9-bit
// look-up table and, for AC tables, a table that also decodes the coefficient's extra bits.

package jpeg

import "encoding/binary"

const (
	lutBits       = 9
	maxCodeLength = 16
)

// huffman is a decoding table for one Huffman table (section C, libjpeg's d_derived_tbl).
type huffman struct {
	defined bool
	// lut maps the next lutBits bits to code length<<8 | symbol, 0 when the code is longer.
	lut [1 << lutBits]uint16
	// ac maps the next lutBits bits to a whole AC coefficient when its code and extra bits fit:
	// value<<16 | run<<8 | bits consumed, 0 when they do not (or for zero-size symbols).
	ac [1 << lutBits]int32
	// maxCode[l] is the largest code of length l (-1 if none); valOff[l] + code indexes vals.
	maxCode [maxCodeLength + 1]int32
	valOff  [maxCodeLength + 1]int32
	vals    [256]uint8
}

// processDHT reads Huffman tables (section B.2.4.2) and derives their decoding tables, rejecting
// tables libjpeg's jpeg_make_d_derived_tbl rejects.
func (d *decoder) processDHT(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return FormatError("DHT has wrong length")
		}
		tc, th := seg[0]>>4, seg[0]&0x0f
		if tc > 1 {
			return FormatError("bad Tc value")
		}
		if th > maxTh || (d.baseline && th > 1) {
			return FormatError("bad Th value")
		}
		var counts [maxCodeLength + 1]int
		total := 0
		for l := 1; l <= maxCodeLength; l++ {
			counts[l] = int(seg[l])
			total += counts[l]
		}
		seg = seg[17:]
		if total == 0 || total > 256 || len(seg) < total {
			return FormatError("bad Huffman table length")
		}
		h := &d.huff[tc][th]
		*h = huffman{defined: true}
		copy(h.vals[:], seg[:total])
		seg = seg[total:]
		if tc == 0 {
			for _, s := range h.vals[:total] {
				if s > 15 {
					return FormatError("bad DC Huffman symbol")
				}
			}
		}
		code, k := int32(0), 0
		for l := 1; l <= maxCodeLength; l++ {
			h.maxCode[l] = -1
			// Codes of each length must fit in that many bits without being all ones.
			if code+int32(counts[l]) >= 1<<l {
				return FormatError("bad Huffman table")
			}
			if counts[l] > 0 {
				h.valOff[l] = int32(k) - code
				for range counts[l] {
					if l <= lutBits {
						fill := 1 << (lutBits - l)
						base := int(code) << (lutBits - l)
						for j := range fill {
							h.lut[base+j] = uint16(l)<<8 | uint16(h.vals[k])
						}
					}
					code++
					k++
				}
				h.maxCode[l] = code - 1
			}
			code <<= 1
		}
		if tc == 1 {
			h.buildAC()
		}
	}
	return nil
}

// buildAC fills the combined AC look-up table.
func (h *huffman) buildAC() {
	for look := range 1 << lutBits {
		e := h.lut[look]
		if e == 0 {
			continue
		}
		l, rs := int(e>>8), int(e&0xff)
		r, s := rs>>4, rs&15
		if s == 0 || l+s > lutBits {
			continue
		}
		v := int32(look>>(lutBits-l-s)) & (1<<s - 1)
		if v < 1<<(s-1) {
			v += -1<<s + 1
		}
		h.ac[look] = v<<16 | int32(r)<<8 | int32(l+s)
	}
}

// bitReader reads entropy-coded data. acc holds n valid bits, the next one in bit 63. At a marker (or the
// end of the data) it feeds zero bits, as libjpeg's jpeg_fill_bit_buffer does, and counts them.
type bitReader struct {
	data  []byte
	pos   int
	acc   uint64
	n     uint
	stop  bool // a marker or the end of the data was reached; pos is at the marker's first 0xff
	eof   bool // the data ended without a marker
	zeros uint // zero bits fed after stop
}

func (b *bitReader) reset(data []byte, pos int) {
	*b = bitReader{data: data, pos: pos}
}

// fill tops acc up to at least 57 bits.
func (b *bitReader) fill() {
	// Fast path: eight bytes without 0xff.
	if !b.stop && b.pos+8 <= len(b.data) {
		x := binary.BigEndian.Uint64(b.data[b.pos:])
		y := ^x
		if (y-0x0101010101010101)&^y&0x8080808080808080 == 0 {
			k := (64 - b.n) >> 3
			b.acc |= (x &^ (1<<(64-8*k) - 1)) >> b.n
			b.pos += int(k)
			b.n += 8 * k
			return
		}
	}
	for b.n <= 56 {
		var c byte
		if !b.stop {
			if b.pos >= len(b.data) {
				b.stop, b.eof = true, true
			} else if c = b.data[b.pos]; c != 0xff {
				b.pos++
			} else {
				// 0xff: a stuffed zero (0xff 0x00, after any number of fill bytes 0xff) is a data byte,
				// anything else a marker.
				p := b.pos + 1
				for p < len(b.data) && b.data[p] == 0xff {
					p++
				}
				switch {
				case p < len(b.data) && b.data[p] == 0:
					b.pos = p + 1
				case p >= len(b.data):
					b.stop, b.eof = true, true
					c = 0
				default:
					b.stop = true
					c = 0
				}
			}
		}
		if b.stop {
			b.zeros += 8
		}
		b.acc |= uint64(c) << (56 - b.n)
		b.n += 8
	}
}

// overrun reports whether zero bits fed after the end of the file were consumed.
func (b *bitReader) overrun() bool {
	return b.eof && b.zeros > b.n
}

func (b *bitReader) consume(n uint) {
	b.acc <<= n
	b.n -= n
}

// bits returns the next n (1..16) bits.
func (b *bitReader) bits(n uint) int32 {
	if b.n < n {
		b.fill()
	}
	v := int32(b.acc >> (64 - n))
	b.consume(n)
	return v
}

// receiveExtend reads s (1..15) bits and sign-extends them (RECEIVE and EXTEND, section F.2.2.1).
// The caller has filled the buffer.
func (b *bitReader) receiveExtend(s uint) int32 {
	v := int32(b.acc >> (64 - s))
	b.consume(s)
	if v < 1<<(s-1) {
		v += -1<<s + 1
	}
	return v
}

var errBadCode = FormatError("bad Huffman code")

// decodeHuffman returns the next symbol. It fills the buffer first, so that afterwards at least 41 bits
// remain for extra bits.
func (b *bitReader) decodeHuffman(h *huffman) (uint8, error) {
	if b.n < 32 {
		b.fill()
	}
	if e := h.lut[b.acc>>(64-lutBits)]; e != 0 {
		b.consume(uint(e >> 8))
		return uint8(e), nil
	}
	for l := lutBits + 1; l <= maxCodeLength; l++ {
		code := int32(b.acc >> (64 - l))
		if code <= h.maxCode[l] {
			b.consume(uint(l))
			return h.vals[h.valOff[l]+code], nil
		}
	}
	return 0, errBadCode
}
