package stream

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/da3-go/da3-go/model"
)

// MetricScene is a Scene whose runs come out in metres through one scale per run: the nested model,
// whose any-view depth and camera translations are multiplied by the scale its metric branch measured on
// the run's views (nested.Scene). MetricMultiView returns the results, in metres, and that scale; Run
// records it for each window (stream.json's "metric").
type MetricScene interface {
	Scene
	MetricMultiView(ctx context.Context, imgs []model.Image, opt model.RunOptions) ([]model.Result, float64, error)
}

// MetricOptions tune a run whose windows are in metres (results with Unit model.Metres: the nested
// model). By default the windows are aligned by similarities like relative ones, so that the seams are
// consistent whatever each window's metric error, and the run's scale comes from all the windows' metric
// scales: each window's (its scale in the run's frame after the chain) enters the pose graph as a
// measurement of that window's scale, pulling a drifting chain back to the windows' metres (weakly: a
// seam is the better measurement of the scale between two neighbours, the metric scales the only one of
// the scale far along the chain), and the whole run is then scaled so that the median window's metre is
// one metre. The zero value uses the defaults.
type MetricOptions struct {
	// Rigid aligns windows in metres rigidly instead (scale 1 at every seam): each window keeps the scale
	// its own metric branch gave it, with no chain scale to drift, but each window's metric error shows at
	// its seams as a mismatch the rigid fit cannot take up.
	Rigid bool
	// Weight is a window's metric scale's weight in the pose graph relative to a seam's (default 0.3).
	// Its residual is re-weighted by the loops' Cauchy kernel, so that a window whose metric scale
	// disagrees with the rest by far (a view of mostly sky) barely counts.
	Weight float64
}

func (o MetricOptions) withDefaults() MetricOptions {
	if !(o.Weight > 0) {
		o.Weight = 0.3
	}
	return o
}

// MetricReport says how a run whose windows are in metres got its scale (stream.json's "metric";
// Reconstruction.Metric).
type MetricReport struct {
	// Scale multiplied the run's frame as the chain (and loop closure, with the windows' metric scales in
	// its pose graph) left it: the frame of window 0, whose metre is its own metric branch's, becomes one
	// in which the median window's metre is one metre.
	Scale float64 `json:"scale"`
	// ChainedSpread is the spread (1.4826 × the median absolute deviation of the logarithm: about a
	// relative standard deviation) of the windows' chained scales: how much the chain and the windows'
	// metric branches disagree (the windows' metric errors and the chain's drift together). Spread is that
	// of the final scales: how much the run stretched the windows' own metres.
	ChainedSpread float64 `json:"chained_spread"`
	Spread        float64 `json:"spread"`
	// Windows are the windows' scales, in order.
	Windows []MetricWindow `json:"windows"`
}

// MetricWindow is one window's scales in a run in metres.
type MetricWindow struct {
	// MetricScale is the scale the window's metric branch gave its run (metres per unit of its any-view
	// depth; 0 when the scene does not say: it is not a MetricScene).
	MetricScale float64 `json:"metric_scale,omitempty"`
	// Chained is the window's scale in the run's frame as chained (window 0's is 1): the scale the seams
	// put on the window's metres relative to window 0's. 1 everywhere when the metric branches and the
	// chain agree.
	Chained float64 `json:"chained_scale"`
	// Final is the window's scale in the finished run: the run's metres per metre of the window's own.
	Final float64 `json:"scale"`
	// Weight is the final robust weight of the window's metric scale in the pose graph (absent when the
	// graph did not run).
	Weight float64 `json:"weight,omitempty"`
}

// metricPriors are the measurements of the windows' scales a run in metres puts into its pose graph:
// every window's scale in the run's frame should be the same, estimated by the median of the chained
// ones. Window 0's is one of them: its scale is free in the graph, so that its own metric error is
// corrected like the others'.
func metricPriors(toWorld []Sim3, opt MetricOptions) []ScalePrior {
	opt = opt.withDefaults()
	if len(toWorld) < 2 {
		return nil
	}
	target := math.Exp(medianLogScale(toWorld))
	out := make([]ScalePrior, 0, len(toWorld))
	for k := range toWorld {
		out = append(out, ScalePrior{Node: k, Scale: target, Weight: opt.Weight})
	}
	return out
}

// toMetres scales the run's frame so that the median window's metre is one metre: the transforms moved
// and the report (weights: the priors' robust weights, per window, or nil).
func toMetres(chained, nodes []Sim3, metricScales, weights []float64) ([]Sim3, MetricReport) {
	rep := MetricReport{Scale: math.Exp(-medianLogScale(nodes))}
	out := make([]Sim3, len(nodes))
	for k, g := range nodes {
		out[k] = Sim3{S: rep.Scale * g.S, R: g.R, T: [3]float64{rep.Scale * g.T[0], rep.Scale * g.T[1], rep.Scale * g.T[2]}}
		mw := MetricWindow{Chained: chained[k].S, Final: out[k].S}
		if k < len(metricScales) {
			mw.MetricScale = metricScales[k]
		}
		if k < len(weights) {
			mw.Weight = weights[k]
		}
		rep.Windows = append(rep.Windows, mw)
	}
	rep.ChainedSpread = logSpread(chained)
	rep.Spread = logSpread(out)
	return out, rep
}

// medianLogScale is the median of the transforms' log scales.
func medianLogScale(gs []Sim3) float64 {
	v := make([]float64, len(gs))
	for i, g := range gs {
		v[i] = math.Log(g.S)
	}
	return median(v)
}

// logSpread is 1.4826 × the median absolute deviation of the transforms' log scales.
func logSpread(gs []Sim3) float64 {
	m := medianLogScale(gs)
	d := make([]float64, len(gs))
	for i, g := range gs {
		d[i] = math.Abs(math.Log(g.S) - m)
	}
	return 1.4826 * median(d)
}

// median is the median of v (the mean of the middle two for an even count); v is reordered.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// logMetric logs a run's metric report: a line per window (debug) and the run's.
func logMetric(log *slog.Logger, rep MetricReport) {
	for k, w := range rep.Windows {
		log.Debug("stream: window scale", "window", k, "metric_scale", w.MetricScale, "chained_scale", w.Chained, "scale", w.Final, "weight", w.Weight)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, w := range rep.Windows {
		lo, hi = min(lo, w.Chained), max(hi, w.Chained)
	}
	log.Info("stream: run in metres from the windows' metric scales", "windows", len(rep.Windows), "scale", rep.Scale,
		"chained_spread", rep.ChainedSpread, "chained_range", fmt.Sprintf("%.4g–%.4g", lo, hi), "spread", rep.Spread)
}
