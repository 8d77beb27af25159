package stream

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/da3-go/da3-go/model"
)

// frameImage stands for frame i of a synthetic sequence: the fake scenes read the index back.
type frameImage struct{ i, w, h int }

func (f frameImage) ColorModel() color.Model { return color.RGBAModel }
func (f frameImage) Bounds() image.Rectangle { return image.Rect(0, 0, f.w, f.h) }
func (f frameImage) At(x, y int) color.Color { return color.RGBA{uint8(f.i), 0, 0, 255} }

// synthFrames returns n frames that open as frameImage, counting the opens.
func synthFrames(n, w, h int, opens *[]int, mu *sync.Mutex) []Frame {
	fr := make([]Frame, n)
	for i := range fr {
		fr[i] = Frame{Name: fmt.Sprintf("f%05d.png", i), Open: func() (model.Image, error) {
			if opens != nil {
				mu.Lock()
				*opens = append(*opens, i)
				mu.Unlock()
			}
			return frameImage{i, w, h}, nil
		}}
	}
	return fr
}

// room is a synthetic world: the inside of a box [−5, 5]×[−2, 2]×[−6, 6] (OpenCV axes, y down), seen by a
// camera moving along a loop, turning as it goes. Depth is ray-cast exactly.
type room struct {
	w, h int
	k    [3][3]float64
	// closed: the camera goes once around the loop (frame n is frame 0), instead of 70 % of it.
	closed bool
	// boxes are solid boxes inside the room, lo and hi corners.
	boxes [][2][3]float64
}

// furnished are boxes off the camera's path: a pillar in the middle, crates on the floor by the walls, a
// shelf.
var furnished = [][2][3]float64{
	{{-0.4, -2, -0.4}, {0.4, 2, 0.4}},
	{{3.8, 0.5, -1}, {5, 2, 1}},
	{{-1, 1, 4.8}, {1, 2, 6}},
	{{-5, -2, 2}, {-4, 0, 3.5}},
	{{-1.5, 1.2, -2.5}, {-0.5, 2, -1.5}},
	{{1.5, 1.5, 1.5}, {2.2, 2, 2.2}},
	{{4, 1, 2.5}, {5, 2, 3.5}},
	{{4.5, -1, 4.5}, {5, -0.5, 5.5}},
}

func newRoom(w, h int) room {
	f := 0.8 * float64(w)
	return room{w: w, h: h, k: [3][3]float64{{f, 0, float64(w-1) / 2}, {0, f, float64(h-1) / 2}, {0, 0, 1}}}
}

// pose returns frame i's world-to-camera extrinsics: position on an ellipse, heading along it, a slight
// pitch wobble.
func (r room) pose(i, n int) [3][4]float64 {
	frac := 0.7
	if r.closed {
		frac = 1
	}
	t := 2 * math.Pi * float64(i) / float64(max(n, 2)) * frac
	pos := [3]float64{3 * math.Sin(t), 0.3 * math.Sin(5*t), 4 * math.Cos(t)}
	yaw := t + math.Pi/2 + 0.4*math.Sin(3*t)
	pitch := 0.1 * math.Sin(7*t)
	cy, sy, cp, sp := math.Cos(yaw), math.Sin(yaw), math.Cos(pitch), math.Sin(pitch)
	// Camera-to-world rotation: yaw about y, then pitch about x.
	ry := [3][3]float64{{cy, 0, sy}, {0, 1, 0}, {-sy, 0, cy}}
	rx := [3][3]float64{{1, 0, 0}, {0, cp, -sp}, {0, sp, cp}}
	c2w := mul33(ry, rx)
	r2 := transpose33(c2w)
	var e [3][4]float64
	for a := range 3 {
		copy(e[a][:3], r2[a][:])
		e[a][3] = -(r2[a][0]*pos[0] + r2[a][1]*pos[1] + r2[a][2]*pos[2])
	}
	return e
}

