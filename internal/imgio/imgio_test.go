package imgio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/da3-go/da3-go/internal/testutil"
)

func sampleMap() []float32 { return []float32{1, 2, 3, 4, 5, 6} } // 3x2

// parsePFM is an independent reader for single-channel PFM files.
func parsePFM(t *testing.T, b []byte) (w, h int, scale float64, rows [][]float32) {
	t.Helper()
	lines := bytes.SplitN(b, []byte("\n"), 4)
	require.Len(t, lines, 4)
	require.Equal(t, "Pf", string(lines[0]))
	var err error
	dims := strings.Fields(string(lines[1]))
	require.Len(t, dims, 2)
	w, h = atoi(t, dims[0]), atoi(t, dims[1])
	_, err = fmt.Sscan(string(lines[2]), &scale)
	require.NoError(t, err)
	data := lines[3]
	require.Len(t, data, 4*w*h)
	for y := range h {
		row := make([]float32, w)
		for x := range w {
			bits := binary.LittleEndian.Uint32(data[4*(y*w+x):])
			if scale > 0 {
				bits = binary.BigEndian.Uint32(data[4*(y*w+x):])
			}
			row[x] = math.Float32frombits(bits)
		}
		rows = append(rows, row)
	}
	return w, h, scale, rows
}

func TestWritePFM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.pfm")
	require.NoError(t, WritePFM(path, sampleMap(), 3, 2))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("Pf\n3 2\n-1.0\n")))
	w, h, scale, rows := parsePFM(t, b)
	assert.Equal(t, [2]int{3, 2}, [2]int{w, h})
	assert.Equal(t, -1.0, scale, "negative scale = little-endian")
	assert.Equal(t, [][]float32{{4, 5, 6}, {1, 2, 3}}, rows, "bottom row first")
}

func TestWriteNPY(t *testing.T) {
	tests := []struct {
		name  string
		shape []int
		dict  string
	}{
		{"2d", []int{2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
		{"1d", []int{6}, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }"},
		{"3d", []int{1, 2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.npy")
			require.NoError(t, WriteNPY(path, sampleMap(), tc.shape...))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Greater(t, len(b), 10)
			assert.Equal(t, []byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}, b[:8])
			hl := int(binary.LittleEndian.Uint16(b[8:10]))
			assert.Zero(t, (10+hl)%64, "header padded to 64 bytes")
			header := string(b[10 : 10+hl])
			assert.True(t, strings.HasSuffix(header, "\n"))
			assert.Equal(t, tc.dict, strings.TrimRight(header, " \n"))
			data := b[10+hl:]
			require.Len(t, data, 24)
			for i, want := range sampleMap() {
				assert.Equal(t, want, math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
			}
		})
	}
	path := filepath.Join(t.TempDir(), "bad.npy")
	assert.Error(t, WriteNPY(path, sampleMap(), 4, 2))
	assert.Error(t, WriteNPY(path, sampleMap(), -2, -3))
	assert.NoFileExists(t, path)
}

func TestEncodeNPYTypes(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, EncodeNPY(&b, []uint8{1, 2, 3, 4, 5, 6}, 1, 2, 3))
	hl := int(binary.LittleEndian.Uint16(b.Bytes()[8:10]))
	assert.Equal(t, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2, 3), }", strings.TrimRight(string(b.Bytes()[10:10+hl]), " \n"))
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6}, b.Bytes()[10+hl:])

	b.Reset()
	require.NoError(t, EncodeNPY(&b, []float64{1.5, -2}, 2))
	hl = int(binary.LittleEndian.Uint16(b.Bytes()[8:10]))
	assert.Contains(t, string(b.Bytes()[10:10+hl]), "'descr': '<f8'")
	data := b.Bytes()[10+hl:]
	require.Len(t, data, 16)
	assert.Equal(t, -2.0, math.Float64frombits(binary.LittleEndian.Uint64(data[8:])))

	// Longer than one chunk.
	big := make([]float32, 10000)
	for i := range big {
		big[i] = float32(i)
	}
	b.Reset()
	require.NoError(t, EncodeNPY(&b, big, 100, 100))
	hl = int(binary.LittleEndian.Uint16(b.Bytes()[8:10]))
	data = b.Bytes()[10+hl:]
	require.Len(t, data, 40000)
	assert.Equal(t, float32(9999), math.Float32frombits(binary.LittleEndian.Uint32(data[4*9999:])))

	assert.ErrorContains(t, EncodeNPY(&b, []int{1}, 1), "unsupported data type")
	assert.ErrorContains(t, EncodeNPY(&b, []uint8{1, 2}, 3), "needs 3 values")
}

