package lens

import (
	"image"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test scene, in the camera frame (both cameras of a test share centre and axes): a plane tilted
// towards the camera, n·X = planeD, with a smooth checker texture, and a box in front of it. Everything
// is computed analytically per ray.
var (
	planeN = normalize([3]float64{0.15, -0.1, 1})
	boxMin = [3]float64{-0.9, -0.5, 1.9}
	boxMax = [3]float64{-0.2, 0.3, 2.4}
)

const planeD = 3.0

func normalize(v [3]float64) [3]float64 {
	n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
	return [3]float64{v[0] / n, v[1] / n, v[2] / n}
}

func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

// hit returns the distance along the unit ray to the nearest surface, its colour and whether it is the
// plane; ok is false when the ray meets nothing.
func hit(ray [3]float64) (t float64, col [3]float64, onPlane, ok bool) {
	t = math.Inf(1)
	// Box: slab method.
	t0, t1, face := 0.0, math.Inf(1), -1
	for a := range 3 {
		if ray[a] == 0 {
			if boxMin[a] > 0 || boxMax[a] < 0 {
				t0 = math.Inf(1)
			}
			continue
		}
		n, f := boxMin[a]/ray[a], boxMax[a]/ray[a]
		if n > f {
			n, f = f, n
		}
		if n > t0 {
			t0, face = n, a
		}
		t1 = min(t1, f)
	}
	if t0 <= t1 && face >= 0 {
		t = t0
		p := [3]float64{ray[0] * t, ray[1] * t, ray[2] * t}
		shade := 0.8 + 0.2*math.Sin(3*p[0]+2*p[1]+p[2])
		base := [3][3]float64{{220, 60, 50}, {60, 200, 70}, {240, 220, 90}}[face]
		col = [3]float64{base[0] * shade, base[1] * shade, base[2] * shade}
	}
	if den := dot(planeN, ray); den > 1e-9 {
		if tp := planeD / den; tp < t {
			t, onPlane = tp, true
			p := [3]float64{ray[0] * t, ray[1] * t, ray[2] * t}
			v := 0.5 + 0.5*math.Tanh(3*math.Sin(2*math.Pi*p[0]/0.7)*math.Sin(2*math.Pi*p[1]/0.7))
			col = [3]float64{40 + 180*v, 60 + 150*v, 200 - 150*v}
		}
	}
	return t, col, onPlane, !math.IsInf(t, 1)
}

// rendered is an image of the scene: RGB, z-depth (NaN where nothing is hit) and the plane mask.
type rendered struct {
	w, h    int
	rgb     []uint8
	depth   []float32
	onPlane []bool
}

// render samples the scene at every pixel centre of c, each pixel seeing along c's ray.
func render(t *testing.T, c *Camera, shade func(ray [3]float64) ([3]float64, float64, bool, bool)) *rendered {
	t.Helper()
	r := &rendered{w: c.Width, h: c.Height, rgb: make([]uint8, 3*c.Width*c.Height), depth: make([]float32, c.Width*c.Height),
		onPlane: make([]bool, c.Width*c.Height)}
	for j := range c.Height {
		for i := range c.Width {
			k := j*c.Width + i
			r.depth[k] = float32(math.NaN())
			ray, ok := c.Unproject(float64(i)+0.5, float64(j)+0.5)
			require.True(t, ok)
			col, dist, plane, ok := shade(ray)
			if !ok {
				r.rgb[3*k], r.rgb[3*k+1], r.rgb[3*k+2] = 128, 128, 128
				continue
			}
			for ch := range 3 {
				r.rgb[3*k+ch] = uint8(math.Round(min(255, max(0, col[ch]))))
			}
			r.depth[k], r.onPlane[k] = float32(dist*ray[2]), plane
		}
	}
	return r
}

func sceneShade(ray [3]float64) ([3]float64, float64, bool, bool) {
	t, col, plane, ok := hit(ray)
	return col, t, plane, ok
}

// lineShade is a fronto-parallel plane at z = 2, white, with a dark vertical line at x = 0.6.
func lineShade(ray [3]float64) ([3]float64, float64, bool, bool) {
	if ray[2] <= 0 {
		return [3]float64{}, 0, false, false
	}
	t := 2 / ray[2]
	x := ray[0] * t
	v := 255 * (1 - 0.9*math.Exp(-(x-0.6)*(x-0.6)/(2*0.015*0.015)))
	return [3]float64{v, v, v}, t, true, true
}

// sceneCameras are the distorted cameras of the scene tests: a barrel-distorted OPENCV lens and an
// OPENCV_FISHEYE one seeing about 150° across the diagonal.
func sceneCameras(t *testing.T) map[string]*Camera {
	t.Helper()
	cv, err := New(OpenCV, 320, 240, []float64{220, 225, 161, 118, -0.28, 0.08, 0.001, -0.0015})
	require.NoError(t, err)
	fe, err := New(OpenCVFisheye, 320, 240, []float64{150, 150, 160.3, 119.6, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	return map[string]*Camera{"opencv": cv, "fisheye": fe}
}

// TestUndistortMatchesPinholeRender: undistorting the distorted render of the scene gives the render of
// the same scene through the chosen pinhole camera.
func TestUndistortMatchesPinholeRender(t *testing.T) {
	for name, c := range sceneCameras(t) {
		t.Run(name, func(t *testing.T) {
			p, err := PinholeFor(c, PinholeOptions{})
			require.NoError(t, err)
			u, err := NewUndistorter(c, p)
			require.NoError(t, err)
			dist := render(t, c, sceneShade)
			want := render(t, p, sceneShade)
			got, err := u.Forward().RGB(dist.rgb)
			require.NoError(t, err)
			valid := 0
			for k := range p.Width * p.Height {
				if u.Forward().Valid(k) {
					valid++
				}
			}
			assert.Equal(t, p.Width*p.Height, valid, "balance 0 fills the frame")
			var se, ae float64
			for k := range got {
				d := float64(got[k]) - float64(want.rgb[k])
				se += d * d
				ae += math.Abs(d)
			}
			mse, mae := se/float64(len(got)), ae/float64(len(got))
			psnr := 10 * math.Log10(255*255/mse)
			fx, _ := p.Focal()
			t.Logf("pinhole fx %.2f: PSNR %.1f dB, mean |d| %.2f of 255", fx, psnr, mae)
			assert.Greater(t, psnr, 30.0)
			assert.Less(t, mae, 2.0)
			// The distorted render itself is far from the pinhole one: the comparison has teeth.
			var se0 float64
			for k := range dist.rgb {
				d := float64(dist.rgb[k]) - float64(want.rgb[k])
				se0 += d * d
			}
			assert.Less(t, 10*math.Log10(255*255*float64(len(got))/se0), 20.0)
		})
	}
}

// lineResidual returns the largest distance (px) of the rows' centres of the dark line from their
// least-squares straight line x = a·y + b, and the number of rows with the line.
func lineResidual(rgb []uint8, w, h int) (float64, int) {
	var ys, xs []float64
	for j := range h {
		var s, sx float64
		for i := range w {
			d := 1 - float64(rgb[3*(j*w+i)])/255
			if d > 0.05 {
				s += d
				sx += d * float64(i)
			}
		}
		if s > 0.5 {
			ys, xs = append(ys, float64(j)), append(xs, sx/s)
		}
	}
	n := float64(len(ys))
	var my, mx, syy, sxy float64
	for k := range ys {
		my, mx = my+ys[k]/n, mx+xs[k]/n
	}
	for k := range ys {
		syy += (ys[k] - my) * (ys[k] - my)
		sxy += (ys[k] - my) * (xs[k] - mx)
	}
	a := sxy / syy
	worst := 0.0
	for k := range ys {
		worst = max(worst, math.Abs(xs[k]-(mx+a*(ys[k]-my))))
	}
	return worst, len(ys)
}

// TestUndistortStraightensLines: a straight line in the scene is curved in the distorted image and
// straight (to a small fraction of a pixel) after undistortion.
func TestUndistortStraightensLines(t *testing.T) {
	for name, c := range sceneCameras(t) {
		t.Run(name, func(t *testing.T) {
			p, err := PinholeFor(c, PinholeOptions{})
			require.NoError(t, err)
			u, err := NewUndistorter(c, p)
			require.NoError(t, err)
			dist := render(t, c, lineShade)
			und, err := u.Forward().RGB(dist.rgb)
			require.NoError(t, err)
			curved, n0 := lineResidual(dist.rgb, c.Width, c.Height)
			straight, n1 := lineResidual(und, p.Width, p.Height)
			t.Logf("line: %.3f px from straight in the distorted image (%d rows), %.3f px undistorted (%d rows)", curved, n0, straight, n1)
			assert.Greater(t, curved, 2.0)
			assert.Less(t, straight, 0.1)
			assert.Greater(t, n1, p.Height*3/4)
		})
	}
}

// TestMapBackDepth: the pinhole view's true depth mapped back through the distorted camera gives the true
// depth at the original pixels, and the points unprojected with the lens's rays lie on the true plane.
func TestMapBackDepth(t *testing.T) {
	for name, c := range sceneCameras(t) {
		t.Run(name, func(t *testing.T) {
			p, err := PinholeFor(c, PinholeOptions{Balance: 0.5})
			require.NoError(t, err)
			u, err := NewUndistorter(c, p)
			require.NoError(t, err)
			truth := render(t, c, sceneShade)
			pin := render(t, p, sceneShade)
			back, err := u.Backward(c.Width, c.Height, p.Width, p.Height).Floats(pin.depth, float32(math.NaN()))
			require.NoError(t, err)
			w, h := c.Width, c.Height
			worst, worstPlane, n, valid := 0.0, 0.0, 0, 0
			const rad = 3 // a pinhole pixel spans up to about two distorted ones: the edge margin
			for j := rad; j < h-rad; j++ {
				for i := rad; i < w-rad; i++ {
					k := j*w + i
					if !math.IsNaN(float64(back[k])) {
						valid++
					}
					// Away from depth edges: the truth within 2 % over a 7×7 neighbourhood.
					lo, hi := math.Inf(1), math.Inf(-1)
					for dj := -rad; dj <= rad; dj++ {
						for di := -rad; di <= rad; di++ {
							d := float64(truth.depth[k+dj*w+di])
							lo, hi = min(lo, d), max(hi, d)
						}
					}
					if math.IsNaN(float64(back[k])) || !(hi <= 1.02*lo) {
						continue
					}
					z := float64(truth.depth[k])
					worst = max(worst, math.Abs(float64(back[k])-z)/z)
					n++
					if truth.onPlane[k] {
						ray, ok := c.Unproject(float64(i)+0.5, float64(j)+0.5)
						require.True(t, ok)
						s := float64(back[k]) / ray[2]
						pt := [3]float64{ray[0] * s, ray[1] * s, ray[2] * s}
						worstPlane = max(worstPlane, math.Abs(dot(planeN, pt)-planeD))
					}
				}
			}
			t.Logf("%d of %d pixels mapped back; %d away from edges: depth max rel err %.2g, plane distance max %.2g", valid, (w-2*rad)*(h-2*rad), n, worst, worstPlane)
			assert.Greater(t, n, w*h/2)
			assert.Less(t, worst, 2e-3)
			assert.Less(t, worstPlane, 5e-3)
		})
	}
}

// TestPinholeBalance: balance 1 keeps the whole image border in view; balance 0 fills the view.
func TestPinholeBalance(t *testing.T) {
	c := sceneCameras(t)["opencv"]
	all, err := PinholeFor(c, PinholeOptions{Balance: 1})
	require.NoError(t, err)
	fill, err := PinholeFor(c, PinholeOptions{})
	require.NoError(t, err)
	fa, _ := all.Focal()
	ff, _ := fill.Focal()
	assert.Less(t, fa, ff)
	for s := 0.0; s <= 1; s += 1.0 / 32 {
		for _, px := range [][2]float64{{s * 320, 0}, {s * 320, 240}, {0, s * 240}, {320, s * 240}} {
			ray, ok := c.Unproject(px[0], px[1])
			require.True(t, ok)
			x, y, ok := all.Project(ray)
			require.True(t, ok)
			assert.True(t, x >= -1e-6 && x <= 320+1e-6 && y >= -1e-6 && y <= 240+1e-6, "border pixel %v at (%g, %g)", px, x, y)
		}
	}
	// A pinhole camera is its own view.
	pc, err := NewPinhole(320, 240, 200, 210, 150, 130)
	require.NoError(t, err)
	same, err := PinholeFor(pc, PinholeOptions{})
	require.NoError(t, err)
	assert.Equal(t, pc.Params, same.Params)
	_, err = PinholeFor(c, PinholeOptions{Balance: 2})
	assert.Error(t, err)
}

// TestUndistortImage: the image.Image path equals the RGB path.
func TestUndistortImage(t *testing.T) {
	c := sceneCameras(t)["fisheye"]
	p, err := PinholeFor(c, PinholeOptions{})
	require.NoError(t, err)
	u, err := NewUndistorter(c, p)
	require.NoError(t, err)
	dist := render(t, c, sceneShade)
	img := image.NewNRGBA(image.Rect(0, 0, c.Width, c.Height))
	for k := range c.Width * c.Height {
		copy(img.Pix[4*k:], dist.rgb[3*k:3*k+3])
		img.Pix[4*k+3] = 255
	}
	got, err := u.Image(img)
	require.NoError(t, err)
	want, err := u.Forward().RGB(dist.rgb)
	require.NoError(t, err)
	assert.Equal(t, want, RGBOf(got))
	_, err = u.Image(image.NewNRGBA(image.Rect(0, 0, 10, 10)))
	assert.Error(t, err)
}
