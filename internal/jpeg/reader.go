// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// Forked from Go's image/jpeg (reader.go) and changed for da3-go: the input is held in memory, the
// sample pipeline after the entropy decoder follows libjpeg-turbo (see package comment), and the Exif
// orientation is read.

// Package jpeg decodes baseline and progressive JPEG images into the pixels that libjpeg-turbo's default
// decompression produces, which is what both reference pipelines read: cv2.imread (Depth Anything V2)
// and PIL's Image.open(...).convert("RGB") (Depth Anything 3).
//
// Go's image/jpeg differs from libjpeg-turbo after the entropy decoder: another inverse DCT, chroma
// replicated instead of interpolated, and other YCbCr→RGB rounding, which together move RGB values by up
// to tens of levels on real photos. This package keeps image/jpeg's marker and entropy decoding and
// implements libjpeg-turbo's default sample pipeline instead:
//   - the accurate integer inverse DCT (jidctint.c, JDCT_ISLOW, the default dct_method), with the
//     output clamped to [0, 255] as the x86-64 and Arm SIMD versions do;
//   - "fancy" upsampling (do_fancy_upsampling, the default): the triangle filters of jdsample.c for
//     2:1 horizontal (4:2:2), 2:1 both ways (4:2:0) and 2:1 vertical (4:4:0), box replication for other
//     integral ratios and for components at most two samples wide;
//   - YCbCr→RGB with jdcolor.c's fixed-point tables (16-bit fractions, rounding as libjpeg does);
//   - the colour space chosen as jdapimin.c's default_decompress_parms does (JFIF, then the Adobe
//     transform flag, then the component identifiers).
//
// Three-component images decode to *image.RGBA (opaque), greyscale ones to *image.Gray. Four-component
// (CMYK/YCCK) images, where the two reference pipelines already disagree with each other, are left to Go's
// image/jpeg. Arithmetic coding, lossless and 12-bit JPEGs are not supported.
//
// Known differences from libjpeg-turbo, none of which a well-formed file from a common encoder reaches:
// corrupt entropy data decodes to different garbage (libjpeg substitutes zero bits and warns; this
// package does the same for data cut short by a marker but returns an error for a bad Huffman code or a
// file that ends inside a scan); a progressive file whose scans leave some low-frequency coefficients
// unsent is not block-smoothed (libjpeg's do_block_smoothing); inverse-DCT inputs that overflow 16 bits
// (possible only with pathological quantization tables) are computed exactly here.
package jpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"io"
)

// A FormatError reports that the input is not a valid JPEG.
type FormatError string

func (e FormatError) Error() string { return "invalid JPEG format: " + string(e) }

// An UnsupportedError reports that the input uses a valid but unimplemented JPEG feature.
type UnsupportedError string

func (e UnsupportedError) Error() string { return "unsupported JPEG feature: " + string(e) }

// MaxFileSize bounds the input read by Decode and DecodeHeader.
const MaxFileSize = 1 << 30

const (
	blockSize     = 64
	maxComponents = 4
	maxTq         = 3
	maxTh         = 3
)

const (
	sof0Marker  = 0xc0 // Start Of Frame (Baseline Sequential).
	sof1Marker  = 0xc1 // Start Of Frame (Extended Sequential).
	sof2Marker  = 0xc2 // Start Of Frame (Progressive).
	dhtMarker   = 0xc4 // Define Huffman Table.
	rst0Marker  = 0xd0 // ReSTart (0).
	rst7Marker  = 0xd7 // ReSTart (7).
	soiMarker   = 0xd8 // Start Of Image.
	eoiMarker   = 0xd9 // End Of Image.
	sosMarker   = 0xda // Start Of Scan.
	dqtMarker   = 0xdb // Define Quantization Table.
	driMarker   = 0xdd // Define Restart Interval.
	comMarker   = 0xfe // COMment.
	app0Marker  = 0xe0
	app1Marker  = 0xe1
	app14Marker = 0xee
	app15Marker = 0xef
)

// unzig maps zig-zag order to natural order, followed by 16 entries of 63 so that a corrupt run length
// that overshoots the block lands on the last coefficient, as jpeg_natural_order does in libjpeg.
var unzig = [blockSize + 16]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63, 63,
}