func TestPending(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	pa, err := WritePending(a, func(w io.Writer) error { _, err := io.WriteString(w, "A"); return err })
	require.NoError(t, err)
	pb, err := WritePending(b, func(w io.Writer) error { _, err := io.WriteString(w, "B"); return err })
	require.NoError(t, err)
	assert.NoFileExists(t, a, "not visible before Commit")
	require.NoError(t, pa.Commit())
	require.NoError(t, pa.Commit(), "second Commit is a no-op")
	pb.Abort()
	got, err := os.ReadFile(a)
	require.NoError(t, err)
	assert.Equal(t, "A", string(got))
	assert.NoFileExists(t, b)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "aborted temporary file removed")

	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	_, err = WritePending(filepath.Join(dir, "d"), func(io.Writer) error { return nil })
	assert.ErrorContains(t, err, "is a directory")
	var nilP *Pending
	assert.NoError(t, nilP.Commit())
	nilP.Abort()
}

func TestWritePNGGray(t *testing.T) {
	dir := t.TempDir()
	data := []float32{0, 1, 2, 3, 4, 10}
	require.NoError(t, WritePNGGray(filepath.Join(dir, "n.png"), data, 3, 2, false))
	require.NoError(t, WritePNGGray(filepath.Join(dir, "i.png"), data, 3, 2, true))
	n := testutil.ReadPNG(t, filepath.Join(dir, "n.png")).(*image.Gray)
	i := testutil.ReadPNG(t, filepath.Join(dir, "i.png")).(*image.Gray)
	// the depth PNG's quantisation: clamp(int(255*t + 0.5)), t = (v-min)/(max-min)
	assert.Equal(t, []uint8{0, 26, 51, 77, 102, 255}, n.Pix)
	assert.Equal(t, []uint8{255, 230, 204, 179, 153, 0}, i.Pix)

	require.NoError(t, WritePNGGray(filepath.Join(dir, "c.png"), []float32{7, 7}, 2, 1, true))
	assert.Equal(t, []uint8{255, 255}, testutil.ReadPNG(t, filepath.Join(dir, "c.png")).(*image.Gray).Pix, "constant map: t = 0, inverted")
}

func TestColorize(t *testing.T) {
	data := []float32{0, 5, 10}
	img, err := Colorize(data, 3, 1, Turbo, false)
	require.NoError(t, err)
	assert.Equal(t, color.RGBA{48, 18, 59, 255}, img.RGBAAt(0, 0), "Turbo low end: dark blue")
	assert.Equal(t, color.RGBA{122, 4, 3, 255}, img.RGBAAt(2, 0), "Turbo high end: dark red")
	mid := turboLUT[128]
	assert.Equal(t, color.RGBA{mid[0], mid[1], mid[2], 255}, img.RGBAAt(1, 0))
	inv, err := Colorize(data, 3, 1, Turbo, true)
	require.NoError(t, err)
	assert.Equal(t, img.RGBAAt(0, 0), inv.RGBAAt(2, 0))
	g, err := Colorize(data, 3, 1, Gray, false)
	require.NoError(t, err)
	assert.Equal(t, color.RGBA{128, 128, 128, 255}, g.RGBAAt(1, 0))
	_, err = Colorize(data, 3, 1, Colormap(9), false)
	assert.Error(t, err)
	_, err = Colorize(data, 2, 1, Gray, false)
	assert.Error(t, err)

	path := filepath.Join(t.TempDir(), "c.png")
	require.NoError(t, WritePNGColor(path, data, 3, 1, Turbo, false))
	back := testutil.ReadPNG(t, path)
	r, gg, b, a := back.At(2, 0).RGBA()
	assert.Equal(t, [4]uint32{122, 4, 3, 255}, [4]uint32{r >> 8, gg >> 8, b >> 8, a >> 8})
}

