package main

import (
	"context"
	"fmt"
	"image"
	"io"
	"log/slog"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/quantize"
)

// checkQuantized runs the reference model ref and the quantized model quant
// on one image and prints how closely their depth (and pose, for models
// with a camera head) agree, the two runs the two items of bar.
func checkQuantized(ctx context.Context, img image.Image, imagePath, ref, quant, device string, threads int, stdout io.Writer, bar *runBar) error {
	var res [2]*model.Result
	for i, path := range []string{ref, quant} {
		m, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: deviceOr(device), Threads: threads, BackendDirs: backendDirs(), Logger: slog.Default()}})
		if err != nil {
			return err
		}
		bar.cover(i, 1)
		res[i], err = m.Depth(ctx, img, model.RunOptions{Progress: bar.tell})
		m.Close()
		if err != nil {
			return fmt.Errorf("run %s: %w", path, err)
		}
	}
	d, err := quantize.Compare(res[0].Depth, res[1].Depth)
	if err != nil {
		return fmt.Errorf("depth: %w", err)
	}
	fmt.Fprintf(stdout, "check %s: depth correlation %.6f, max|d| %.4g (%.3g%% of the largest depth)\n",
		imagePath, d.Corr, d.MaxAbs, 100*d.MaxRel)
	if res[0].Camera != nil && res[1].Camera != nil {
		p, err := quantize.Compare(res[0].Camera.PoseEncoding[:], res[1].Camera.PoseEncoding[:])
		if err != nil {
			return fmt.Errorf("pose: %w", err)
		}
		fmt.Fprintf(stdout, "check %s: pose encoding (t, q, fov) correlation %.6f, max|d| %.4g\n", imagePath, p.Corr, p.MaxAbs)
	}
	return nil
}