// component is one frame component (section B.2.2) and its decoded samples.
type component struct {
	h, v   int   // sampling factors (1 and 1 for a single-component frame)
	id     uint8 // component identifier
	tq     uint8 // quantization table selector
	dw, dh int   // downsampled size in samples: ceil(width·h/hmax), ceil(height·v/vmax)
	bw, bh int   // blocks in a non-interleaved scan: ceil(dw/8), ceil(dh/8)
	stride int   // samples per plane row: 8·h per MCU column
	pix    []byte
	coef   []int16   // progressive: 64 coefficients per block, plane block order
	q      [64]int32 // quantization table latched at the component's first scan, natural order
	seen   bool      // a scan has included the component
}

// Header describes a JPEG file without decoding its pixels.
type Header struct {
	Width, Height int
	Components    int  // 1 (grey), 3 (YCbCr or RGB), 4 (CMYK or YCCK)
	Progressive   bool // SOF2
	// Sampling holds each component's (h, v) sampling factors.
	Sampling [][2]int
	// Orientation is the Exif orientation tag (1–8) of the first APP1 Exif segment, 0 when absent or
	// out of range.
	Orientation int
}

type decoder struct {
	data []byte
	pos  int // next unread byte of data

	width, height int
	nComp         int
	comp          [maxComponents]component
	hmax, vmax    int
	mcusX, mcusY  int

	baseline, progressive bool
	jfif                  bool
	adobe                 bool
	adobeTransform        uint8
	orientation           int

	ri     int // restart interval in MCUs
	quant  [maxTq + 1][64]int32
	qSet   [maxTq + 1]bool
	huff   [2][maxTh + 1]huffman
	eobRun int32
	bits   bitReader
}

// readAll reads r into memory, refusing inputs larger than MaxFileSize.
func readAll(r io.Reader) ([]byte, error) {
	if br, ok := r.(*bytes.Reader); ok && br.Size() <= MaxFileSize {
		b := make([]byte, br.Len())
		_, err := io.ReadFull(br, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, FormatError(fmt.Sprintf("file larger than %d bytes", MaxFileSize))
	}
	return b, nil
}

// Decode reads a JPEG image. See the package documentation for what it returns.
func Decode(r io.Reader) (image.Image, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, err
	}
	return DecodeBytes(data)
}

// DecodeBytes decodes a JPEG image held in memory; data is not retained.
func DecodeBytes(data []byte) (image.Image, error) {
	d := &decoder{data: data}
	if err := d.decode(false); err != nil {
		if errors.Is(err, errFourComponents) {
			return stdjpeg.Decode(bytes.NewReader(data))
		}
		return nil, err
	}
	return d.image()
}

// DecodeHeader reads the markers up to the first scan: size, components and Exif orientation.
func DecodeHeader(r io.Reader) (Header, error) {
	data, err := readAll(r)
	if err != nil {
		return Header{}, err
	}
	return DecodeHeaderBytes(data)
}

// DecodeHeaderBytes is DecodeHeader on a JPEG held in memory.
func DecodeHeaderBytes(data []byte) (Header, error) {
	d := &decoder{data: data}
	if err := d.decode(true); err != nil && !errors.Is(err, errFourComponents) {
		return Header{}, err
	}
	h := Header{Width: d.width, Height: d.height, Components: d.nComp, Progressive: d.progressive, Orientation: d.orientation}
	for _, c := range d.comp[:d.nComp] {
		h.Sampling = append(h.Sampling, [2]int{c.h, c.v})
	}
	return h, nil
}

// DecodeConfig returns the colour model and size of a JPEG image, like image/jpeg.DecodeConfig.
func DecodeConfig(r io.Reader) (image.Config, error) {
	h, err := DecodeHeader(r)
	if err != nil {
		return image.Config{}, err
	}
	cm := color.RGBAModel
	switch h.Components {
	case 1:
		cm = color.GrayModel
	case 4:
		cm = color.CMYKModel
	}
	return image.Config{ColorModel: cm, Width: h.Width, Height: h.Height}, nil
}

// errFourComponents defers CMYK/YCCK images to image/jpeg.
var errFourComponents = errors.New("four-component JPEG")

