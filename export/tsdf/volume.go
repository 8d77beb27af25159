// Package tsdf fuses depth maps into a truncated signed distance field and extracts its zero crossing as
// a triangle mesh (marching cubes). Depth maps from many views, or from the windows of a streamed
// reconstruction aligned into one frame, become one surface: where a point cloud merge keeps one layer of
// points per view and shows every misalignment as a doubled ("ghosted") surface, the fusion averages the
// views' signed distances and leaves one layer.
//
// The volume is sparse: a hash map of blocks of 8³ voxels, allocated only along the rays' truncation
// bands, with a limit on the number of blocks (Options.MaxBlocks) so that memory stays bounded; a frame
// that would pass it is refused whole with ErrTooManyBlocks and the volume is left as it was.
//
// Conventions: cameras are pinhole with OpenCV axes (x right, y down, z forward), extrinsics are
// world-to-camera [R | t], depth is the z coordinate in the camera frame, and pixel (u, v) = (column, row)
// is at integer coordinates (the centre of the top-left pixel is (0, 0)), as package export has them. The
// signed distance is positive in front of the surface (on the side the cameras saw it from) and negative
// behind it. The package depends on the standard library only.
package tsdf

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/da3-go/da3-go/internal/par"
)

// BlockSize is the edge of a voxel block, in voxels.
const BlockSize = 8

const blockVoxels = BlockSize * BlockSize * BlockSize

// BlockBytes is the memory of one block's voxels: 8³ voxels of 16 bytes (signed distance and weight as
// float32, colour as three uint16 in 1/256 steps, padding).
const BlockBytes = blockVoxels * 16

// Defaults of Options.
const (
	// DefaultTruncation is the truncation distance in voxels: the signed distance is kept within ±4
	// voxels of the surface. Depth noise and misalignment between views up to about this distance are
	// averaged into one surface; structures thinner than it are thickened.
	DefaultTruncation = 4
	// DefaultMaxBlocks caps the volume at 65 536 blocks: 512 MiB of voxels (about 34 million).
	DefaultMaxBlocks = 1 << 16
	// AutoVoxelDivisor is the divisor of the median depth that AutoVoxelSize uses.
	AutoVoxelDivisor = 200
)

// ErrTooManyBlocks is returned (wrapped, with the figures) by Integrate when a frame needs more blocks
// than Options.MaxBlocks allows; the frame is not integrated.
var ErrTooManyBlocks = errors.New("tsdf: too many voxel blocks")

// AutoVoxelSize is the voxel chosen from the scene's scale: its median depth / 200. At DA3's processing
// resolution (504 pixels wide, a field of view near 60°, a focal length near 440 pixels) a pixel covers
// depth/440 at that depth, so a voxel is about two pixels' footprint: each voxel averages several depth
// samples per view, and the detail kept is 0.5 % of the depth, finer than the model's depth error. The
// number of blocks a view allocates then depends on its field of view, not on the image resolution or the
// scene's unit (a few thousand blocks per view). It returns 0 for a median that is not a positive finite
// number.
func AutoVoxelSize(medianDepth float64) float64 {
	if !(medianDepth > 0) || math.IsInf(medianDepth, 1) {
		return 0
	}
	return medianDepth / AutoVoxelDivisor
}

// Options configure a Volume.
type Options struct {
	// VoxelSize is the edge of a voxel in the depth maps' unit; it must be positive (see AutoVoxelSize).
	VoxelSize float64
	// Truncation is the truncation distance in voxels (≥ 1); 0 means DefaultTruncation.
	Truncation float64
	// MaxBlocks caps the blocks allocated (each BlockBytes); 0 means DefaultMaxBlocks.
	MaxBlocks int
	// MaxDepth ignores pixels whose depth exceeds it (the depth cut-off); 0 means no cut-off.
	MaxDepth float64
}

