package imgio

import (
	"bytes"
	"encoding/binary"
	"image"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/tiff"

	"github.com/da3-go/da3-go/internal/testutil"
)

// tiffFile builds a little-endian one-strip 8-bit grey TIFF of w×h whose strip is count bytes at
// offset, padded with zeros to size bytes.
func tiffFile(w, h, offset, count uint32, size int) []byte {
	type entry struct {
		tag, typ uint16
		val      uint32
	}
	entries := []entry{
		{256, 4, w}, {257, 4, h}, {258, 3, 8}, {259, 3, 1}, {262, 3, 1},
		{273, 4, offset}, {277, 3, 1}, {278, 4, h}, {279, 4, count},
	}
	var b bytes.Buffer
	b.WriteString("II*\x00")
	binary.Write(&b, binary.LittleEndian, uint32(8))
	binary.Write(&b, binary.LittleEndian, uint16(len(entries)))
	for _, e := range entries {
		binary.Write(&b, binary.LittleEndian, e.tag)
		binary.Write(&b, binary.LittleEndian, e.typ)
		binary.Write(&b, binary.LittleEndian, uint32(1))
		if e.typ == 3 {
			binary.Write(&b, binary.LittleEndian, [2]uint16{uint16(e.val), 0})
		} else {
			binary.Write(&b, binary.LittleEndian, e.val)
		}
	}
	binary.Write(&b, binary.LittleEndian, uint32(0)) // no next IFD
	b.Write(make([]byte, max(0, size-b.Len())))
	return b.Bytes()
}

// hostileTIFF is a 9 KiB 64×64 TIFF whose one strip claims 3.75 GiB at an offset of 3.75 GiB:
// golang.org/x/image/tiff, read through image.Decode, buffers the file up to offset + count (8 GiB).
func hostileTIFF() []byte { return tiffFile(64, 64, 0xF0000000, 0xF0000000, 9<<10) }

func TestHostileTIFFRefusedUnderMemoryLimit(t *testing.T) {
	out, took := testutil.UnderMemoryLimit(t, 1<<30, func(t *testing.T) {
		start := time.Now()
		_, _, err := DecodeBytes(hostileTIFF(), "hostile.tiff")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "hostile.tiff")
		assert.Contains(t, err.Error(), "strip 0: 4026531840 bytes at offset 4026531840 lie past the end of the file (9216 bytes)")
		_, err = DecodeHeaderBytes(hostileTIFF(), "hostile.tiff")
		assert.ErrorContains(t, err, "past the end of the file")
		t.Logf("refused in %v: %v", time.Since(start), err)
	})
	t.Logf("child (1 GiB more address space) ran %v:\n%s", took, out)
}

func TestTIFFBounds(t *testing.T) {
	pix := image.NewGray(image.Rect(0, 0, 8, 4))
	for i := range pix.Pix {
		pix.Pix[i] = uint8(i * 7)
	}
	// A hand-built TIFF whose strip lies inside the file decodes.
	good := tiffFile(8, 4, 200, 32, 232)
	copy(good[200:], pix.Pix)
	img, _, err := DecodeBytes(good, "good.tiff")
	require.NoError(t, err)
	assert.Equal(t, pix.Pix, img.(*image.Gray).Pix)

	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"strip past the end", tiffFile(8, 4, 200, 33, 232), "strip 0: 33 bytes at offset 200 lie past the end of the file (232 bytes)"},
		{"offset wraps", tiffFile(8, 4, 0xFFFFFFFF, 0xFFFFFFFF, 232), "strip 0"},
		{"IFD past the end", append([]byte("II*\x00\x00\x10\x00\x00"), make([]byte, 64)...), "image file directory at offset 4096 lies past the end"},
		{"truncated", []byte("II*\x00"), "TIFF header truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeBytes(tc.data, "x.tiff")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "x.tiff")
		})
	}

	// Compressed and tiled encodings of x/image/tiff pass the check.
	for _, c := range []tiff.CompressionType{tiff.Uncompressed, tiff.Deflate} {
		var b bytes.Buffer
		require.NoError(t, tiff.Encode(&b, pix, &tiff.Options{Compression: c}))
		img, _, err := DecodeBytes(b.Bytes(), "enc.tiff")
		require.NoError(t, err, "compression %d", c)
		assert.Equal(t, pix.Bounds(), img.Bounds())
	}
}

