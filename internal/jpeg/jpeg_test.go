package jpeg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
)

// The fixtures in testdata are written by tests/oracle/jpeg_fixtures.py: each <name>.jpg with
// cv2.imread's decode beside it as <name>.png (PIL's decode is checked equal by the script).

type fixture struct {
	Name        string `json:"name"`
	What        string `json:"what"`
	Size        [2]int `json:"size"`
	Orientation int    `json:"orientation"`
}

func fixtures(t *testing.T) []fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/manifest.json")
	require.NoError(t, err)
	var m struct{ Files []fixture }
	require.NoError(t, json.Unmarshal(b, &m))
	require.NotEmpty(t, m.Files)
	return m.Files
}

// rgb returns img as interleaved 8-bit RGB.
func rgb(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out
}

// diffStats returns the largest absolute difference and the number of differing values.
func diffStats(a, b []byte) (maxd, n int) {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d != 0 {
			n++
			maxd = max(maxd, d, -d)
		}
	}
	return maxd, n
}

func decodeFile(t *testing.T, path string) image.Image {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	img, err := DecodeBytes(data)
	require.NoError(t, err, path)
	return img
}

// TestDecodeMatchesLibjpegTurbo compares every fixture pixel for pixel with libjpeg-turbo's decode.
// image/jpeg is measured on the same files to show that the fixtures tell the two apart.
func TestDecodeMatchesLibjpegTurbo(t *testing.T) {
	stdDiffers := 0
	n := 0
	for _, f := range fixtures(t) {
		if f.Orientation != 0 {
			continue // oriented references: see TestOrientationTag and imgio
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			path := filepath.Join("testdata", f.Name+".jpg")
			got := decodeFile(t, path)
			require.Equal(t, image.Rect(0, 0, f.Size[0], f.Size[1]), got.Bounds())
			if strings.HasPrefix(f.Name, "grey") {
				assert.IsType(t, &image.Gray{}, got)
			} else {
				assert.IsType(t, &image.RGBA{}, got)
			}
			want := rgb(testutil.ReadPNG(t, filepath.Join("testdata", f.Name+".png")))
			maxd, nd := diffStats(rgb(got), want)
			assert.Zero(t, nd, "%s (%s): %d of %d values differ from libjpeg-turbo, max %d", f.Name, f.What, nd, len(want), maxd)

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			std, err := stdjpeg.Decode(bytes.NewReader(data))
			if err != nil {
				t.Logf("%-26s image/jpeg fails: %v", f.Name, err)
				stdDiffers++
				return
			}
			smax, sn := diffStats(rgb(std), want)
			t.Logf("%-26s image/jpeg: %4d of %5d values differ, max %2d; this package: %d differ", f.Name, sn, len(want), smax, nd)
			if sn > 0 {
				stdDiffers++
			}
		})
	}
	assert.Greater(t, stdDiffers, n/2, "image/jpeg should differ from libjpeg-turbo on most fixtures")
}

func TestOrientationTag(t *testing.T) {
	for _, f := range fixtures(t) {
		data, err := os.ReadFile(filepath.Join("testdata", f.Name+".jpg"))
		require.NoError(t, err)
		h, err := DecodeHeaderBytes(data)
		require.NoError(t, err)
		assert.Equal(t, f.Orientation, h.Orientation, f.Name)
		if f.Orientation == 0 {
			assert.Equal(t, [2]int{h.Width, h.Height}, f.Size, f.Name)
		}
	}
}

func TestExifOrientationParsing(t *testing.T) {
	ifd := func(order string, tag, typ uint16, count uint32, val uint32) []byte {
		var b bytes.Buffer
		b.WriteString("Exif\x00\x00")
		le := order == "II"
		u16 := func(v uint16) {
			if le {
				b.Write([]byte{byte(v), byte(v >> 8)})
			} else {
				b.Write([]byte{byte(v >> 8), byte(v)})
			}
		}
		u32 := func(v uint32) {
			if le {
				b.Write([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
			} else {
				b.Write([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
			}
		}
		b.WriteString(order)
		u16(42)
		u32(8)
		u16(1)
		u16(tag)
		u16(typ)
		u32(count)
		if typ == 3 {
			u16(uint16(val))
			u16(0)
		} else {
			u32(val)
		}
		u32(0)
		return b.Bytes()
	}
	assert.Equal(t, 6, exifOrientation(ifd("II", 0x0112, 3, 1, 6)))
	assert.Equal(t, 8, exifOrientation(ifd("MM", 0x0112, 3, 1, 8)))
	assert.Equal(t, 3, exifOrientation(ifd("MM", 0x0112, 4, 1, 3)))
	assert.Equal(t, 0, exifOrientation(ifd("II", 0x0112, 3, 1, 9)), "out of range")
	assert.Equal(t, 0, exifOrientation(ifd("II", 0x0110, 3, 1, 6)), "other tag")
	assert.Equal(t, 0, exifOrientation(ifd("XX", 0x0112, 3, 1, 6)), "bad byte order")
	full := ifd("II", 0x0112, 3, 1, 6)
	for n := range len(full) - 4 { // the last 4 bytes (next-IFD offset) are not needed
		assert.Equal(t, 0, exifOrientation(full[:n]), "truncated to %d bytes", n)
	}
}

// TestSharedDataJPEGs decodes the JPEGs of the shared test data (read in place) and compares a hash of
// the RGB bytes with cv2's decode, recorded by the fixture script.
func TestSharedDataJPEGs(t *testing.T) {
	dir := testutil.SharedData(t)
	b, err := os.ReadFile("testdata/shared.json")
	require.NoError(t, err)
	var want map[string]struct {
		Size      [2]int `json:"size"`
		RGBSHA256 string `json:"rgb_sha256"`
	}
	require.NoError(t, json.Unmarshal(b, &want))
	require.NotEmpty(t, want)
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s not in the shared data", path)
			}
			img := decodeFile(t, path)
			require.Equal(t, image.Rect(0, 0, w.Size[0], w.Size[1]), img.Bounds())
			sum := sha256.Sum256(rgb(img))
			assert.Equal(t, w.RGBSHA256, hex.EncodeToString(sum[:]), "RGB differs from cv2.imread's decode")
		})
	}
}

