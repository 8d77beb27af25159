package jpeg

import "encoding/binary"

// exifOrientation returns the Orientation tag (0x0112) of IFD0 in an APP1 segment, or 0 when the segment
// is not Exif, the tag is absent, or its value is not 1–8.
func exifOrientation(seg []byte) int {
	if len(seg) < 6 || string(seg[:6]) != "Exif\x00\x00" {
		return 0
	}
	t := seg[6:] // TIFF header
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 0
	}
	off := int(bo.Uint32(t[4:]))
	if off < 8 || off > len(t)-2 {
		return 0
	}
	n := int(bo.Uint16(t[off:]))
	for i := range n {
		e := off + 2 + 12*i
		if e+12 > len(t) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		var v int
		switch typ, count := bo.Uint16(t[e+2:]), bo.Uint32(t[e+4:]); {
		case typ == 3 && count >= 1: // SHORT
			v = int(bo.Uint16(t[e+8:]))
		case typ == 4 && count >= 1: // LONG
			v = int(bo.Uint32(t[e+8:]))
		default:
			return 0
		}
		if v < 1 || v > 8 {
			return 0
		}
		return v
	}
	return 0
}
