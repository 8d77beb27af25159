package server

import (
	"image"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/export/tsdf"
	"github.com/da3-go/da3-go/internal/sysmem"
)

// bigRequest is the estimate above which the server hands the request's
// memory back to the system once the response is written.
const bigRequest = 256 << 20

// formatBytes is what one map costs per pixel in each format: the encoded
// bytes or the image encoded, their base64 text, and that text again in the
// JSON encoder's buffer (PNG at its worst, uncompressed).
var formatBytes = map[string]float64{
	"f32":   2 * 4 * 4 / 3.0,
	"npy":   4 + 2*4*4/3.0,
	"png":   4 + 4 + 2*4*4/3.0,
	"png16": 2 + 2 + 2*2*4/3.0,
}

// budget is a request's memory estimate, by part.
type budget struct {
	decode, model, maps, extra int64
	lens                       int64       // undistortion (camera_model)
	out                        image.Point // the maps' size (largest view)
	views, nmaps               int
}

func (b budget) total() int64 { return b.decode + b.model + b.maps + b.extra + b.lens }

// estimate estimates the memory of request p on instance in: the decoded
// images (4 bytes a pixel), the model's compute buffers, host buffers and
// kernel scratch at the processed size (its own planning; weights are
// loaded already), the maps at their output size in every format asked
// for, and the exports and point cloud.
func (s *Server) estimate(in *instance, p *parsed, m ModelInfo) (budget, error) {
	var b budget
	b.views = len(p.sizes)
	big := image.Point{}
	for _, sz := range p.sizes {
		b.decode += 4 * int64(sz.X) * int64(sz.Y)
		if sz.X*sz.Y > big.X*big.Y {
			big = sz
		}
	}
	if b.views == 0 {
		return b, nil
	}
	o := p.runOptions()
	opt, err := o.modelOptions()
	if err != nil {
		return b, err
	}
	proc := big
	// An image the model cannot take is left to the run, which names the
	// problem; its estimate is then the other parts.
	if e, err := in.r.EstimateMemory(opt, b.views, big.X, big.Y); err == nil {
		proc = image.Pt(e.Width, e.Height)
		b.model = e.Compute + e.Host + e.Scratch
		// The maps are counted below at the size they come out at.
		b.model -= e.Maps
	}
	b.out = big
	if o.processedSize {
		b.out = proc
	}
	w := p.wants(m)
	for _, on := range []bool{w.depth, w.conf && m.Confidence, w.sky && m.Sky} {
		if on {
			b.nmaps++
		}
	}
	formats := p.req.MapFormats
	if len(formats) == 0 {
		formats = []string{"f32"}
	}
	perPixel := 4.0 // the float map itself
	for _, f := range formats {
		perPixel += formatBytes[f]
	}
	px := float64(b.views) * float64(b.out.X) * float64(b.out.Y)
	b.maps = int64(px * float64(b.nmaps) * perPixel)
	// Points (x, y, z, colour, and their base64 in the response) and
	// exports (about 20 bytes a point before base64) at the processed size.
	ppx := float64(b.views) * float64(proc.X) * float64(proc.Y)
	if p.req.IncludePoints {
		b.extra += int64(ppx * 15 * (1 + 2*4/3.0))
	}
	b.extra += int64(ppx * 20 * (1 + 2*4/3.0) * float64(len(p.req.Exports)))
	// gs_video holds every frame's image and depth (about 7 bytes a pixel of the processed size) until
	// the depth's colours are known, then the encoded video and its base64.
	if slices.Contains(p.req.Exports, "gs_video") {
		b.extra += gsVideoFrames(b.views) * int64(proc.X) * int64(proc.Y) * 8
	}
	// Tiles merge into full-size buffers, one per map the model has.
	if p.req.tiling() {
		n := 1
		for _, on := range []bool{m.Confidence, m.Sky} {
			if on {
				n++
			}
		}
		b.extra += tileMerge(big.X, big.Y, n)
	}
	// The mesh exports share one TSDF volume of at most meshBlocks blocks,
	// and its mesh (counted as large again).
	if slices.ContainsFunc(p.req.Exports, func(e string) bool { return strings.HasPrefix(e, "mesh_") }) {
		b.extra += 2 * meshBlocks * tsdf.BlockBytes
	}
	if p.lens != nil {
		b.lens = lensBytes(p, b, proc)
	}
	return b, nil
}

// lensBytes estimates the undistortion's memory: per image its RGB pixels,
// their undistorted copy and the undistorted image (10 bytes a pixel); per
// image size the undistortion table (8 bytes a pixel); and, mapped back,
// the table back at the maps' and the processed size (8 bytes a pixel) and
// a new copy of every map (the maps' cost again, without their encodings)
// and of each export view (depth, confidence, sky, colours: 15 bytes a
// processed pixel).
func lensBytes(p *parsed, b budget, proc image.Point) int64 {
	var n int64
	sizes := map[image.Point]bool{}
	for _, sz := range p.sizes {
		px := int64(sz.X) * int64(sz.Y)
		n += 10 * px
		if !sizes[sz] {
			sizes[sz] = true
			n += 8 * px
		}
	}
	if p.req.KeepUndistorted {
		return n
	}
	out := int64(b.out.X) * int64(b.out.Y)
	ppx := int64(proc.X) * int64(proc.Y)
	n += 8*out + 8*ppx
	n += int64(b.views) * (int64(b.nmaps)*4*out + 15*ppx)
	return n
}

// checkBudget refuses (413) a request whose estimate exceeds
// -max-request-memory, naming the estimate, the budget and what to lower.
// It returns the estimate.
func (s *Server) checkBudget(in *instance, p *parsed, m ModelInfo) (int64, *apiError) {
	b, err := s.estimate(in, p, m)
	if err != nil {
		return 0, unprocessable("%v", err)
	}
	limit := s.opts.MaxRequestMemory
	if b.total() <= limit {
		return b.total(), nil
	}
	by := func(n int64) string { return sysmem.Bytes(uint64(max(n, 0))) }
	var lower []string
	if !p.req.ProcessedSize && b.maps > b.total()/4 {
		lower = append(lower, "ask for the maps at the processed size (processed_size: true)")
	}
	if len(p.req.MapFormats) > 1 {
		lower = append(lower, "ask for fewer map_formats")
	}
	if b.model > b.total()/4 {
		lower = append(lower, "lower process_res")
	}
	if b.views > 1 {
		lower = append(lower, "send fewer images")
	}
	lower = append(lower, "send smaller images")
	undist := ""
	if b.lens > 0 {
		undist = ", undistortion " + by(b.lens)
	}
	return 0, tooLarge("the request needs about %s of memory (decoded images %s, model %s, %d map(s) of %dx%d for %d view(s) in %s: %s, points and exports %s%s), more than the server's budget of %s per request (-max-request-memory): %s",
		by(b.total()), by(b.decode), by(b.model), b.nmaps, b.out.X, b.out.Y, b.views, formatsOf(p.req.MapFormats), by(b.maps), by(b.extra), undist, by(limit), strings.Join(lower, ", or "))
}

func formatsOf(f []string) string {
	if len(f) == 0 {
		return "f32"
	}
	return strings.Join(f, ",")
}
