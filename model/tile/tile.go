// Package tile estimates depth at the full resolution of large images. The
// network sees an image at its process resolution (504 pixels on the long
// side for DA3, 518 on the short side for DA2), so a 12–48 Mpx photo loses
// its fine structure. Depth runs the network once on the whole image (the
// global pass, which fixes the map's scale), then on overlapping tiles of
// it, each at the process resolution so the network sees it in detail;
// each tile's map is brought to the global pass's by a robust per-tile fit
// (Fit) and the tiles are blended with raised-cosine weights that fall to
// about 0 at their edges and sum to 1 (Layout.Weights) into one map at the
// image's size.
//
// The fit is made at the global pass's resolution: the tile's map is
// averaged over each global pixel it covers, so the fine detail the global
// pass cannot see does not bias the fit. It is made in the output's own
// domain: DA2's relative output is disparity up to scale and shift (its
// training loss is affine-invariant in disparity), so disparity is fitted
// by scale and shift; DA3's relative depth is depth up to scale in theory,
// but a network shown a crop sees a different field of view and context
// and changes its depth range by more than a factor, which a shift in depth
// absorbs (a fit that would make the tile's depth non-positive falls back
// to scale only); metric outputs (metres, DA3 metric's focal-normalised
// depth) have a true zero and are fitted by scale only, which also absorbs
// the apparent focal length of a crop enlarged to the process resolution.
//
// Memory stays bounded: tiles run one at a time, and besides the image and
// the global pass only float32 maps at the image size are held (depth, and
// confidence or sky where the model has them) with one tile's maps.
package tile

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"runtime"

	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/sky"
	"github.com/da3-go/da3-go/model"
)

// Runner runs the network on one image; da3.Runner and *model.Model are
// Runners.
type Runner interface {
	Config() model.Config
	Capabilities() model.Capabilities
	Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error)
}

// Options tune a tiled run. The zero value tiles with AutoSize and
// DefaultOverlap and the fit FitAuto picks.
type Options struct {
	// Size is the tiles' side in pixels of the image; 0 chooses AutoSize.
	Size int
	// Overlap is the share of a tile's side in common with each neighbour,
	// in (0, 1/2]; 0 means DefaultOverlap.
	Overlap float64
	// Fit is how each tile is brought to the global pass.
	Fit Fit
	// Run are the options of every run (process resolution, resize
	// method, intrinsics, progress…). The maps come back at the image
	// size whatever ProcessedSize says; crop resize methods, taps, known
	// cameras and Gaussians are refused. Progress is told of each run as
	// stage "tiles", part 1 the global pass and part k the tile k−1.
	Run model.RunOptions
}

// Stage is the model.Progress stage of a tiled run's graphs.
const Stage = "tiles"

// Depth runs img tiled (see the package comment) and returns its maps at
// the image's size, in the global pass's unit and scale; the result's
// processed size, RGB and camera are the global pass's. An image no larger
// than one tile is run once.
func Depth(ctx context.Context, r Runner, img model.Image, opt Options) (*model.Result, error) {
	if err := check(opt.Run); err != nil {
		return nil, err
	}
	b := img.Bounds()
	res := opt.Run.ProcessRes
	if res == 0 {
		res = r.Config().ResizeTarget
	}
	lay, err := Plan(b.Dx(), b.Dy(), opt.Size, opt.Overlap, res)
	if err != nil {
		return nil, invalid(err)
	}
	parts := len(lay.Tiles) + 1
	if parts == 2 {
		parts = 1 // the image is the one tile: the global pass alone
	}
	global, err := r.Depth(ctx, img, runOptions(opt.Run, 1, parts, image.Point{}))
	if err != nil {
		return nil, err
	}
	if global.Cropped {
		return nil, invalid(errors.New("tile: the global pass was centre-cropped (a crop resize method): tiles need a resize method that keeps the whole image"))
	}
	if parts == 1 {
		global.ToOriginalSize()
		return global, nil
	}
	// The global pass's working set at the image size (the image in RGB,
	// resized: some 1.4 GB for 48 Mpx) is garbage now, but it set the Go
	// heap's goal to twice its size, and the tiles' garbage would grow the
	// heap to that goal before the next collection (48 Mpx: 3.0 GB peak RSS
	// instead of 2.0). One collection here resets the goal to the merge's
	// own size.
	runtime.GC()
	m := newMerger(lay, global, fitFor(opt.Fit, global.Unit))
	for i, rect := range lay.Tiles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := r.Depth(ctx, crop(img, rect.Add(b.Min)), runOptions(opt.Run, i+2, parts, rect.Min))
		if err != nil {
			return nil, fmt.Errorf("tile %d of %d (%v): %w", i+1, len(lay.Tiles), rect, err)
		}
		if err := m.add(i, t); err != nil {
			return nil, fmt.Errorf("tile %d of %d (%v): %w", i+1, len(lay.Tiles), rect, err)
		}
	}
	return m.result(), nil
}

