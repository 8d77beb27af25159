package render

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model/gs"
)

// refRender is a straightforward float64 rasteriser written apart from the
// package's: every Gaussian projected (3DGS's EWA splatting, gsplat's
// Jacobian clamp and low-pass), all of them sorted by depth, each pixel
// composited over all of them, no tiles, no bounding boxes.
func refRender(g *gs.Gaussians, cam Camera, bg [3]float64) (rgb, depth, alpha []float64) {
	type proj struct {
		mx, my, z, op float64
		inv           [2][2]float64
		rgb           [3]float64
		idx           int
	}
	var w [3][3]float64
	var t, campos [3]float64
	for i := range 3 {
		for j := range 3 {
			w[i][j] = cam.Extrinsics[i][j]
		}
		t[i] = cam.Extrinsics[i][3]
	}
	for i := range 3 {
		for k := range 3 {
			campos[i] -= w[k][i] * t[k]
		}
	}
	W, H := float64(cam.Width), float64(cam.Height)
	var ps []proj
	n := len(g.Opacities)
	for i := range n {
		q := g.Rotations[4*i : 4*i+4]
		qw, qx, qy, qz := float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3])
		qn := math.Sqrt(qw*qw + qx*qx + qy*qy + qz*qz)
		qw, qx, qy, qz = qw/qn, qx/qn, qy/qn, qz/qn
		rot := [3][3]float64{
			{qw*qw + qx*qx - qy*qy - qz*qz, 2 * (qx*qy - qw*qz), 2 * (qx*qz + qw*qy)},
			{2 * (qx*qy + qw*qz), qw*qw - qx*qx + qy*qy - qz*qz, 2 * (qy*qz - qw*qx)},
			{2 * (qx*qz - qw*qy), 2 * (qy*qz + qw*qx), qw*qw - qx*qx - qy*qy + qz*qz},
		}
		var sigma [3][3]float64
		for a := range 3 {
			for b := range 3 {
				for k := range 3 {
					s := float64(g.Scales[3*i+k])
					sigma[a][b] += rot[a][k] * s * s * rot[b][k]
				}
			}
		}
		m := [3]float64{float64(g.Means[3*i]), float64(g.Means[3*i+1]), float64(g.Means[3*i+2])}
		var c [3]float64
		for a := range 3 {
			c[a] = t[a]
			for k := range 3 {
				c[a] += w[a][k] * m[k]
			}
		}
		op := float64(g.Opacities[i])
		if c[2] < Near || c[2] > Far || op < 1.0/255 {
			continue
		}
		limx := [2]float64{-(cam.Cx/cam.Fx + 0.3*W/(2*cam.Fx)), (W-cam.Cx)/cam.Fx + 0.3*W/(2*cam.Fx)}
		limy := [2]float64{-(cam.Cy/cam.Fy + 0.3*H/(2*cam.Fy)), (H-cam.Cy)/cam.Fy + 0.3*H/(2*cam.Fy)}
		u := math.Min(math.Max(c[0]/c[2], limx[0]), limx[1])
		v := math.Min(math.Max(c[1]/c[2], limy[0]), limy[1])
		j := [2][3]float64{{cam.Fx / c[2], 0, -cam.Fx * u / c[2]}, {0, cam.Fy / c[2], -cam.Fy * v / c[2]}}
		var jw [2][3]float64
		for a := range 2 {
			for b := range 3 {
				for k := range 3 {
					jw[a][b] += j[a][k] * w[k][b]
				}
			}
		}
		var cov [2][2]float64
		for a := range 2 {
			for b := range 2 {
				for k := range 3 {
					for l := range 3 {
						cov[a][b] += jw[a][k] * sigma[k][l] * jw[b][l]
					}
				}
			}
		}
		cov[0][0] += 0.3
		cov[1][1] += 0.3
		det := cov[0][0]*cov[1][1] - cov[0][1]*cov[1][0]
		if det <= 0 {
			continue
		}
		p := proj{mx: cam.Fx*c[0]/c[2] + cam.Cx, my: cam.Fy*c[1]/c[2] + cam.Cy, z: c[2], op: op, idx: i,
			inv: [2][2]float64{{cov[1][1] / det, -cov[0][1] / det}, {-cov[1][0] / det, cov[0][0] / det}}}
		d := [3]float64{m[0] - campos[0], m[1] - campos[1], m[2] - campos[2]}
		dn := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
		for ch := range 3 {
			sh := g.Harmonics[(3*i+ch)*g.SHDim : (3*i+ch+1)*g.SHDim]
			p.rgb[ch] = math.Max(refSH(sh, d[0]/dn, d[1]/dn, d[2]/dn)+0.5, 0)
		}
		ps = append(ps, p)
	}
	sort.SliceStable(ps, func(a, b int) bool { return ps[a].z < ps[b].z })
	np := cam.Width * cam.Height
	rgb, depth, alpha = make([]float64, 3*np), make([]float64, np), make([]float64, np)
	for y := range cam.Height {
		for x := range cam.Width {
			T, acc, accZ := 1.0, [3]float64{}, 0.0
			for _, p := range ps {
				d := [2]float64{p.mx - (float64(x) + 0.5), p.my - (float64(y) + 0.5)}
				s := 0.5 * (d[0]*(p.inv[0][0]*d[0]+p.inv[0][1]*d[1]) + d[1]*(p.inv[1][0]*d[0]+p.inv[1][1]*d[1]))
				if s < 0 {
					continue
				}
				a := math.Min(0.999, p.op*math.Exp(-s))
				if a < 1.0/255 {
					continue
				}
				if T*(1-a) <= 1e-4 {
					break
				}
				for ch := range 3 {
					acc[ch] += a * T * p.rgb[ch]
				}
				accZ += a * T * p.z
				T *= 1 - a
			}
			o := y*cam.Width + x
			for ch := range 3 {
				rgb[3*o+ch] = acc[ch] + T*bg[ch]
			}
			alpha[o] = 1 - T
			depth[o] = accZ / math.Max(1-T, 1e-10)
		}
	}
	return rgb, depth, alpha
}