// render returns the exact depth map (z in the camera) of a camera with extrinsics e.
func (r room) render(e [3][4]float64) []float32 {
	c2w := extrinsicsToSim3(e).Inverse()
	o := c2w.T
	lo, hi := [3]float64{-5, -2, -6}, [3]float64{5, 2, 6}
	d := make([]float32, r.w*r.h)
	for y := range r.h {
		for x := range r.w {
			dc := [3]float64{(float64(x) - r.k[0][2]) / r.k[0][0], (float64(y) - r.k[1][2]) / r.k[1][1], 1}
			var dw [3]float64
			for a := range 3 {
				dw[a] = c2w.R[a][0]*dc[0] + c2w.R[a][1]*dc[1] + c2w.R[a][2]*dc[2]
			}
			best := math.Inf(1)
			for a := range 3 {
				for _, b := range []float64{lo[a], hi[a]} {
					if dw[a] == 0 {
						continue
					}
					if t := (b - o[a]) / dw[a]; t > 0 && t < best {
						best = t
					}
				}
			}
			for _, b := range r.boxes {
				if t, ok := rayBox(o, dw, b); ok && t < best {
					best = t
				}
			}
			d[y*r.w+x] = float32(best) // dc has z = 1, so t is the depth along the optical axis
		}
	}
	return d
}

// rayBox is the distance along o + t·d to a box seen from outside (slab method).
func rayBox(o, d [3]float64, b [2][3]float64) (float64, bool) {
	lo, hi := math.Inf(-1), math.Inf(1)
	for a := range 3 {
		if d[a] == 0 {
			if o[a] < b[0][a] || o[a] > b[1][a] {
				return 0, false
			}
			continue
		}
		t1, t2 := (b[0][a]-o[a])/d[a], (b[1][a]-o[a])/d[a]
		lo, hi = max(lo, min(t1, t2)), min(hi, max(t1, t2))
	}
	return lo, hi >= lo && lo > 0
}

// windowScene is a fake Scene with known geometry: each MultiView answers the frames' true depth and
// cameras in a frame of its own, as a multi-view network does: the world is the first view's camera,
// scaled so that its median depth is 1; depth is perturbed by multiplicative noise and confidences are
// drawn in [1, 3].
type windowScene struct {
	room      room
	n         int
	noise     float64
	unit      model.DepthUnit
	rigid     bool     // keep the scale (metric windows)
	calls     [][2]int // frames of each call
	failAt    int      // call index that fails (−1: none)
	failErr   error    // its error
	poseNoise float64  // radians of random rotation added to each camera
	// drift is injected at every seam: in each window but the first, the first driftFrames frames (those it
	// shares with the window before) are described in the window's frame moved by Exp(drift +
	// driftJitter·N(0, 1)) (about the window's first camera), so the seam's alignment on them is off by
	// that, and the chain of windows drifts by it at every seam.
	drift       Vec7
	driftJitter float64
	driftFrames int
	// outliers is the fraction of pixels whose depth is off by a factor drawn in [0.6, 1.4] (flying pixels,
	// wrong depth at edges), at confidences like the others'.
	outliers float64
	mu       sync.Mutex
	truth    map[int][]float32
}

func (s *windowScene) depth(i int) []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truth == nil {
		s.truth = map[int][]float32{}
	}
	if d, ok := s.truth[i]; ok {
		return d
	}
	d := s.room.render(s.room.pose(i, s.n))
	s.truth[i] = d
	return d
}