// inputError is an error of the call's options: errors.Is(err,
// model.ErrInvalidInput) holds, and its text is the underlying error's.
type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{e.err, model.ErrInvalidInput} }

func invalid(err error) error { return inputError{err} }

// check refuses the options a tiled run does not support.
func check(o model.RunOptions) error {
	switch {
	case o.Method == model.UpperBoundCrop || o.Method == model.LowerBoundCrop:
		return invalid(fmt.Errorf("tile: resize method %s crops the image; tiles need a resize method", o.Method))
	case o.Taps != nil:
		return invalid(errors.New("tile: taps are not returned by tiled runs"))
	case o.Extrinsics != nil || o.ViewIntrinsics != nil:
		return invalid(errors.New("tile: known cameras condition a scene; tiled runs are single views"))
	case o.Gaussians:
		return invalid(errors.New("tile: 3D Gaussians are not merged across tiles"))
	}
	return nil
}

// fitFor is the fit of a depth in unit u (see the package comment).
func fitFor(f Fit, u model.DepthUnit) Fit {
	if f != FitAuto {
		return f
	}
	if u == model.Metres || u == model.FocalNormalised {
		return FitScale
	}
	return FitAffine
}

// runOptions are the options of part (of parts) of a tiled run, on a crop
// whose top-left corner is at in the image: maps at the processed size,
// intrinsics moved to the crop's pixels, progress told as Stage.
func runOptions(o model.RunOptions, part, parts int, at image.Point) model.RunOptions {
	o.ProcessedSize = true
	if k := o.Intrinsics; k != nil {
		c := *k
		c.Cx, c.Cy = c.Cx-float64(at.X), c.Cy-float64(at.Y)
		o.Intrinsics = &c
	}
	if tell := o.Progress; tell != nil {
		o.Progress = func(p model.Progress) {
			p.Stage, p.Part, p.Parts = Stage, part, parts
			tell(p)
		}
	}
	return o
}

// crop is the part r of img (in img's coordinates), without copying where
// img's type can.
func crop(img image.Image, r image.Rectangle) image.Image {
	if s, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	}); ok {
		return s.SubImage(r)
	}
	return cropped{img, r}
}

type cropped struct {
	image.Image
	r image.Rectangle
}

func (c cropped) Bounds() image.Rectangle { return c.r }

// merger accumulates the aligned, weighted tiles into maps at the image
// size.
type merger struct {
	lay    Layout
	global *model.Result // at its processed size: the fits compare its pixels
	fit    Fit
	gw, gh int // the global pass's size
	// The merged maps.
	depth, conf   []float32
	sky           []float32
	skyDepth      float32 // the depth the global pass gave the sky, NaN if none
	nonFinite     string
	fallbackTiles int
}

func newMerger(lay Layout, global *model.Result, fit Fit) *merger {
	n := lay.Width * lay.Height
	m := &merger{lay: lay, global: global, fit: fit, depth: make([]float32, n), skyDepth: float32(math.NaN())}
	m.gw, m.gh = global.Width, global.Height
	if global.Conf != nil {
		m.conf = make([]float32, n)
	}
	if global.Sky != nil {
		m.sky = make([]float32, n)
		// The depth sky.Fill gave the global pass's sky, where it filled it.
		first, n := -1, 0
		for i, s := range global.Sky {
			if s >= sky.Threshold {
				n++
				if first < 0 {
					first = i
				}
			}
		}
		if n > 10 && len(global.Sky)-n > 10 {
			m.skyDepth = global.Depth[first]
		}
	}
	m.nonFinite = global.NonFinite
	return m
}

