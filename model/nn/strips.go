package nn

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Upsample is the bilinear resize (align_corners) of a map to W×H that
// convolutions then take, as Upsampled computes it.
type Upsample struct {
	W, H int
	// EmbedMap and EmbedTables, when set (both or neither), give an
	// embedding added to the resized map: as a map [W, H, C, 1], or as the
	// per-column [W, C] and per-row [H, C] tables of kernels.BilinearWindow.
	EmbedMap    func() *ggml.Tensor
	EmbedTables func() (ux, uy *ggml.Tensor)
	// Tap names the resized map for taps; Check adds a finiteness probe of
	// that name too (on the map, or in strips on its input: each resized
	// value is a convex combination of the input's, plus the finite
	// embedding).
	Tap   string
	Check bool
	// Convs are the 3×3 convolutions with padding 1 the map goes through
	// first (nil ones skipped).
	Convs []*Conv2D
}

// Upsampled is f of the resized map x, where f applies convs (Upsample.Convs
// as given, or without their padding) to x first. When the graph's kernel
// policy has Strips and the map is large, x is each window of rows of the
// resize (kernels.BilinearWindow: zero border of 1, the convolutions'
// padding, which they then do not add) in turn, and each of f's outputs is
// stacked along the rows: the resized map, the largest of a DPT head,
// never exists whole, and the values are the same. Otherwise x is the
// whole map (nn.Resize, then the embedding).
func Upsampled(g *ggml.Context, b Builder, z *ggml.Tensor, u Upsample, f func(x *ggml.Tensor, convs []*Conv2D) []*ggml.Tensor) []*ggml.Tensor {
	if rows := stripRows(g, z, u.W, u.H, u.Convs); rows > 0 {
		return u.strips(g, b, z, rows, f)
	}
	x := Resize(g, z, u.W, u.H, ggml.ScaleBilinear|ggml.ScaleAlignCorners)
	if u.EmbedMap != nil {
		x = x.Add(g, u.EmbedMap())
	}
	x = b.Tap(u.Tap, x)
	if u.Check {
		b.Check(u.Tap, x)
	}
	return f(x, u.Convs)
}

// strips is Upsampled in strips of rows rows.
func (u Upsample) strips(g *ggml.Context, b Builder, z *ggml.Tensor, rows int, f func(x *ggml.Tensor, convs []*Conv2D) []*ggml.Tensor) []*ggml.Tensor {
	var ux, uy *ggml.Tensor
	if u.EmbedTables != nil {
		ux, uy = u.EmbedTables()
	}
	if u.Check {
		b.Check(u.Tap, z)
	}
	if b.Tapping(u.Tap) { // the whole resized map only for the tap, from the same kernel
		b.Tap(u.Tap, kernels.BilinearWindow(g, z, ux, uy, u.W, u.H, 0, u.H, 0, true))
	}
	convs := make([]*Conv2D, len(u.Convs))
	for i, c := range u.Convs {
		if c != nil {
			convs[i] = unpadded(c)
		}
	}
	var parts [][]*ggml.Tensor // per output, its strips
	for y0 := 0; y0 < u.H; y0 += rows {
		win := kernels.BilinearWindow(g, z, ux, uy, u.W, u.H, y0, min(rows, u.H-y0), 1, true)
		for i, t := range f(win, convs) {
			if i == len(parts) {
				parts = append(parts, nil)
			}
			parts[i] = append(parts[i], t)
		}
	}
	out := make([]*ggml.Tensor, len(parts))
	for i, ts := range parts {
		out[i] = concatRows(g, ts)
	}
	return out
}

// stripRows is the height of the strips (a multiple of 4, so that
// Winograd's 2×2 and 4×4 tiles fall where they do on the whole map) in
// which the resize of z to W×H and the convolutions convs (nil ones
// skipped) run, or 0 for the whole map: without the Strips policy, when one
// strip would hold the whole map, or when a convolution is not 3×3 with
// padding 1.
func stripRows(g *ggml.Context, z *ggml.Tensor, W, H int, convs []*Conv2D) int {
	p := kernels.PolicyOf(g)
	if !p.Strips {
		return 0
	}
	size := p.StripBytes
	if size <= 0 {
		size = 8 << 20
	}
	for _, c := range convs {
		if c == nil {
			continue
		}
		st, pad, dil := c.Params.Norm()
		if c.Weight == nil || c.Weight.Dim(0) != 3 || c.Weight.Dim(1) != 3 || st != 1 || pad != 1 || dil != 1 {
			return 0
		}
	}
	C, S := z.Dim(2), z.Dim(3)
	// At most maxStrips strips (a bounded number of graph nodes).
	rows := int(max(4, size/int64((W+2)*C*S*4), int64((H+maxStrips-1)/maxStrips+3))) &^ 3
	if rows >= H || !kernels.BilinearWindowFits(z, nil, nil, W, H, 0, rows, 1) {
		return 0
	}
	return rows
}

// maxStrips bounds the number of strips of one map.
const maxStrips = 64

// unpadded is c without padding (its input window carries the zero border).
func unpadded(c *Conv2D) *Conv2D {
	u := *c
	u.Params.Pad = 0
	return &u
}

// concatRows stacks maps [W, h_i, C, S] along the rows: with the Strips
// policy by kernels.StackRows (each value copied once for up to
// kernels.MaxStack maps, else once per level of a tree of such stacks),
// otherwise as a balanced tree of concatenations (each value copied about
// log2(len) times).
func concatRows(g *ggml.Context, ts []*ggml.Tensor) *ggml.Tensor {
	if len(ts) == 1 {
		return ts[0]
	}
	if kernels.PolicyOf(g).Strips && kernels.StackRowsFits(ts[:min(len(ts), kernels.MaxStack)]) {
		for len(ts) > kernels.MaxStack {
			var level []*ggml.Tensor
			for i := 0; i < len(ts); i += kernels.MaxStack {
				level = append(level, kernels.StackRows(g, ts[i:min(i+kernels.MaxStack, len(ts))]))
			}
			ts = level
		}
		if kernels.StackRowsFits(ts) {
			return kernels.StackRows(g, ts)
		}
	}
	m := len(ts) / 2
	return concatRows(g, ts[:m]).Concat(g, concatRows(g, ts[m:]), 1)
}
