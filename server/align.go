package server

import (
	"fmt"

	"github.com/da3-go/da3-go/align"
	"github.com/da3-go/da3-go/model"
)

// AlignPoint is one metric depth measurement: Depth metres at pixel (X, Y)
// of input image Image (0 for the first; the top-left pixel's centre is
// (0, 0)).
type AlignPoint struct {
	Image int     `json:"image"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Depth float64 `json:"depth"`
}

// maxAlignPoints bounds align_points: a million measurements (a dense
// 1000×1000 sensor map) is far more than a robust scale fit needs.
const maxAlignPoints = 1 << 20

// validateAlign checks align_points: their count, images and values, and
// that the request does not combine them with what they cannot apply to.
func (p *parsed) validateAlign() *apiError {
	q := &p.req
	if len(q.AlignPoints) == 0 {
		return nil
	}
	if len(q.AlignPoints) > maxAlignPoints {
		return tooLarge("%d align_points exceed the limit of %d", len(q.AlignPoints), maxAlignPoints)
	}
	for i, a := range q.AlignPoints { // JSON numbers are finite

		if a.Image < 0 || a.Image >= len(p.images) {
			return badRequest("align_points[%d]: image %d out of range (%d images)", i, a.Image, len(p.images))
		}
	}
	if len(q.Cameras) > 0 {
		return badRequest("align_points with cameras: the given cameras set the scene's frame and scale already")
	}
	for _, e := range q.Exports {
		if gaussianExport(e) {
			return badRequest("align_points with the %s export: the Gaussians are not rescaled", e)
		}
	}
	return nil
}

// alignSamples groups the points by image (nil without points).
func alignSamples(points []AlignPoint, images int) []align.Samples {
	if len(points) == 0 {
		return nil
	}
	out := make([]align.Samples, images)
	for _, a := range points {
		if a.Image >= 0 && a.Image < images {
			out[a.Image].Points = append(out[a.Image].Points, align.Sample{X: a.X, Y: a.Y, Depth: a.Depth})
		}
	}
	return out
}

// alignResults fits the results to the samples, one fit for the scene or
// one per image (independent), in place; it returns each view's fit (all
// nil without samples). A fit that fails is an input error.
func alignResults(res []model.Result, samples []align.Samples, independent bool) ([]*align.Alignment, error) {
	fits := make([]*align.Alignment, len(res))
	if samples == nil {
		return fits, nil
	}
	groups := [][]int{}
	if independent {
		for i := range res {
			if samples[i].Len() > 0 {
				groups = append(groups, []int{i})
			}
		}
	} else {
		all := make([]int, len(res))
		for i := range all {
			all[i] = i
		}
		groups = append(groups, all)
	}
	for _, g := range groups {
		rs, ss := make([]*model.Result, len(g)), make([]align.Samples, len(g))
		for k, i := range g {
			rs[k], ss[k] = &res[i], samples[i]
		}
		fit, err := align.Results(rs, ss, align.Options{})
		if err != nil {
			return nil, fmt.Errorf("%w: align_points: %w", model.ErrInvalidInput, err)
		}
		for _, i := range g {
			fits[i] = &fit
		}
	}
	return fits, nil
}
