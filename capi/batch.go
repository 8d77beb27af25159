package main

import (
	"fmt"
	"image"

	"github.com/da3-go/da3-go/model"
)

// sceneCounts checks the views per scene of da3go_run_scenes: 1 to
// maxImages scenes of at least one view, maxImages views in all.
func sceneCounts(counts []int32, nscenes int) ([]int, error) {
	if nscenes <= 0 || nscenes > maxImages {
		return nil, fmt.Errorf("da3go_run_scenes: need 1 to %d scenes, got %d", maxImages, nscenes)
	}
	sizes := make([]int, nscenes)
	total := 0
	for i, c := range counts {
		if c <= 0 {
			return nil, fmt.Errorf("da3go_run_scenes: scene %d has %d images (at least 1)", i, c)
		}
		total += int(c)
		if total > maxImages {
			return nil, fmt.Errorf("da3go_run_scenes: more than %d images in all", maxImages)
		}
		sizes[i] = int(c)
	}
	return sizes, nil
}

// runScenes runs consecutive groups of imgs, sizes[i] images each, as
// scenes of their own (or each image alone with o.independent); the results
// are in input order, mapped back to the images' pixels with a lens (unless
// keep_undistorted). Given cameras (one per image of every scene) are split
// between the scenes.
func (s scene) runScenes(imgs []image.Image, sizes []int, o runOptions) ([]model.Result, error) {
	out := make([]model.Result, 0, len(imgs))
	start := 0
	for i, n := range sizes {
		so := o
		if o.opt.Extrinsics != nil {
			so.opt.Extrinsics = o.opt.Extrinsics[start : start+n]
			so.opt.ViewIntrinsics = o.opt.ViewIntrinsics[start : start+n]
		}
		res, back, err := s.run(imgs[start:start+n], so)
		if err == nil {
			err = mapBack(res, back)
		}
		if err != nil {
			return nil, fmt.Errorf("scene %d: %w", i, err)
		}
		out = append(out, res...)
		start += n
	}
	return out, nil
}
