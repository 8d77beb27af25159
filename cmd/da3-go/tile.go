package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/tile"
)

// tileMode is -tile: when depth runs images tiled.
type tileMode int

const (
	tileOff  tileMode = iota
	tileOn            // every image
	tileAuto          // images whose longer side is at least autoTileFactor × the process resolution
)

// autoTileFactor: -tile auto tiles an image whose longer side is at least
// this many times the process resolution, where the global pass sees it
// at a quarter of its resolution or coarser.
const autoTileFactor = tile.AutoFactor

func (m *tileMode) String() string {
	switch *m {
	case tileOn:
		return "on"
	case tileAuto:
		return "auto"
	}
	return "off"
}

func (m *tileMode) Set(s string) error {
	switch s {
	case "off":
		*m = tileOff
	case "on":
		*m = tileOn
	case "auto":
		*m = tileAuto
	default:
		return errors.New("want on, auto or off")
	}
	return nil
}

// tileFlags are depth's tiling flags.
type tileFlags struct {
	mode    tileMode
	size    int
	overlap float64
	fit     string
}

func (f *tileFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.mode, "tile", fmt.Sprintf("high-resolution depth for large images: on runs each image once whole (the global pass) and again in overlapping tiles, each at the process resolution, "+
		"fits each tile's map to the global pass and blends them into one map at the image size; auto does so for images whose longer side is at least %d× the process resolution "+
		"(2016 pixels for DA3 at 504); off runs each image once", autoTileFactor))
	fs.IntVar(&f.size, "tile-size", 0, "with -tile: the tiles' side in pixels of the image (0: a quarter of the longer side, within 1–4× the process resolution); "+
		"smaller tiles show the network more detail and cost more runs")
	fs.Float64Var(&f.overlap, "tile-overlap", tile.DefaultOverlap, "with -tile: share of a tile's side in common with each neighbour, in (0, 0.5]; the tiles blend across it")
	fs.StringVar(&f.fit, "tile-fit", "auto", "with -tile: how each tile is brought to the global pass: affine (scale and shift), scale, or auto (affine for relative depth and disparity, scale for metric depth)")
}

// options checks the tiling flags against depth's others and returns the
// tiled runs' options.
func (f *tileFlags) options(d *depthFlags) (tile.Options, error) {
	var o tile.Options
	if f.mode == tileOff {
		return o, nil
	}
	switch {
	case f.size != 0 && f.size < 8:
		return o, fmt.Errorf("-tile-size %d: want 0 (automatic) or at least 8 pixels", f.size)
	case !(f.overlap > 0 && f.overlap <= 0.5):
		return o, fmt.Errorf("-tile-overlap %g: want a share in (0, 0.5]", f.overlap)
	case d.processedSize:
		return o, errors.New("-tile makes maps at the image size: it does not go with -processed-size")
	case d.gaussians != "":
		return o, errors.New("-tile: the 3D Gaussians are not merged across tiles; drop -gaussians")
	case d.cameras != "":
		return o, errors.New("-tile runs each image alone: it does not go with -cameras")
	case d.streamFlags.stream || d.streamFlags.window > 0:
		return o, errors.New("-tile runs each image alone: it does not go with -stream or -window")
	}
	switch f.fit {
	case "auto":
		o.Fit = tile.FitAuto
	case "affine":
		o.Fit = tile.FitAffine
	case "scale":
		o.Fit = tile.FitScale
	default:
		return o, fmt.Errorf("-tile-fit %q: want affine, scale or auto", f.fit)
	}
	o.Size, o.Overlap = f.size, f.overlap
	return o, nil
}

// tiles reports whether an image of w×h runs tiled, at process resolution
// res.
func (f *tileFlags) tiles(w, h, res int) bool {
	switch f.mode {
	case tileOn:
		return true
	case tileAuto:
		return tile.Worth(w, h, res)
	}
	return false
}

// tiled runs the images one at a time, each tiled where -tile says, and
// writes its maps; a bar counts each image's runs (the global pass and the
// tiles).
func (d *depthRun) tiled(ctx context.Context, m da3.Runner, w *mapWriter) error {
	f, caps, n := &d.f, m.Capabilities(), len(d.in.names)
	if caps.MultiView && !f.independent && n > 1 {
		return errors.New("-tile runs each image alone, not as views of one scene: give -independent (or one image)")
	}
	res := d.opt.ProcessRes
	if res == 0 {
		res = m.Config().ResizeTarget
	}
	mem := estimateDepthMemory(m, d.opt, d.in.names, d.sizes, 1, d.formats, false)
	maps := int64(1)
	if caps.Confidence {
		maps++
	}
	if caps.Sky {
		maps++
	}
	mem.merge = maps * 4 * int64(mem.size.X) * int64(mem.size.Y)
	if err := checkDepthMemory(mem, d.opt, d.formats, false); err != nil {
		return err
	}
	orient := f.rotates(caps)
	for i, p := range d.in.paths {
		if err := checkDecodeMemory(d.sizes[i : i+1]); err != nil {
			return err
		}
		img, err := decodeOriented(p, orient)
		if err != nil {
			return err
		}
		r, err := d.tiledOne(ctx, m, img, d.in.names[i], res)
		if err != nil {
			return fmt.Errorf("%s: %w", d.in.names[i], err)
		}
		img = nil
		if err := w.write(i, r); err != nil {
			return err
		}
	}
	return nil
}

// tiledOne runs one image, tiled if -tile says so.
func (d *depthRun) tiledOne(ctx context.Context, m da3.Runner, img model.Image, name string, res int) (*model.Result, error) {
	f, opt := &d.f, d.opt
	b := img.Bounds()
	if !f.tile.tiles(b.Dx(), b.Dy(), res) {
		bar := newItemBar(1, "depth", f.quiet, d.stderr)
		defer bar.finish()
		opt.Progress = bar.tell
		return m.Depth(ctx, img, opt)
	}
	o := d.tileOpt
	overlap := o.Overlap
	if overlap == 0 {
		overlap = tile.DefaultOverlap
	}
	lay, err := tile.Plan(b.Dx(), b.Dy(), o.Size, o.Overlap, res)
	if err != nil {
		return nil, asUsage(err)
	}
	parts := len(lay.Tiles) + 1
	switch {
	case parts == 2:
		parts = 1 // one tile: the global pass alone
	case !f.quiet:
		fmt.Fprintf(d.stderr, "da3-go: %s: %dx%d in %s of %d pixels (overlap at least %d) and a global pass\n", name, b.Dx(), b.Dy(), tileCount(lay), lay.Size, int(overlap*float64(lay.Size)+0.5))
	}
	bar := newItemBar(parts, "tiles "+filepath.Base(name), f.quiet, d.stderr)
	defer bar.finish()
	bar.cover(0, parts)
	o.Run = opt
	o.Run.Progress = bar.tell
	return tile.Depth(ctx, m, img, o)
}

// tileCount is "C×R tiles".
func tileCount(l tile.Layout) string {
	cols := 0
	for _, t := range l.Tiles {
		if t.Min.Y == 0 {
			cols++
		}
	}
	return fmt.Sprintf("%d×%d tiles", cols, len(l.Tiles)/cols)
}
