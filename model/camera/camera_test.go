package camera

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model/nn"
)

func assertMat3(t *testing.T, want, got [3][3]float64, tol float64, msg string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			assert.InDelta(t, want[i][j], got[i][j], tol, "%s [%d][%d]", msg, i, j)
		}
	}
}

// rodrigues is the rotation by angle θ about the unit axis n.
func rodrigues(n [3]float64, th float64) [3][3]float64 {
	c, s := math.Cos(th), math.Sin(th)
	x, y, z := n[0], n[1], n[2]
	return [3][3]float64{
		{c + x*x*(1-c), x*y*(1-c) - z*s, x*z*(1-c) + y*s},
		{y*x*(1-c) + z*s, c + y*y*(1-c), y*z*(1-c) - x*s},
		{z*x*(1-c) - y*s, z*y*(1-c) + x*s, c + z*z*(1-c)},
	}
}

func TestQuatToMat(t *testing.T) {
	id := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	assertMat3(t, id, QuatToMat([4]float64{0, 0, 0, 1}), 1e-15, "identity")
	assertMat3(t, id, QuatToMat([4]float64{0, 0, 0, -2.5}), 1e-15, "identity, −2.5 scale")

	// 90° about z (xyzw): x → y, y → −x.
	h := math.Sqrt(0.5)
	rz := [3][3]float64{{0, -1, 0}, {1, 0, 0}, {0, 0, 1}}
	assertMat3(t, rz, QuatToMat([4]float64{0, 0, h, h}), 1e-15, "90° about z")
	assertMat3(t, rz, QuatToMat([4]float64{0, 0, 3.7, 3.7}), 1e-14, "90° about z, non-normalised")

	// Random axis-angle: q = (n·sin(θ/2), cos(θ/2)) scaled arbitrarily.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		n := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		l := math.Sqrt(n[0]*n[0] + n[1]*n[1] + n[2]*n[2])
		for i := range n {
			n[i] /= l
		}
		th := (r.Float64()*2 - 1) * math.Pi
		k := 0.1 + 5*r.Float64()
		q := [4]float64{k * n[0] * math.Sin(th/2), k * n[1] * math.Sin(th/2), k * n[2] * math.Sin(th/2), k * math.Cos(th/2)}
		assertMat3(t, rodrigues(n, th), QuatToMat(q), 1e-12, "axis-angle")
	}
}

func TestDecodeIdentity(t *testing.T) {
	fov := float32(2 * math.Atan(0.75))
	p := Decode([9]float32{0, 0, 0, 0, 0, 0, 1, fov, fov}, 640, 480)
	assert.Equal(t, [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, p.Extrinsics)
	// fy = (480/2)/tan(fov/2) = 240/0.75 = 320; fx = 320/0.75.
	assert.InDelta(t, 320, p.Intrinsics[1][1], 1e-4)
	assert.InDelta(t, 320/0.75, p.Intrinsics[0][0], 1e-4)
	assert.Equal(t, [3]float64{0, 0, 1}, p.Intrinsics[2])
	assert.Equal(t, 320.0, p.Intrinsics[0][2])
	assert.Equal(t, 240.0, p.Intrinsics[1][2])
	assert.Equal(t, 0.0, p.Intrinsics[0][1])
	assert.Equal(t, 0.0, p.Intrinsics[1][0])
}

func TestDecodePose(t *testing.T) {
	// c2w: R = 90° about z, t = (1, 2, 3). w2c = [Rᵀ | −Rᵀt] with
	// Rᵀ = [[0,1,0],[−1,0,0],[0,0,1]], −Rᵀt = −(2, −1, 3).
	h := float32(math.Sqrt(0.5))
	fovH := float32(math.Pi / 2)        // tan 45° = 1 → fy = H/2
	fovW := float32(2 * math.Atan(0.5)) // tan = 0.5 → fx = W
	p := Decode([9]float32{1, 2, 3, 0, 0, 2 * h, 2 * h, fovH, fovW}, 504, 378)
	want := [3][4]float64{{0, 1, 0, -2}, {-1, 0, 0, 1}, {0, 0, 1, -3}}
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			assert.InDelta(t, want[i][j], p.Extrinsics[i][j], 1e-6, "extrinsics [%d][%d]", i, j)
		}
	}
	assert.InDelta(t, 189, p.Intrinsics[1][1], 189*1e-6)
	assert.InDelta(t, 504, p.Intrinsics[0][0], 504*1e-6)
	assert.Equal(t, 252.0, p.Intrinsics[0][2])
	assert.Equal(t, 189.0, p.Intrinsics[1][2])

	// Round trip: the extrinsics map the camera centre t (world) to the origin.
	var c [3]float64
	for i := 0; i < 3; i++ {
		c[i] = p.Extrinsics[i][3]
		for j := 0; j < 3; j++ {
			c[i] += p.Extrinsics[i][j] * float64([]float32{1, 2, 3}[j])
		}
		assert.InDelta(t, 0, c[i], 1e-6)
	}
}

