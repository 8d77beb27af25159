package imgio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/da3-go/da3-go/internal/imgproc"
)

// DefaultMaxPixels is the pixel budget of a decoded image unless SetMaxPixels changes it: an image whose
// header declares more pixels (width × height) is refused before any pixel is decoded. Each side is also
// bounded by imgproc.MaxSide (16384), whatever the budget.
const DefaultMaxPixels = imgproc.MaxPixels

// ErrTooManyPixels is wrapped by the error for an image whose header declares more pixels than the
// budget (SetMaxPixels) or a side longer than imgproc.MaxSide.
var ErrTooManyPixels = errors.New("image too large")

var maxPixels atomic.Int64

func init() { maxPixels.Store(DefaultMaxPixels) }

// SetMaxPixels sets the pixel budget of every later decode in this process (a CLI flag: da3-go's
// -max-image-pixels) and returns the previous one; n ≤ 0 restores DefaultMaxPixels. Raising it lets
// larger images in (up to imgproc.MaxSide on each side), at about 4 bytes of memory per pixel for the
// decoded image and more for 16-bit formats.
func SetMaxPixels(n int64) int64 {
	if n <= 0 {
		n = DefaultMaxPixels
	}
	return maxPixels.Swap(n)
}

// MaxPixels is the pixel budget in force (see SetMaxPixels).
func MaxPixels() int64 { return maxPixels.Load() }

// tooManyPixels is an error that reads as its message and is ErrTooManyPixels.
type tooManyPixels string

func (e tooManyPixels) Error() string        { return string(e) }
func (e tooManyPixels) Is(target error) bool { return target == ErrTooManyPixels }

// budget is a pixel budget and what raises it (named in the error).
type budget struct {
	max   int64
	raise string
}

// processBudget is the process's budget (SetMaxPixels), raised by da3-go's -max-image-pixels.
func processBudget() budget { return budget{MaxPixels(), "-max-image-pixels"} }

// checkBudget checks a declared image size against the sides' limit and the pixel budget.
func checkBudget(w, h int, b budget) error {
	switch {
	case w <= 0 || h <= 0:
		return fmt.Errorf("image size %dx%d: empty image", w, h)
	case w > imgproc.MaxSide || h > imgproc.MaxSide:
		return tooManyPixels(fmt.Sprintf("image size %dx%d: a side exceeds %d pixels", w, h, imgproc.MaxSide))
	}
	if n := int64(w) * int64(h); n > b.max {
		return tooManyPixels(fmt.Sprintf("image size %dx%d: %d pixels exceeds the budget of %d (raise it with %s)", w, h, n, b.max, b.raise))
	}
	return nil
}

// TIFF tags read by checkTIFF.
const (
	tiffImageWidth      = 256
	tiffImageLength     = 257
	tiffStripOffsets    = 273
	tiffStripByteCounts = 279
	tiffTileWidth       = 322
	tiffTileLength      = 323
	tiffTileOffsets     = 324
	tiffTileByteCounts  = 325
)

// tiffTypeSize is the size in bytes of the TIFF field types (0: unknown type).
var tiffTypeSize = [...]uint64{0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8}

// maxTIFFEntries bounds the entries of the IFD: real files have a few dozen.
const maxTIFFEntries = 4096

func isTIFF(data []byte) bool {
	return bytes.HasPrefix(data, []byte("II*\x00")) || bytes.HasPrefix(data, []byte("MM\x00*"))
}