// refSH is the SH colour of 3DGS's reference eval_sh (degrees 0 to 3).
func refSH(sh []float32, x, y, z float64) float64 {
	c := func(k int) float64 { return float64(sh[k]) }
	v := 0.28209479177387814 * c(0)
	if len(sh) >= 4 {
		v += -0.4886025119029199*y*c(1) + 0.4886025119029199*z*c(2) - 0.4886025119029199*x*c(3)
	}
	if len(sh) >= 9 {
		xx, yy, zz := x*x, y*y, z*z
		v += 1.0925484305920792*x*y*c(4) - 1.0925484305920792*y*z*c(5) + 0.31539156525252005*(2*zz-xx-yy)*c(6) -
			1.0925484305920792*x*z*c(7) + 0.5462742152960396*(xx-yy)*c(8)
	}
	if len(sh) >= 16 {
		xx, yy, zz := x*x, y*y, z*z
		v += -0.5900435899266435*y*(3*xx-yy)*c(9) + 2.890611442640554*x*y*z*c(10) - 0.4570457994644658*y*(4*zz-xx-yy)*c(11) +
			0.3731763325901154*z*(2*zz-3*xx-3*yy)*c(12) - 0.4570457994644658*x*(4*zz-xx-yy)*c(13) +
			1.445305721320277*z*(xx-yy)*c(14) - 0.5900435899266435*x*(xx-3*yy)*c(15)
	}
	return v
}

// randomScene is n Gaussians around the view of a camera at the origin
// looking down +z: most in front, some behind or beside it, sizes from a
// fraction of a pixel to tens of pixels, any opacity, SH of degree deg.
func randomScene(r *rand.Rand, n, deg int) *gs.Gaussians {
	dsh := (deg + 1) * (deg + 1)
	g := &gs.Gaussians{Views: 1, Height: 1, Width: n, SHDim: dsh, Means: make([]float32, 3*n), Scales: make([]float32, 3*n),
		Rotations: make([]float32, 4*n), Harmonics: make([]float32, 3*dsh*n), Opacities: make([]float32, n), Depth: make([]float32, n)}
	for i := range n {
		z := -0.5 + 6.5*r.Float64()
		g.Means[3*i] = float32((r.Float64()*3 - 1.5) * max(z, 0.3))
		g.Means[3*i+1] = float32((r.Float64()*2.2 - 1.1) * max(z, 0.3))
		g.Means[3*i+2] = float32(z)
		for a := range 3 {
			g.Scales[3*i+a] = float32(0.004 * math.Pow(60, r.Float64()))
		}
		for a := range 4 {
			g.Rotations[4*i+a] = float32(r.NormFloat64())
		}
		for k := range 3 * dsh {
			g.Harmonics[3*dsh*i+k] = float32(r.NormFloat64() * 0.6)
		}
		g.Opacities[i] = float32(r.Float64())
		g.Depth[i] = float32(z)
	}
	return g
}