// add aligns tile i's result and adds it, weighted, to the maps.
func (m *merger) add(i int, t *model.Result) error {
	rect := m.lay.Tiles[i]
	tw, th := rect.Dx(), rect.Dy()
	depth, err := atSize(t, t.Depth, tw, th)
	if err != nil {
		return err
	}
	var sk []float32
	if m.sky != nil {
		if sk, err = atSize(t, t.Sky, tw, th); err != nil {
			return err
		}
	}
	if t.NonFinite != "" && m.nonFinite == "" {
		m.nonFinite = t.NonFinite
	}
	f, ok := m.fitTile(rect, depth, sk)
	if !ok {
		// Nothing to align the tile by: the global pass stands there.
		m.fallbackTiles++
		depth = m.globalOver(m.global.Depth, rect)
		f = affine{A: 1}
	}
	wx, wy := m.lay.axisWeights(i)
	accumulate(m.depth, m.lay.Width, rect, depth, wx, wy, f)
	if m.conf != nil {
		c, err := atSize(t, t.Conf, tw, th)
		if err != nil {
			return err
		}
		accumulate(m.conf, m.lay.Width, rect, c, wx, wy, affine{A: 1})
	}
	if m.sky != nil {
		accumulate(m.sky, m.lay.Width, rect, sk, wx, wy, affine{A: 1})
	}
	return nil
}

// atSize is one of a tile's maps at the tile's size w×h.
func atSize(t *model.Result, d []float32, w, h int) ([]float32, error) {
	switch {
	case len(d) != t.Width*t.Height || t.Width < 1 || t.Height < 1:
		return nil, fmt.Errorf("tile: a map of %d values for %dx%d", len(d), t.Width, t.Height)
	case t.Cropped:
		return nil, errors.New("tile: the tile was centre-cropped (a crop resize method)")
	case t.Width == w && t.Height == h:
		return d, nil
	}
	return imgproc.BilinearAlignCorners(d, t.Width, t.Height, w, h), nil
}

// accumulate adds wy[y]·wx[x]·f(d) over rect to acc (stride width), the
// weights of Layout.Weights.
func accumulate(acc []float32, width int, rect image.Rectangle, d []float32, wx, wy []float64, f affine) {
	tw := rect.Dx()
	for y, a := range wy {
		if a == 0 {
			continue
		}
		row := acc[(rect.Min.Y+y)*width+rect.Min.X:][:tw]
		dr := d[y*tw : (y+1)*tw]
		for x, b := range wx {
			if wt := float32(a * b); wt != 0 {
				row[x] += wt * float32(f.A*float64(dr[x])+f.B)
			}
		}
	}
}

// fitTile fits the tile's depth d (its size, over rect) to the global
// pass, at the global pass's pixels: each global pixel whose footprint in
// the image lies in the tile is compared with the tile's mean over that
// footprint, leaving out sky and values that are not finite.
func (m *merger) fitTile(rect image.Rectangle, d, sk []float32) (affine, bool) {
	W, H, tw := m.lay.Width, m.lay.Height, rect.Dx()
	var t, g []float64
	for gy := range m.gh {
		y0, y1 := gy*H/m.gh, (gy+1)*H/m.gh
		if y0 < rect.Min.Y || y1 > rect.Max.Y || y1 <= y0 {
			continue
		}
		for gx := range m.gw {
			x0, x1 := gx*W/m.gw, (gx+1)*W/m.gw
			if x0 < rect.Min.X || x1 > rect.Max.X || x1 <= x0 {
				continue
			}
			gv := float64(m.global.Depth[gy*m.gw+gx])
			if m.global.Sky != nil && m.global.Sky[gy*m.gw+gx] >= sky.Threshold {
				continue
			}
			var sum, skySum float64
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					j := (y-rect.Min.Y)*tw + x - rect.Min.X
					sum += float64(d[j])
					if sk != nil {
						skySum += float64(sk[j])
					}
				}
			}
			n := float64((y1 - y0) * (x1 - x0))
			tv := sum / n
			if skySum/n >= sky.Threshold || math.IsNaN(tv+gv) || math.IsInf(tv+gv, 0) {
				continue
			}
			t, g = append(t, tv), append(g, gv)
		}
	}
	if len(t) < minSamples {
		// A tile smaller than a few global pixels: compare pixel by pixel.
		t, g = m.pixelSamples(rect, d, sk)
	}
	f, ok := robustFit(t, g, m.fit == FitScale)
	if ok && f.B != 0 && m.global.Unit != model.Disparity && !positive(d, f) {
		f, ok = robustFit(t, g, true) // depth must stay positive
	}
	return f, ok
}

