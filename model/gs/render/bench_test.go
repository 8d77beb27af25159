package render

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/da3-go/da3-go/model/gs"
)

// da3Scene imitates DA3-GIANT's Gaussians of views 504×336 pixels: one per
// pixel, on a wavy surface 2 to 3 units deep, each about a pixel wide,
// opacities 0.3 to 1, SH degree 2; view v's camera is shifted 0.1·v along x.
func da3Scene(views int) *gs.Gaussians {
	const w, h, f = 504, 336, 400.0
	r := rand.New(rand.NewPCG(1, uint64(views)))
	n := views * w * h
	g := &gs.Gaussians{Views: views, Height: h, Width: w, SHDim: 9, Means: make([]float32, 3*n), Scales: make([]float32, 3*n),
		Rotations: make([]float32, 4*n), Harmonics: make([]float32, 27*n), Opacities: make([]float32, n), Depth: make([]float32, n)}
	for v := range views {
		for y := range h {
			for x := range w {
				i := (v*h+y)*w + x
				u, vv := (float64(x)+0.5-w/2)/f, (float64(y)+0.5-h/2)/f
				d := 2.5 + 0.4*math.Sin(3*u)*math.Cos(4*vv) + 0.02*r.NormFloat64()
				g.Means[3*i], g.Means[3*i+1], g.Means[3*i+2] = float32(u*d+0.1*float64(v)), float32(vv*d), float32(d)
				for a := range 3 {
					g.Scales[3*i+a] = float32(d / f * (0.3 + 0.9*r.Float64()))
				}
				for a := range 4 {
					g.Rotations[4*i+a] = float32(r.NormFloat64())
				}
				for k := range 27 {
					g.Harmonics[27*i+k] = float32(0.3 * r.NormFloat64())
				}
				g.Opacities[i] = float32(0.3 + 0.7*r.Float64())
				g.Depth[i] = float32(d)
			}
		}
	}
	return g
}

// The render time of one 504×336 frame of the Gaussians of 1 and 4 views,
// from a camera turned 3° and moved 0.05 sideways.
func BenchmarkRender504x336(b *testing.B) {
	a := 3 * math.Pi / 180
	cam := Camera{Width: 504, Height: 336, Fx: 400, Fy: 400, Cx: 252, Cy: 168,
		Extrinsics: [3][4]float64{{math.Cos(a), 0, math.Sin(a), -0.05}, {0, 1, 0, 0}, {-math.Sin(a), 0, math.Cos(a), 0}}}
	for _, views := range []int{1, 4} {
		g := da3Scene(views)
		b.Run(fmt.Sprintf("gaussians=%d", len(g.Opacities)), func(b *testing.B) {
			r, err := New(g, Options{})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := r.Render(cam); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
