package tsdf

import "fmt"

// The marching cubes case table: for each of the 256 sign patterns of a cube's 8 corners, the triangles
// (as triples of cube edges) of the surface inside the cube. It is built at start-up from the cube's
// geometry rather than typed in, so that it is topologically consistent by construction:
//
//   - on each face the crossed edges are joined in pairs by segments (marching squares); a face with four
//     crossed edges (an ambiguous face: two diagonal corners inside) separates the two inside corners.
//     The choice depends on the face's four corners only, so the two cubes sharing a face make the same
//     segments there and the surface has no cracks;
//   - each segment is oriented so that, seen from outside the cube, the inside corner it cuts off is on
//     its right; the segments then chain into closed loops around the cube, each loop is the boundary of
//     one sheet of the surface, fan-triangulated from its first edge;
//   - the triangles' winding is counter-clockwise seen from the outside (positive) side, so their normals
//     point out of the negative region: toward the cameras, for a TSDF.
//
// Corner c is at (c&1, c>>1&1, c>>2&1); a corner is inside when its value is negative. The table has the
// same 256 cases and crossed edges as the classic tables (Lorensen and Cline's, as tabulated by Bourke);
// triangulations differ where those tables resolve ambiguous faces differently.

// cubeEdge is an edge from corner a to corner b = a + 1<<axis.
type cubeEdge struct{ a, b, axis int }

var cubeEdges = func() [12]cubeEdge {
	var e [12]cubeEdge
	n := 0
	for axis := range 3 {
		for c := range 8 {
			if c>>axis&1 == 0 {
				e[n] = cubeEdge{c, c | 1<<axis, axis}
				n++
			}
		}
	}
	return e
}()

// mcTable is each case's triangles, three edge indices each.
var mcTable = buildTable()

func cornerPos(c int) [3]float64 {
	return [3]float64{float64(c & 1), float64(c >> 1 & 1), float64(c >> 2 & 1)}
}

func edgeIndex(a, b int) int {
	for i, e := range cubeEdges {
		if e.a == min(a, b) && e.b == max(a, b) {
			return i
		}
	}
	panic(fmt.Sprintf("tsdf: corners %d and %d share no edge", a, b))
}

func buildTable() [256][]uint8 {
	var t [256][]uint8
	for c := range 256 {
		t[c] = caseTriangles(c)
	}
	return t
}

// caseTriangles builds one case's triangles (see the table's comment).
func caseTriangles(cs int) []uint8 {
	inside := func(c int) bool { return cs>>c&1 == 1 }
	next := map[int]int{} // directed segments, edge → edge
	for axis := range 3 {
		for side := range 2 {
			// The face's corners in cyclic order, and its outward normal.
			u, v := (axis+1)%3, (axis+2)%3
			base := side << axis
			ring := [4]int{base, base | 1<<u, base | 1<<u | 1<<v, base | 1<<v}
			var n [3]float64
			n[axis] = float64(2*side - 1)
			var crossed []int // ring positions i whose edge (ring[i], ring[i+1]) is crossed
			for i := range 4 {
				if inside(ring[i]) != inside(ring[(i+1)%4]) {
					crossed = append(crossed, i)
				}
			}
			segs := faceSegments(ring, crossed, inside)
			for _, s := range segs {
				e1 := edgeIndex(ring[s.e1], ring[(s.e1+1)%4])
				e2 := edgeIndex(ring[s.e2], ring[(s.e2+1)%4])
				if !rightOf(e1, e2, s.corner, n) == inside(s.corner) {
					e1, e2 = e2, e1
				}
				if _, dup := next[e1]; dup {
					panic(fmt.Sprintf("tsdf: case %d: edge %d starts two segments", cs, e1))
				}
				next[e1] = e2
			}
		}
	}
	var tris []uint8
	done := map[int]bool{}
	for start := range 12 {
		if _, ok := next[start]; !ok || done[start] {
			continue
		}
		var loop []int
		for e := start; !done[e]; e = next[e] {
			done[e] = true
			loop = append(loop, e)
		}
		for i := 1; i+1 < len(loop); i++ {
			tris = append(tris, uint8(loop[0]), uint8(loop[i]), uint8(loop[i+1]))
		}
	}
	return tris
}

// faceSegment joins the crossed face edges at ring positions e1 and e2; corner is a face corner that the
// segment separates from the ones on its other side in the same way as it separates inside from outside.
type faceSegment struct{ e1, e2, corner int }

func faceSegments(ring [4]int, crossed []int, inside func(int) bool) []faceSegment {
	switch len(crossed) {
	case 2:
		// One segment; every corner lies on its inside or outside side as it is inside or outside.
		return []faceSegment{{crossed[0], crossed[1], ring[0]}}
	case 4:
		// Ambiguous: each inside corner is cut off by the segment joining its two edges.
		var segs []faceSegment
		for i := range 4 {
			if inside(ring[i]) {
				segs = append(segs, faceSegment{(i + 3) % 4, i, ring[i]})
			}
		}
		return segs
	}
	return nil
}

// rightOf reports whether corner lies on the right of the segment from the midpoint of edge e1 to that of
// edge e2, seen from the side the normal n points to.
func rightOf(e1, e2, corner int, n [3]float64) bool {
	mid := func(e int) [3]float64 {
		a, b := cornerPos(cubeEdges[e].a), cornerPos(cubeEdges[e].b)
		return [3]float64{(a[0] + b[0]) / 2, (a[1] + b[1]) / 2, (a[2] + b[2]) / 2}
	}
	m1, m2, p := mid(e1), mid(e2), cornerPos(corner)
	d := [3]float64{m2[0] - m1[0], m2[1] - m1[1], m2[2] - m1[2]}
	q := [3]float64{p[0] - m1[0], p[1] - m1[1], p[2] - m1[2]}
	c := [3]float64{d[1]*q[2] - d[2]*q[1], d[2]*q[0] - d[0]*q[2], d[0]*q[1] - d[1]*q[0]}
	return c[0]*n[0]+c[1]*n[1]+c[2]*n[2] < 0
}
