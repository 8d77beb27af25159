// Package camera decodes camera poses from DA3's camera tokens: the CameraDec
// MLP as a ggml graph, and the decoding of its 9-value pose encoding into
// world-to-camera extrinsics and pinhole intrinsics in pure Go.
package camera

import (
	"math"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/nn"
)

// Decoder is DA3's CameraDec: h = ReLU(bb2(ReLU(bb0(tok)))); t = fc_t(h) (3),
// q = fc_q(h) (4, xyzw), fov = ReLU(fc_fov(h)) (2: fov_h, fov_w).
// Bind it under "cam".
type Decoder struct {
	BB0   nn.Linear `gguf:"bb0"`
	BB2   nn.Linear `gguf:"bb2"`
	FCT   nn.Linear `gguf:"fc_t"`
	FCQ   nn.Linear `gguf:"fc_q"`
	FCFov nn.Linear `gguf:"fc_fov"`
}

// Forward maps camera tokens [2C, S] to pose encodings [9, S]:
// [t (3), q (4, xyzw), fov_h, fov_w].
func (d *Decoder) Forward(g *ggml.Context, tok *ggml.Tensor) *ggml.Tensor {
	h := d.BB2.Forward(g, d.BB0.Forward(g, tok).ReLU(g)).ReLU(g)
	t := d.FCT.Forward(g, h)
	q := d.FCQ.Forward(g, h)
	fov := d.FCFov.Forward(g, h).ReLU(g)
	return t.Concat(g, q, 0).Concat(g, fov, 0)
}

// Pose is one view's camera.
type Pose struct {
	// Extrinsics is the 3×4 world-to-camera matrix [R | t] (OpenCV axes: x
	// right, y down, z forward), row-major.
	Extrinsics [3][4]float64
	// Intrinsics is the 3×3 pinhole matrix in processed-image pixels.
	Intrinsics [3][3]float64
}

// Decode turns a pose encoding [t(3), q(4, xyzw), fov_h, fov_w] for an image of
// processed size w×h into a world-to-camera pose (pose_encoding_to_extri_intri):
// [R | t] built from q is camera-to-world, so the result is [Rᵀ | −Rᵀt];
// fy = (h/2)/max(tan(fov_h/2), 1e-6), fx likewise with w, principal point at
// the centre.
func Decode(enc [9]float32, w, h int) Pose {
	t := [3]float64{float64(enc[0]), float64(enc[1]), float64(enc[2])}
	R := QuatToMat([4]float64{float64(enc[3]), float64(enc[4]), float64(enc[5]), float64(enc[6])})
	var p Pose
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			p.Extrinsics[i][j] = R[j][i]
		}
		var s float64
		for k := 0; k < 3; k++ {
			s += R[k][i] * t[k]
		}
		p.Extrinsics[i][3] = -s
	}
	fovH, fovW := float64(enc[7]), float64(enc[8])
	fy := (float64(h) / 2) / math.Max(math.Tan(fovH/2), 1e-6)
	fx := (float64(w) / 2) / math.Max(math.Tan(fovW/2), 1e-6)
	p.Intrinsics = [3][3]float64{{fx, 0, float64(w) / 2}, {0, fy, float64(h) / 2}, {0, 0, 1}}
	return p
}

// QuatToMat converts a quaternion (x, y, z, w), not necessarily normalised,
// to a rotation matrix, as DA3's quat_to_mat: s = 2/|q|².
func QuatToMat(q [4]float64) [3][3]float64 {
	i, j, k, r := q[0], q[1], q[2], q[3]
	s := 2 / (i*i + j*j + k*k + r*r)
	return [3][3]float64{
		{1 - s*(j*j+k*k), s * (i*j - k*r), s * (i*k + j*r)},
		{s * (i*j + k*r), 1 - s*(i*i+k*k), s * (j*k - i*r)},
		{s * (i*k - j*r), s * (j*k + i*r), 1 - s*(i*i+j*j)},
	}
}

// ScaleIntrinsics maps intrinsics of the processed image (w×h, possibly after a
// centre crop at cropX, cropY of the resized image) to the original image:
// the processed image was resized by sx = rw/ow, sy = rh/oh from the original.
func ScaleIntrinsics(k [3][3]float64, sx, sy float64, cropX, cropY int) [3][3]float64 {
	out := k
	out[0][2] += float64(cropX)
	out[1][2] += float64(cropY)
	out[0][0] /= sx
	out[0][2] /= sx
	out[1][1] /= sy
	out[1][2] /= sy
	return out
}

// ProcessIntrinsics maps intrinsics of an original image to the processed
// image, the inverse of ScaleIntrinsics, as the package's InputProcessor
// does (_resize_ixt, then the crop offsets subtracted from cx, cy).
func ProcessIntrinsics(k [3][3]float64, sx, sy float64, cropX, cropY int) [3][3]float64 {
	out := k
	for j := 0; j < 3; j++ {
		out[0][j] *= sx
		out[1][j] *= sy
	}
	out[0][2] -= float64(cropX)
	out[1][2] -= float64(cropY)
	return out
}