var errShortData = FormatError("unexpected end of file")

func (d *decoder) need(n int) error {
	if n > len(d.data)-d.pos {
		return errShortData
	}
	return nil
}

// decode processes the markers. With headerOnly it stops at the first SOS.
func (d *decoder) decode(headerOnly bool) error {
	if len(d.data) < 2 || d.data[0] != 0xff || d.data[1] != soiMarker {
		return FormatError("missing SOI marker")
	}
	d.pos = 2
	scans := 0
	for {
		// Find the next marker. Extraneous bytes before it are skipped, as libjpeg's next_marker does
		// (with a warning there).
		for d.pos < len(d.data) && d.data[d.pos] != 0xff {
			d.pos++
		}
		for d.pos < len(d.data) && d.data[d.pos] == 0xff {
			d.pos++ // fill bytes (section B.1.1.2)
		}
		if d.pos >= len(d.data) {
			if scans > 0 && !headerOnly && !d.progressive {
				// A sequential file that ends after its scans without an EOI marker: libjpeg's data source
				// inserts one (with a warning). A progressive file may have lost scans, and PIL refuses it.
				return d.finish()
			}
			return errShortData
		}
		marker := d.data[d.pos]
		d.pos++
		switch {
		case marker == 0:
			continue // a stuffed 0xff00 outside a scan: extraneous data
		case marker == eoiMarker:
			if headerOnly && d.nComp == 0 {
				return FormatError("missing SOF marker")
			}
			if headerOnly {
				return nil
			}
			if scans == 0 {
				return FormatError("missing SOS marker")
			}
			return d.finish()
		case rst0Marker <= marker && marker <= rst7Marker:
			continue // a stray restart marker carries no data
		case marker == soiMarker:
			return FormatError("repeated SOI marker")
		}
		if err := d.need(2); err != nil {
			return err
		}
		n := int(d.data[d.pos])<<8 | int(d.data[d.pos+1]) - 2
		d.pos += 2
		if n < 0 {
			return FormatError("short segment length")
		}
		if err := d.need(n); err != nil {
			return err
		}
		seg := d.data[d.pos : d.pos+n]
		d.pos += n
		var err error
		switch marker {
		case sof0Marker, sof1Marker, sof2Marker:
			d.baseline = marker == sof0Marker
			d.progressive = marker == sof2Marker
			err = d.processSOF(seg)
		case 0xc3, 0xc5, 0xc6, 0xc7, 0xcb, 0xcd, 0xce, 0xcf:
			err = UnsupportedError("lossless or hierarchical JPEG")
		case 0xc9, 0xca:
			err = UnsupportedError("arithmetic coding")
		case dhtMarker:
			err = d.processDHT(seg)
		case dqtMarker:
			err = d.processDQT(seg)
		case driMarker:
			err = d.processDRI(seg)
		case sosMarker:
			if d.nComp == 0 {
				return FormatError("missing SOF marker")
			}
			if d.nComp == 4 {
				return errFourComponents
			}
			if headerOnly {
				return nil
			}
			err = d.processSOS(seg)
			scans++
		case app0Marker:
			d.jfif = len(seg) >= 5 && string(seg[:5]) == "JFIF\x00"
		case app1Marker:
			if d.orientation == 0 {
				d.orientation = exifOrientation(seg)
			}
		case app14Marker:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				d.adobe = true
				d.adobeTransform = seg[11]
			}
		case 0xdc: // DNL
			err = UnsupportedError("DNL marker")
		default:
			if !(app0Marker <= marker && marker <= app15Marker || marker == comMarker) && marker < 0xc0 {
				err = FormatError(fmt.Sprintf("unknown marker 0x%02x", marker))
			}
			// Other markers (APPn, COM, JPG extensions) are skipped.
		}
		if err != nil {
			return err
		}
	}
}