func (s *windowScene) MultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, error) {
	idx := make([]int, len(imgs))
	for k, im := range imgs {
		idx[k] = im.(frameImage).i
	}
	s.mu.Lock()
	call := len(s.calls)
	s.calls = append(s.calls, [2]int{idx[0], idx[len(idx)-1] + 1})
	s.mu.Unlock()
	if call == s.failAt {
		return nil, s.failErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a0 := s.windowFrame(idx[0])
	r := rand.New(rand.NewPCG(uint64(idx[0]), uint64(len(idx))))
	bend := s.drift
	if s.driftJitter > 0 {
		for k := range bend {
			bend[k] += s.driftJitter * r.NormFloat64()
		}
	}
	out := make([]model.Result, len(idx))
	W, H := s.room.w, s.room.h
	for k, i := range idx {
		gt := s.depth(i)
		a := a0
		if bend != (Vec7{}) && idx[0] > 0 && k < s.driftFrames {
			a = Exp(bend).Compose(a0)
		}
		d := make([]float32, len(gt))
		c := make([]float32, len(gt))
		for p := range gt {
			d[p] = float32(float64(gt[p]) * a.S * (1 + s.noise*r.NormFloat64()))
			c[p] = 1 + 2*r.Float32()
			if s.outliers > 0 && r.Float64() < s.outliers {
				d[p] *= float32(0.6 + 0.8*r.Float64())
			}
		}
		e := a.Camera(s.room.pose(i, s.n))
		if s.poseNoise > 0 {
			q := [4]float64{1, s.poseNoise * r.NormFloat64() / 2, s.poseNoise * r.NormFloat64() / 2, s.poseNoise * r.NormFloat64() / 2}
			e = Sim3{S: 1, R: quatToRot(q)}.Camera(e)
		}
		rgb := make([]uint8, 3*len(gt))
		for p := range rgb {
			rgb[p] = uint8(i + p)
		}
		out[k] = model.Result{Depth: d, Conf: c, RGB: rgb, Width: W, Height: H, ProcessedWidth: W, ProcessedHeight: H,
			OrigWidth: 2 * W, OrigHeight: 2 * H, Unit: s.unit,
			Camera: &model.Camera{Extrinsics: e, Intrinsics: s.room.k, IntrinsicsOriginal: scaleK(s.room.k, 2)}}
	}
	return out, nil
}

// windowFrame is the transform from the true world to the frame of a window whose first frame is first:
// that camera's frame, scaled so that its median depth is 1 (unless rigid).
func (s *windowScene) windowFrame(first int) Sim3 {
	a := extrinsicsToSim3(s.room.pose(first, s.n))
	if !s.rigid {
		med := median32(s.depth(first))
		a.S = 1 / med
		a.T = [3]float64{a.T[0] / med, a.T[1] / med, a.T[2] / med}
	}
	return a
}

func scaleK(k [3][3]float64, f float64) [3][3]float64 {
	return [3][3]float64{{k[0][0] * f, 0, k[0][2] * f}, {0, k[1][1] * f, k[1][2] * f}, {0, 0, 1}}
}

func median32(v []float32) float64 {
	s := append([]float32(nil), v...)
	for i := 1; i < len(s); i++ { // insertion sort is fine for test maps
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return float64(s[len(s)/2])
}

var errBoom = errors.New("boom")

// trajectoryError aligns the estimated camera centres to the true ones with one Sim(3) (as absolute
// trajectory error is measured) and returns the RMS centre error relative to the true trajectory's RMS
// spread, and the largest rotation error (degrees) of the cameras after the same alignment.
func trajectoryError(est, truth [][3][4]float64) (ate, rotDeg float64, err error) {
	var a, b []float64
	for i := range est {
		ca, cb := cameraCentre(est[i]), cameraCentre(truth[i])
		a = append(a, ca[:]...)
		b = append(b, cb[:]...)
	}
	g, err := Umeyama(a, b, nil, ScaleLeastSquares)
	if err != nil {
		return 0, 0, err
	}
	var ss float64
	for i := range est {
		p := g.Apply([3]float64{a[3*i], a[3*i+1], a[3*i+2]})
		for k := range 3 {
			ss += (p[k] - b[3*i+k]) * (p[k] - b[3*i+k])
		}
		// Camera-to-world rotations: est moved by g vs truth.
		re := transpose33(extrinsicsToSim3(est[i]).R)
		rt := transpose33(extrinsicsToSim3(truth[i]).R)
		rotDeg = max(rotDeg, rotationAngle(mul33(g.R, re), rt)*180/math.Pi)
	}
	ate = math.Sqrt(ss/float64(len(est))) / spread(b, nil)
	return ate, rotDeg, nil
}
