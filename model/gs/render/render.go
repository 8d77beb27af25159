// Package render rasterises 3D Gaussians (package gs) into images on the
// CPU the way gsplat's "classic" 3DGS rasteriser does (gsplat.rasterization
// with its defaults, the renderer behind depth_anything_3's gs_video
// export): each Gaussian is projected to the image with the EWA splatting
// Jacobian, its 2D covariance widened by a low-pass filter of 0.3 pixels²,
// binned into 16×16 tiles, sorted by depth within each tile and composited
// front to back until the transmittance falls to 1e-4. Colours are the
// Gaussians' spherical harmonics seen from the camera (+0.5, clamped at 0,
// as gsplat does); the expected depth is rendered alongside (gsplat's
// "RGB+ED").
//
// Pure Go, float32 compositing, parallel over tiles; the result does not
// depend on the number of workers.
package render

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/da3-go/da3-go/internal/par"

	"github.com/da3-go/da3-go/model/gs"
)

// gsplat's constants and defaults.
const (
	// TileSize is the side of the square tiles the image is cut into.
	TileSize = 16
	// LowPass is gsplat's eps2d, added to the diagonal of every projected
	// covariance (pixels²): no Gaussian is thinner than about half a pixel.
	LowPass = 0.3
	// AlphaThreshold: a Gaussian whose alpha at a pixel is below it is
	// skipped there (and one whose opacity is below it, everywhere).
	AlphaThreshold = 1.0 / 255
	// MaxAlpha caps a Gaussian's alpha (gsplat 0.999; the original 3DGS
	// rasteriser 0.99).
	MaxAlpha = 0.999
	// MinTransmittance ends a pixel: the Gaussian that would bring its
	// transmittance to it or below is not composited, nor any behind it.
	MinTransmittance = 1e-4
	// Near and Far are the clipping planes (camera z): Gaussians whose
	// centre lies outside are culled.
	Near = 0.01
	Far  = 1e10
	// extendCap bounds the bounding box at 3.33 standard deviations.
	extendCap = 3.33
)

// Camera is a pinhole camera: world-to-camera extrinsics (OpenCV axes: x
// right, y down, z forward) and intrinsics in pixels of a Width × Height
// image. Pixel (i, j) has its centre at (j+0.5, i+0.5).
type Camera struct {
	Width, Height  int
	Extrinsics     [3][4]float64
	Fx, Fy, Cx, Cy float64
}

// Options are the renderer's settings.
type Options struct {
	// Background is the colour behind the Gaussians (depth_anything_3:
	// black).
	Background [3]float32
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
}

// Frame is a rendered image.
type Frame struct {
	Width, Height int
	// RGB holds 3 values per pixel, row-major: the composited colour plus
	// the background times the transmittance left; at least 0, not clamped
	// above (RGB8 clamps).
	RGB []float32
	// Depth is the expected camera z (Σ wᵢzᵢ / max(Alpha, 1e-10); 0 where
	// nothing was composited).
	Depth []float32
	// Alpha is 1 − the transmittance left.
	Alpha []float32
}

// RGB8 is the frame as 8-bit RGB, each value clamped to [0, 1], times 255
// and truncated (torch's (x.clamp(0, 1)·255).byte()); dst is reused when
// large enough.
func (f *Frame) RGB8(dst []byte) []byte {
	n := len(f.RGB)
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	for i, v := range f.RGB {
		dst[i] = byte(min(max(v, 0), 1) * 255)
	}
	return dst
}

// ErrInput reports Gaussians or a camera the renderer cannot use.
var ErrInput = errors.New("render input")

// Renderer renders one set of Gaussians from any number of cameras. It
// keeps its buffers between frames; a Renderer is not safe for concurrent
// use (Render is parallel inside).
type Renderer struct {
	g       *gs.Gaussians
	n       int
	deg     int
	cov     []float32 // the world covariances, 6 per Gaussian: xx, xy, xz, yy, yz, zz
	opt     Options
	workers int

	splats []splat    // per Gaussian, valid where visible
	tiles  []int32    // per Gaussian: its number of tiles (0: culled)
	keys   []uint64   // the tiles' entries, tile after tile
	starts []int      // per tile, its first entry in keys (tiles+1 values)
	counts [][]int32  // per chunk of Gaussians, entries per tile
	bufs   []*tileBuf // per worker
}

