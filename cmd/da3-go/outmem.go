package main

import (
	"fmt"
	"image"
	"strings"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/sysmem"
	"github.com/da3-go/da3-go/model"
)

// formatPixelBytes is what writing one map holds per pixel in each format
// besides the map: the image png encodes (RGBA) or png16 (16-bit grey);
// pfm and npy stream the map through a small buffer.
var formatPixelBytes = map[string]int64{"png": 4, "png16": 2, "pfm": 0, "npy": 0}

// depthMemory is what depth holds at its peak, by part, for the largest
// image: its decoded images, the model's run at the processed size, one
// map at the output size (the maps are resized and written one at a time)
// and the image the costliest format encodes.
type depthMemory struct {
	name          string      // the largest image
	size, out     image.Point // its size and the maps' size
	views         int         // images decoded and run at once
	decode, run   int64
	weights       int64
	mapB, format  int64
	merge         int64 // -tile's maps at the image size, merged tile by tile
	costliest     string
	processedSize image.Point // the maps' size with -processed-size
}

func (d depthMemory) total() int64 { return d.decode + d.run + d.merge + d.mapB + d.format }

// estimateDepthMemory estimates depth's peak memory for the largest of the
// images (sizes), views of which are decoded and run at once (0: the run
// is accounted elsewhere, as for streamed windows; the decoding too).
func estimateDepthMemory(m da3.Runner, opt model.RunOptions, names []string, sizes []imgio.Header, views int, formats []string, processedSize bool) depthMemory {
	var d depthMemory
	big := 0
	for i, s := range sizes {
		if int64(s.Width)*int64(s.Height) > int64(sizes[big].Width)*int64(sizes[big].Height) {
			big = i
		}
	}
	s := sizes[big]
	d.name, d.size, d.views = names[big], image.Pt(s.Width, s.Height), views
	px := int64(d.size.X) * int64(d.size.Y)
	d.decode = int64(views) * 4 * px
	o := opt
	o.ProcessedSize = true // the maps are counted here, at their output size
	d.out, d.processedSize = d.size, d.size
	if e, err := m.EstimateMemory(o, max(views, 1), d.size.X, d.size.Y); err == nil { // else the run names the problem
		if views > 0 {
			d.run += e.Compute + e.Host + e.Scratch
		}
		d.weights += e.Weights
		d.processedSize = image.Pt(e.Width, e.Height)
	}
	if processedSize {
		d.out = d.processedSize
	}
	opx := int64(d.out.X) * int64(d.out.Y)
	d.mapB = 4 * opx
	for _, f := range formats {
		if b := formatPixelBytes[f] * opx; b > d.format || d.costliest == "" {
			d.format, d.costliest = b, f
		}
	}
	return d
}

// checkDepthMemory refuses, before any image is decoded, a depth run whose
// peak (estimateDepthMemory) exceeds -max-memory (weights included) or the
// memory left, naming the parts and what lowers them.
func checkDepthMemory(d depthMemory, opt model.RunOptions, formats []string, processedSize bool) error {
	var limit sysmem.Limit
	need, over := d.total(), false
	if opt.MaxMemory > 0 && d.total()+d.weights > opt.MaxMemory {
		need, over = d.total()+d.weights, true
		limit = sysmem.Limit{Name: "memory limit asked for (-max-memory)", Total: uint64(opt.MaxMemory), Free: uint64(opt.MaxMemory)}
	}
	limits := sysmem.Limits()
	if l, ok := sysmem.Tightest(limits, false); !over && ok && need > int64(l.Free) {
		limit, over = l, true
	}
	// Address space: the Go heap grows in 64 MiB arenas and keeps garbage
	// until its next cycle, so a margin is kept (as the model's check does).
	const margin = 192 << 20
	if l, ok := sysmem.Tightest(limits, true); !over && ok && need+margin > int64(l.Free) {
		limit, over = l, true
	}
	if !over {
		return nil
	}
	by := func(n int64) string { return sysmem.Bytes(uint64(max(n, 0))) }
	parts := []string{}
	if d.decode > 0 {
		parts = append(parts, fmt.Sprintf("decoded image(s) %s", by(d.decode)))
	}
	if d.run > 0 {
		parts = append(parts, fmt.Sprintf("the run %s", by(d.run)))
	}
	if d.merge > 0 {
		parts = append(parts, fmt.Sprintf("the tiles' merged maps %s", by(d.merge)))
	}
	parts = append(parts, fmt.Sprintf("one map at %dx%d %s", d.out.X, d.out.Y, by(d.mapB)))
	if d.format > 0 {
		parts = append(parts, fmt.Sprintf("its %s image %s", d.costliest, by(d.format)))
	}
	if need > d.total() {
		parts = append(parts, fmt.Sprintf("weights %s", by(d.weights)))
	}
	var advice []string
	if !processedSize && d.processedSize != d.size && d.merge == 0 {
		small := d
		small.out = d.processedSize
		opx := int64(small.out.X) * int64(small.out.Y)
		small.mapB = 4 * opx
		small.format = formatPixelBytes[d.costliest] * opx
		advice = append(advice, fmt.Sprintf("use -processed-size (maps at %dx%d: about %s in all)", small.out.X, small.out.Y, by(small.total())))
	}
	if d.format > 0 {
		advice = append(advice, fmt.Sprintf("use fewer -format entries (png holds 4 bytes a pixel while it encodes, png16 2, pfm and npy none; now %s)", strings.Join(formats, ",")))
	}
	if d.run > d.total()/4 {
		advice = append(advice, "lower -process-res")
	}
	if d.views > 1 {
		advice = append(advice, "run fewer images at once (-chunk-size, or -independent)")
	}
	advice = append(advice, "use smaller images")
	return fmt.Errorf("%w for the maps of %s (%dx%d): depth needs about %s (%s), more than the %s; %s",
		model.ErrNotEnoughMemory, d.name, d.size.X, d.size.Y, by(need), strings.Join(parts, ", "),
		freeOf(limit), strings.Join(advice, ", or "))
}

// freeOf names what is left under a limit.
func freeOf(l sysmem.Limit) string {
	if l.Used == 0 {
		return l.String()
	}
	return fmt.Sprintf("%s free under the %s", sysmem.Bytes(l.Free), l)
}