// checkTIFF refuses a TIFF whose first image file directory (the one decoded) points outside the file:
// every entry's values, and every strip or tile (offset + byte count), must lie within the file, and
// tiles must not be larger than an image may be. golang.org/x/image/tiff trusts these numbers and can
// allocate up to offset + count bytes (gigabytes from a file of a few kilobytes) before it finds the
// data missing.
func checkTIFF(data []byte) error {
	if len(data) < 8 {
		return fmt.Errorf("TIFF header truncated (%d bytes)", len(data))
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if data[0] == 'M' {
		bo = binary.BigEndian
	}
	size := uint64(len(data))
	ifd := uint64(bo.Uint32(data[4:8]))
	if ifd+2 > size {
		return fmt.Errorf("TIFF image file directory at offset %d lies past the end of the file (%d bytes)", ifd, size)
	}
	n := uint64(bo.Uint16(data[ifd:]))
	if n > maxTIFFEntries {
		return fmt.Errorf("TIFF image file directory of %d entries (at most %d)", n, maxTIFFEntries)
	}
	if ifd+2+12*n > size {
		return fmt.Errorf("TIFF image file directory of %d entries at offset %d runs past the end of the file (%d bytes)", n, ifd, size)
	}
	values := map[uint16][]uint64{}
	for i := range n {
		e := data[ifd+2+12*i : ifd+2+12*(i+1)]
		tag, typ, count := bo.Uint16(e[0:2]), bo.Uint16(e[2:4]), uint64(bo.Uint32(e[4:8]))
		if int(typ) >= len(tiffTypeSize) || tiffTypeSize[typ] == 0 {
			continue // a type the decoder does not read either (it refuses the tags it needs in one)
		}
		length := count * tiffTypeSize[typ] // at most 2^32 · 8: no overflow
		raw := e[8:12]
		if length > 4 {
			off := uint64(bo.Uint32(e[8:12]))
			if off+length > size {
				return fmt.Errorf("TIFF tag %d: %d values (%d bytes) at offset %d lie past the end of the file (%d bytes)",
					tag, count, length, off, size)
			}
			raw = data[off : off+length]
		}
		switch tag {
		case tiffImageWidth, tiffImageLength, tiffStripOffsets, tiffStripByteCounts,
			tiffTileWidth, tiffTileLength, tiffTileOffsets, tiffTileByteCounts:
		default:
			continue
		}
		vals := make([]uint64, 0, count) // count ≤ size: the values are in the file
		for j := range count {
			switch typ {
			case 1: // BYTE
				vals = append(vals, uint64(raw[j]))
			case 3: // SHORT
				vals = append(vals, uint64(bo.Uint16(raw[2*j:])))
			case 4: // LONG
				vals = append(vals, uint64(bo.Uint32(raw[4*j:])))
			default:
				return fmt.Errorf("TIFF tag %d has field type %d (want BYTE, SHORT or LONG)", tag, typ)
			}
		}
		values[tag] = vals
	}
	for _, tag := range []uint16{tiffTileWidth, tiffTileLength} {
		if v := values[tag]; len(v) > 0 && v[0] > imgproc.MaxSide {
			return fmt.Errorf("TIFF tiles of %d pixels on a side (tag %d; at most %d)", v[0], tag, imgproc.MaxSide)
		}
	}
	for _, pair := range [][2]uint16{{tiffStripOffsets, tiffStripByteCounts}, {tiffTileOffsets, tiffTileByteCounts}} {
		offs, counts := values[pair[0]], values[pair[1]]
		for i := range min(len(offs), len(counts)) {
			end, carry := bits.Add64(offs[i], counts[i], 0)
			if carry != 0 || end > size {
				what := "strip"
				if pair[0] == tiffTileOffsets {
					what = "tile"
				}
				return fmt.Errorf("TIFF %s %d: %d bytes at offset %d lie past the end of the file (%d bytes)",
					what, i, counts[i], offs[i], size)
			}
		}
	}
	return nil
}

// checkWebP refuses a WebP whose bitstream (VP8 or VP8L chunk) is not the size of the canvas its VP8X
// chunk declares: golang.org/x/image/webp reports the canvas as the image's size but decodes the
// bitstream at its own size (up to 16384×16384, a gigabyte), so the canvas alone does not bound it.
func checkWebP(data []byte, b budget) error {
	if len(data) < 12 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WEBP" {
		return nil // not WebP: the decoders say what it is
	}
	var canvasW, canvasH int
	for p := 12; p+8 <= len(data); {
		id, n := string(data[p:p+4]), int64(binary.LittleEndian.Uint32(data[p+4:p+8]))
		body := data[p+8:]
		if n > int64(len(body)) {
			return fmt.Errorf("WebP chunk %q of %d bytes runs past the end of the file", id, n)
		}
		body = body[:n]
		switch id {
		case "VP8X":
			if len(body) < 10 {
				return fmt.Errorf("WebP VP8X chunk of %d bytes (want 10)", len(body))
			}
			canvasW = 1 + int(uint32(body[4])|uint32(body[5])<<8|uint32(body[6])<<16)
			canvasH = 1 + int(uint32(body[7])|uint32(body[8])<<8|uint32(body[9])<<16)
		case "VP8 ", "VP8L":
			var w, h int
			switch {
			case id == "VP8 " && len(body) >= 10:
				w = int(binary.LittleEndian.Uint16(body[6:8]) & 0x3fff)
				h = int(binary.LittleEndian.Uint16(body[8:10]) & 0x3fff)
			case id == "VP8L" && len(body) >= 5:
				v := binary.LittleEndian.Uint32(body[1:5])
				w, h = 1+int(v&0x3fff), 1+int(v>>14&0x3fff)
			default:
				return fmt.Errorf("WebP %q chunk of %d bytes is truncated", id, len(body))
			}
			if canvasW != 0 && (w != canvasW || h != canvasH) {
				return fmt.Errorf("WebP bitstream of %dx%d in a canvas of %dx%d (VP8X)", w, h, canvasW, canvasH)
			}
			return checkBudget(w, h, b)
		}
		p += 8 + int(n) + int(n&1)
	}
	return nil
}