// splat is a Gaussian projected to the image.
type splat struct {
	x, y               float32 // the mean in pixels
	a, b, c            float32 // the conic: the inverse 2D covariance [[a, b], [b, c]]
	op                 float32 // opacity
	lnop               float32 // ln(255·op): for σ (half the squared Mahalanobis distance) beyond it alpha < 1/255
	rgb                [3]float32
	z                  float32 // camera depth of the mean
	rx, ry             float32 // the bounding box's half sides (pixels)
	tx0, tx1, ty0, ty1 int32   // the tiles it touches, [tx0, tx1) × [ty0, ty1)
}

// New checks g and prepares its covariances. g must not change while the
// Renderer is used.
func New(g *gs.Gaussians, opt Options) (*Renderer, error) {
	if g == nil {
		return nil, fmt.Errorf("%w: no Gaussians", ErrInput)
	}
	n := len(g.Opacities)
	if len(g.Means) != 3*n || len(g.Scales) != 3*n || len(g.Rotations) != 4*n || g.SHDim < 1 || len(g.Harmonics) != 3*g.SHDim*n {
		return nil, fmt.Errorf("%w: inconsistent Gaussians (%d opacities, %d means, %d scales, %d rotations, %d SH values of %d coefficients)",
			ErrInput, n, len(g.Means), len(g.Scales), len(g.Rotations), len(g.Harmonics), g.SHDim)
	}
	if n >= math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d Gaussians, at most %d", ErrInput, n, math.MaxInt32-1)
	}
	deg := int(math.Sqrt(float64(g.SHDim))) - 1
	if (deg+1)*(deg+1) != g.SHDim || deg > 3 {
		return nil, fmt.Errorf("%w: %d SH coefficients per colour: want (degree+1)², degree 0 to 3", ErrInput, g.SHDim)
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &Renderer{g: g, n: n, deg: deg, opt: opt, workers: workers,
		cov: make([]float32, 6*n), splats: make([]splat, n), tiles: make([]int32, n)}
	r.parallelChunks(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			covariance(r.cov[6*i:6*i+6], g.Rotations[4*i:4*i+4], g.Scales[3*i:3*i+3])
		}
	})
	return r, nil
}

// covariance sets c to R·S²·Rᵀ, R the rotation of the quaternion q read as
// gsplat reads it, (w, x, y, z), normalised (a zero quaternion is the
// identity), S the scales. gs.Gaussians hold mat_to_quat's (x, y, z, w) in
// a field the package documents as wxyz, and gsplat reads it as wxyz: so
// does the renderer, to render what depth_anything_3 renders.
func covariance(c []float32, q, s []float32) {
	w, x, y, z := float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3])
	nq := math.Sqrt(w*w + x*x + y*y + z*z)
	if nq == 0 {
		w, nq = 1, 1
	}
	w, x, y, z = w/nq, x/nq, y/nq, z/nq
	rm := [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
	s2 := [3]float64{float64(s[0]) * float64(s[0]), float64(s[1]) * float64(s[1]), float64(s[2]) * float64(s[2])}
	at := func(i, j int) float32 {
		return float32(rm[i][0]*s2[0]*rm[j][0] + rm[i][1]*s2[1]*rm[j][1] + rm[i][2]*s2[2]*rm[j][2])
	}
	c[0], c[1], c[2], c[3], c[4], c[5] = at(0, 0), at(0, 1), at(0, 2), at(1, 1), at(1, 2), at(2, 2)
}

// Len is the number of Gaussians.
func (r *Renderer) Len() int { return r.n }

// Render renders the Gaussians seen by cam into a new frame.
func (r *Renderer) Render(cam Camera) (*Frame, error) {
	if err := checkCamera(cam); err != nil {
		return nil, err
	}
	npx := cam.Width * cam.Height
	f := &Frame{Width: cam.Width, Height: cam.Height, RGB: make([]float32, 3*npx), Depth: make([]float32, npx), Alpha: make([]float32, npx)}
	tw, th := tilesOf(cam.Width), tilesOf(cam.Height)
	p := newProjector(cam, r.g, r.deg)
	r.parallelChunks(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			r.tiles[i] = p.project(&r.splats[i], i, r.cov[6*i:6*i+6], tw, th)
		}
	})
	r.bin(tw, tw*th)
	r.rasterise(f, tw, th)
	return f, nil
}

