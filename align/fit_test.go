package align_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/align"
)

const w, h = 160, 120

// depthField is a smooth scene from 1 to about 9 metres.
func depthField() []float32 {
	d := make([]float32, w*h)
	for y := range h {
		for x := range w {
			d[y*w+x] = float32(1 + 6*float64(y)/h + 2*math.Sin(float64(x)/25)*math.Sin(float64(x)/25))
		}
	}
	return d
}

// noisySamples draws n measurements of depth (on its w×h grid) with a 2%
// Gaussian error, a share of them gross outliers (depth times a factor of
// 1.5–4 or its inverse).
func noisySamples(depth []float32, n int, outliers float64, seed uint64) []align.Sample {
	r := rand.New(rand.NewPCG(seed, 1))
	s := make([]align.Sample, n)
	for i := range s {
		x, y := r.IntN(w), r.IntN(h)
		d := float64(depth[y*w+x]) * (1 + 0.02*r.NormFloat64())
		if float64(i) < outliers*float64(n) {
			f := 1.5 + 2.5*r.Float64()
			if r.IntN(2) == 0 {
				f = 1 / f
			}
			d = float64(depth[y*w+x]) * f
		}
		s[i] = align.Sample{X: float64(x), Y: float64(y), Depth: d}
	}
	return s
}

func TestFitScaleWithOutliers(t *testing.T) {
	truth := depthField()
	const scale = 2.5
	pred := make([]float32, len(truth))
	for i, d := range truth {
		pred[i] = d / scale
	}
	samples := align.Samples{Width: w, Height: h, Points: noisySamples(truth, 500, 0.2, 7)}
	for _, loss := range []align.Loss{align.Tukey, align.Huber} {
		t.Run(loss.String(), func(t *testing.T) {
			a, err := align.Fit([]align.View{{Pred: align.Map{Width: w, Height: h, Values: pred}, Samples: samples}}, align.Options{Loss: loss})
			require.NoError(t, err)
			assert.False(t, a.Disparity)
			assert.InDelta(t, scale, a.Scale, 0.01*scale, "scale within 1%%")
			assert.InDelta(t, 0.8, a.InlierShare, 0.03)
			assert.Equal(t, 500, a.Samples)
			assert.InDelta(t, 0.0135, a.Residual, 0.006, "median |error| of 2%% Gaussian noise ≈ 0.0135")
			got := a.Apply(pred)
			assert.InDelta(t, truth[w*h/2+w/2], got[w*h/2+w/2], 0.01*float64(truth[w*h/2+w/2]))
		})
	}
}

// TestFitConfidenceWeights: the confidence weighs the refit: where the
// measurements of low-confidence pixels are biased, the fit follows the
// confident ones.
func TestFitConfidenceWeights(t *testing.T) {
	truth := depthField()
	pred := make([]float32, len(truth))
	conf := make([]float32, len(truth))
	var pts []align.Sample
	for y := 0; y < h; y += 4 {
		for x := 0; x < w; x += 4 {
			i := y*w + x
			pred[i] = truth[i]
			conf[i] = 50
			d := float64(truth[i])
			if x < w/2 {
				conf[i], d = 1, d*1.05 // within the inlier threshold, but biased
			}
			pts = append(pts, align.Sample{X: float64(x), Y: float64(y), Depth: d})
		}
	}
	for i := range pred {
		if pred[i] == 0 {
			pred[i], conf[i] = truth[i], 1
		}
	}
	view := align.View{Pred: align.Map{Width: w, Height: h, Values: pred, Conf: conf}, Samples: align.Samples{Width: w, Height: h, Points: pts}}
	a, err := align.Fit([]align.View{view}, align.Options{Loss: align.Huber, InlierThreshold: 0.2})
	require.NoError(t, err)
	assert.InDelta(t, 1.0, a.Scale, 0.005, "the confident half decides")
	view.Pred.Conf = nil
	a, err = align.Fit([]align.View{view}, align.Options{Loss: align.Huber, InlierThreshold: 0.2})
	require.NoError(t, err)
	assert.Greater(t, a.Scale, 1.015, "unweighted, the biased half pulls")
}

