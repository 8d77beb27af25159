package export

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// COLMAPModel is a COLMAP sparse model: the content of cameras, images and points3D (.bin or .txt).
type COLMAPModel struct {
	Cameras []COLMAPCamera
	Images  []COLMAPImage
	Points  []COLMAPPoint3D
}

// COLMAPCamera is one camera of cameras.bin/.txt.
type COLMAPCamera struct {
	ID            uint32
	Model         CameraModel
	Width, Height uint64
	Params        []float64 // in the model's order, e.g. PINHOLE: fx, fy, cx, cy
}

// COLMAPImage is one image of images.bin/.txt: its pose is cam_from_world, x_cam = R(Q)·x_world + T.
type COLMAPImage struct {
	ID       uint32
	Q        [4]float64 // rotation quaternion qw, qx, qy, qz
	T        [3]float64
	CameraID uint32
	Name     string
	Points2D []COLMAPPoint2D
}

// COLMAPPoint2D is an observation in an image; Point3DID is -1 when it has no 3D point.
type COLMAPPoint2D struct {
	X, Y      float64
	Point3DID int64
}

// COLMAPPoint3D is one point of points3D.bin/.txt.
type COLMAPPoint3D struct {
	ID    uint64
	XYZ   [3]float64
	RGB   [3]uint8
	Error float64 // reprojection error; -1 when unknown
	Track []COLMAPTrackElement
}

// COLMAPTrackElement is an observation of a 3D point: the image and the index of its 2D point there.
type COLMAPTrackElement struct {
	ImageID, Point2DIdx uint32
}

// CameraModel is a COLMAP camera model id.
type CameraModel int32

// The COLMAP camera models (ids as in COLMAP's models.h).
const (
	SimplePinhole          CameraModel = 0
	Pinhole                CameraModel = 1
	SimpleRadial           CameraModel = 2
	Radial                 CameraModel = 3
	OpenCV                 CameraModel = 4
	OpenCVFisheye          CameraModel = 5
	FullOpenCV             CameraModel = 6
	FOV                    CameraModel = 7
	SimpleRadialFisheye    CameraModel = 8
	RadialFisheye          CameraModel = 9
	ThinPrismFisheye       CameraModel = 10
	RadTanThinPrismFisheye CameraModel = 11
	SimpleDivision         CameraModel = 12
	Division               CameraModel = 13
	SimpleFisheye          CameraModel = 14
	Fisheye                CameraModel = 15
	EUCM                   CameraModel = 16
)

var cameraModels = []struct {
	name    string
	nParams int
	single  bool // one focal length f (params f, cx, cy, …)
}{
	{"SIMPLE_PINHOLE", 3, true}, {"PINHOLE", 4, false}, {"SIMPLE_RADIAL", 4, true}, {"RADIAL", 5, true},
	{"OPENCV", 8, false}, {"OPENCV_FISHEYE", 8, false}, {"FULL_OPENCV", 12, false}, {"FOV", 5, false},
	{"SIMPLE_RADIAL_FISHEYE", 4, true}, {"RADIAL_FISHEYE", 5, true}, {"THIN_PRISM_FISHEYE", 12, false},
	{"RAD_TAN_THIN_PRISM_FISHEYE", 16, false}, {"SIMPLE_DIVISION", 4, true}, {"DIVISION", 5, false},
	{"SIMPLE_FISHEYE", 3, true}, {"FISHEYE", 4, false}, {"EUCM", 6, false},
}

func (m CameraModel) valid() bool { return m >= 0 && int(m) < len(cameraModels) }

// String returns COLMAP's name of the model.
func (m CameraModel) String() string {
	if !m.valid() {
		return fmt.Sprintf("CameraModel(%d)", int32(m))
	}
	return cameraModels[m].name
}

// NumParams returns the model's parameter count (0 for an unknown model).
func (m CameraModel) NumParams() int {
	if !m.valid() {
		return 0
	}
	return cameraModels[m].nParams
}

// ParseCameraModel parses a COLMAP model name such as "PINHOLE".
func ParseCameraModel(s string) (CameraModel, error) {
	for i, c := range cameraModels {
		if c.name == s {
			return CameraModel(i), nil
		}
	}
	return 0, fmt.Errorf("unknown COLMAP camera model %q", s)
}

