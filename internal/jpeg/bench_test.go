package jpeg

import (
	"bytes"
	"image"
	stdjpeg "image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/da3-go/da3-go/internal/imgproc"
)

// benchJPEG is a 12-megapixel (4000×3000) 4:2:0 baseline JPEG at quality 90 of a synthetic photo-like
// image (smooth shading, edges, fine texture; about 2 bits per pixel), or the file named by
// $DA3_JPEG_BENCH.
var benchJPEG = sync.OnceValues(func() ([]byte, error) {
	if p := os.Getenv("DA3_JPEG_BENCH"); p != "" {
		return os.ReadFile(p)
	}
	const w, h = 4000, 3000
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			fx, fy := float64(x)/w, float64(y)/h
			shade := 0.5 + 0.4*math.Sin(6*fx+3*fy)*math.Cos(4*fy-2*fx)
			if (x/250+y/310)%3 == 0 { // objects with hard edges
				shade = 1 - shade
			}
			tex := 18 * math.Sin(float64(x)*0.9+float64(y)*0.35) // fine texture
			n := rng.NormFloat64() * 6
			o := img.PixOffset(x, y)
			for c, tint := range [3]float64{1, 0.85 + 0.1*fx, 0.7 + 0.3*fy} {
				img.Pix[o+c] = uint8(max(0, min(255, 255*shade*tint+tex+n)))
			}
			img.Pix[o+3] = 255
		}
	}
	var buf bytes.Buffer
	err := stdjpeg.Encode(&buf, img, &stdjpeg.Options{Quality: 90})
	return buf.Bytes(), err
})

// BenchmarkDecode12MP decodes the same 12-MP JPEG with image/jpeg and with this package, alone ("decode":
// image/jpeg stops at YCbCr planes, this package includes upsampling and colour conversion) and followed by
// the conversion to interleaved RGB that preprocessing performs ("rgb"). Run with -count and compare
// the pairs (benchstat, or the ratio of the medians).
func BenchmarkDecode12MP(b *testing.B) {
	data, err := benchJPEG()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d bytes", len(data))
	run := func(b *testing.B, dec func() (image.Image, error), toRGB bool) {
		b.SetBytes(int64(len(data)))
		cpu0 := cpuTime()
		for b.Loop() {
			img, err := dec()
			if err != nil {
				b.Fatal(err)
			}
			if toRGB {
				imgproc.FromImage(img)
			}
		}
		// CPU time of the process (decoder and garbage collector) is steadier than wall time on a loaded
		// machine.
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
	std := func() (image.Image, error) { return stdjpeg.Decode(bytes.NewReader(data)) }
	turbo := func() (image.Image, error) { return DecodeBytes(data) }
	b.Run("decode/image-jpeg", func(b *testing.B) { run(b, std, false) })
	b.Run("decode/turbo", func(b *testing.B) { run(b, turbo, false) })
	b.Run("rgb/image-jpeg", func(b *testing.B) { run(b, std, true) })
	b.Run("rgb/turbo", func(b *testing.B) { run(b, turbo, true) })
}

// cpuTime returns the user and system CPU time used by the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