// Stats describe a volume.
type Stats struct {
	VoxelSize  float64 // in the depth maps' unit
	Truncation float64 // in the depth maps' unit
	Blocks     int     // blocks allocated
	MaxBlocks  int     // the limit
	Bytes      int64   // memory of the blocks' voxels: Blocks × BlockBytes
	Frames     int     // frames integrated
}

type voxel struct {
	d, w float32   // normalised signed distance in [−1, 1] and accumulated weight (0: never observed)
	c    [3]uint16 // colour × 256
}

type block struct {
	v     [blockVoxels]voxel
	stamp int // the last frame that touched it
}

// key is a block's coordinates: it holds voxels BlockSize·key … BlockSize·key + BlockSize − 1 per axis.
type key struct{ x, y, z int32 }

// Volume is a sparse TSDF. Voxel g (integer coordinates) samples the field at the point g·VoxelSize. Not
// safe for concurrent use; Integrate itself uses every CPU.
type Volume struct {
	vs, trunc float64 // voxel and truncation in world units
	maxBlocks int
	maxDepth  float64
	blocks    map[key]*block
	frames    int // frames integrated
	epoch     int // frames tried, the stamp of the blocks a frame touches
}

// New returns an empty volume.
func New(opt Options) (*Volume, error) {
	if !(opt.VoxelSize > 0) || math.IsInf(opt.VoxelSize, 1) {
		return nil, fmt.Errorf("tsdf: voxel size %g must be a positive number", opt.VoxelSize)
	}
	tr := opt.Truncation
	if tr == 0 {
		tr = DefaultTruncation
	}
	if !(tr >= 1) || math.IsInf(tr, 1) {
		return nil, fmt.Errorf("tsdf: truncation %g voxels must be at least 1", opt.Truncation)
	}
	mb := opt.MaxBlocks
	if mb == 0 {
		mb = DefaultMaxBlocks
	}
	if mb < 0 {
		return nil, fmt.Errorf("tsdf: block limit %d must be positive (0: %d)", opt.MaxBlocks, DefaultMaxBlocks)
	}
	if !(opt.MaxDepth >= 0) {
		return nil, fmt.Errorf("tsdf: depth cut-off %g must be ≥ 0 (0: none)", opt.MaxDepth)
	}
	// Voxel coordinates are int32 and pack into 20 bits each in the mesh's edge keys; the extent is
	// checked per point (see blockOf).
	return &Volume{vs: opt.VoxelSize, trunc: tr * opt.VoxelSize, maxBlocks: mb, maxDepth: opt.MaxDepth, blocks: map[key]*block{}}, nil
}

// Stats returns the volume's figures.
func (v *Volume) Stats() Stats {
	return Stats{VoxelSize: v.vs, Truncation: v.trunc, Blocks: len(v.blocks), MaxBlocks: v.maxBlocks,
		Bytes: int64(len(v.blocks)) * BlockBytes, Frames: v.frames}
}

// Frame is one depth map with its camera.
type Frame struct {
	Width, Height int
	// Depth is the z-depth per pixel, row-major (top row first); pixels whose depth is not a positive
	// finite number, or exceeds Options.MaxDepth, are ignored (mark sky and masked pixels so, or by a
	// zero weight).
	Depth []float32
	// Weight is each pixel's weight (the model's confidence), or nil for 1 everywhere; pixels whose
	// weight is not positive and finite are ignored.
	Weight []float32
	// RGB is the image, Width·Height·3 values (HWC), or nil (grey).
	RGB []uint8
	// K are the pinhole intrinsics in pixels of the depth map; the last row must be (0, 0, 1).
	K [3][3]float64
	// WorldToCam is the world-to-camera [R | t]; a similarity s·R is accepted (distances are divided by s).
	WorldToCam [3][4]float64
}

// camera is a frame's projection, precomputed.
type camera struct {
	k      [3][3]float64
	w2c    [3][4]float64
	kinv   [3][3]float64
	c2w    [3][4]float64 // camera-to-world, affine
	scale  float64       // camera units per world unit
	centre [3]float64
}