func TestParseColormap(t *testing.T) {
	for _, c := range []Colormap{Turbo, Gray} {
		got, err := ParseColormap(c.String())
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	got, err := ParseColormap("GREY")
	require.NoError(t, err)
	assert.Equal(t, Gray, got)
	_, err = ParseColormap("jet")
	assert.Error(t, err)
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	boom := errors.New("boom")

	err := writeAtomic(path, func(w io.Writer) error {
		_, _ = w.Write(make([]byte, 1<<17)) // more than the buffer: the temp file really has content
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), path)
	assert.NoFileExists(t, path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "temporary file removed")

	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	require.ErrorIs(t, writeAtomic(path, func(io.Writer) error { return boom }), boom)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(b), "failed write leaves the previous file intact")

	require.NoError(t, WritePFM(path, sampleMap(), 3, 2))
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only the destination remains")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	assert.Error(t, WritePFM(filepath.Join(dir, "missing", "x.pfm"), sampleMap(), 3, 2))
	bad := filepath.Join(dir, "bad.png")
	assert.Error(t, WritePNGGray(bad, sampleMap(), 2, 2, false))
	assert.Error(t, WritePNGColor(bad, sampleMap(), 7, 1, Turbo, false))
	assert.NoFileExists(t, bad)
}

func testImage() *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, 4, 3))
	for y := range 3 {
		for x := range 4 {
			img.SetNRGBA(x, y, color.NRGBA{uint8(60 * x), uint8(100 * y), 7, 255})
		}
	}
	return img
}

func TestDecodeFormats(t *testing.T) {
	dir := t.TempDir()
	src := testImage()
	pal := image.NewPaletted(src.Bounds(), nil)
	for y := range 3 {
		for x := range 4 {
			pal.Palette = append(pal.Palette, src.At(x, y))
			pal.Pix[y*pal.Stride+x] = uint8(len(pal.Palette) - 1)
		}
	}
	flat := image.NewNRGBA(image.Rect(0, 0, 4, 3)) // JPEG is lossy: a flat colour survives it
	for i := 0; i < len(flat.Pix); i += 4 {
		flat.Pix[i], flat.Pix[i+1], flat.Pix[i+2], flat.Pix[i+3] = 180, 200, 7, 255
	}
	tests := []struct {
		ext string
		enc func(io.Writer) error
		tol float64
	}{
		{"png", func(w io.Writer) error { return png.Encode(w, src) }, 0},
		{"bmp", func(w io.Writer) error { return bmp.Encode(w, src) }, 0},
		{"tiff", func(w io.Writer) error { return tiff.Encode(w, src, nil) }, 0},
		{"gif", func(w io.Writer) error { return gif.Encode(w, pal, nil) }, 0},
		{"jpg", func(w io.Writer) error { return jpeg.Encode(w, flat, &jpeg.Options{Quality: 100}) }, 3},
	}
	for _, tc := range tests {
		t.Run(tc.ext, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tc.enc(&buf))
			path := filepath.Join(dir, "img."+tc.ext)
			require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			img, err := Decode(path)
			require.NoError(t, err)
			fromBytes, o, err := DecodeBytes(buf.Bytes(), "upload")
			require.NoError(t, err)
			assert.Equal(t, OrientNormal, o)
			hd, err := DecodeHeaderBytes(buf.Bytes(), "upload")
			require.NoError(t, err)
			assert.Equal(t, [2]int{4, 3}, [2]int{hd.Width, hd.Height})
			require.Equal(t, img, fromBytes, "DecodeBytes decodes as Decode does")
			require.Equal(t, image.Rect(0, 0, 4, 3), img.Bounds())
			for y := range 3 {
				for x := range 4 {
					r, g, b, _ := img.At(x, y).RGBA()
					want := [3]float64{float64(60 * x), float64(100 * y), 7}
					if tc.ext == "jpg" {
						want = [3]float64{180, 200, 7}
					}
					assert.InDelta(t, want[0], float64(r>>8), tc.tol)
					assert.InDelta(t, want[1], float64(g>>8), tc.tol)
					assert.InDelta(t, want[2], float64(b>>8), tc.tol)
				}
			}
		})
	}
	t.Run("webp", func(t *testing.T) { // lossless WebP written by cv2.imencode
		img, err := Decode(filepath.Join("testdata", "rgb4x3_lossless.webp"))
		require.NoError(t, err)
		require.Equal(t, image.Rect(0, 0, 4, 3), img.Bounds())
		for y := range 3 {
			for x := range 4 {
				r, g, b, _ := img.At(x, y).RGBA()
				assert.Equal(t, [3]uint32{uint32(60 * x), uint32(100 * y), 7}, [3]uint32{r >> 8, g >> 8, b >> 8})
			}
		}
	})
}

