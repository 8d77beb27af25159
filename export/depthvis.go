package export

import (
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// DepthVis returns the official depth visualisation of a view (depth_anything_3.utils.export.depth_vis):
// the image and its coloured depth side by side, 2·Width × Height. The colouring is
// depth_anything_3.utils.visualize.visualize_depth: inverse depth over the positive pixels, normalised
// between its 2nd and 98th percentiles, reversed (near = red, far = blue in matplotlib's "Spectral"),
// computed in float32 as numpy does.
func DepthVis(v *View) (*image.RGBA, error) {
	if err := v.check(0, false, true); err != nil {
		return nil, err
	}
	if v.RGB == nil {
		return nil, fmt.Errorf("view %s: the depth visualisation needs the image (RGB)", v.Name)
	}
	w, h := v.Width, v.Height
	img := image.NewRGBA(image.Rect(0, 0, 2*w, h))
	for y := range h {
		for x := range w {
			i := y*w + x
			o := img.PixOffset(x, y)
			copy(img.Pix[o:o+3], v.RGB[3*i:3*i+3])
			img.Pix[o+3] = 255
		}
	}
	for i, c := range visualizeDepth(v.Depth) {
		o := img.PixOffset(w+i%w, i/w)
		copy(img.Pix[o:o+3], c[:])
		img.Pix[o+3] = 255
	}
	return img, nil
}

// visualizeDepth is visualize_depth(depth) with its defaults (percentile 2, cmap "Spectral", uint8).
func visualizeDepth(depth []float32) [][3]uint8 {
	inv := make([]float32, len(depth))
	var valid []float32
	for i, d := range depth {
		inv[i] = d
		if d > 0 {
			inv[i] = 1 / d
			valid = append(valid, inv[i])
		}
	}
	var lo, span float32
	if len(valid) <= 10 {
		// depth_min = depth_max = 0 (Python ints), then ∓1e-6 in float64.
		lo, span = float32(-1e-6), float32(1e-6-(-1e-6))
	} else {
		s := sorted32(valid)
		lo32, hi32 := percentile(s, 2), percentile(s, 98)
		if lo32 == hi32 {
			lo32, hi32 = lo32-float32(1e-6), hi32+float32(1e-6)
		}
		lo, span = lo32, hi32-lo32
	}
	out := make([][3]uint8, len(depth))
	for i, d := range inv {
		t := (d - lo) / span
		t = 1 - min(max(t, 0), 1) // numpy clip: NaN stays NaN
		if math.IsNaN(float64(d)) {
			continue // matplotlib's "bad" colour: transparent black
		}
		out[i] = Spectral(t)
	}
	return out
}

// Spectral is matplotlib's "Spectral" colormap at t as 8-bit RGB (each
// channel truncated from value·255): t clipped to [0, 1], 0 dark red, 1
// violet blue, the 256 colours at ⌊256·t⌋ (255 for t = 1); NaN is black
// (matplotlib's "bad" colour).
func Spectral(t float32) [3]uint8 {
	if t != t {
		return [3]uint8{}
	}
	x := min(max(t, 0), 1) * 256
	if x == 256 {
		x = 255
	}
	return spectralLUT[min(int(x), 255)]
}

// WriteDepthVis writes DepthVis(v) as JPEG quality 95 (the official export's format) or, when path ends in
// .png, as a lossless PNG.
func WriteDepthVis(path string, v *View) error {
	img, err := DepthVis(v)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".png") {
		return atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, img) }, v.Source)
	}
	return atomicfile.Write(path, func(w io.Writer) error { return jpeg.Encode(w, img, &jpeg.Options{Quality: 95}) }, v.Source)
}
