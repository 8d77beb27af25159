package server

import "math"

// pointCloud is a view's coloured points in the world frame of the cameras
// (OpenCV axes: x right, y down, z forward).
type pointCloud struct {
	XYZ []float32 // 3 per point
	RGB []uint8   // 3 per point
}

// unproject back-projects a processed-size depth map (w×h, with its
// processed image rgb and camera) to world points, keeping the pixels whose
// confidence is at least confThresh (every pixel without a confidence map)
// and whose depth is positive and finite. Pixel (x, y) looks along
// K⁻¹·(x, y, 1) (pixel centres at integer coordinates, as the reference's
// unprojection); world = Rᵀ(cam − t) for world-to-camera [R | t].
func unproject(depth, conf []float32, rgb []uint8, w, h int, c *camera, confThresh float32) pointCloud {
	var pc pointCloud
	k, e := c.Intrinsics, c.Extrinsics
	fx, fy, cx, cy := k[0][0], k[1][1], k[0][2], k[1][2]
	for y := range h {
		for x := range w {
			o := y*w + x
			d := float64(depth[o])
			if !(d > 0) || math.IsInf(d, 0) || (conf != nil && conf[o] < confThresh) {
				continue
			}
			cam := [3]float64{(float64(x)-cx)/fx*d - e[0][3], (float64(y)-cy)/fy*d - e[1][3], d - e[2][3]}
			for j := range 3 {
				pc.XYZ = append(pc.XYZ, float32(e[0][j]*cam[0]+e[1][j]*cam[1]+e[2][j]*cam[2]))
			}
			if len(rgb) == 3*w*h {
				pc.RGB = append(pc.RGB, rgb[3*o], rgb[3*o+1], rgb[3*o+2])
			} else {
				pc.RGB = append(pc.RGB, 200, 200, 200)
			}
		}
	}
	return pc
}

// merge concatenates the views' point clouds.
func merge(views []view) pointCloud {
	var pc pointCloud
	for _, v := range views {
		pc.XYZ = append(pc.XYZ, v.points.XYZ...)
		pc.RGB = append(pc.RGB, v.points.RGB...)
	}
	return pc
}
