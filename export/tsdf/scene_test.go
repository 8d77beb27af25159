package tsdf

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Synthetic scenes rendered analytically (ray casting in float64) for the fusion tests, and the
// geometric measures they are checked with.

type vec = [3]float64

func add(a, b vec) vec           { return vec{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func scale(a vec, s float64) vec { return vec{a[0] * s, a[1] * s, a[2] * s} }
func dot(a, b vec) float64       { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func unit(a vec) vec             { return scale(a, 1/norm(a)) }

// scene is a closed surface that rays can be cast against.
type scene interface {
	// hit returns the smallest t > 0 with o + t·d on the surface.
	hit(o, d vec) (float64, bool)
	// dist is the distance from p to the surface.
	dist(p vec) float64
	// samples are n points spread over the surface.
	samples(n int) []vec
}

type sphere struct {
	c vec
	r float64
}

func (s sphere) hit(o, d vec) (float64, bool) {
	oc := sub(o, s.c)
	a, b, c := dot(d, d), 2*dot(oc, d), dot(oc, oc)-s.r*s.r
	disc := b*b - 4*a*c
	if disc < 0 {
		return 0, false
	}
	q := math.Sqrt(disc)
	for _, t := range []float64{(-b - q) / (2 * a), (-b + q) / (2 * a)} {
		if t > 0 {
			return t, true
		}
	}
	return 0, false
}

func (s sphere) dist(p vec) float64 { return math.Abs(norm(sub(p, s.c)) - s.r) }

func (s sphere) samples(n int) []vec { return fibonacci(n, s.c, s.r) }

// fibonacci returns n points spread evenly over a sphere.
func fibonacci(n int, c vec, r float64) []vec {
	pts := make([]vec, n)
	golden := math.Pi * (3 - math.Sqrt(5))
	for i := range n {
		y := 1 - 2*(float64(i)+0.5)/float64(n)
		rad := math.Sqrt(1 - y*y)
		th := golden * float64(i)
		pts[i] = add(c, scale(vec{math.Cos(th) * rad, y, math.Sin(th) * rad}, r))
	}
	return pts
}

// room is the inside of the box lo–hi, seen from within.
type room struct{ lo, hi vec }

func (b room) hit(o, d vec) (float64, bool) {
	t := math.Inf(1)
	for i := range 3 {
		switch {
		case d[i] > 0:
			t = min(t, (b.hi[i]-o[i])/d[i])
		case d[i] < 0:
			t = min(t, (b.lo[i]-o[i])/d[i])
		}
	}
	return t, t > 0 && !math.IsInf(t, 1)
}

func (b room) dist(p vec) float64 {
	var out float64
	in := math.Inf(1)
	for i := range 3 {
		e := max(b.lo[i]-p[i], p[i]-b.hi[i], 0)
		out += e * e
		in = min(in, p[i]-b.lo[i], b.hi[i]-p[i])
	}
	if out > 0 {
		return math.Sqrt(out)
	}
	return in
}

// samples are points on a grid over each wall, about n in all.
func (b room) samples(n int) []vec {
	var area float64
	ext := sub(b.hi, b.lo)
	for a := range 3 {
		area += 2 * ext[(a+1)%3] * ext[(a+2)%3]
	}
	step := math.Sqrt(area / float64(n))
	var pts []vec
	for a := range 3 {
		u, v := (a+1)%3, (a+2)%3
		for _, side := range []float64{b.lo[a], b.hi[a]} {
			for s := b.lo[u] + step/2; s < b.hi[u]; s += step {
				for t := b.lo[v] + step/2; t < b.hi[v]; t += step {
					var p vec
					p[a], p[u], p[v] = side, s, t
					pts = append(pts, p)
				}
			}
		}
	}
	return pts
}

// shifted is a scene moved by off.
type shifted struct {
	s   scene
	off vec
}

func (s shifted) hit(o, d vec) (float64, bool) { return s.s.hit(sub(o, s.off), d) }
func (s shifted) dist(p vec) float64           { return s.s.dist(sub(p, s.off)) }
func (s shifted) samples(n int) []vec {
	pts := s.s.samples(n)
	for i := range pts {
		pts[i] = add(pts[i], s.off)
	}
	return pts
}

// lookAt returns the world-to-camera extrinsics (OpenCV axes) of a camera at eye looking at target.
func lookAt(eye, target vec) [3][4]float64 {
	z := unit(sub(target, eye))
	a := vec{0, 1, 0}
	if math.Abs(z[1]) > 0.9 {
		a = vec{1, 0, 0}
	}
	x := unit(cross(z, a))
	y := cross(z, x)
	var e [3][4]float64
	for i, r := range [3]vec{x, y, z} {
		copy(e[i][:3], r[:])
		e[i][3] = -dot(r, eye)
	}
	return e
}

// intrinsics of a w×h camera with the given horizontal field of view (degrees), principal point at the
// centre.
func intrinsics(w, h int, fov float64) [3][3]float64 {
	f := float64(w) / 2 / math.Tan(fov/2*math.Pi/180)
	return [3][3]float64{{f, 0, float64(w-1) / 2}, {0, f, float64(h-1) / 2}, {0, 0, 1}}
}

// render casts a ray through every pixel and returns the frame: depth (z in the camera), no weight,
// a colour that depends on the hit point.
func render(s scene, k [3][3]float64, e [3][4]float64, w, h int) *Frame {
	f := &Frame{Width: w, Height: h, Depth: make([]float32, w*h), RGB: make([]uint8, 3*w*h), K: k, WorldToCam: e}
	kinv, _ := inverse3(k)
	var c2w [3][3]float64 // Rᵀ
	var eye vec           // −Rᵀ·t
	for i := range 3 {
		for j := range 3 {
			c2w[i][j] = e[j][i]
			eye[i] -= e[j][i] * e[j][3]
		}
	}
	for y := range h {
		for x := range w {
			r := mul33(kinv, vec{float64(x), float64(y), 1}) // z = 1: t is the depth
			d := mul33(c2w, r)
			t, ok := s.hit(eye, d)
			if !ok {
				continue
			}
			i := y*w + x
			f.Depth[i] = float32(t)
			p := add(eye, scale(d, t))
			f.RGB[3*i] = uint8(128 + 100*math.Sin(3*p[0]))
			f.RGB[3*i+1] = uint8(128 + 100*math.Sin(3*p[1]))
			f.RGB[3*i+2] = uint8(128 + 100*math.Sin(3*p[2]))
		}
	}
	return f
}

// sphereFrames renders the sphere from n cameras spread around it at distance dist from its centre.
func sphereFrames(s scene, c vec, n int, dist float64, w int) []*Frame {
	k := intrinsics(w, w, 50)
	var out []*Frame
	for _, eye := range fibonacci(n, c, dist) {
		out = append(out, render(s, k, lookAt(eye, c), w, w))
	}
	return out
}

// roomFrames renders the room from cameras near its centre looking along the 6 axes and 8 diagonals.
func roomFrames(s scene, centre vec, w, h int) []*Frame {
	k := intrinsics(w, h, 90)
	var out []*Frame
	var dirs []vec
	for a := range 3 {
		for _, sg := range []float64{-1, 1} {
			var d vec
			d[a] = sg
			dirs = append(dirs, d)
		}
	}
	for _, x := range []float64{-1, 1} {
		for _, y := range []float64{-1, 1} {
			for _, z := range []float64{-1, 1} {
				dirs = append(dirs, vec{x, y, z})
			}
		}
	}
	for i, d := range dirs {
		eye := add(centre, vec{0.1 * math.Sin(float64(i)), 0.05 * math.Cos(float64(i)), 0.07 * math.Sin(2*float64(i))})
		out = append(out, render(s, k, lookAt(eye, add(eye, d)), w, h))
	}
	return out
}

// addNoise adds Gaussian noise of standard deviation sigma to every valid depth (seeded).
func addNoise(f *Frame, sigma float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for i, d := range f.Depth {
		if d > 0 {
			f.Depth[i] = d + float32(r.NormFloat64()*sigma)
		}
	}
}

// stats of a sample: mean, 99th percentile and maximum.
type distStats struct{ mean, p99, max float64 }

func summarize(d []float64) distStats {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return distStats{sum / float64(len(s)), s[len(s)*99/100], s[len(s)-1]}
}

// vertexDistances are the distances of the mesh's vertices to the true surface.
func vertexDistances(m *Mesh, s scene) []float64 {
	d := make([]float64, m.Len())
	for i := range d {
		d[i] = s.dist(vertexAt(m, uint32(i)))
	}
	return d
}

func vertexAt(m *Mesh, i uint32) vec {
	return vec{float64(m.Vertices[3*i]), float64(m.Vertices[3*i+1]), float64(m.Vertices[3*i+2])}
}

// triGrid finds the triangles near a point: a uniform grid of cells, each listing the triangles whose
// bounding box meets it.
type triGrid struct {
	m    *Mesh
	cell float64
	g    map[[3]int][]int
}

func newTriGrid(m *Mesh, cell float64) *triGrid {
	tg := &triGrid{m: m, cell: cell, g: map[[3]int][]int{}}
	for t := range m.Triangles() {
		lo, hi := vec{math.Inf(1), math.Inf(1), math.Inf(1)}, vec{math.Inf(-1), math.Inf(-1), math.Inf(-1)}
		for _, i := range m.Faces[3*t : 3*t+3] {
			p := vertexAt(m, i)
			for a := range 3 {
				lo[a], hi[a] = min(lo[a], p[a]), max(hi[a], p[a])
			}
		}
		a, b := tg.cellOf(lo), tg.cellOf(hi)
		for x := a[0]; x <= b[0]; x++ {
			for y := a[1]; y <= b[1]; y++ {
				for z := a[2]; z <= b[2]; z++ {
					tg.g[[3]int{x, y, z}] = append(tg.g[[3]int{x, y, z}], t)
				}
			}
		}
	}
	return tg
}

func (tg *triGrid) cellOf(p vec) [3]int {
	return [3]int{int(math.Floor(p[0] / tg.cell)), int(math.Floor(p[1] / tg.cell)), int(math.Floor(p[2] / tg.cell))}
}

// dist is the distance from p to the nearest triangle within one cell, or the cell size when none is.
func (tg *triGrid) dist(p vec) float64 {
	best := tg.cell
	c := tg.cellOf(p)
	for x := c[0] - 1; x <= c[0]+1; x++ {
		for y := c[1] - 1; y <= c[1]+1; y++ {
			for z := c[2] - 1; z <= c[2]+1; z++ {
				for _, t := range tg.g[[3]int{x, y, z}] {
					f := tg.m.Faces[3*t : 3*t+3]
					q := closestOnTriangle(p, vertexAt(tg.m, f[0]), vertexAt(tg.m, f[1]), vertexAt(tg.m, f[2]))
					best = min(best, norm(sub(p, q)))
				}
			}
		}
	}
	return best
}

// closestOnTriangle is the point of triangle abc nearest p (Ericson, Real-Time Collision Detection 5.1.5).
func closestOnTriangle(p, a, b, c vec) vec {
	ab, ac, ap := sub(b, a), sub(c, a), sub(p, a)
	d1, d2 := dot(ab, ap), dot(ac, ap)
	if d1 <= 0 && d2 <= 0 {
		return a
	}
	bp := sub(p, b)
	d3, d4 := dot(ab, bp), dot(ac, bp)
	if d3 >= 0 && d4 <= d3 {
		return b
	}
	vc := d1*d4 - d3*d2
	if vc <= 0 && d1 >= 0 && d3 <= 0 {
		return add(a, scale(ab, d1/(d1-d3)))
	}
	cp := sub(p, c)
	d5, d6 := dot(ab, cp), dot(ac, cp)
	if d6 >= 0 && d5 <= d6 {
		return c
	}
	vb := d5*d2 - d1*d6
	if vb <= 0 && d2 >= 0 && d6 <= 0 {
		return add(a, scale(ac, d2/(d2-d6)))
	}
	va := d3*d6 - d5*d4
	if va <= 0 && d4-d3 >= 0 && d5-d6 >= 0 {
		return add(b, scale(sub(c, b), (d4-d3)/((d4-d3)+(d5-d6))))
	}
	den := 1 / (va + vb + vc)
	return add(a, add(scale(ab, vb*den), scale(ac, vc*den)))
}

// rayCrossings counts the triangles the ray o + t·d (t > 0) passes through (Möller–Trumbore).
func rayCrossings(m *Mesh, o, d vec) int {
	n := 0
	for t := range m.Triangles() {
		f := m.Faces[3*t : 3*t+3]
		a, b, c := vertexAt(m, f[0]), vertexAt(m, f[1]), vertexAt(m, f[2])
		e1, e2 := sub(b, a), sub(c, a)
		p := cross(d, e2)
		det := dot(e1, p)
		if math.Abs(det) < 1e-15 {
			continue
		}
		inv := 1 / det
		s := sub(o, a)
		u := dot(s, p) * inv
		if u < 0 || u > 1 {
			continue
		}
		q := cross(s, e1)
		v := dot(d, q) * inv
		if v < 0 || u+v > 1 {
			continue
		}
		if dot(e2, q)*inv > 0 {
			n++
		}
	}
	return n
}