// Intrinsics returns the camera's pinhole matrix; distorted reports a model with distortion parameters or
// a non-perspective projection, which the matrix alone does not describe.
func (c *COLMAPCamera) Intrinsics() (k [3][3]float64, distorted bool, err error) {
	if !c.Model.valid() || len(c.Params) != c.Model.NumParams() {
		return k, false, fmt.Errorf("camera %d: model %v with %d parameters", c.ID, c.Model, len(c.Params))
	}
	p := c.Params
	if cameraModels[c.Model].single {
		k = [3][3]float64{{p[0], 0, p[1]}, {0, p[0], p[2]}, {0, 0, 1}}
	} else {
		k = [3][3]float64{{p[0], 0, p[2]}, {0, p[1], p[3]}, {0, 0, 1}}
	}
	return k, c.Model != SimplePinhole && c.Model != Pinhole, nil
}

// Extrinsics returns the image's world-to-camera [R | t].
func (im *COLMAPImage) Extrinsics() [3][4]float64 {
	r := quatToRot(im.Q)
	var e [3][4]float64
	for i := range 3 {
		copy(e[i][:3], r[i][:])
		e[i][3] = im.T[i]
	}
	return e
}

// quatToRot is COLMAP's QuaternionToRotationMatrix for a quaternion (w, x, y, z), normalised first.
func quatToRot(q [4]float64) [3][3]float64 {
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [3][3]float64{
		{1 - 2*y*y - 2*z*z, 2*x*y - 2*w*z, 2*x*z + 2*w*y},
		{2*x*y + 2*w*z, 1 - 2*x*x - 2*z*z, 2*y*z - 2*w*x},
		{2*x*z - 2*w*y, 2*y*z + 2*w*x, 1 - 2*x*x - 2*y*y},
	}
}

// rotToQuat converts a rotation matrix to a unit quaternion (w, x, y, z) as Eigen's Quaternion(Matrix3)
// does (pycolmap.Rotation3d, used by the official exporter): Shepperd's method on the largest of the
// trace and the diagonal.
func rotToQuat(m [3][3]float64) [4]float64 {
	var q [4]float64 // w, x, y, z
	if t := m[0][0] + m[1][1] + m[2][2]; t > 0 {
		s := math.Sqrt(t + 1)
		q[0] = 0.5 * s
		s = 0.5 / s
		q[1] = (m[2][1] - m[1][2]) * s
		q[2] = (m[0][2] - m[2][0]) * s
		q[3] = (m[1][0] - m[0][1]) * s
	} else {
		i := 0
		if m[1][1] > m[0][0] {
			i = 1
		}
		if m[2][2] > m[i][i] {
			i = 2
		}
		j, k := (i+1)%3, (i+2)%3
		s := math.Sqrt(m[i][i] - m[j][j] - m[k][k] + 1)
		q[1+i] = 0.5 * s
		s = 0.5 / s
		q[0] = (m[k][j] - m[j][k]) * s
		q[1+j] = (m[j][i] + m[i][j]) * s
		q[1+k] = (m[k][i] + m[i][k]) * s
	}
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	for i := range q {
		q[i] /= n
	}
	return q
}

