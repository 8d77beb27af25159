// Package export writes Depth Anything 3 outputs as 3D scene files: coloured point clouds (PLY, GLB with
// camera frusta), COLMAP sparse models (binary and text), the official package's NPZ archives and the
// side-by-side depth visualisation; it also reads COLMAP models back.
//
// The package takes plain data, one View per image: row-major float32 maps (top row first), the 8-bit RGB
// image the maps were computed on, a world-to-camera pose and pinhole intrinsics, or a COLMAP camera model
// (package lens) for maps in the frame of a distorted or fisheye image (DistortView). It does not depend
// on the model package, so any producer of depth and cameras can use it.
//
// Conventions, as depth_anything_3.utils.export (the official exporters) has them:
//   - cameras: OpenCV axes (x right, y down, z forward); extrinsics are world-to-camera [R | t], 3×4;
//   - pixel (u, v) = (column, row) at integer coordinates, back-projected as K⁻¹·[u, v, 1]·depth;
//   - point order: view, row, column.
//
// Every file is written to a temporary file next to its destination and renamed into place, so nothing is
// left half-written; a COLMAP model's files are renamed only after all of them were written.
package export

import (
	"errors"
	"fmt"
	"math"

	"github.com/da3-go/da3-go/lens"
)

// Camera is one view's pinhole camera.
type Camera struct {
	// Extrinsics: world-to-camera [R | t], OpenCV axes, row-major.
	Extrinsics [3][4]float64
	// Intrinsics in pixels of the view's maps (Width × Height).
	Intrinsics [3][3]float64
	// IntrinsicsOriginal in pixels of the original image (OrigWidth × OrigHeight), used for COLMAP cameras.
	// A zero matrix means the maps are at the original size: Intrinsics is used.
	IntrinsicsOriginal [3][3]float64
	// Lens, when set, is the original image's camera model (COLMAP's, with distortion or a fisheye
	// projection), for an image of OrigWidth × OrigHeight; the maps are in that camera's frame (a view
	// mapped back from an undistorted one: DistortView). Points then follow the lens's rays (pixel
	// (column, row) sees Lens.Unproject at its centre, COLMAP's (column + 0.5, row + 0.5), scaled to the
	// original size) and the COLMAP export writes the lens's model and parameters. Intrinsics and
	// IntrinsicsOriginal are then its pinhole part, for camera frusta and the NPZ archives.
	Lens *lens.Camera
}

// View is one image's outputs.
type View struct {
	// Name is the image's file name (COLMAP image name, usually the input's base name).
	Name string
	// Width, Height are the maps' size.
	Width, Height int
	// Depth (Width·Height values): depth along the optical axis, any unit (metres for metric models).
	Depth []float32
	// Conf is the per-pixel confidence (DA3 any-view models), or nil: no confidence filtering.
	Conf []float32
	// Sky is the sky map (DA3 mono, metric and nested models), or nil. Pixels with Sky ≥ the options'
	// SkyThreshold are sky.
	Sky []float32
	// RGB is the image the maps belong to, 8-bit, Width·Height·3 values (HWC), or nil (grey points).
	RGB []uint8
	// Camera is the view's camera, or nil (NPZ and depth visualisation only).
	Camera *Camera
	// OrigWidth, OrigHeight are the original image size (COLMAP cameras); 0 means Width, Height.
	OrigWidth, OrigHeight int
	// Source is the path of the file the view's image was read from, or "": the writers refuse to
	// replace it (an export never overwrites its inputs).
	Source string
}

// sources are the views' Source paths.
func sources(views []View) []string {
	var s []string
	for i := range views {
		if views[i].Source != "" {
			s = append(s, views[i].Source)
		}
	}
	return s
}

// ErrNoCamera reports a view without a camera given to an output that needs one.
var ErrNoCamera = errors.New("view has no camera")

func (v *View) origSize() (int, int) {
	if v.OrigWidth > 0 && v.OrigHeight > 0 {
		return v.OrigWidth, v.OrigHeight
	}
	return v.Width, v.Height
}

// origIntrinsics returns the intrinsics for the original image.
func (c *Camera) origIntrinsics() [3][3]float64 {
	if c.IntrinsicsOriginal == ([3][3]float64{}) {
		return c.Intrinsics
	}
	return c.IntrinsicsOriginal
}

// maxMapPixels bounds a view's map size (about 1e8 pixels: 400 MB of depth), far above any DA3 output.
const maxMapPixels = 1 << 27