func (f *Frame) check() (*camera, error) {
	n := f.Width * f.Height
	switch {
	case f.Width <= 0 || f.Height <= 0:
		return nil, fmt.Errorf("tsdf: frame size %d×%d", f.Width, f.Height)
	case len(f.Depth) != n:
		return nil, fmt.Errorf("tsdf: %d depth values for a %d×%d frame", len(f.Depth), f.Width, f.Height)
	case f.Weight != nil && len(f.Weight) != n:
		return nil, fmt.Errorf("tsdf: %d weights for a %d×%d frame", len(f.Weight), f.Width, f.Height)
	case f.RGB != nil && len(f.RGB) != 3*n:
		return nil, fmt.Errorf("tsdf: %d colour values for a %d×%d frame", len(f.RGB), f.Width, f.Height)
	case f.K[2] != [3]float64{0, 0, 1}:
		return nil, fmt.Errorf("tsdf: intrinsics' last row %v is not (0, 0, 1)", f.K[2])
	}
	c := &camera{k: f.K, w2c: f.WorldToCam}
	var ok bool
	if c.kinv, ok = inverse3(f.K); !ok {
		return nil, errors.New("tsdf: singular intrinsics")
	}
	r := [3][3]float64{{f.WorldToCam[0][0], f.WorldToCam[0][1], f.WorldToCam[0][2]},
		{f.WorldToCam[1][0], f.WorldToCam[1][1], f.WorldToCam[1][2]},
		{f.WorldToCam[2][0], f.WorldToCam[2][1], f.WorldToCam[2][2]}}
	ri, ok := inverse3(r)
	if !ok || !finite(f.WorldToCam[0][3]+f.WorldToCam[1][3]+f.WorldToCam[2][3]) {
		return nil, errors.New("tsdf: singular or non-finite extrinsics")
	}
	for i := range 3 {
		copy(c.c2w[i][:3], ri[i][:])
		c.c2w[i][3] = -(ri[i][0]*f.WorldToCam[0][3] + ri[i][1]*f.WorldToCam[1][3] + ri[i][2]*f.WorldToCam[2][3])
		c.centre[i] = c.c2w[i][3]
	}
	c.scale = math.Cbrt(math.Abs(det3(r)))
	return c, nil
}

// prepared is a frame's depth and weight with the ignored pixels at 0.
type prepared struct {
	*Frame
	depth, weight []float32
}

// prepare cleans the frame's maps: pixels whose depth is not a positive finite number (or is beyond the
// cut-off) or whose weight is not a positive finite number get depth and weight 0.
func (v *Volume) prepare(f *Frame) *prepared {
	n := f.Width * f.Height
	p := &prepared{Frame: f, depth: make([]float32, n), weight: make([]float32, n)}
	for i, d := range f.Depth {
		if !(d > 0) || math.IsInf(float64(d), 1) || (v.maxDepth > 0 && float64(d) > v.maxDepth) {
			continue
		}
		w := float32(1)
		if f.Weight != nil {
			if w = f.Weight[i]; !(w > 0) || math.IsInf(float64(w), 1) {
				continue
			}
		}
		p.depth[i], p.weight[i] = d, w
	}
	return p
}

// pixel returns the depth and weight of pixel i, ok false when it is ignored.
func (p *prepared) pixel(i int) (d, w float32, ok bool) {
	d, w = p.depth[i], p.weight[i]
	return d, w, w > 0
}