// processSOF reads a frame header (section B.2.2).
func (d *decoder) processSOF(seg []byte) error {
	if d.nComp != 0 {
		return FormatError("multiple SOF markers")
	}
	if len(seg) < 6 {
		return FormatError("SOF has wrong length")
	}
	if seg[0] != 8 {
		return UnsupportedError(fmt.Sprintf("%d-bit precision", seg[0]))
	}
	d.height = int(seg[1])<<8 | int(seg[2])
	d.width = int(seg[3])<<8 | int(seg[4])
	n := int(seg[5])
	if n != 1 && n != 3 && n != 4 {
		return UnsupportedError(fmt.Sprintf("%d components", n))
	}
	if len(seg) != 6+3*n {
		return FormatError("SOF has wrong length")
	}
	if d.width == 0 {
		return FormatError("zero width")
	}
	if d.height == 0 {
		return UnsupportedError("height defined by a DNL marker")
	}
	for i := range n {
		c := &d.comp[i]
		c.id = seg[6+3*i]
		for j := range i {
			if d.comp[j].id == c.id {
				return FormatError("repeated component identifier")
			}
		}
		c.h, c.v = int(seg[7+3*i]>>4), int(seg[7+3*i]&0x0f)
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
			return FormatError("bad sampling factors")
		}
		c.tq = seg[8+3*i]
		if c.tq > maxTq {
			return FormatError("bad Tq value")
		}
		if n == 1 {
			// A single-component scan is non-interleaved: one block per MCU whatever the factors
			// (section A.2), so only their ratio to the maximum matters, which is 1.
			c.h, c.v = 1, 1
		}
	}
	d.nComp = n
	d.hmax, d.vmax = 1, 1
	for _, c := range d.comp[:n] {
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	for i := range n {
		c := &d.comp[i]
		// libjpeg's jinit_upsampler supports integral ratios only (JERR_FRACT_SAMPLE_NOTIMPL).
		if d.hmax%c.h != 0 || d.vmax%c.v != 0 {
			return UnsupportedError("non-integral sampling ratio")
		}
	}
	d.mcusX = (d.width + 8*d.hmax - 1) / (8 * d.hmax)
	d.mcusY = (d.height + 8*d.vmax - 1) / (8 * d.vmax)
	for i := range n {
		c := &d.comp[i]
		c.dw = (d.width*c.h + d.hmax - 1) / d.hmax
		c.dh = (d.height*c.v + d.vmax - 1) / d.vmax
		c.bw, c.bh = (c.dw+7)/8, (c.dh+7)/8
		c.stride = 8 * c.h * d.mcusX
	}
	return nil
}

// processDQT reads quantization tables (section B.2.4.1), storing them in natural order.
func (d *decoder) processDQT(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, seg[0]&0x0f
		seg = seg[1:]
		if tq > maxTq {
			return FormatError("bad Tq value")
		}
		switch pq {
		case 0:
			if len(seg) < blockSize {
				return FormatError("DQT has wrong length")
			}
			for zig := range blockSize {
				d.quant[tq][unzig[zig]] = int32(seg[zig])
			}
			seg = seg[blockSize:]
		case 1:
			if len(seg) < 2*blockSize {
				return FormatError("DQT has wrong length")
			}
			for zig := range blockSize {
				d.quant[tq][unzig[zig]] = int32(seg[2*zig])<<8 | int32(seg[2*zig+1])
			}
			seg = seg[2*blockSize:]
		default:
			return FormatError("bad Pq value")
		}
		d.qSet[tq] = true
	}
	return nil
}

// processDRI reads the restart interval (section B.2.4.4).
func (d *decoder) processDRI(seg []byte) error {
	if len(seg) != 2 {
		return FormatError("DRI has wrong length")
	}
	d.ri = int(seg[0])<<8 | int(seg[1])
	return nil
}

// isRGB reports whether three components hold RGB rather than YCbCr, decided as libjpeg's
// default_decompress_parms does: JFIF means YCbCr; else an Adobe marker's transform 0 means RGB and any
// other value YCbCr; else component identifiers 'R', 'G', 'B' mean RGB.
func (d *decoder) isRGB() bool {
	switch {
	case d.jfif:
		return false
	case d.adobe:
		return d.adobeTransform == 0
	}
	return d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B'
}

// finish runs the inverse DCT of a progressive image once every scan is in.
func (d *decoder) finish() error {
	for i := range d.nComp {
		c := &d.comp[i]
		if !c.seen {
			return FormatError(fmt.Sprintf("no scan for component %d", i))
		}
		if d.progressive {
			d.reconstructProgressive(c)
		}
	}
	return nil
}
