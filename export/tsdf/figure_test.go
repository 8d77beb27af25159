package tsdf

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// union is the surfaces of several scenes together (what a ray meets first).
type union []scene

func (u union) hit(o, d vec) (float64, bool) {
	best, ok := math.Inf(1), false
	for _, s := range u {
		if t, hit := s.hit(o, d); hit && t < best {
			best, ok = t, true
		}
	}
	return best, ok
}

func (u union) dist(p vec) float64 {
	best := math.Inf(1)
	for _, s := range u {
		best = min(best, s.dist(p))
	}
	return best
}

func (u union) samples(n int) []vec {
	var out []vec
	for _, s := range u {
		out = append(out, s.samples(n/len(u))...)
	}
	return out
}

// TestWriteMeshFigure fuses the room of the tests with a ball on its floor, seen from three places inside (14 views each),
// and renders the mesh, cut open by back-face culling (the walls and ceiling facing away from the viewer
// are not drawn), to the PNG $DA3_TSDF_FIGURE (docs/tsdf_room.png); skipped without it.
func TestWriteMeshFigure(t *testing.T) {
	out := os.Getenv("DA3_TSDF_FIGURE")
	if out == "" {
		t.Skip("DA3_TSDF_FIGURE not set")
	}
	ball := sphere{c: vec{0.9, testRoom.hi[1] - 0.6, 1.0}, r: 0.6}
	s := union{testRoom, ball}
	var frames []*Frame
	for _, c := range []vec{{0.1, -0.6, 0.02}, {-1.1, -0.5, -1.4}, {1.5, -0.6, 2.0}} {
		frames = append(frames, roomFrames(s, c, 160, 120)...)
	}
	v := fuse(t, Options{VoxelSize: 0.03}, frames...)
	m := v.Mesh()
	require.NotZero(t, m.Triangles())
	toSurf, toMesh := chamfer(t, m, s, 0.03)
	logChamfer(t, "room and ball", v, m, toSurf, toMesh, 0.03)
	img := rasterise(m, vec{3.4, -4.8, -6.6}, vec{0, 0.3, 0.1}, 640, 440, 2)
	f, err := os.Create(out)
	require.NoError(t, err)
	require.NoError(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(f, img))
	require.NoError(t, f.Close())
	fi, err := os.Stat(out)
	require.NoError(t, err)
	t.Logf("%s: %d KiB", out, fi.Size()>>10)
	assert.Less(t, fi.Size(), int64(200<<10))
}

// rasterise draws the mesh seen from eye looking at target into a w×h image (ss×ss samples a pixel):
// triangles facing the viewer only, z-buffered, clay shading (a light over the viewer's shoulder on the
// interpolated vertex normals) tinted by the vertices' colours.
func rasterise(m *Mesh, eye, target vec, w, h, ss int) *image.NRGBA {
	W, H := w*ss, h*ss
	k := intrinsics(W, H, 44)
	e := lookAt(eye, target)
	for r := range 2 { // lookAt's image up is the world's −y (up): roll the camera by 180° to stand upright
		for c := range 4 {
			e[r][c] = -e[r][c]
		}
	}
	light := unit(sub(add(eye, vec{-3, -4, 1}), target))
	zbuf := make([]float64, W*H)
	for i := range zbuf {
		zbuf[i] = math.Inf(1)
	}
	rgb := make([]float64, 3*W*H)
	for i := range W * H {
		rgb[3*i], rgb[3*i+1], rgb[3*i+2] = 255, 255, 255
	}
	type px struct{ x, y, z float64 }
	proj := make([]px, m.Len())
	for i := range m.Len() {
		p := vertexAt(m, uint32(i))
		var c vec
		for r := range 3 {
			c[r] = e[r][0]*p[0] + e[r][1]*p[1] + e[r][2]*p[2] + e[r][3]
		}
		proj[i] = px{k[0][0]*c[0]/c[2] + k[0][2], k[1][1]*c[1]/c[2] + k[1][2], c[2]}
	}
	for f := 0; f < len(m.Faces); f += 3 {
		ia, ib, ic := m.Faces[f], m.Faces[f+1], m.Faces[f+2]
		a, b, c := vertexAt(m, ia), vertexAt(m, ib), vertexAt(m, ic)
		if dot(cross(sub(b, a), sub(c, a)), sub(eye, a)) <= 0 {
			continue // facing away: the near walls and the ceiling
		}
		pa, pb, pc := proj[ia], proj[ib], proj[ic]
		area := (pb.x-pa.x)*(pc.y-pa.y) - (pb.y-pa.y)*(pc.x-pa.x)
		if area == 0 || pa.z <= 0 || pb.z <= 0 || pc.z <= 0 {
			continue
		}
		x0, x1 := max(0, int(math.Floor(min(pa.x, pb.x, pc.x)))), min(W-1, int(math.Ceil(max(pa.x, pb.x, pc.x))))
		y0, y1 := max(0, int(math.Floor(min(pa.y, pb.y, pc.y)))), min(H-1, int(math.Ceil(max(pa.y, pb.y, pc.y))))
		for y := y0; y <= y1; y++ {
			for x := x0; x <= x1; x++ {
				qx, qy := float64(x)+0.5, float64(y)+0.5
				l0 := ((pb.x-qx)*(pc.y-qy) - (pb.y-qy)*(pc.x-qx)) / area
				l1 := ((pc.x-qx)*(pa.y-qy) - (pc.y-qy)*(pa.x-qx)) / area
				l2 := 1 - l0 - l1
				if l0 < 0 || l1 < 0 || l2 < 0 {
					continue
				}
				z := l0*pa.z + l1*pb.z + l2*pc.z
				i := y*W + x
				if z >= zbuf[i] {
					continue
				}
				zbuf[i] = z
				var n vec
				for r := range 3 {
					n[r] = l0*float64(m.Normals[3*ia+uint32(r)]) + l1*float64(m.Normals[3*ib+uint32(r)]) + l2*float64(m.Normals[3*ic+uint32(r)])
				}
				shade := 0.3 + 0.7*max(0, dot(unit(n), light))
				for r := range 3 {
					col := l0*float64(m.Colors[3*ia+uint32(r)]) + l1*float64(m.Colors[3*ib+uint32(r)]) + l2*float64(m.Colors[3*ic+uint32(r)])
					rgb[3*i+r] = shade * (0.75*215 + 0.25*col)
				}
			}
		}
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			var c [3]float64
			for dy := range ss {
				for dx := range ss {
					i := (y*ss+dy)*W + x*ss + dx
					for r := range 3 {
						c[r] += rgb[3*i+r]
					}
				}
			}
			n := float64(ss * ss)
			img.SetNRGBA(x, y, color.NRGBA{uint8(c[0] / n), uint8(c[1] / n), uint8(c[2] / n), 255})
		}
	}
	return img
}