// pngWithSize returns a valid 1x1 PNG whose IHDR is patched to declare w×h (CRC fixed up).
func pngWithSize(t *testing.T, w, h uint32) []byte {
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))))
	b := buf.Bytes()
	// signature(8) | length(4) "IHDR"(4) width(4) height(4) ... crc after 13 data bytes
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

func TestDecodeErrors(t *testing.T) {
	dir := t.TempDir()
	var good bytes.Buffer
	require.NoError(t, png.Encode(&good, testImage()))
	files := map[string][]byte{
		"empty.png":     {},
		"garbage.jpg":   []byte("this is not an image at all"),
		"truncated.png": good.Bytes()[:len(good.Bytes())/2],
		"huge.png":      pngWithSize(t, 100000, 100000),
		"wide.png":      pngWithSize(t, 20000, 1),
	}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, b, 0o644))
			img, err := Decode(path)
			require.Error(t, err)
			assert.Nil(t, img)
			assert.Contains(t, err.Error(), path, "errors name the file")
		})
	}
	for name, b := range files {
		img, _, err := DecodeBytes(b, name)
		require.Error(t, err, name)
		assert.Nil(t, img)
		assert.Contains(t, err.Error(), name, "errors name the upload")
		if name != "truncated.png" { // its header is intact
			_, err = DecodeHeaderBytes(b, name)
			assert.Error(t, err, "%s: the header check refuses it", name)
		}
	}
	_, err := Decode(filepath.Join(dir, "missing.png"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = Decode(dir)
	assert.Error(t, err)
}

// TestDecodeHeader: the header as Decode reads it, from files of every size, and Decode's errors.
func TestDecodeHeader(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{8, 600} { // a small file and one larger than the 256 KiB read first
		img := image.NewNRGBA(image.Rect(0, 0, n, n/2))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7919 % 251) // incompressible enough
		}
		p := filepath.Join(dir, "a.png")
		var b bytes.Buffer
		require.NoError(t, png.Encode(&b, img))
		require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
		hd, err := DecodeHeader(p)
		require.NoError(t, err)
		assert.Equal(t, Header{Width: n, Height: n / 2, Format: "png", Orientation: OrientNormal}, hd)
	}
	bad := filepath.Join(dir, "bad.png")
	require.NoError(t, os.WriteFile(bad, bytes.Repeat([]byte("not an image "), 30000), 0o644))
	_, err := DecodeHeader(bad)
	assert.ErrorContains(t, err, "unknown format")
	_, err = DecodeHeader(filepath.Join(dir, "missing.png"))
	assert.Error(t, err)
}
