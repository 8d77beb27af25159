package tile_test

import (
	"context"
	"image"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/da3-go/da3-go/model"
)

// scene is a synthetic high-resolution scene with known depth (truth, in
// the network's unit): a slanted plane with boxes standing out of it
// (sharp edges) and thin poles and a wire.
type scene struct {
	W, H  int
	truth []float32
	boxes []image.Rectangle // the boxes, poles and wire, standing Step above the plane
	img   *image.Gray
}

// Step is how far the boxes stand out of the plane.
const Step = 0.8

func newScene(w, h int) *scene {
	s := &scene{W: w, H: h, truth: make([]float32, w*h), img: image.NewGray(image.Rect(0, 0, w, h))}
	for y := range h {
		for x := range w {
			s.truth[y*w+x] = s.plane(x, y)
		}
	}
	// Boxes of 90–240 pixels, poles 6 wide, a wire 4 high; placed in
	// fractions of the image.
	frac := func(fx0, fy0, fx1, fy1 float64) image.Rectangle {
		return image.Rect(int(fx0*float64(w)), int(fy0*float64(h)), int(fx1*float64(w)), int(fy1*float64(h)))
	}
	s.boxes = []image.Rectangle{
		frac(0.08, 0.10, 0.17, 0.25), frac(0.33, 0.15, 0.45, 0.30), frac(0.60, 0.08, 0.68, 0.20),
		frac(0.10, 0.60, 0.20, 0.75), frac(0.45, 0.55, 0.55, 0.72), frac(0.75, 0.62, 0.87, 0.80),
	}
	for _, fx := range []float64{0.27, 0.62, 0.91} {
		x := int(fx * float64(w))
		s.boxes = append(s.boxes, image.Rect(x, int(0.35*float64(h)), x+6, int(0.9*float64(h))))
	}
	s.boxes = append(s.boxes, image.Rect(int(0.2*float64(w)), int(0.45*float64(h)), int(0.8*float64(w)), int(0.45*float64(h))+4))
	for _, b := range s.boxes {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				s.truth[y*w+x] = s.plane(x, y) + Step
			}
		}
	}
	for i, v := range s.truth {
		s.img.Pix[i] = uint8(min(255, v*80))
	}
	return s
}

func (s *scene) plane(x, y int) float32 {
	return 1 + 0.5*float32(y)/float32(s.H) + 0.2*float32(x)/float32(s.W)
}

// flat is whether (x, y) is at least margin pixels from every box edge.
func (s *scene) flat(x, y, margin int) bool {
	for _, b := range s.boxes {
		if image.Pt(x, y).In(b.Inset(-margin)) && !image.Pt(x, y).In(b.Inset(margin)) {
			return false
		}
	}
	return true
}

// fakeNet is a synthetic "network" at process resolution res: for any crop
// it is given it returns the crop's true depth as a network at res sees
// it (averaged down to the processed size; the tiled run upsamples it
// back) under an unknown transform per call: a random scale in [0.5, 2]
// and, when shift, a random shift in [−1, 1], as relative models do.
type fakeNet struct {
	s     *scene
	res   int
	unit  model.DepthUnit
	shift bool
	// maps: also a confidence map (3 everywhere) and a sky map (the
	// image's top tenth), the sky's depth filled with a far value of each call's own
	// as DA3 mono does.
	maps bool

	mu     sync.Mutex
	rng    *rand.Rand
	calls  int
	global []float32 // the first call's output, and its size
	gw, gh int
	// inFlight counts calls running; live the outputs returned and not yet
	// collected (a finalizer on each); maxInFlight and maxLive their
	// largest values, live read at the start of each call.
	inFlight, maxInFlight int
	live                  atomic.Int64
	maxLive               int64
}

func newFakeNet(s *scene, res int, unit model.DepthUnit, shift bool, seed uint64) *fakeNet {
	return &fakeNet{s: s, res: res, unit: unit, shift: shift, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (f *fakeNet) Config() model.Config { return model.Config{ResizeTarget: f.res} }

func (f *fakeNet) Capabilities() model.Capabilities { return model.Capabilities{Unit: f.unit} }

func (f *fakeNet) Depth(ctx context.Context, img model.Image, opt model.RunOptions) (*model.Result, error) {
	f.mu.Lock()
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	f.maxLive = max(f.maxLive, f.settledLive())

	r := img.Bounds()
	res := opt.ProcessRes
	if res == 0 {
		res = f.res
	}
	scale := float64(res) / float64(max(r.Dx(), r.Dy()))
	pw, ph := max(1, int(math.Round(float64(r.Dx())*scale))), max(1, int(math.Round(float64(r.Dy())*scale)))
	out := make([]float32, pw*ph)
	f.mu.Lock()
	a, b := 0.5+1.5*f.rng.Float64(), 0.0
	if f.shift {
		b = 2*f.rng.Float64() - 1
	}
	far := 5 + f.rng.Float64() // each call's own sky depth
	f.mu.Unlock()
	for j := range ph {
		y0, y1 := r.Min.Y+j*r.Dy()/ph, r.Min.Y+(j+1)*r.Dy()/ph
		for i := range pw {
			x0, x1 := r.Min.X+i*r.Dx()/pw, r.Min.X+(i+1)*r.Dx()/pw
			var sum float64
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					sum += float64(f.s.truth[y*f.s.W+x])
				}
			}
			out[j*pw+i] = float32(a*sum/float64((y1-y0)*(x1-x0)) + b)
		}
	}
	var conf, sk []float32
	if f.maps {
		conf, sk = make([]float32, pw*ph), make([]float32, pw*ph)
		for j := range ph {
			for i := range pw {
				conf[j*pw+i] = 3
				if r.Min.Y+(2*j+1)*r.Dy()/(2*ph) < f.s.H/10 {
					sk[j*pw+i] = 1
					out[j*pw+i] = float32(a*far + b)
				}
			}
		}
	}
	f.mu.Lock()
	if f.calls == 0 {
		f.global, f.gw, f.gh = append([]float32(nil), out...), pw, ph
	}
	f.calls++
	f.mu.Unlock()
	f.live.Add(1)
	runtime.SetFinalizer(&out[0], func(*float32) { f.live.Add(-1) })
	return &model.Result{Depth: out, Conf: conf, Sky: sk, Unit: f.unit, Width: pw, Height: ph, ProcessedWidth: pw, ProcessedHeight: ph,
		OrigWidth: r.Dx(), OrigHeight: r.Dy()}, nil
}

// settledLive is live after collections have run the finalizers of what
// is no longer referenced (waiting up to half a second for them while it
// is above 1, the global pass the tiled run keeps).
func (f *fakeNet) settledLive() int64 {
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		runtime.GC()
		if n := f.live.Load(); n <= 1 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