// checkCamera refuses sizes and intrinsics that cannot be rendered.
func checkCamera(cam Camera) error {
	if cam.Width < 1 || cam.Height < 1 || cam.Width > 1<<15 || cam.Height > 1<<15 {
		return fmt.Errorf("%w: image size %dx%d (sides 1 to %d)", ErrInput, cam.Width, cam.Height, 1<<15)
	}
	for _, v := range []float64{cam.Fx, cam.Fy} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: focal lengths %g, %g must be positive", ErrInput, cam.Fx, cam.Fy)
		}
	}
	for _, row := range cam.Extrinsics {
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: extrinsics not finite", ErrInput)
			}
		}
	}
	if math.IsNaN(cam.Cx) || math.IsNaN(cam.Cy) || math.IsInf(cam.Cx, 0) || math.IsInf(cam.Cy, 0) {
		return fmt.Errorf("%w: principal point not finite", ErrInput)
	}
	return nil
}

func tilesOf(px int) int { return (px + TileSize - 1) / TileSize }

// chunk is the number of Gaussians a worker takes at a time.
const chunk = 1 << 14

// parallelChunks calls fn on the chunks [lo, hi) of the Gaussians (chunk c
// = [c·chunk, …)) from the renderer's workers.
func (r *Renderer) parallelChunks(fn func(c, lo, hi int)) {
	nc := (r.n + chunk - 1) / chunk
	parallel(r.workers, nc, func(c int) { fn(c, c*chunk, min((c+1)*chunk, r.n)) })
}

// parallel runs fn(0 … n−1) on at most workers goroutines.
func parallel(workers, n int, fn func(i int)) { par.For(workers, n, fn) }

// bin lists, per tile, the Gaussians that touch it as sort keys (depth
// bits, Gaussian index), in two parallel passes over the chunks: count,
// then fill at offsets fixed by the counts.
func (r *Renderer) bin(tw, ntiles int) {
	nc := (r.n + chunk - 1) / chunk
	for len(r.counts) < nc {
		r.counts = append(r.counts, nil)
	}
	r.parallelChunks(func(c, lo, hi int) {
		if len(r.counts[c]) != ntiles {
			r.counts[c] = make([]int32, ntiles)
		}
		cnt := r.counts[c]
		clear(cnt)
		for i := lo; i < hi; i++ {
			if r.tiles[i] == 0 {
				continue
			}
			s := &r.splats[i]
			for ty := s.ty0; ty < s.ty1; ty++ {
				for tx := s.tx0; tx < s.tx1; tx++ {
					cnt[int(ty)*tw+int(tx)]++
				}
			}
		}
	})
	// The counts become each chunk's first position in each tile.
	if cap(r.starts) < ntiles+1 {
		r.starts = make([]int, ntiles+1)
	}
	r.starts = r.starts[:ntiles+1]
	at := 0
	for t := range ntiles {
		r.starts[t] = at
		for c := range nc {
			k := int(r.counts[c][t])
			r.counts[c][t] = int32(at - r.starts[t])
			at += k
		}
	}
	r.starts[ntiles] = at
	if cap(r.keys) < at {
		r.keys = make([]uint64, at+at/4)
	}
	r.keys = r.keys[:at]
	r.parallelChunks(func(c, lo, hi int) {
		off := r.counts[c]
		for i := lo; i < hi; i++ {
			if r.tiles[i] == 0 {
				continue
			}
			s := &r.splats[i]
			key := uint64(math.Float32bits(s.z))<<32 | uint64(i)
			for ty := s.ty0; ty < s.ty1; ty++ {
				for tx := s.tx0; tx < s.tx1; tx++ {
					t := int(ty)*tw + int(tx)
					r.keys[r.starts[t]+int(off[t])] = key
					off[t]++
				}
			}
		}
	})
}