// Integrate fuses one frame: it allocates the blocks within the truncation band of every valid pixel's
// depth, then updates each voxel of those blocks that projects into the frame onto a valid pixel and lies
// in front of, or at most the truncation distance behind, the depth there. The depth and weight at the
// voxel's projection are interpolated bilinearly between the four pixels around it when they are all
// valid and on one surface (depths within the truncation distance), else taken from the nearest pixel; the
// colour is the nearest pixel's. The projective signed distance sdf = (depth − z)/s (z the voxel's depth
// in the camera, s the extrinsics' scale) is clamped to the truncation τ and normalised to [−1, 1], and the
// voxel keeps the running weighted averages
//
//	D ← (W·D + w·sdf/τ) / (W + w),  C ← (W·C + w·rgb) / (W + w),  W ← W + w
//
// with w the pixel's weight, decreasing linearly to 0 from one voxel to τ behind the surface (as voxblox's
// weight drop-off: what lies behind an observed surface, such as the free space just past a convex
// object's silhouette, is the least certain). A frame that would allocate more than Options.MaxBlocks
// blocks in all is refused with ErrTooManyBlocks and leaves the volume unchanged.
func (v *Volume) Integrate(f *Frame) error {
	cam, err := f.check()
	if err != nil {
		return err
	}
	v.epoch++
	p := v.prepare(f)
	touched, err := v.allocate(p, cam)
	if err != nil {
		return err
	}
	v.update(p, cam, touched)
	v.frames++
	return nil
}

// allocate makes the blocks the frame's truncation bands cross and returns every block they cross. The
// rows are traced in parallel; the blocks are then looked up and made in row order.
func (v *Volume) allocate(f *prepared, cam *camera) ([]keyed, error) {
	workers := min(runtime.GOMAXPROCS(0), f.Height)
	rows := make([][]key, workers)
	par.For(workers, workers, func(w int) { rows[w] = v.trace(f, cam, w*f.Height/workers, (w+1)*f.Height/workers) })
	var touched []keyed
	var created []key
	for _, keys := range rows {
		for _, k := range keys {
			b := v.blocks[k]
			if b == nil {
				b = &block{}
				v.blocks[k] = b
				created = append(created, k)
			}
			if b.stamp != v.epoch {
				b.stamp = v.epoch
				touched = append(touched, keyed{k, b})
			}
		}
	}
	if len(v.blocks) > v.maxBlocks {
		need := len(v.blocks)
		for _, k := range created {
			delete(v.blocks, k)
		}
		return nil, fmt.Errorf("%w: a frame (after %d fused) needs %d blocks of %d³ voxels (%d MiB at voxel %g), more than the limit of %d (%d MiB): use a larger voxel or a higher limit",
			ErrTooManyBlocks, v.frames, need, BlockSize, int64(need)*BlockBytes>>20, v.vs, v.maxBlocks, int64(v.maxBlocks)*BlockBytes>>20)
	}
	return touched, nil
}

// trace returns the blocks that the truncation bands of rows y0 … y1−1 cross (a 3D DDA over the block
// grid along each band, from τ in front of the depth to τ behind it), leaving out most repeats.
func (v *Volume) trace(f *prepared, cam *camera, y0, y1 int) []key {
	var keys []key
	bw := v.vs * BlockSize
	band := v.trunc * cam.scale // in camera depth units
	var seen recent
	for y := y0; y < y1; y++ {
		for x := range f.Width {
			d, _, ok := f.pixel(y*f.Width + x)
			if !ok {
				continue
			}
			r := mul33(cam.kinv, [3]float64{float64(x), float64(y), 1})
			var p0, dp [3]float64 // the band's start and length, in blocks
			za, zb := max(float64(d)-band, 0), float64(d)+band
			for i := range 3 {
				dir := cam.c2w[i][0]*r[0] + cam.c2w[i][1]*r[1] + cam.c2w[i][2]*r[2] // world units per unit of depth
				p0[i] = (cam.centre[i] + za*dir) / bw
				dp[i] = (zb - za) * dir / bw
			}
			keys = dda(keys, &seen, p0, dp)
		}
	}
	return keys
}

// recent is a small direct-mapped cache of the blocks a worker has listed, so that the blocks that
// neighbouring pixels share are mostly listed once.
type recent struct {
	k  [256]key
	ok [256]bool
}

// add reports whether k is new to the cache, and puts it there.
func (r *recent) add(k key) bool {
	h := (uint32(k.x)*73856093 ^ uint32(k.y)*19349663 ^ uint32(k.z)*83492791) >> 24
	if r.ok[h] && r.k[h] == k {
		return false
	}
	r.k[h], r.ok[h] = k, true
	return true
}

