package tsdf

import (
	"cmp"
	"math"
	"slices"
)

// Mesh is a triangle mesh with per-vertex colours and normals, in the frames' world frame.
type Mesh struct {
	Vertices []float32 // x, y, z per vertex
	Normals  []float32 // unit normal per vertex (area-weighted mean of its triangles'), toward the cameras' side
	Colors   []uint8   // r, g, b per vertex
	// Faces are the triangles, three vertex indices each, counter-clockwise seen from the side their
	// normal points to (the side the surface was observed from).
	Faces []uint32
}

// Len returns the number of vertices.
func (m *Mesh) Len() int { return len(m.Vertices) / 3 }

// Triangles returns the number of triangles.
func (m *Mesh) Triangles() int { return len(m.Faces) / 3 }

// maxJump is the largest change of the normalised signed distance along one voxel edge that is taken as a
// surface: a true distance field changes by at most 1/Truncation (0.25 at 4 voxels) per voxel, more at
// grazing views where the projective distance overestimates it, while the edges of a truncation band (a
// voxel seen in front of a background next to one behind a foreground object) jump from +1 to below 0.
const maxJump = 1.0

// Mesh extracts the zero crossing of the field with marching cubes. A cube is meshed when its eight
// corners were all observed (weight > 0) and no sign change along its edges jumps by more than a
// truncation distance (the edge of a band, not a surface). Vertices lie on the cube edges where the
// field crosses zero, at the linear interpolation of the edge's two values, with the colour interpolated
// the same way; a vertex is shared by every triangle that uses its edge. Blocks are visited in sorted
// order, so the mesh is the same for the same volume.
func (v *Volume) Mesh() *Mesh {
	keys := make([]key, 0, len(v.blocks))
	for k := range v.blocks {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.z, b.z), cmp.Compare(a.y, b.y), cmp.Compare(a.x, b.x))
	})
	x := &extractor{v: v, m: &Mesh{}, index: map[uint64]uint32{}}
	for _, k := range keys {
		x.block(k)
	}
	x.normals()
	return x.m
}

type extractor struct {
	v     *Volume
	m     *Mesh
	index map[uint64]uint32 // edge key → vertex
	grad  []float32         // the field's gradient at each vertex (the normal where its triangles have no area)
	nb    [8]*block         // the block and its neighbours at +x, +y, +z offsets, by corner bits
}

func (x *extractor) block(k key) {
	for c := range 8 {
		x.nb[c] = x.v.blocks[key{k.x + int32(c&1), k.y + int32(c>>1&1), k.z + int32(c>>2&1)}]
	}
	var vals [8]float32
	var vox [8]*voxel
	for kz := range BlockSize {
		for jy := range BlockSize {
		cube:
			for ix := range BlockSize {
				cs := 0
				for c := range 8 {
					vx := x.voxel(ix+c&1, jy+c>>1&1, kz+c>>2&1)
					if vx == nil || vx.w == 0 {
						continue cube
					}
					vox[c], vals[c] = vx, vx.d
					if vx.d < 0 {
						cs |= 1 << c
					}
				}
				tris := mcTable[cs]
				if len(tris) == 0 {
					continue
				}
				for _, e := range cubeEdges {
					if (cs>>e.a&1 != cs>>e.b&1) && math.Abs(float64(vals[e.a]-vals[e.b])) > maxJump {
						continue cube
					}
				}
				g := [3]int32{k.x*BlockSize + int32(ix), k.y*BlockSize + int32(jy), k.z*BlockSize + int32(kz)}
				for _, e := range tris {
					x.m.Faces = append(x.m.Faces, x.vertex(g, int(e), &vals, &vox))
				}
			}
		}
	}
}

// voxel returns the voxel at local coordinates (0 … 2·BlockSize−1) from the current block or a neighbour.
func (x *extractor) voxel(i, j, k int) *voxel {
	c := i/BlockSize | j/BlockSize<<1 | k/BlockSize<<2
	b := x.nb[c]
	if b == nil {
		return nil
	}
	return &b.v[(k%BlockSize*BlockSize+j%BlockSize)*BlockSize+i%BlockSize]
}

// vertex returns the vertex on edge e of the cube whose lowest corner is voxel g, making it on first use.
func (x *extractor) vertex(g [3]int32, e int, vals *[8]float32, vox *[8]*voxel) uint32 {
	ce := cubeEdges[e]
	a := cornerPos(ce.a)
	ga := [3]int32{g[0] + int32(a[0]), g[1] + int32(a[1]), g[2] + int32(a[2])}
	ek := uint64(ga[0]+maxCoord)&0xFFFFF | (uint64(ga[1]+maxCoord)&0xFFFFF)<<20 | (uint64(ga[2]+maxCoord)&0xFFFFF)<<40 | uint64(ce.axis)<<60
	if i, ok := x.index[ek]; ok {
		return i
	}
	da, db := float64(vals[ce.a]), float64(vals[ce.b])
	t := da / (da - db)
	m := x.m
	for i := range 3 {
		p := float64(ga[i])
		if i == ce.axis {
			p += t
		}
		m.Vertices = append(m.Vertices, float32(p*x.v.vs))
	}
	va, vb := vox[ce.a], vox[ce.b]
	for c := range 3 {
		col := (float64(va.c[c]) + t*(float64(vb.c[c])-float64(va.c[c]))) / 256
		m.Colors = append(m.Colors, uint8(min(255, math.Round(col))))
	}
	// The gradient of the cube's trilinear interpolant at the vertex.
	q := a
	q[ce.axis] += t
	var g3 [3]float64
	for c := range 8 {
		p := cornerPos(c)
		for j := range 3 {
			w := float64(vals[c]) * (2*p[j] - 1)
			for k := range 3 {
				if k != j {
					w *= 1 - p[k] + q[k]*(2*p[k]-1)
				}
			}
			g3[j] += w
		}
	}
	x.grad = append(x.grad, float32(g3[0]), float32(g3[1]), float32(g3[2]))
	i := uint32(m.Len() - 1)
	x.index[ek] = i
	return i
}

// normals sets each vertex's normal to the normalised sum of its triangles' (cross products, so weighted
// by area), or to the field's normalised gradient where that sum is zero (a vertex of degenerate
// triangles only).
func (x *extractor) normals() {
	m := x.m
	acc := make([]float64, len(m.Vertices))
	pos := func(i uint32) [3]float64 {
		return [3]float64{float64(m.Vertices[3*i]), float64(m.Vertices[3*i+1]), float64(m.Vertices[3*i+2])}
	}
	for f := 0; f+2 < len(m.Faces); f += 3 {
		a, b, c := pos(m.Faces[f]), pos(m.Faces[f+1]), pos(m.Faces[f+2])
		n := cross(sub(b, a), sub(c, a))
		for _, i := range m.Faces[f : f+3] {
			for k := range 3 {
				acc[3*i+uint32(k)] += n[k]
			}
		}
	}
	m.Normals = make([]float32, len(m.Vertices))
	for i := 0; i < len(acc); i += 3 {
		l := math.Sqrt(acc[i]*acc[i] + acc[i+1]*acc[i+1] + acc[i+2]*acc[i+2])
		if l == 0 {
			for k := range 3 {
				acc[i+k] = float64(x.grad[i+k])
			}
			l = math.Sqrt(acc[i]*acc[i] + acc[i+1]*acc[i+1] + acc[i+2]*acc[i+2])
		}
		if l > 0 {
			for k := range 3 {
				m.Normals[i+k] = float32(acc[i+k] / l)
			}
		}
	}
}

func sub(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
