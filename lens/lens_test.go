package lens

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refProject is an independent, straightforward transcription of the textbook formulas of each model
// (OpenCV's radial-tangential and fisheye documentation), used to check Project and Unproject.
func refProject(m Model, p []float64, X [3]float64) (float64, float64) {
	var fx, fy, cx, cy float64
	var k []float64
	switch m {
	case SimplePinhole, SimpleRadial, Radial, SimpleRadialFisheye, RadialFisheye, SimpleFisheye:
		fx, fy, cx, cy, k = p[0], p[0], p[1], p[2], p[3:]
	default:
		fx, fy, cx, cy, k = p[0], p[1], p[2], p[3], p[4:]
	}
	x, y := X[0]/X[2], X[1]/X[2]
	r2 := x*x + y*y
	var xd, yd float64
	switch m {
	case SimplePinhole, Pinhole:
		xd, yd = x, y
	case SimpleRadial:
		xd, yd = x*(1+k[0]*r2), y*(1+k[0]*r2)
	case Radial:
		s := 1 + k[0]*r2 + k[1]*r2*r2
		xd, yd = x*s, y*s
	case OpenCV:
		s := 1 + k[0]*r2 + k[1]*r2*r2
		xd = x*s + 2*k[2]*x*y + k[3]*(r2+2*x*x)
		yd = y*s + k[2]*(r2+2*y*y) + 2*k[3]*x*y
	case FullOpenCV:
		s := (1 + k[0]*r2 + k[1]*r2*r2 + k[4]*r2*r2*r2) / (1 + k[5]*r2 + k[6]*r2*r2 + k[7]*r2*r2*r2)
		xd = x*s + 2*k[2]*x*y + k[3]*(r2+2*x*x)
		yd = y*s + k[2]*(r2+2*y*y) + 2*k[3]*x*y
	default: // fisheye: θ_d = θ(1 + k1θ² + k2θ⁴ + …), θ the angle from the axis
		r := math.Hypot(X[0], X[1])
		if r == 0 {
			return cx, cy
		}
		th := math.Atan2(r, X[2])
		td, t2 := th, th*th
		pw := th
		for _, ki := range k {
			pw *= t2
			td += ki * pw
		}
		xd, yd = td*X[0]/r, td*X[1]/r
	}
	return fx*xd + cx, fy*yd + cy
}

// testCameras are one camera of every model, 640×480, with distortions as strong as real lenses have
// (the fisheye ones see about 150° across the diagonal).
var testCameras = []struct {
	model  Model
	params []float64
}{
	{SimplePinhole, []float64{500, 320, 240}},
	{Pinhole, []float64{500, 520, 321, 239}},
	{SimpleRadial, []float64{500, 320, 240, -0.12}},
	{Radial, []float64{500, 320, 240, -0.1, 0.02}},
	{OpenCV, []float64{500, 520, 321, 239, -0.2, 0.05, 0.001, -0.002}},
	{FullOpenCV, []float64{500, 520, 321, 239, -0.2, 0.05, 0.001, -0.002, 0.01, 0.02, -0.01, 0.003}},
	{OpenCVFisheye, []float64{200, 205, 320, 240, 0.05, -0.01, 0.002, -0.0003}},
	{SimpleRadialFisheye, []float64{200, 320, 240, 0.05}},
	{RadialFisheye, []float64{200, 320, 240, 0.05, -0.01}},
	{SimpleFisheye, []float64{200, 320, 240}},
	{Fisheye, []float64{200, 205, 320, 240}},
}

// TestRoundTrip: over the whole image (every 5th pixel, and the corners), a pixel's ray projects back
// to the pixel within 1e-6 px, and the independent formula puts the ray at the same pixel.
func TestRoundTrip(t *testing.T) {
	for _, tc := range testCameras {
		t.Run(tc.model.String(), func(t *testing.T) {
			c, err := New(tc.model, 640, 480, tc.params)
			require.NoError(t, err)
			worst, worstRef, n := 0.0, 0.0, 0
			for y := 0.0; y <= 480; y += 5 {
				for x := 0.0; x <= 640; x += 5 {
					ray, ok := c.Unproject(x, y)
					require.True(t, ok, "pixel (%g, %g) has no ray", x, y)
					assert.InDelta(t, 1, math.Sqrt(ray[0]*ray[0]+ray[1]*ray[1]+ray[2]*ray[2]), 1e-12)
					px, py, ok := c.Project(ray)
					require.True(t, ok)
					worst = max(worst, math.Hypot(px-x, py-y))
					rx, ry := refProject(tc.model, tc.params, ray)
					worstRef = max(worstRef, math.Hypot(rx-x, ry-y))
					n++
				}
			}
			t.Logf("%d pixels: round trip max %.2g px, against the formula %.2g px", n, worst, worstRef)
			assert.Less(t, worst, 1e-6)
			assert.Less(t, worstRef, 1e-6)
		})
	}
}