// dda appends the grid cells the segment p0 → p0 + dp crosses (Amanatides and Woo) that are new to seen;
// it leaves out a segment with an end outside the representable extent.
func dda(keys []key, seen *recent, p0, dp [3]float64) []key {
	var c, step [3]int32
	var tMax, tDelta [3]float64
	for i := range 3 {
		lo, hi := p0[i], p0[i]+dp[i]
		if !(math.Abs(lo) < maxCoord/BlockSize-1 && math.Abs(hi) < maxCoord/BlockSize-1) {
			return keys
		}
		c[i] = int32(math.Floor(lo))
		switch {
		case dp[i] > 0:
			step[i], tDelta[i] = 1, 1/dp[i]
			tMax[i] = (float64(c[i]+1) - lo) / dp[i]
		case dp[i] < 0:
			step[i], tDelta[i] = -1, -1/dp[i]
			tMax[i] = (float64(c[i]) - lo) / dp[i]
		default:
			tMax[i] = math.Inf(1)
		}
	}
	for {
		if k := (key{c[0], c[1], c[2]}); seen.add(k) {
			keys = append(keys, k)
		}
		a := 0
		if tMax[1] < tMax[a] {
			a = 1
		}
		if tMax[2] < tMax[a] {
			a = 2
		}
		if tMax[a] > 1 {
			return keys
		}
		c[a] += step[a]
		tMax[a] += tDelta[a]
	}
}

// maxCoord bounds voxel coordinates to ±2¹⁹ so that they pack into the mesh's edge keys.
const maxCoord = 1 << 19

type keyed struct {
	k key
	b *block
}

// update integrates the frame into the touched blocks, in parallel: each block is updated by one worker,
// so the result does not depend on the scheduling.
func (v *Volume) update(f *prepared, cam *camera, touched []keyed) {
	par.For(runtime.GOMAXPROCS(0), len(touched), func(i int) { v.updateBlock(f, cam, touched[i]) })
}

func (v *Volume) updateBlock(f *prepared, cam *camera, kb keyed) {
	// The camera coordinates of voxel (i, j, k) of the block: p0 + i·ax + j·ay + k·az.
	g0 := [3]float64{float64(kb.k.x) * BlockSize * v.vs, float64(kb.k.y) * BlockSize * v.vs, float64(kb.k.z) * BlockSize * v.vs}
	p0 := apply34(cam.w2c, g0)
	var ax [3][3]float64
	for a := range 3 {
		for r := range 3 {
			ax[a][r] = cam.w2c[r][a] * v.vs
		}
	}
	invTrunc := 1 / v.trunc
	invScale := 1 / cam.scale
	band := v.trunc * cam.scale
	k := &cam.k
	idx := 0
	for kz := range BlockSize {
		for jy := range BlockSize {
			for ix := range BlockSize {
				vx := &kb.b.v[idx]
				idx++
				var p [3]float64
				for r := range 3 {
					p[r] = p0[r] + float64(ix)*ax[0][r] + float64(jy)*ax[1][r] + float64(kz)*ax[2][r]
				}
				z := p[2]
				if !(z > 0) {
					continue
				}
				u := (k[0][0]*p[0]+k[0][1]*p[1])/z + k[0][2]
				w := (k[1][0]*p[0]+k[1][1]*p[1])/z + k[1][2]
				d, wt, i, ok := f.sample(u, w, band)
				if !ok {
					continue
				}
				sdf := (d - z) * invScale
				if sdf < -v.trunc {
					continue
				}
				t := float32(min(sdf*invTrunc, 1))
				if sdf < -v.vs { // the drop-off behind the surface
					drop := (v.trunc + sdf) / (v.trunc - v.vs)
					if !(drop > 0) { // at −τ (0, or 0/0 for a truncation of one voxel)
						continue
					}
					wt *= float32(drop)
				}
				nw := vx.w + wt
				a := wt / nw
				vx.d += (t - vx.d) * a
				for c := range 3 {
					col := float32(128)
					if f.RGB != nil {
						col = float32(f.RGB[3*i+c])
					}
					vx.c[c] = uint16(float32(vx.c[c]) + (col*256-float32(vx.c[c]))*a + 0.5)
				}
				vx.w = nw
			}
		}
	}
}