// testCamera looks from slightly off the origin, slightly turned, with a
// principal point off the image centre; 67×45 pixels cut the last row and
// column of tiles.
func testCamera() Camera {
	a, b := 0.05, -0.08
	rx := [3][3]float64{{1, 0, 0}, {0, math.Cos(a), -math.Sin(a)}, {0, math.Sin(a), math.Cos(a)}}
	ry := [3][3]float64{{math.Cos(b), 0, math.Sin(b)}, {0, 1, 0}, {-math.Sin(b), 0, math.Cos(b)}}
	var e [3][4]float64
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				e[i][j] += rx[i][k] * ry[k][j]
			}
		}
	}
	e[0][3], e[1][3], e[2][3] = 0.05, -0.03, 0.1
	return Camera{Width: 67, Height: 45, Extrinsics: e, Fx: 40, Fy: 42, Cx: 35.2, Cy: 21.7}
}

func psnr(a []float32, b []float64) float64 {
	var se float64
	for i := range a {
		d := math.Min(math.Max(float64(a[i]), 0), 1) - math.Min(math.Max(b[i], 0), 1)
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(float64(len(a))/se)
}

// The tiled float32 renderer against the float64 reference on random
// scenes: PSNR of the colours and of the alpha ≥ 50 dB.
func TestRenderMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		seed   uint64
		n, deg int
		bg     [3]float32
	}{{1, 1500, 2, [3]float32{}}, {2, 1500, 0, [3]float32{0.2, 0.5, 1}}, {3, 800, 3, [3]float32{1, 1, 1}}} {
		g := randomScene(rand.New(rand.NewPCG(tc.seed, 9)), tc.n, tc.deg)
		r, err := New(g, Options{Background: tc.bg, Workers: 3})
		require.NoError(t, err)
		cam := testCamera()
		f, err := r.Render(cam)
		require.NoError(t, err)
		rgb, _, alpha := refRender(g, cam, [3]float64{float64(tc.bg[0]), float64(tc.bg[1]), float64(tc.bg[2])})
		p := psnr(f.RGB, rgb)
		t.Logf("seed %d: %d Gaussians, SH degree %d: PSNR %.1f dB (colour), %.1f dB (alpha)", tc.seed, tc.n, tc.deg, p, psnr(f.Alpha, alpha))
		assert.GreaterOrEqual(t, p, 50.0, "colour PSNR")
		assert.GreaterOrEqual(t, psnr(f.Alpha, alpha), 50.0, "alpha PSNR")
		var covered int
		for _, a := range f.Alpha {
			if a > 0.5 {
				covered++
			}
		}
		assert.Greater(t, covered, len(f.Alpha)/2, "the scene covers the image")
	}
}

// gaussians are isotropic Gaussians at ms of scales ss, opacities ops and
// DC colours dcs (the SH band 0 coefficient per channel; degree 2, the
// other bands 0).
func gaussians(ms [][3]float32, ss, ops []float32, dcs [][3]float32) *gs.Gaussians {
	n := len(ms)
	g := &gs.Gaussians{Views: 1, Height: 1, Width: n, SHDim: 9, Means: make([]float32, 3*n), Scales: make([]float32, 3*n),
		Rotations: make([]float32, 4*n), Harmonics: make([]float32, 27*n), Opacities: make([]float32, n), Depth: make([]float32, n)}
	for i := range n {
		copy(g.Means[3*i:], ms[i][:])
		g.Scales[3*i], g.Scales[3*i+1], g.Scales[3*i+2] = ss[i], ss[i], ss[i]
		g.Rotations[4*i] = 1
		for c := range 3 {
			g.Harmonics[(3*i+c)*9] = dcs[i][c]
		}
		g.Opacities[i] = ops[i]
	}
	return g
}