func TestDecodeConfigMatchesStd(t *testing.T) {
	for _, f := range fixtures(t) {
		data, err := os.ReadFile(filepath.Join("testdata", f.Name+".jpg"))
		require.NoError(t, err)
		got, err := DecodeConfig(bytes.NewReader(data))
		require.NoError(t, err)
		want, err := stdjpeg.DecodeConfig(bytes.NewReader(data))
		require.NoError(t, err)
		assert.Equal(t, [2]int{want.Width, want.Height}, [2]int{got.Width, got.Height}, f.Name)
	}
}

// TestTruncated cuts fixtures at every length: the decoder must never panic, and whenever it returns an
// image that image equals the full decode (only the EOI marker or padding was missing).
func TestTruncated(t *testing.T) {
	for _, name := range []string{"baseline_420", "progressive_420", "restart_422", "grey_progressive"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".jpg"))
		require.NoError(t, err)
		full, err := DecodeBytes(data)
		require.NoError(t, err)
		want := rgb(full)
		ok := 0
		for n := range len(data) {
			img, err := DecodeBytes(data[:n])
			if err != nil {
				continue
			}
			ok++
			require.Equal(t, want, rgb(img), "%s cut to %d of %d bytes decoded to a different image", name, n, len(data))
		}
		assert.Less(t, ok, 8, "%s: only cuts in the last bytes may decode", name)
	}
}

func TestBadInput(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":     nil,
		"not jpeg":  []byte("\x89PNG\r\n\x1a\n"),
		"soi only":  {0xff, 0xd8},
		"no frame":  {0xff, 0xd8, 0xff, 0xd9},
		"zero size": {0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, 0, 0, 0, 1, 1, 0x11, 0, 0xff, 0xd9},
		"12-bit":    {0xff, 0xd8, 0xff, 0xc0, 0, 11, 12, 0, 8, 0, 8, 1, 1, 0x11, 0, 0xff, 0xd9},
		"arith":     {0xff, 0xd8, 0xff, 0xc9, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0, 0xff, 0xd9},
	} {
		_, err := DecodeBytes(data)
		assert.Error(t, err, name)
	}
}

func FuzzDecode(f *testing.F) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".jpg") && (strings.HasPrefix(e.Name(), "restart") || strings.HasPrefix(e.Name(), "size3") || strings.HasPrefix(e.Name(), "progressive")) {
			b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, herr := DecodeHeaderBytes(data)
		if herr != nil || h.Width*h.Height > 1<<22 {
			return
		}
		img, err := DecodeBytes(data)
		if err != nil {
			return
		}
		if b := img.Bounds(); b.Dx() != h.Width || b.Dy() != h.Height {
			t.Fatal(fmt.Sprintf("decoded %v, header says %dx%d", b, h.Width, h.Height))
		}
	})
}

// TestCMYKFallsBackToStd: four-component files go to image/jpeg (the references disagree with each other
// on their RGB), with the header still read here.
func TestCMYKFallsBackToStd(t *testing.T) {
	data, err := os.ReadFile("testdata/cmyk.jpg")
	require.NoError(t, err)
	h, err := DecodeHeaderBytes(data)
	require.NoError(t, err)
	assert.Equal(t, 4, h.Components)
	img, err := DecodeBytes(data)
	require.NoError(t, err)
	assert.IsType(t, &image.CMYK{}, img)
	assert.Equal(t, image.Rect(0, 0, h.Width, h.Height), img.Bounds())
}