// vp8lFlat is a valid lossless WebP bitstream of a w×h black image: no transform, no colour cache,
// and five Huffman codes of one symbol each, so that every pixel takes no bits at all (a few bytes
// for any size).
func vp8lFlat(w, h int) []byte {
	var out []byte
	var acc uint64
	var n uint
	put := func(v uint64, bits uint) { // LSB first
		acc |= v << n
		for n += bits; n >= 8; n -= 8 {
			out = append(out, byte(acc))
			acc >>= 8
		}
	}
	put(0x2f, 8)
	put(uint64(w-1), 14)
	put(uint64(h-1), 14)
	put(0, 1) // alpha not used
	put(0, 3) // version
	put(0, 1) // no transform
	put(0, 1) // no colour cache
	put(0, 1) // no meta Huffman codes
	for range 5 {
		put(1, 1) // simple code
		put(0, 1) // of one symbol
		put(0, 1) // of 1 bit
		put(0, 1) // symbol 0
	}
	put(0, 8)
	return out
}

// webpVP8X wraps vp8lFlat(bw, bh) in a VP8X container with a cw×ch canvas.
func webpVP8X(cw, ch, bw, bh int) []byte {
	var vp8x [10]byte
	vp8x[4], vp8x[5], vp8x[6] = byte(cw-1), byte((cw-1)>>8), byte((cw-1)>>16)
	vp8x[7], vp8x[8], vp8x[9] = byte(ch-1), byte((ch-1)>>8), byte((ch-1)>>16)
	vp8l := vp8lFlat(bw, bh)
	var b bytes.Buffer
	chunk := func(id string, data []byte) {
		b.WriteString(id)
		binary.Write(&b, binary.LittleEndian, uint32(len(data)))
		b.Write(data)
		if len(data)%2 == 1 {
			b.WriteByte(0)
		}
	}
	b.WriteString("RIFF\x00\x00\x00\x00WEBP")
	chunk("VP8X", vp8x[:])
	chunk("VP8L", vp8l)
	out := b.Bytes()
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// TestHostileWebPRefusedUnderMemoryLimit: a VP8X canvas of 16×16 around a bitstream of 16384×16384,
// which golang.org/x/image/webp would decode into a 1 GiB buffer.
func TestHostileWebPRefusedUnderMemoryLimit(t *testing.T) {
	img, _, err := DecodeBytes(webpVP8X(16, 16, 16, 16), "flat.webp")
	require.NoError(t, err, "the bitstream is valid WebP")
	assert.Equal(t, image.Rect(0, 0, 16, 16), img.Bounds())
	testutil.UnderMemoryLimit(t, 1<<30, func(t *testing.T) {
		_, _, err := DecodeBytes(webpVP8X(16, 16, 16384, 16384), "hostile.webp")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "hostile.webp")
		assert.Contains(t, err.Error(), "bitstream of 16384x16384 in a canvas of 16x16")
	})
}

// TestPixelBudget: a 200-byte PNG declaring 60000×60000 is refused from its header at once, and the
// budget can be raised and lowered.
func TestPixelBudget(t *testing.T) {
	start := time.Now()
	_, _, err := DecodeBytes(pngWithSize(t, 60000, 60000), "huge.png")
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "huge.png (png): image size 60000x60000: a side exceeds 16384 pixels")
	assert.Less(t, took, time.Second)
	t.Logf("refused in %v", took)

	_, _, err = DecodeBytes(pngWithSize(t, 16000, 16000), "big.png")
	assert.ErrorContains(t, err, "256000000 pixels exceeds the budget of 104857600 (raise it with -max-image-pixels)")

	var small bytes.Buffer
	require.NoError(t, tiff.Encode(&small, image.NewGray(image.Rect(0, 0, 20, 20)), nil))
	assert.Equal(t, int64(DefaultMaxPixels), SetMaxPixels(100))
	t.Cleanup(func() { SetMaxPixels(0) })
	_, _, err = DecodeBytes(small.Bytes(), "small.tiff")
	assert.ErrorContains(t, err, "400 pixels exceeds the budget of 100")
	SetMaxPixels(0)
	assert.Equal(t, int64(DefaultMaxPixels), MaxPixels())
	_, _, err = DecodeBytes(small.Bytes(), "small.tiff")
	assert.NoError(t, err)
}

// TestDecodeFIFORefused: an image path naming a FIFO is refused at once (os.Open would wait for a
// writer forever), as is a device.
func TestDecodeFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "img.png")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Decode(p); done <- err }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, "not a regular file")
		case <-time.After(5 * time.Second):
			t.Fatalf("decoding %s blocked for 5 s", p)
		}
		done2 := make(chan error, 1)
		go func() { _, _, err := ReadNPY(p); done2 <- err }()
		select {
		case err := <-done2:
			assert.ErrorContains(t, err, "not a regular file")
		case <-time.After(5 * time.Second):
			t.Fatalf("reading %s as .npy blocked for 5 s", p)
		}
	}
}
