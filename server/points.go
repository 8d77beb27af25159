package server

import (
	"image"
	"math"
)

// pointCloud is the scene's coloured points in the world frame of the
// cameras (OpenCV axes: x right, y down, z forward).
type pointCloud struct {
	XYZ []float32 // 3 per point
	RGB []uint8   // 3 per point
}

// unproject back-projects every view's depth to world points, keeping the
// pixels whose confidence is at least confThresh (all pixels of maps without
// confidence). Maps at the processed size use the processed intrinsics and
// colours; maps resized to the image size use the original intrinsics, the
// image's colours and a stride that keeps about one point per processed
// pixel. Views without a camera are skipped.
func unproject(views []view, imgs []image.Image, confThresh float32) pointCloud {
	var pc pointCloud
	for i, v := range views {
		if v.Camera == nil || v.Depth == nil {
			continue
		}
		k := v.Camera.Intrinsics
		processed := v.Width == v.ProcessedW && v.Height == v.ProcessedH
		stride := 1
		if !processed {
			k = v.Camera.IntrinsicsOriginal
			stride = max(1, int(math.Ceil(math.Sqrt(float64(v.Width*v.Height)/float64(v.ProcessedW*v.ProcessedH)))))
		}
		colour := func(x, y int) (uint8, uint8, uint8) {
			if processed {
				o := 3 * (y*v.Width + x)
				return v.RGB[o], v.RGB[o+1], v.RGB[o+2]
			}
			b := imgs[i].Bounds()
			r, g, bl, _ := imgs[i].At(b.Min.X+x, b.Min.Y+y).RGBA()
			return uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)
		}
		e := v.Camera.Extrinsics // world-to-camera [R | t]: world = Rᵀ(cam − t)
		fx, fy, cx, cy := k[0][0], k[1][1], k[0][2], k[1][2]
		for y := 0; y < v.Height; y += stride {
			for x := 0; x < v.Width; x += stride {
				o := y*v.Width + x
				d := float64(v.Depth[o])
				if !(d > 0) || math.IsInf(d, 0) || (v.Conf != nil && v.Conf[o] < confThresh) {
					continue
				}
				c := [3]float64{(float64(x) - cx) / fx * d, (float64(y) - cy) / fy * d, d}
				for j := range 3 {
					c[j] -= e[j][3]
				}
				for j := range 3 {
					pc.XYZ = append(pc.XYZ, float32(e[0][j]*c[0]+e[1][j]*c[1]+e[2][j]*c[2]))
				}
				r, g, b := colour(x, y)
				pc.RGB = append(pc.RGB, r, g, b)
			}
		}
	}
	return pc
}