// check validates a view's sizes; needCamera also requires an invertible camera. With needMaps unset the
// depth map may be nil (a view that only places its camera).
func (v *View) check(i int, needCamera, needMaps bool) error {
	if v.Width <= 0 || v.Height <= 0 || v.Width > maxMapPixels/v.Height {
		return fmt.Errorf("view %d (%s): invalid map size %dx%d", i, v.Name, v.Width, v.Height)
	}
	n := v.Width * v.Height
	if len(v.Depth) != n && (needMaps || v.Depth != nil) {
		return fmt.Errorf("view %d (%s): %dx%d map needs %d depth values, got %d", i, v.Name, v.Width, v.Height, n, len(v.Depth))
	}
	if v.Conf != nil && len(v.Conf) != n {
		return fmt.Errorf("view %d (%s): %d confidence values for %d pixels", i, v.Name, len(v.Conf), n)
	}
	if v.Sky != nil && len(v.Sky) != n {
		return fmt.Errorf("view %d (%s): %d sky values for %d pixels", i, v.Name, len(v.Sky), n)
	}
	if v.RGB != nil && len(v.RGB) != 3*n {
		return fmt.Errorf("view %d (%s): %d RGB values for %d pixels (want %d)", i, v.Name, len(v.RGB), n, 3*n)
	}
	if v.OrigWidth < 0 || v.OrigHeight < 0 || (v.OrigWidth == 0) != (v.OrigHeight == 0) {
		return fmt.Errorf("view %d (%s): invalid original size %dx%d", i, v.Name, v.OrigWidth, v.OrigHeight)
	}
	if !needCamera {
		return nil
	}
	if v.Camera == nil {
		return fmt.Errorf("view %d (%s): %w (pose and intrinsics are needed to place points in 3D)", i, v.Name, ErrNoCamera)
	}
	for _, row := range v.Camera.Extrinsics {
		for _, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("view %d (%s): extrinsics are not finite", i, v.Name)
			}
		}
	}
	if _, ok := camToWorld(v.Camera.Extrinsics); !ok {
		return fmt.Errorf("view %d (%s): extrinsics rotation is singular", i, v.Name)
	}
	if _, ok := inverse3(v.Camera.Intrinsics); !ok {
		return fmt.Errorf("view %d (%s): intrinsics %v are not invertible", i, v.Name, v.Camera.Intrinsics)
	}
	if _, ok := inverse3(v.Camera.origIntrinsics()); !ok {
		return fmt.Errorf("view %d (%s): original-image intrinsics %v are not invertible", i, v.Name, v.Camera.IntrinsicsOriginal)
	}
	if l := v.Camera.Lens; l != nil {
		ow, oh := v.origSize()
		if _, err := lens.New(l.Model, l.Width, l.Height, l.Params); err != nil {
			return fmt.Errorf("view %d (%s): lens: %w", i, v.Name, err)
		}
		if l.Width != ow || l.Height != oh {
			return fmt.Errorf("view %d (%s): the lens is for a %dx%d image, the original image is %dx%d", i, v.Name, l.Width, l.Height, ow, oh)
		}
	}
	return nil
}

// checkViews validates every view.
func checkViews(views []View, needCamera bool) error { return checkAll(views, needCamera, true) }

// checkCameras validates views given for their cameras (the views of a cloud's points): their maps may
// be nil.
func checkCameras(views []View) error { return checkAll(views, true, false) }

func checkAll(views []View, needCamera, needMaps bool) error {
	if len(views) == 0 {
		return errors.New("no views")
	}
	for i := range views {
		if err := views[i].check(i, needCamera, needMaps); err != nil {
			return err
		}
	}
	return nil
}

// ViewSource gives a scene's views one at a time, for scenes too large to hold in memory (a streamed
// reconstruction reads them back from disk). The writers that take one read each view once per pass
// they make over the scene.
type ViewSource interface {
	Len() int
	View(i int) (View, error)
}

// ViewSlice is a ViewSource over views in memory.
type ViewSlice []View

func (s ViewSlice) Len() int { return len(s) }

func (s ViewSlice) View(i int) (View, error) { return s[i], nil }

// inverse3 inverts a 3×3 matrix by the adjugate; ok is false when it is singular or not finite.
func inverse3(m [3][3]float64) (inv [3][3]float64, ok bool) {
	c00 := m[1][1]*m[2][2] - m[1][2]*m[2][1]
	c01 := m[1][2]*m[2][0] - m[1][0]*m[2][2]
	c02 := m[1][0]*m[2][1] - m[1][1]*m[2][0]
	det := m[0][0]*c00 + m[0][1]*c01 + m[0][2]*c02
	if det == 0 || math.IsNaN(det) || math.IsInf(det, 0) {
		return inv, false
	}
	r := 1 / det
	inv[0] = [3]float64{c00 * r, (m[0][2]*m[2][1] - m[0][1]*m[2][2]) * r, (m[0][1]*m[1][2] - m[0][2]*m[1][1]) * r}
	inv[1] = [3]float64{c01 * r, (m[0][0]*m[2][2] - m[0][2]*m[2][0]) * r, (m[0][2]*m[1][0] - m[0][0]*m[1][2]) * r}
	inv[2] = [3]float64{c02 * r, (m[0][1]*m[2][0] - m[0][0]*m[2][1]) * r, (m[0][0]*m[1][1] - m[0][1]*m[1][0]) * r}
	return inv, true
}

// camToWorld inverts a world-to-camera [R | t] as a 4×4 affine matrix: [R⁻¹ | −R⁻¹·t] (the official
// exporters invert the homogeneous matrix with numpy.linalg.inv; R⁻¹ is not assumed to be Rᵀ). ok is false
// when R is singular.
func camToWorld(e [3][4]float64) (c2w [3][4]float64, ok bool) {
	r := [3][3]float64{{e[0][0], e[0][1], e[0][2]}, {e[1][0], e[1][1], e[1][2]}, {e[2][0], e[2][1], e[2][2]}}
	ri, ok := inverse3(r)
	if !ok {
		return c2w, false
	}
	for i := range 3 {
		copy(c2w[i][:3], ri[i][:])
		c2w[i][3] = -(ri[i][0]*e[0][3] + ri[i][1]*e[1][3] + ri[i][2]*e[2][3])
	}
	return c2w, true
}

func apply34(m [3][4]float64, p [3]float64) [3]float64 {
	return [3]float64{
		m[0][0]*p[0] + m[0][1]*p[1] + m[0][2]*p[2] + m[0][3],
		m[1][0]*p[0] + m[1][1]*p[1] + m[1][2]*p[2] + m[1][3],
		m[2][0]*p[0] + m[2][1]*p[1] + m[2][2]*p[2] + m[2][3],
	}
}