// TestMatchesPycolmap compares with values computed by pycolmap 4.2.1 (COLMAP's own code): the pixels
// of four camera-frame points (img_from_cam) and the normalised coordinates of four pixels
// (cam_from_img), with the same cameras.
func TestMatchesPycolmap(t *testing.T) {
	pts := [][3]float64{{0.3, -0.2, 1.0}, {-0.5, 0.4, 2.0}, {0.01, 0.02, 3.0}, {-1.2, -0.9, 1.5}}
	pix := [][2]float64{{10.5, 20.25}, {600.0, 400.0}, {320.0, 240.0}, {123.4, 456.7}}
	for _, tc := range pycolmapRef {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseModel(tc.name)
			require.NoError(t, err)
			c, err := New(m, 640, 480, tc.params)
			require.NoError(t, err)
			for i, p := range pts {
				x, y, ok := c.Project(p)
				require.True(t, ok)
				assert.InDelta(t, tc.img[i][0], x, 1e-9, "point %d x", i)
				assert.InDelta(t, tc.img[i][1], y, 1e-9, "point %d y", i)
				rx, ry := refProject(m, tc.params, p)
				assert.InDelta(t, tc.img[i][0], rx, 1e-9, "formula, point %d x", i)
				assert.InDelta(t, tc.img[i][1], ry, 1e-9, "formula, point %d y", i)
			}
			for i, p := range pix {
				u, v, ok := c.Normalized(p[0], p[1])
				require.True(t, ok)
				assert.InDelta(t, tc.cam[i][0], u, 1e-8, "pixel %d u", i)
				assert.InDelta(t, tc.cam[i][1], v, 1e-8, "pixel %d v", i)
			}
		})
	}
}