// NewCOLMAPModel builds the sparse model of the official colmap exporter
// (depth_anything_3.utils.export.colmap.export_to_colmap) from a cloud and its views:
//
//   - camera i+1: PINHOLE at the original image size with the original-image intrinsics, or the view's
//     Lens (its COLMAP model and parameters) when it has one;
//   - image i+1: the view's pose (quaternion of R, t), camera i+1, the view's name;
//   - point j+1 for the cloud's j-th point (float32 coordinates, its colour, error −1), observed once, in
//     its own view at the pixel mapped to the original image and truncated to integers as the official
//     exporter does (u·ow/W for resized views);
//
// The official exporter indexes its 2D points with the confidence mask alone, which misaligns them from
// the 3D points when a confident pixel has a non-positive or non-finite depth; here each point keeps its
// own pixel. Names must be unique. Only the views' names, sizes and cameras are read: their maps may be
// nil (the cameras of a scene whose cloud was built with NewPointCloudFrom).
func NewCOLMAPModel(pc *PointCloud, views []View) (*COLMAPModel, error) {
	if err := pc.check(); err != nil {
		return nil, err
	}
	m, maps, err := colmapCameras(views)
	if err != nil {
		return nil, err
	}
	m.Points = make([]COLMAPPoint3D, pc.Len())
	for j := range m.Points {
		vi := int(pc.View[j])
		if vi < 0 || vi >= len(views) {
			return nil, fmt.Errorf("point %d comes from view %d, but there are %d views", j, vi, len(views))
		}
		im := &m.Images[vi]
		px := int(pc.Pixel[j])
		if px < 0 || px >= views[vi].Width*views[vi].Height {
			return nil, fmt.Errorf("point %d: pixel %d outside view %d", j, px, vi)
		}
		x, y := maps[vi].apply(px%views[vi].Width, px/views[vi].Width)
		im.Points2D = append(im.Points2D, COLMAPPoint2D{X: x, Y: y, Point3DID: int64(j + 1)})
		m.Points[j] = COLMAPPoint3D{ID: uint64(j + 1),
			XYZ:   [3]float64{float64(pc.Points[3*j]), float64(pc.Points[3*j+1]), float64(pc.Points[3*j+2])},
			RGB:   [3]uint8{pc.Colors[3*j], pc.Colors[3*j+1], pc.Colors[3*j+2]},
			Error: -1,
			Track: []COLMAPTrackElement{{ImageID: im.ID, Point2DIdx: uint32(len(im.Points2D) - 1)}}}
	}
	return m, nil
}

// colmapCameras is the model of the views' cameras and images, without points, and the map of each
// view's pixels to its original image.
func colmapCameras(views []View) (*COLMAPModel, []pixelMap, error) {
	if err := checkCameras(views); err != nil {
		return nil, nil, err
	}
	seen := map[string]int{}
	for i, v := range views {
		if v.Name == "" || strings.ContainsAny(v.Name, "\x00\n\r") {
			return nil, nil, fmt.Errorf("view %d: invalid image name %q", i, v.Name)
		}
		if j, dup := seen[v.Name]; dup {
			return nil, nil, fmt.Errorf("views %d and %d have the same image name %q (COLMAP names must be unique)", j, i, v.Name)
		}
		seen[v.Name] = i
	}
	m := &COLMAPModel{}
	maps := make([]pixelMap, len(views))
	for i := range views {
		v := &views[i]
		ow, oh := v.origSize()
		k := v.Camera.origIntrinsics()
		cam := COLMAPCamera{ID: uint32(i + 1), Model: Pinhole, Width: uint64(ow), Height: uint64(oh),
			Params: []float64{k[0][0], k[1][1], k[0][2], k[1][2]}}
		if l := v.Camera.Lens; l != nil {
			cam.Model, cam.Params = CameraModel(l.Model), append([]float64(nil), l.Params...)
		}
		m.Cameras = append(m.Cameras, cam)
		e := v.Camera.Extrinsics
		r := [3][3]float64{{e[0][0], e[0][1], e[0][2]}, {e[1][0], e[1][1], e[1][2]}, {e[2][0], e[2][1], e[2][2]}}
		m.Images = append(m.Images, COLMAPImage{ID: uint32(i + 1), Q: rotToQuat(r), T: [3]float64{e[0][3], e[1][3], e[2][3]},
			CameraID: uint32(i + 1), Name: v.Name})
		maps[i] = newPixelMap(v)
	}
	return m, maps, nil
}

// pixelMap maps a pixel of a view's maps to the original image: x_orig = trunc(sx·u + ox).
type pixelMap struct{ sx, ox, sy, oy float64 }

// newPixelMap derives the map from the two intrinsics. When the original intrinsics are the map's scaled
// by ow/W and oh/H (resized, not cropped, views) it uses exactly those ratios, as the official exporter
// does; otherwise (crops) the affine map x_orig = (u − cx)·fx'/fx + cx'.
func newPixelMap(v *View) pixelMap {
	k, ko := v.Camera.Intrinsics, v.Camera.origIntrinsics()
	ow, oh := v.origSize()
	rx, ry := float64(ow)/float64(v.Width), float64(oh)/float64(v.Height)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b), 1) }
	if near(ko[0][0], k[0][0]*rx) && near(ko[0][2], k[0][2]*rx) && near(ko[1][1], k[1][1]*ry) && near(ko[1][2], k[1][2]*ry) {
		return pixelMap{sx: rx, sy: ry}
	}
	sx, sy := ko[0][0]/k[0][0], ko[1][1]/k[1][1]
	return pixelMap{sx: sx, ox: ko[0][2] - sx*k[0][2], sy: sy, oy: ko[1][2] - sy*k[1][2]}
}

