package tile

import (
	"errors"
	"fmt"
	"image"
	"math"
)

// DefaultOverlap is the share of a tile's side it has in common with each
// neighbour when Options.Overlap is 0.
const DefaultOverlap = 0.25

// Layout is how an image is cut into tiles: square tiles of Size pixels
// (narrower where the image is), overlapping their neighbours, in rows
// from the top left; and the blend weights that merge them.
type Layout struct {
	Width, Height int
	Size          int
	Tiles         []image.Rectangle
	cols, rows    axis
}

// AutoFactor: Worth tiles an image whose longer side is at least this many
// times the process resolution (each tile then seen about AutoFactor times
// finer than the whole image).
const AutoFactor = 4

// Worth reports whether tiling a w×h image at process resolution res shows
// the network markedly more detail than one run: its longer side is at
// least AutoFactor·res.
func Worth(w, h, res int) bool { return max(w, h) >= AutoFactor*res }

// AutoSize is the tile side Plan chooses for a w×h image at process
// resolution res: a quarter of the longer side, so the network sees each
// tile about four times finer than the whole image, but at least res
// (smaller tiles would be enlarged, showing the network nothing more) and
// at most 4·res (finer than four image pixels per processed pixel).
func AutoSize(w, h, res int) int {
	l := max(w, h)
	return min(max((l+3)/4, res), 4*res)
}

// Plan lays out the tiles of a w×h image: tiles of size pixels (AutoSize
// when 0) sharing overlap of their side with each neighbour (DefaultOverlap
// when 0; at most 1/2), spread evenly so the last tile ends at the image's
// edge. An image no larger than a tile is one tile.
func Plan(w, h, size int, overlap float64, res int) (Layout, error) {
	if w < 1 || h < 1 {
		return Layout{}, fmt.Errorf("tile: image size %dx%d", w, h)
	}
	if overlap == 0 {
		overlap = DefaultOverlap
	}
	if !(overlap > 0 && overlap <= 0.5) {
		return Layout{}, fmt.Errorf("tile: overlap %g is not in (0, 1/2]", overlap)
	}
	if size == 0 {
		if res < 1 {
			return Layout{}, errors.New("tile: no process resolution to size the tiles by")
		}
		size = AutoSize(w, h, res)
	}
	if size < 8 {
		return Layout{}, fmt.Errorf("tile: tile size %d is below 8 pixels", size)
	}
	l := Layout{Width: w, Height: h, Size: size, cols: newAxis(w, size, overlap), rows: newAxis(h, size, overlap)}
	for _, y := range l.rows.starts {
		for _, x := range l.cols.starts {
			l.Tiles = append(l.Tiles, image.Rect(x, y, x+l.cols.size, y+l.rows.size))
		}
	}
	return l, nil
}

// Weights are tile i's blend weights, row-major over the tile's rectangle:
// 1 where it alone covers the image, a raised cosine falling to about 0 at
// its edges across each overlap with a neighbour. The tiles' weights sum to
// 1 at every pixel of the image.
func (l Layout) Weights(i int) []float32 {
	wx, wy := l.axisWeights(i)
	out := make([]float32, len(wx)*len(wy))
	for y, a := range wy {
		row := out[y*len(wx) : (y+1)*len(wx)]
		for x, b := range wx {
			row[x] = float32(a * b)
		}
	}
	return out
}

// axisWeights are tile i's weights along x and along y: its weight at
// (x, y) is wy[y]·wx[x].
func (l Layout) axisWeights(i int) (wx, wy []float64) {
	return l.cols.weights(i % len(l.cols.starts)), l.rows.weights(i / len(l.cols.starts))
}

// axis is the tiles along one side of the image: their starts, their
// length (the side, when shorter than a tile), and the transitions between
// neighbours: centred in each overlap, all ramp wide.
type axis struct {
	length, size int
	starts       []int
	centres      []float64 // of the transition between tile k and k+1
	ramp         float64
}

func newAxis(length, size int, overlap float64) axis {
	if length <= size {
		return axis{length: length, size: length, starts: []int{0}}
	}
	ov := max(1, int(math.Round(overlap*float64(size))))
	n := (length-size+size-ov-1)/(size-ov) + 1
	a := axis{length: length, size: size, starts: make([]int, n), ramp: math.Inf(1)}
	for k := range n {
		a.starts[k] = int(math.Round(float64(k) * float64(length-size) / float64(n-1)))
	}
	for k := range n - 1 {
		lo, hi := a.starts[k+1], a.starts[k]+size // the overlap of tiles k and k+1
		a.centres = append(a.centres, float64(lo+hi)/2)
		a.ramp = min(a.ramp, float64(hi-lo))
	}
	// Transitions must not meet: each within half the way to the next.
	for k := 1; k < len(a.centres); k++ {
		a.ramp = min(a.ramp, a.centres[k]-a.centres[k-1])
	}
	return a
}

// weights are tile k's weights along the axis, over its length: sin² up
// across the transition from tile k−1, cos² down across that to tile k+1
// (so neighbours' weights sum to 1), 0 beyond.
func (a axis) weights(k int) []float64 {
	out := make([]float64, a.size)
	s := a.starts[k]
	for i := range out {
		x, w := float64(s+i)+0.5, 1.0
		if k > 0 {
			w *= rampUp((x - a.centres[k-1] + a.ramp/2) / a.ramp)
		}
		if k < len(a.starts)-1 {
			w *= 1 - rampUp((x-a.centres[k]+a.ramp/2)/a.ramp)
		}
		out[i] = w
	}
	return out
}

// rampUp is 0 below t = 0, sin²(πt/2) on [0, 1], 1 above.
func rampUp(t float64) float64 {
	switch {
	case t <= 0:
		return 0
	case t >= 1:
		return 1
	}
	s := math.Sin(math.Pi / 2 * t)
	return s * s
}