// identity is a camera at the origin looking down +z, f pixels, w×h with
// the principal point at the image centre.
func identity(w, h int, f float64) Camera {
	return Camera{Width: w, Height: h, Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
		Fx: f, Fy: f, Cx: float64(w) / 2, Cy: float64(h) / 2}
}

// An isotropic Gaussian of scale s at depth z seen by a camera of focal f
// is a 2D Gaussian of variance (f·s/z)² + 0.3 (the low-pass): its alpha at
// d pixels from the centre is opacity·exp(−d²/2σ²), 0 below 1/255; the
// colour is C0·dc + 0.5 times the alpha; the depth z.
func TestSingleGaussianProfile(t *testing.T) {
	const f, s, z, op = 40.0, 0.05, 2.0, 0.8
	dc := [3]float32{1, 0, -1}
	g := gaussians([][3]float32{{0, 0, z}}, []float32{s}, []float32{op}, [][3]float32{dc})
	r, err := New(g, Options{})
	require.NoError(t, err)
	fr, err := r.Render(identity(33, 33, f))
	require.NoError(t, err)
	v := math.Pow(f*s/z, 2) + 0.3
	for y := range 33 {
		for x := range 33 {
			d2 := math.Pow(float64(x)-16, 2) + math.Pow(float64(y)-16, 2)
			want := op * math.Exp(-d2/(2*v))
			if want < 1.0/255 {
				want = 0
			}
			o := y*33 + x
			require.InDelta(t, want, fr.Alpha[o], 2e-6, "alpha at (%d, %d)", x, y)
			for c := range 3 {
				assert.InDelta(t, want*(0.2820947917738781*float64(dc[c])+0.5), fr.RGB[3*o+c], 2e-6)
			}
			if want > 0 {
				assert.InDelta(t, z, fr.Depth[o], 1e-5)
			} else {
				assert.Zero(t, fr.Depth[o])
			}
		}
	}
	assert.InDelta(t, op, fr.Alpha[16*33+16], 1e-6, "peak alpha")

	// Full opacity peaks at 0.999.
	g.Opacities[0] = 1
	r, err = New(g, Options{})
	require.NoError(t, err)
	fr, err = r.Render(identity(33, 33, f))
	require.NoError(t, err)
	assert.InDelta(t, 0.999, fr.Alpha[16*33+16], 1e-6)
}

// Two Gaussians on the optical axis of the same apparent size: the nearer
// (red, opacity 0.6) is composited first, then the farther (blue, 0.8)
// through what the nearer leaves, whatever their order in the arrays.
func TestCompositingOrder(t *testing.T) {
	red, blue := [3]float32{1.7725, -1.7725, -1.7725}, [3]float32{-1.7725, -1.7725, 1.7725}
	for _, nearFirst := range []bool{false, true} {
		ms, ss, ops, dcs := [][3]float32{{0, 0, 4}, {0, 0, 2}}, []float32{0.1, 0.05}, []float32{0.8, 0.6}, [][3]float32{blue, red}
		if nearFirst {
			ms[0], ms[1], ss[0], ss[1], ops[0], ops[1], dcs[0], dcs[1] = ms[1], ms[0], ss[1], ss[0], ops[1], ops[0], dcs[1], dcs[0]
		}
		r, err := New(gaussians(ms, ss, ops, dcs), Options{Background: [3]float32{0, 1, 0}})
		require.NoError(t, err)
		fr, err := r.Render(identity(33, 33, 40))
		require.NoError(t, err)
		o := 16*33 + 16
		c0 := func(v float64) float64 { return math.Max(0.2820947917738781*v+0.5, 0) }
		rc, bc := c0(1.7725), c0(1.7725)
		assert.InDelta(t, 0.6*rc, fr.RGB[3*o], 1e-5, "red: the nearer, first")
		assert.InDelta(t, 0.4*0.2, fr.RGB[3*o+1], 1e-5, "the background through both")
		assert.InDelta(t, 0.4*0.8*bc, fr.RGB[3*o+2], 1e-5, "blue: behind")
		assert.InDelta(t, (0.6*2+0.4*0.8*4)/(1-0.4*0.2), fr.Depth[o], 1e-5)
	}
}