func (p pixelMap) apply(u, v int) (float64, float64) {
	return math.Trunc(float64(u)*p.sx + p.ox), math.Trunc(float64(v)*p.sy + p.oy)
}

// exact maps a (sub-)pixel position of the view's maps to the original image without truncation.
func (p pixelMap) exact(u, v float64) (float64, float64) { return u*p.sx + p.ox, v*p.sy + p.oy }

// WriteCOLMAP writes the official colmap export of the cloud and views (see NewCOLMAPModel) into dir.
func WriteCOLMAP(dir string, pc *PointCloud, views []View, text bool) error {
	m, err := NewCOLMAPModel(pc, views)
	if err != nil {
		return fmt.Errorf("write COLMAP model %s: %w", dir, err)
	}
	return m.write(dir, text, sources(views))
}

// Write writes cameras, images and points3D (.bin, or .txt when text is set) into dir, which must exist,
// in COLMAP's layouts (text as COLMAP's writer prints it: %.17g numbers, its comment headers). The files
// are renamed into place only after all three were written.
func (m *COLMAPModel) Write(dir string, text bool) error { return m.write(dir, text, nil) }

// write is Write refusing to replace the files inputs.
func (m *COLMAPModel) write(dir string, text bool, inputs []string) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("write COLMAP model %s: %w", dir, err)
	}
	var pending []*atomicfile.Pending
	defer func() {
		for _, p := range pending {
			p.Abort()
		}
	}()
	err := m.encode(text, func(name string, write func(io.Writer) error) error {
		p, err := atomicfile.WritePending(filepath.Join(dir, name), write, inputs...)
		if err != nil {
			return err
		}
		pending = append(pending, p)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range pending {
		if err := p.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Encode gives the model's three files (cameras, images, points3D; .bin, or .txt when text is set) to
// file, each as its name and a function that writes its content: a COLMAP model in an archive or any
// other store than a directory (Write puts them in one).
func (m *COLMAPModel) Encode(text bool, file func(name string, write func(io.Writer) error) error) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("COLMAP model: %w", err)
	}
	return m.encode(text, file)
}

func (m *COLMAPModel) encode(text bool, file func(name string, write func(io.Writer) error) error) error {
	ext := ".bin"
	enc := []func(io.Writer) error{m.camerasBin, m.imagesBin, m.pointsBin}
	if text {
		ext = ".txt"
		enc = []func(io.Writer) error{m.camerasText, m.imagesText, m.pointsText}
	}
	for i, name := range []string{"cameras", "images", "points3D"} {
		if err := file(name+ext, enc[i]); err != nil {
			return err
		}
	}
	return nil
}

// check validates what the writers rely on: known models with their parameter counts, names without
// NUL or line breaks, track image ids that exist.
func (m *COLMAPModel) check() error {
	for _, c := range m.Cameras {
		if !c.Model.valid() || len(c.Params) != c.Model.NumParams() {
			return fmt.Errorf("camera %d: model %v with %d parameters", c.ID, c.Model, len(c.Params))
		}
	}
	for _, im := range m.Images {
		if im.Name == "" || strings.ContainsAny(im.Name, "\x00\n\r") {
			return fmt.Errorf("image %d: invalid name %q", im.ID, im.Name)
		}
	}
	return nil
}

type binWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (b *binWriter) put(vals ...any) {
	if b.err != nil {
		return
	}
	b.buf = b.buf[:0]
	for _, v := range vals {
		switch x := v.(type) {
		case uint8:
			b.buf = append(b.buf, x)
		case int32:
			b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(x))
		case uint32:
			b.buf = binary.LittleEndian.AppendUint32(b.buf, x)
		case int64:
			b.buf = binary.LittleEndian.AppendUint64(b.buf, uint64(x))
		case uint64:
			b.buf = binary.LittleEndian.AppendUint64(b.buf, x)
		case float64:
			b.buf = binary.LittleEndian.AppendUint64(b.buf, math.Float64bits(x))
		case string:
			b.buf = append(append(b.buf, x...), 0)
		default:
			panic(fmt.Sprintf("binWriter: %T", v))
		}
	}
	_, b.err = b.w.Write(b.buf)
}