// pycolmapRef: pycolmap.Camera(model, 640, 480, params).img_from_cam(pts) and .cam_from_img(pix).
var pycolmapRef = []struct {
	name     string
	params   []float64
	img, cam [][2]float64
}{
	{"SIMPLE_PINHOLE", []float64{500.0, 320.0, 240.0},
		[][2]float64{{470.0, 140.0}, {195.0, 340.0}, {321.6666666666667, 243.33333333333334}, {-80.0, -60.0}},
		[][2]float64{{-0.619, -0.4395}, {0.56, 0.32}, {0.0, 0.0}, {-0.3932, 0.43339999999999995}}},
	{"PINHOLE", []float64{500.0, 520.0, 320.0, 240.0},
		[][2]float64{{470.0, 136.0}, {195.0, 344.0}, {321.6666666666667, 243.46666666666667}, {-80.0, -72.0}},
		[][2]float64{{-0.619, -0.42259615384615384}, {0.56, 0.3076923076923077}, {0.0, 0.0}, {-0.3932, 0.4167307692307692}}},
	{"SIMPLE_RADIAL", []float64{500.0, 320.0, 240.0, -0.12},
		[][2]float64{{467.65999999999997, 141.56}, {196.5375, 338.77}, {321.66665555555556, 243.3333111111111}, {-32.0, -24.0}},
		[][2]float64{{-0.6743505142515747, -0.4787997593110938}, {0.593233448883321, 0.33899054221904057}, {0.0, 0.0}, {-0.41175483622701886, 0.4538518464414801}}},
	{"RADIAL", []float64{500.0, 320.0, 240.0, -0.1, 0.02},
		[][2]float64{{468.10069999999996, 141.26619999999997}, {196.254984375, 338.9960125}, {321.6666574075103, 243.33331481502057}, {-48.0, -35.99999999999994}},
		[][2]float64{{-0.6559582151912738, -0.4657409298490547}, {0.5840346760039272, 0.33373410057367264}, {0.0, 0.0}, {-0.4070410503099941, 0.44865613225928647}}},
	{"OPENCV", []float64{500.0, 520.0, 321.0, 239.0, -0.2, 0.05, 0.001, -0.002},
		[][2]float64{{466.85675, 137.85012}, {198.21933593749998, 341.1215325}, {322.6665925928498, 242.46665703757202}, {-20.80000000000001, -26.303999999999974}},
		[][2]float64{{-0.7008931916076828, -0.4767077598849326}, {0.6127991501421854, 0.3388874355139484}, {-0.001999963991695668, 0.0019230494054571978}, {-0.42232394950547697, 0.4478413730288982}}},
	{"FULL_OPENCV", []float64{500.0, 520.0, 321.0, 239.0, -0.2, 0.05, 0.001, -0.002, 0.01, 0.02, -0.01, 0.003},
		[][2]float64{{466.5044632213219, 138.09437216655013}, {198.45618516726833, 340.92447394083274}, {322.666590741072, 242.46665318587424}, {-20.385389930898384, -25.980604146100745}},
		[][2]float64{{-0.7061616423595506, -0.48032030524489067}, {0.6175939168544257, 0.341521119466686}, {-0.0019999642995969453, 0.0019230497015194003}, {-0.4251010453769508, 0.45079231128809444}}},
	{"OPENCV_FISHEYE", []float64{300.0, 310.0, 320.0, 240.0, 0.1, -0.05, 0.01, -0.002},
		[][2]float64{{407.35242065175055, 179.82388799546075}, {246.75157792039232, 300.55202891914234}, {320.9999870371914, 242.06663987686215}, {123.07541153585453, 87.38344394028724}},
		[][2]float64{{-1.994264160525245, -1.370283649826742}, {1.386414164263705, 0.7666806438324634}, {0.0, 0.0}, {-0.8793228895855781, 0.937957881599423}}},
	{"SIMPLE_RADIAL_FISHEYE", []float64{300.0, 320.0, 240.0, 0.05},
		[][2]float64{{406.89572011812464, 182.06951992125022}, {247.0671769433378, 298.34625844532974}, {320.9999842597222, 241.99996851944442}, {125.69076390705621, 94.26807293029213}},
		[][2]float64{{-1.993688610901817, -1.4155511219569445}, {1.4188556132887558, 0.8107746361650032}, {0.0, 0.0}, {-0.9094839084677971, 1.0024677668615036}}},
	{"RADIAL_FISHEYE", []float64{300.0, 320.0, 240.0, 0.05, -0.01},
		[][2]float64{{406.8833336969749, 182.07777753535004}, {247.07386683781283, 298.34090652974976}, {320.99998425969136, 241.9999685193827}, {126.4079975432717, 94.80599815745376}},
		[][2]float64{{-2.1183736918879204, -1.5040795437556396}, {1.451568208756488, 0.8294675478608503}, {0.0, 0.0}, {-0.9220001349970649, 1.016263627944374}}},
	{"SIMPLE_FISHEYE", []float64{300.0, 320.0, 240.0},
		[][2]float64{{406.3785352103274, 182.41430985978172}, {247.41559551579533, 298.0675235873637}, {320.99998148209875, 241.9999629641975}, {131.50444078461243, 98.6283305884593}},
		[][2]float64{{-2.5851436701554746, -1.835493769036076}, {1.6051869098423803, 0.9172496627670745}, {0.0, 0.0}, {-0.9917218495458513, 1.0931135544078634}}},
	{"FISHEYE", []float64{300.0, 310.0, 320.0, 240.0},
		[][2]float64{{406.3785352103274, 180.49478685510775}, {247.41559551579533, 300.0031077069425}, {320.99998148209875, 242.0666283963374}, {131.50444078461243, 93.9159416080746}},
		[][2]float64{{-2.4948965348695045, -1.7142743661605302}, {1.5857793196529624, 0.8769286560292878}, {0.0, 0.0}, {-0.9731293232038609, 1.0380195140203294}}},
}