// A pixel ends at the Gaussian that would bring its transmittance to 1e-4
// or below: behind an opaque Gaussian (alpha 0.999, T 0.001), a second one
// (T would be 1e-6) and all behind it are left out.
func TestEarlyTermination(t *testing.T) {
	yellow, white := [3]float32{1.7725, 1.7725, -1.7725}, [3]float32{1.7725, 1.7725, 1.7725}
	g := gaussians([][3]float32{{0, 0, 2}, {0, 0, 3}, {0, 0, 4}}, []float32{0.05, 0.075, 0.1}, []float32{1, 1, 1}, [][3]float32{yellow, white, white})
	r, err := New(g, Options{Background: [3]float32{0, 0, 1}})
	require.NoError(t, err)
	fr, err := r.Render(identity(33, 33, 40))
	require.NoError(t, err)
	o := 16*33 + 16
	w := 0.2820947917738781*1.7725 + 0.5
	assert.InDelta(t, 0.999*w, fr.RGB[3*o], 1e-6)
	assert.InDelta(t, 0.001, fr.RGB[3*o+2], 1e-6, "the background (blue) through the first Gaussian only, none of the white behind")
	assert.InDelta(t, 0.999, fr.Alpha[o], 1e-6)
	assert.InDelta(t, 2, fr.Depth[o], 1e-5)
}

// Gaussians behind the camera or nearer than the near plane are culled;
// so are those of opacity below 1/255.
func TestCulling(t *testing.T) {
	dc := [3]float32{1, 1, 1}
	g := gaussians([][3]float32{{0, 0, -1}, {0, 0, 0.005}, {0, 0, 3}}, []float32{0.5, 0.001, 0.5}, []float32{1, 1, 0.003}, [][3]float32{dc, dc, dc})
	r, err := New(g, Options{})
	require.NoError(t, err)
	fr, err := r.Render(identity(20, 20, 30))
	require.NoError(t, err)
	for _, a := range fr.Alpha {
		require.Zero(t, a)
	}
}

// The image does not depend on the number of workers.
func TestDeterministic(t *testing.T) {
	g := randomScene(rand.New(rand.NewPCG(5, 5)), 3000, 2)
	var frames []*Frame
	for _, w := range []int{1, 2, 7} {
		r, err := New(g, Options{Workers: w})
		require.NoError(t, err)
		f, err := r.Render(testCamera())
		require.NoError(t, err)
		frames = append(frames, f)
	}
	for _, f := range frames[1:] {
		assert.Equal(t, frames[0].RGB, f.RGB)
		assert.Equal(t, frames[0].Depth, f.Depth)
	}
	// The same Renderer renders the same frame again.
	r, err := New(g, Options{Workers: 2})
	require.NoError(t, err)
	cam := testCamera()
	_, err = r.Render(identity(50, 30, 20))
	require.NoError(t, err)
	f, err := r.Render(cam)
	require.NoError(t, err)
	assert.Equal(t, frames[0].RGB, f.RGB)
}

func TestRenderRejects(t *testing.T) {
	g := gaussians([][3]float32{{0, 0, 2}}, []float32{0.1}, []float32{1}, [][3]float32{{1, 1, 1}})
	r, err := New(g, Options{})
	require.NoError(t, err)
	for _, cam := range []Camera{identity(0, 10, 10), identity(10, 10, 0), {Width: 5, Height: 5, Fx: 1, Fy: math.NaN()}} {
		_, err := r.Render(cam)
		assert.ErrorIs(t, err, ErrInput)
	}
	g.SHDim = 4
	_, err = New(g, Options{})
	assert.ErrorIs(t, err, ErrInput)
}

func TestRGB8(t *testing.T) {
	f := &Frame{RGB: []float32{-0.5, 0, 0.5, 0.999, 1, 7}}
	assert.Equal(t, []byte{0, 0, 127, 254, 255, 255}, f.RGB8(nil))
}

// expNeg is e^−x to 2e-7 relative over the range it is used on.
func TestExpNeg(t *testing.T) {
	for i := 0; i <= 60000; i++ {
		x := float32(i) / 10000
		want := math.Exp(-float64(x))
		require.InEpsilon(t, want, float64(expNeg(x)), 2e-7, "e^-%g", x)
	}
}