// sample returns the depth and weight at the point (u, v) of the frame, and the pixel nearest it (for the
// colour): interpolated bilinearly between the four pixels around it when all four are valid and their
// depths differ by at most maxStep (the same surface), else the nearest pixel's. ok is false when the
// nearest pixel is outside the frame or ignored.
func (f *prepared) sample(u, w, maxStep float64) (d float64, wt float32, i int, ok bool) {
	if !(u > -0.5 && u < float64(f.Width)-0.5 && w > -0.5 && w < float64(f.Height)-0.5) {
		return 0, 0, 0, false
	}
	i = int(w+0.5)*f.Width + int(u+0.5)
	d0, w0, ok := f.pixel(i)
	if !ok {
		return 0, 0, 0, false
	}
	x0, y0 := int(math.Floor(u)), int(math.Floor(w))
	if x0 < 0 || y0 < 0 || x0+1 >= f.Width || y0+1 >= f.Height {
		return float64(d0), w0, i, true
	}
	fx, fy := u-float64(x0), w-float64(y0)
	var ds [4]float32
	var ws [4]float32
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for c := range 4 {
		dc, wc, okc := f.pixel((y0+c>>1)*f.Width + x0 + c&1)
		if !okc {
			return float64(d0), w0, i, true
		}
		ds[c], ws[c] = dc, wc
		lo, hi = min(lo, dc), max(hi, dc)
	}
	if float64(hi-lo) > maxStep {
		return float64(d0), w0, i, true
	}
	b := [4]float64{(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy}
	var wsum float64
	for c := range 4 {
		d += b[c] * float64(ds[c])
		wsum += b[c] * float64(ws[c])
	}
	return d, float32(wsum), i, true
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func norm(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }

func det3(m [3][3]float64) float64 {
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}

// inverse3 inverts a 3×3 matrix by the adjugate; ok is false when it is singular or not finite.
func inverse3(m [3][3]float64) (inv [3][3]float64, ok bool) {
	det := det3(m)
	if det == 0 || !finite(det) {
		return inv, false
	}
	r := 1 / det
	inv[0] = [3]float64{(m[1][1]*m[2][2] - m[1][2]*m[2][1]) * r, (m[0][2]*m[2][1] - m[0][1]*m[2][2]) * r, (m[0][1]*m[1][2] - m[0][2]*m[1][1]) * r}
	inv[1] = [3]float64{(m[1][2]*m[2][0] - m[1][0]*m[2][2]) * r, (m[0][0]*m[2][2] - m[0][2]*m[2][0]) * r, (m[0][2]*m[1][0] - m[0][0]*m[1][2]) * r}
	inv[2] = [3]float64{(m[1][0]*m[2][1] - m[1][1]*m[2][0]) * r, (m[0][1]*m[2][0] - m[0][0]*m[2][1]) * r, (m[0][0]*m[1][1] - m[0][1]*m[1][0]) * r}
	return inv, true
}

func mul33(m [3][3]float64, p [3]float64) [3]float64 {
	return [3]float64{m[0][0]*p[0] + m[0][1]*p[1] + m[0][2]*p[2], m[1][0]*p[0] + m[1][1]*p[1] + m[1][2]*p[2], m[2][0]*p[0] + m[2][1]*p[1] + m[2][2]*p[2]}
}

func apply34(m [3][4]float64, p [3]float64) [3]float64 {
	return [3]float64{
		m[0][0]*p[0] + m[0][1]*p[1] + m[0][2]*p[2] + m[0][3],
		m[1][0]*p[0] + m[1][1]*p[1] + m[1][2]*p[2] + m[1][3],
		m[2][0]*p[0] + m[2][1]*p[1] + m[2][2]*p[2] + m[2][3],
	}
}