func TestFitDisparityScaleShift(t *testing.T) {
	truth := depthField()
	const s, shift = 0.3, 0.05 // 1/depth = s·disp + shift
	disp := make([]float32, len(truth))
	for i, d := range truth {
		disp[i] = float32((1/float64(d) - shift) / s)
	}
	samples := align.Samples{Width: w, Height: h, Points: noisySamples(truth, 500, 0.2, 11)}
	a, err := align.Fit([]align.View{{Pred: align.Map{Width: w, Height: h, Values: disp, Disparity: true}, Samples: samples}}, align.Options{})
	require.NoError(t, err)
	assert.True(t, a.Disparity)
	assert.InDelta(t, s, a.Scale, 0.02*s)
	assert.InDelta(t, shift, a.Shift, 0.01)
	assert.InDelta(t, 0.8, a.InlierShare, 0.03)
	got := a.Apply(disp)
	for _, i := range []int{0, w*h/2 + 17, w*h - 1} {
		assert.InDelta(t, truth[i], got[i], 0.02*float64(truth[i]), "pixel %d in metres", i)
	}
	// A disparity the fit maps to a non-positive inverse depth has no depth.
	assert.True(t, math.IsNaN(float64(a.Metres(float32(-a.Shift/a.Scale-1)))))
}

// TestFitDenseOtherResolution: a dense map at twice the prediction's
// resolution, with holes (0 and NaN), and several views sharing a scale.
func TestFitDenseOtherResolution(t *testing.T) {
	truth := depthField()
	pred := make([]float32, len(truth))
	for i, d := range truth {
		pred[i] = d / 4
	}
	big := make([]float32, 4*w*h)
	for y := range 2 * h {
		for x := range 2 * w {
			v := truth[(y/2)*w+x/2]
			switch {
			case (x+y)%3 == 0:
				v = 0
			case (x+y)%3 == 1 && x%5 == 0:
				v = float32(math.NaN())
			}
			big[y*2*w+x] = v
		}
	}
	views := []align.View{
		{Pred: align.Map{Width: w, Height: h, Values: pred}, Samples: align.Samples{Width: 2 * w, Height: 2 * h, Dense: big}},
		{Pred: align.Map{Width: w, Height: h, Values: pred}, Samples: align.Samples{Width: w, Height: h, Points: noisySamples(truth, 100, 0, 3)}},
	}
	a, err := align.Fit(views, align.Options{MaxSamples: 20000})
	require.NoError(t, err)
	assert.InDelta(t, 4, a.Scale, 0.04)
	assert.Equal(t, 20000, a.Samples, "a dense map is subsampled to MaxSamples")
	assert.Greater(t, a.InlierShare, 0.95)
}

func TestFitRefuses(t *testing.T) {
	truth := depthField()
	pred := align.Map{Width: w, Height: h, Values: truth}
	few := align.Samples{Width: w, Height: h, Points: noisySamples(truth, 9, 0, 1)}
	_, err := align.Fit([]align.View{{Pred: pred, Samples: few}}, align.Options{})
	require.ErrorIs(t, err, align.ErrTooFewSamples)
	assert.Contains(t, err.Error(), "9 valid")

	// Points outside the image or without depth do not count.
	pts := append(noisySamples(truth, 8, 0, 2), align.Sample{X: -3, Y: 4, Depth: 2}, align.Sample{X: 4, Y: float64(h), Depth: 2},
		align.Sample{X: 4, Y: 4, Depth: 0}, align.Sample{X: 4, Y: 4, Depth: math.NaN()})
	_, err = align.Fit([]align.View{{Pred: pred, Samples: align.Samples{Width: w, Height: h, Points: pts}}}, align.Options{})
	require.ErrorIs(t, err, align.ErrTooFewSamples)

	// Mostly outliers: the inlier share is below the bound.
	bad := align.Samples{Width: w, Height: h, Points: noisySamples(truth, 200, 0.7, 5)}
	a, err := align.Fit([]align.View{{Pred: pred, Samples: bad}}, align.Options{})
	require.ErrorIs(t, err, align.ErrPoorFit)
	assert.Less(t, a.InlierShare, 0.5)
	assert.Contains(t, err.Error(), "within 10% of the fit")

	// The grid's size is required.
	_, err = align.Fit([]align.View{{Pred: pred, Samples: align.Samples{Points: few.Points}}}, align.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grid's size")
}

func TestAlignmentString(t *testing.T) {
	a := align.Alignment{Scale: 2.5, Residual: 0.0123, InlierShare: 0.81, Samples: 500, Inliers: 405}
	assert.Equal(t, "scale 2.5, residual 1.23% (median relative error of inliers), inliers 81.0% of 500 samples", a.String())
	a.Disparity, a.Shift = true, -0.02
	assert.Contains(t, a.String(), "inverse depth = 2.5·disparity -0.02")
}
