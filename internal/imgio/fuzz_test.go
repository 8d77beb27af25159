package imgio

import (
	"bytes"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// FuzzDecodeBytes feeds mutated images of every format through the bounded entry point (header
// check, TIFF and WebP checks, decoded-size check): no panic escapes, no image over the budget or of
// another size than its header is returned, and the header check agrees with the decoder.
func FuzzDecodeBytes(f *testing.F) {
	src := testImage()
	for _, enc := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return png.Encode(b, src) },
		func(b *bytes.Buffer) error { return bmp.Encode(b, src) },
		func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) },
		func(b *bytes.Buffer) error {
			return tiff.Encode(b, src, &tiff.Options{Compression: tiff.Deflate, Predictor: true})
		},
		func(b *bytes.Buffer) error { return gif.Encode(b, src, nil) },
		func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 90}) },
	} {
		var b bytes.Buffer
		if err := enc(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "rgb4x3_lossless.webp")); err == nil {
		f.Add(b)
	}
	f.Add(webpVP8X(4, 3, 4, 3))
	f.Add(tiffFile(8, 4, 200, 32, 232))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, _, err := DecodeBytes(b, "fuzz")
		hd, herr := DecodeHeaderBytes(b, "fuzz")
		if err != nil {
			return
		}
		if herr != nil {
			t.Fatalf("decoded, but the header check refuses it: %v", herr)
		}
		r := img.Bounds()
		if r.Dx() != hd.Width || r.Dy() != hd.Height {
			t.Fatalf("decoded %v, header says %dx%d", r, hd.Width, hd.Height)
		}
		if int64(r.Dx())*int64(r.Dy()) > MaxPixels() {
			t.Fatalf("decoded %v, over the budget", r)
		}
		_ = image.Image(img)
	})
}

// FuzzDecodeNPY: mutated .npy files never panic, and what decodes holds as many values as its shape.
func FuzzDecodeNPY(f *testing.F) {
	var b bytes.Buffer
	if err := EncodeNPY(&b, []float32{1, 2, 3, 4, 5, 6}, 2, 3); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		data, shape, err := DecodeNPY(bytes.NewReader(in), int64(len(in)))
		if err != nil {
			return
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if n != len(data) {
			t.Fatalf("shape %v but %d values", shape, len(data))
		}
	})
}