func (m *COLMAPModel) camerasBin(w io.Writer) error {
	b := &binWriter{w: w}
	b.put(uint64(len(m.Cameras)))
	for _, c := range m.Cameras {
		b.put(c.ID, int32(c.Model), c.Width, c.Height)
		for _, p := range c.Params {
			b.put(p)
		}
	}
	return b.err
}

func (m *COLMAPModel) imagesBin(w io.Writer) error {
	b := &binWriter{w: w}
	b.put(uint64(len(m.Images)))
	for _, im := range m.Images {
		b.put(im.ID, im.Q[0], im.Q[1], im.Q[2], im.Q[3], im.T[0], im.T[1], im.T[2], im.CameraID, im.Name, uint64(len(im.Points2D)))
		for _, p := range im.Points2D {
			b.put(p.X, p.Y, p.Point3DID)
		}
	}
	return b.err
}

func (m *COLMAPModel) pointsBin(w io.Writer) error {
	b := &binWriter{w: w}
	b.put(uint64(len(m.Points)))
	for _, p := range m.Points {
		b.put(p.ID, p.XYZ[0], p.XYZ[1], p.XYZ[2], p.RGB[0], p.RGB[1], p.RGB[2], p.Error, uint64(len(p.Track)))
		for _, t := range p.Track {
			b.put(t.ImageID, t.Point2DIdx)
		}
	}
	return b.err
}

// mean is sum/n, 0 for n = 0.
func mean(sum, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// g17 formats a number as COLMAP's text writer does (std::setprecision(17), i.e. %.17g).
func g17(x float64) string { return strconv.FormatFloat(x, 'g', 17, 64) }

func (m *COLMAPModel) camerasText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Camera list with one line of data per camera:\n#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n# Number of cameras: %d\n", len(m.Cameras))
	for _, c := range m.Cameras {
		fmt.Fprintf(bw, "%d %s %d %d", c.ID, c.Model, c.Width, c.Height)
		for _, p := range c.Params {
			bw.WriteString(" " + g17(p))
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}

func (m *COLMAPModel) imagesText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	obs := 0
	for _, im := range m.Images {
		for _, p := range im.Points2D {
			if p.Point3DID >= 0 {
				obs++
			}
		}
	}
	fmt.Fprintf(bw, "# Image list with two lines of data per image:\n#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n#   POINTS2D[] as (X, Y, POINT3D_ID)\n# Number of images: %d, mean observations per image: %s\n", len(m.Images), g17(mean(obs, len(m.Images))))
	for _, im := range m.Images {
		fmt.Fprintf(bw, "%d %s %s %s %s %s %s %s %d %s\n", im.ID, g17(im.Q[0]), g17(im.Q[1]), g17(im.Q[2]), g17(im.Q[3]),
			g17(im.T[0]), g17(im.T[1]), g17(im.T[2]), im.CameraID, im.Name)
		for _, p := range im.Points2D {
			bw.WriteString(g17(p.X) + " " + g17(p.Y) + " " + strconv.FormatInt(p.Point3DID, 10) + " ")
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}

func (m *COLMAPModel) pointsText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	track := 0
	for _, p := range m.Points {
		track += len(p.Track)
	}
	fmt.Fprintf(bw, "# 3D point list with one line of data per point:\n#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n# Number of points: %d, mean track length: %s\n", len(m.Points), g17(mean(track, len(m.Points))))
	for _, p := range m.Points {
		fmt.Fprintf(bw, "%d %s %s %s %d %d %d %s", p.ID, g17(p.XYZ[0]), g17(p.XYZ[1]), g17(p.XYZ[2]), p.RGB[0], p.RGB[1], p.RGB[2], g17(p.Error))
		for _, t := range p.Track {
			fmt.Fprintf(bw, " %d %d", t.ImageID, t.Point2DIdx)
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}