// A zero fov is clamped: tan(0) → 1e-6.
func TestDecodeZeroFov(t *testing.T) {
	p := Decode([9]float32{0, 0, 0, 0, 0, 0, 1, 0, 0}, 100, 60)
	assert.InDelta(t, 30/1e-6, p.Intrinsics[1][1], 1)
	assert.InDelta(t, 50/1e-6, p.Intrinsics[0][0], 1)
}

func TestScaleIntrinsics(t *testing.T) {
	k := [3][3]float64{{400, 0, 252}, {0, 410, 189}, {0, 0, 1}}
	// Resize only: original 1008×567 → processed 504×378 (sx = 0.5, sy = 2/3).
	got := ScaleIntrinsics(k, 0.5, 378.0/567, 0, 0)
	assertMat3(t, [3][3]float64{{800, 0, 504}, {0, 615, 283.5}, {0, 0, 1}}, got, 1e-9, "resize")
	// Resize + centre crop: the processed image starts at (7, 14) of the
	// resized one, so the principal point moves by the crop before scaling.
	got = ScaleIntrinsics(k, 0.5, 0.5, 7, 14)
	assertMat3(t, [3][3]float64{{800, 0, 518}, {0, 820, 406}, {0, 0, 1}}, got, 1e-9, "resize+crop")
	// The input is not modified.
	assert.Equal(t, 400.0, k[0][0])
}

// The decoder graph: ReLU MLP, then [t, q, ReLU(fov)] concatenated per view.
func TestDecoderForward(t *testing.T) {
	rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer rt.Close()
	r := rand.New(rand.NewPCG(3, 4))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const d, s = 6, 3
	type lin struct {
		w, b    []float32
		in, out int
	}
	ls := map[string]*lin{"bb0": {in: d, out: d}, "bb2": {in: d, out: d}, "t": {in: d, out: 3}, "q": {in: d, out: 4}, "fov": {in: d, out: 2}}
	for _, l := range ls {
		l.w, l.b = randn(l.in*l.out), randn(l.out)
	}
	tok := randn(d * s)
	out, err := rt.Run(context.Background(), backend.RunOptions{}, func(b *backend.Builder) error {
		mk := func(name string) nn.Linear {
			l := ls[name]
			return nn.Linear{Weight: b.Input(name+".w", l.w, l.in, l.out), Bias: b.Input(name+".b", l.b, l.out)}
		}
		dec := Decoder{BB0: mk("bb0"), BB2: mk("bb2"), FCT: mk("t"), FCQ: mk("q"), FCFov: mk("fov")}
		b.Output("y", dec.Forward(b.G, b.Input("tok", tok, d, s)))
		return nil
	})
	require.NoError(t, err)
	apply := func(l *lin, x []float64, relu bool) []float64 {
		y := make([]float64, l.out)
		for o := range y {
			y[o] = float64(l.b[o])
			for i := range x {
				y[o] += float64(l.w[o*l.in+i]) * x[i]
			}
			if relu {
				y[o] = max(y[o], 0)
			}
		}
		return y
	}
	var want []float32
	sawNegFov := false
	for v := 0; v < s; v++ {
		x := make([]float64, d)
		for i := range x {
			x[i] = float64(tok[v*d+i])
		}
		h := apply(ls["bb2"], apply(ls["bb0"], x, true), true)
		fovRaw := apply(ls["fov"], h, false)
		sawNegFov = sawNegFov || fovRaw[0] < 0 || fovRaw[1] < 0
		enc := append(append(apply(ls["t"], h, false), apply(ls["q"], h, false)...), apply(ls["fov"], h, true)...)
		for _, e := range enc {
			want = append(want, float32(e))
		}
	}
	assert.Equal(t, []int{9, s}, out["y"].Shape)
	testutil.AllClose(t, want, out["y"].Data, 1e-5, 1e-5)
	assert.True(t, sawNegFov, "the data must exercise the ReLU on fov (a negative raw fov)")
}