// positive is whether f keeps every finite value of d above 0.
func positive(d []float32, f affine) bool {
	for _, v := range d {
		if f.A*float64(v)+f.B <= 0 {
			return false
		}
	}
	return true
}

// pixelSamples pairs the tile's pixels with the global pass's (upsampled)
// over rect, on a grid of at most 64×64.
func (m *merger) pixelSamples(rect image.Rectangle, d, sk []float32) (t, g []float64) {
	tw, th := rect.Dx(), rect.Dy()
	gd := m.globalOver(m.global.Depth, rect)
	var gs []float32
	if sk != nil {
		gs = m.globalOver(m.global.Sky, rect)
	}
	step := max(1, max(tw, th)/64)
	for y := 0; y < th; y += step {
		for x := 0; x < tw; x += step {
			j := y*tw + x
			tv, gv := float64(d[j]), float64(gd[j])
			if sk != nil && (sk[j] >= sky.Threshold || gs[j] >= sky.Threshold) || math.IsNaN(tv+gv) || math.IsInf(tv+gv, 0) {
				continue
			}
			t, g = append(t, tv), append(g, gv)
		}
	}
	return t, g
}

// globalOver is one of the global pass's maps, upsampled to the image size
// as Result.ToOriginalSize does (bilinear, align corners), over rect.
func (m *merger) globalOver(src []float32, rect image.Rectangle) []float32 {
	W, H, gw, gh := m.lay.Width, m.lay.Height, m.gw, m.gh
	scale := func(in, out int) float64 {
		if out < 2 {
			return 0
		}
		return float64(in-1) / float64(out-1)
	}
	sx, sy := scale(gw, W), scale(gh, H)
	tw := rect.Dx()
	out := make([]float32, tw*rect.Dy())
	for y := range rect.Dy() {
		fy := sy * float64(rect.Min.Y+y)
		y0 := min(int(fy), gh-1)
		y1, ly := min(y0+1, gh-1), fy-float64(y0)
		for x := range tw {
			fx := sx * float64(rect.Min.X+x)
			x0 := min(int(fx), gw-1)
			x1, lx := min(x0+1, gw-1), fx-float64(x0)
			top := float64(src[y0*gw+x0])*(1-lx) + float64(src[y0*gw+x1])*lx
			bot := float64(src[y1*gw+x0])*(1-lx) + float64(src[y1*gw+x1])*lx
			out[y*tw+x] = float32(top*(1-ly) + bot*ly)
		}
	}
	return out
}

// result is the merged maps as a result at the image size.
func (m *merger) result() *model.Result {
	g := m.global
	if m.sky != nil && !math.IsNaN(float64(m.skyDepth)) {
		// Each tile filled its sky with its own far depth: the global
		// pass's sky depth stands for all.
		for i, s := range m.sky {
			if s >= sky.Threshold {
				m.depth[i] = m.skyDepth
			}
		}
	}
	return &model.Result{Depth: m.depth, Conf: m.conf, Sky: m.sky, Unit: g.Unit,
		Width: m.lay.Width, Height: m.lay.Height, ProcessedWidth: g.ProcessedWidth, ProcessedHeight: g.ProcessedHeight,
		OrigWidth: m.lay.Width, OrigHeight: m.lay.Height, RGB: g.RGB, Camera: g.Camera,
		NonFinite: m.nonFinite, AlignScale: g.AlignScale, Position: g.Position}
}
