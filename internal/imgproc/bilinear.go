package imgproc

import (
	"fmt"
	"math"
)

// BilinearAlignCorners resizes a single-channel sw×sh float32 map (row-major, top row first) to dw×dh like
// torch.nn.functional.interpolate(x, (dh, dw), mode="bilinear", align_corners=True) on the CPU:
// scale = float32(in−1)/(out−1) (0 when out = 1), source = scale·d in float32, i0 = min(⌊source⌋, in−1),
// λ = clamp(source − i0, 0, 1), i1 = i0+1 clamped; out = (x00·wx0 + x01·wx1)·wy0 + (x10·wx0 + x11·wx1)·wy1.
// Torch's kernels may fuse multiply-adds, so agreement is to float32 rounding, not bit for bit.
// It panics if a size is not positive or len(src) != sw·sh.
func BilinearAlignCorners(src []float32, sw, sh, dw, dh int) []float32 {
	mustPositive("BilinearAlignCorners", sw, sh)
	mustPositive("BilinearAlignCorners", dw, dh)
	if len(src) != sw*sh {
		panic(fmt.Sprintf("imgproc: BilinearAlignCorners: %dx%d map has %d values", sw, sh, len(src)))
	}
	x0, x1, wx0, wx1 := linearAxis(sw, dw)
	y0, y1, wy0, wy1 := linearAxis(sh, dh)
	out := make([]float32, dw*dh)
	for dy := range dh {
		r0 := src[y0[dy]*sw : (y0[dy]+1)*sw]
		r1 := src[y1[dy]*sw : (y1[dy]+1)*sw]
		o := out[dy*dw : (dy+1)*dw]
		for dx := range dw {
			t0 := float32(r0[x0[dx]]*wx0[dx]) + float32(r0[x1[dx]]*wx1[dx])
			t1 := float32(r1[x0[dx]]*wx0[dx]) + float32(r1[x1[dx]]*wx1[dx])
			o[dx] = float32(t0*wy0[dy]) + float32(t1*wy1[dy])
		}
	}
	return out
}

func linearAxis(in, out int) (i0, i1 []int, w0, w1 []float32) {
	var scale float32
	if out > 1 {
		scale = float32(in-1) / float32(out-1)
	}
	i0, i1 = make([]int, out), make([]int, out)
	w0, w1 = make([]float32, out), make([]float32, out)
	for d := range out {
		src := scale * float32(d)
		idx := min(int(math.Floor(float64(src))), in-1)
		lambda := min(max(src-float32(idx), 0), 1)
		i0[d] = idx
		i1[d] = idx
		if idx < in-1 {
			i1[d] = idx + 1
		}
		w0[d], w1[d] = 1-lambda, lambda
	}
	return i0, i1, w0, w1
}