// TestHandComputed checks a few values worked out by hand.
func TestHandComputed(t *testing.T) {
	// OPENCV, point (0.1, 0.2, 1): r² = 0.05, radial = 1 − 0.2·0.05 + 0.05·0.0025 = 0.990125;
	// x_d = 0.1·0.990125 + 2·0.001·0.02 + (−0.002)·(0.05 + 0.02) = 0.0989125,
	// y_d = 0.2·0.990125 + 0.001·(0.05 + 0.08) + 2·(−0.002)·0.02 = 0.198075;
	// pixel (500·x_d + 321, 520·y_d + 239).
	c, err := New(OpenCV, 640, 480, []float64{500, 520, 321, 239, -0.2, 0.05, 0.001, -0.002})
	require.NoError(t, err)
	x, y, ok := c.Project([3]float64{0.1, 0.2, 1})
	require.True(t, ok)
	assert.InDelta(t, 500*0.0989125+321, x, 1e-12)
	assert.InDelta(t, 520*0.198075+239, y, 1e-12)
	// OPENCV_FISHEYE, point (1, 0, 1): θ = π/4, θ_d = θ(1 + 0.1θ²) (k2..k4 = 0); pixel (300θ_d + 320, 240).
	f, err := New(OpenCVFisheye, 640, 480, []float64{300, 300, 320, 240, 0.1, 0, 0, 0})
	require.NoError(t, err)
	x, y, ok = f.Project([3]float64{1, 0, 1})
	require.True(t, ok)
	th := math.Pi / 4
	assert.InDelta(t, 300*th*(1+0.1*th*th)+320, x, 1e-12)
	assert.InDelta(t, 240, y, 1e-12)
	// A fisheye ray at 100° from the axis, beyond COLMAP's normalised plane, still round-trips.
	ray := [3]float64{math.Sin(100 * math.Pi / 180), 0, math.Cos(100 * math.Pi / 180)}
	x, y, ok = f.Project(ray)
	require.True(t, ok)
	back, ok := f.Unproject(x, y)
	require.True(t, ok)
	assert.InDeltaSlice(t, ray[:], back[:], 1e-12)
	_, _, ok = f.Normalized(x, y)
	assert.False(t, ok, "no normalised coordinates beyond 90°")
}

// TestFoldRefused: a strong barrel distortion turns back beyond some radius; pixels there have no ray
// (Newton would otherwise land on the wrong branch), and points behind a perspective camera have no
// pixel.
func TestFoldRefused(t *testing.T) {
	c, err := New(SimpleRadial, 640, 480, []float64{300, 320, 240, -0.5})
	require.NoError(t, err)
	// x_d = x(1 − 0.5x²) peaks at x = √(2/3), x_d ≈ 0.544: the pixel 0.6·300 right of the centre is past it.
	_, ok := c.Unproject(320+0.6*300, 240)
	assert.False(t, ok)
	_, ok = c.Unproject(320+0.5*300, 240)
	assert.True(t, ok)
	_, _, ok = c.Project([3]float64{0, 0, -1})
	assert.False(t, ok)
}

func TestParseAndValidate(t *testing.T) {
	for s, want := range map[string]Model{"opencv": OpenCV, "OPENCV_FISHEYE": OpenCVFisheye, "fisheye": OpenCVFisheye,
		"pinhole": Pinhole, "full_opencv": FullOpenCV, "simple_radial_fisheye": SimpleRadialFisheye} {
		m, err := ParseModel(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, m, s)
	}
	_, err := ParseModel("fov")
	assert.ErrorContains(t, err, "unsupported")
	_, err = New(OpenCV, 640, 480, []float64{1, 2, 3})
	assert.ErrorContains(t, err, "takes 8 parameters")
	_, err = New(Pinhole, 640, 480, []float64{-1, 2, 3, 4})
	assert.ErrorContains(t, err, "positive")
	_, err = New(Pinhole, 640, 480, []float64{math.NaN(), 2, 3, 4})
	assert.ErrorContains(t, err, "finite")
	_, err = New(Model(7), 640, 480, []float64{1, 2, 3, 4, 5})
	assert.ErrorContains(t, err, "FOV")
}

// TestRescaled: a rescaled camera sees the same ray at the scaled pixel (COLMAP's pixel convention).
func TestRescaled(t *testing.T) {
	c, err := New(OpenCVFisheye, 640, 480, []float64{200, 205, 321, 239, 0.1, -0.05, 0.01, -0.002})
	require.NoError(t, err)
	s := c.Rescaled(320, 240)
	p := [3]float64{0.4, -0.3, 1}
	x, y, _ := c.Project(p)
	xs, ys, _ := s.Project(p)
	assert.InDelta(t, x/2, xs, 1e-12)
	assert.InDelta(t, y/2, ys, 1e-12)
}
