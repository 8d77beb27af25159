package export

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// GLBOptions tune WriteGLB; the zero value writes every point and no cameras, DefaultGLBOptions is the
// official glb exporter's default.
type GLBOptions struct {
	// MaxPoints caps the points written (uniform subsample, see PointCloud.Subsample); ≤ 0 keeps all.
	MaxPoints int
	Seed      uint64
	// ShowCameras draws each view's camera as a wireframe pyramid.
	ShowCameras bool
	// CameraSize is the pyramid's depth as a fraction of the scene's size (official: 0.03).
	CameraSize float64
}

// DefaultGLBOptions returns the official defaults: at most 1 000 000 points, cameras shown at 0.03.
func DefaultGLBOptions() GLBOptions {
	return GLBOptions{MaxPoints: 1_000_000, ShowCameras: true, CameraSize: 0.03}
}

// WriteGLB writes the cloud and the views' cameras as a binary glTF 2.0 scene, built as the official
// exporter (depth_anything_3.utils.export.glb.export_to_glb) builds it:
//
//   - alignment A = T·M·E₀: E₀ is the first view's world-to-camera matrix, M = diag(1, −1, −1) turns OpenCV
//     axes into glTF's (x right, y up, z backward) and T moves the per-axis median of the transformed
//     points (all points, before subsampling) to the origin; every point and camera is mapped by A, which
//     the scene stores as extras.hf_alignment;
//   - points: one mesh of POINTS (float32 POSITION, normalised uint8 RGBA COLOR_0 with alpha 255);
//   - cameras: per view one mesh of LINES, 8 segments (centre to the four image corners, then the four
//     edges), the corners K⁻¹·(0,0,1), (W−1,0,1), (W−1,H−1,1), (0,H−1,1) on the plane z = s in camera
//     space, s = CameraSize × the diagonal of the 5–95 % percentile box of the (subsampled) aligned points;
//     colour HSV((i+0.5)/N, 0.85, 0.95).
//
// Differences from the official file: meshes and nodes are named "points" and "camera_<i>" (trimesh names
// them geometry_<k>), bufferViews carry target ARRAY_BUFFER, the generator is da3-go, and the subsample is
// seeded (numpy.random.choice is not). Only the views' sizes and cameras are read: their maps may be nil
// (the cameras of a scene whose cloud was built with NewPointCloudFrom; the alignment's median is then
// that of the cloud given).
func WriteGLB(path string, pc *PointCloud, views []View, opt GLBOptions) error {
	b, err := buildGLB(pc, views, opt)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error { return b.encode(w) }, sources(views)...)
}

// EncodeGLB writes the scene of WriteGLB to w.
func EncodeGLB(w io.Writer, pc *PointCloud, views []View, opt GLBOptions) error {
	b, err := buildGLB(pc, views, opt)
	if err != nil {
		return err
	}
	return b.encode(w)
}

// Alignment returns the official glb exporter's alignment of the cloud (see WriteGLB) as a row-major 4×4
// matrix: first camera to glTF axes, centred on the points' per-axis median.
func Alignment(e0 [3][4]float64, pc *PointCloud) [4][4]float64 { return alignment(e0, pc.Points) }

// alignment is Alignment for the points x, y, z, ….
func alignment(e0 [3][4]float64, points []float32) [4][4]float64 {
	// A₀ = M·E₀ with M = diag(1, −1, −1, 1).
	a := [4][4]float64{{e0[0][0], e0[0][1], e0[0][2], e0[0][3]},
		{-e0[1][0], -e0[1][1], -e0[1][2], -e0[1][3]},
		{-e0[2][0], -e0[2][1], -e0[2][2], -e0[2][3]},
		{0, 0, 0, 1}}
	a3 := [3][4]float64{a[0], a[1], a[2]}
	n := len(points) / 3
	if n == 0 {
		return a
	}
	axis := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	for i := range n {
		p := apply34(a3, [3]float64{float64(points[3*i]), float64(points[3*i+1]), float64(points[3*i+2])})
		axis[0][i], axis[1][i], axis[2][i] = p[0], p[1], p[2]
	}
	for k := range 3 {
		a[k][3] -= median64(axis[k])
	}
	return a
}

type glbScene struct {
	doc gltfDoc
	bin []byte
}

func buildGLB(pc *PointCloud, views []View, opt GLBOptions) (*glbScene, error) {
	if err := pc.check(); err != nil {
		return nil, err
	}
	if err := checkCameras(views); err != nil {
		return nil, err
	}
	for i, v := range pc.View {
		if int(v) < 0 || int(v) >= len(views) {
			return nil, fmt.Errorf("point %d comes from view %d, but there are %d views", i, v, len(views))
		}
	}
	if opt.CameraSize < 0 || math.IsNaN(opt.CameraSize) || math.IsInf(opt.CameraSize, 0) {
		return nil, fmt.Errorf("invalid camera size %g", opt.CameraSize)
	}
	a := Alignment(views[0].Camera.Extrinsics, pc)
	a3 := [3][4]float64{a[0], a[1], a[2]}
	sub := pc.Subsample(opt.MaxPoints, opt.Seed)
	n := sub.Len()
	pts := make([]float32, 3*n)
	aligned := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	for i := range n {
		p := apply34(a3, [3]float64{float64(sub.Points[3*i]), float64(sub.Points[3*i+1]), float64(sub.Points[3*i+2])})
		for k := range 3 {
			pts[3*i+k] = float32(p[k])
			aligned[k][i] = p[k]
		}
	}
	s := &glbScene{doc: gltfDoc{Asset: gltfAsset{Version: "2.0", Generator: "da3-go"},
		Scenes: []gltfScene{{Extras: map[string]any{"hf_alignment": a}}},
		Materials: []json.RawMessage{json.RawMessage(
			`{"pbrMetallicRoughness":{"baseColorFactor":[1,1,1,1],"metallicFactor":0,"roughnessFactor":0}}`)}}}
	if n > 0 {
		rgba := make([]uint8, 4*n)
		for i := range n {
			copy(rgba[4*i:], sub.Colors[3*i:3*i+3])
			rgba[4*i+3] = 255
		}
		s.addMesh("points", 0, pts, rgba)
	}
	if opt.ShowCameras {
		s.addCameras(views, a3, sceneScale(aligned)*opt.CameraSize)
	}
	if len(s.bin) > 0 {
		s.doc.Buffers = []gltfBuffer{{ByteLength: len(s.bin)}}
	}
	return s, nil
}

// addCameras adds each view's camera pyramid of depth scale, mapped by a3, as a mesh of LINES.
func (s *glbScene) addCameras(views []View, a3 [3][4]float64, scale float64) {
	for i := range views {
		segs := frustum(&views[i], scale)
		lines := make([]float32, 0, 3*len(segs))
		for _, p := range segs {
			q := apply34(a3, p)
			lines = append(lines, float32(q[0]), float32(q[1]), float32(q[2]))
		}
		c := indexColor(i, len(views))
		rgba := make([]uint8, 0, 4*len(segs))
		for range segs {
			rgba = append(rgba, c[0], c[1], c[2], 255)
		}
		s.addMesh(fmt.Sprintf("camera_%d", i), 1, lines, rgba)
	}
}

// sceneScale is the official _estimate_scene_scale: the norm of P95 − P5 per axis, 1 when there are
// fewer than two points or the result is not a positive finite number.
func sceneScale(axis [3][]float64) float64 {
	if len(axis[0]) < 2 {
		return 1
	}
	var d2 float64
	for k := range 3 {
		s := slices.Clone(axis[k])
		slices.Sort(s)
		d := percentile(s, 95) - percentile(s, 5)
		d2 += d * d
	}
	d := math.Sqrt(d2)
	if math.IsNaN(d) || math.IsInf(d, 0) || d <= 0 {
		return 1
	}
	return d
}

// frustum returns the 16 end points (8 segments) of a view's camera pyramid in world coordinates, as the
// official _camera_frustum_lines builds them.
func frustum(v *View, scale float64) [][3]float64 {
	kinv, _ := inverse3(v.Camera.Intrinsics)
	c2w, _ := camToWorld(v.Camera.Extrinsics)
	w, h := float64(v.Width-1), float64(v.Height-1)
	corners := [4][3]float64{{0, 0, 1}, {w, 0, 1}, {w, h, 1}, {0, h, 1}}
	centre := apply34(c2w, [3]float64{})
	var plane [4][3]float64
	for k, c := range corners {
		var r [3]float64
		for i := range 3 {
			r[i] = kinv[i][0]*c[0] + kinv[i][1]*c[1] + kinv[i][2]*c[2]
		}
		z := r[2]
		if z == 0 {
			z = 1
		}
		plane[k] = apply34(c2w, [3]float64{r[0] / z * scale, r[1] / z * scale, r[2] / z * scale})
	}
	segs := make([][3]float64, 0, 16)
	for k := range 4 {
		segs = append(segs, centre, plane[k])
	}
	for k := range 4 {
		segs = append(segs, plane[k], plane[(k+1)%4])
	}
	return segs
}

// indexColor is the official _index_color_rgb: HSV((i+0.5)/n, 0.85, 0.95) scaled by 255 and truncated.
func indexColor(i, n int) [3]uint8 {
	h := (float64(i) + 0.5) / float64(max(n, 1))
	s, v := 0.85, 0.95
	k := int(h * 6)
	f := h*6 - float64(k)
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var r, g, b float64
	switch k % 6 {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return [3]uint8{uint8(r * 255), uint8(g * 255), uint8(b * 255)}
}

// glTF document (only what the scene uses), fields in the order trimesh writes them.
type gltfDoc struct {
	Scene       int               `json:"scene"`
	Scenes      []gltfScene       `json:"scenes"`
	Asset       gltfAsset         `json:"asset"`
	Accessors   []gltfAccessor    `json:"accessors,omitempty"`
	Meshes      []gltfMesh        `json:"meshes,omitempty"`
	Materials   []json.RawMessage `json:"materials,omitempty"`
	Nodes       []gltfNode        `json:"nodes,omitempty"`
	Buffers     []gltfBuffer      `json:"buffers,omitempty"`
	BufferViews []gltfBufferView  `json:"bufferViews,omitempty"`
}

type gltfScene struct {
	Extras map[string]any `json:"extras,omitempty"`
	Nodes  []int          `json:"nodes,omitempty"`
}

type gltfAsset struct {
	Version   string `json:"version"`
	Generator string `json:"generator"`
}

type gltfAccessor struct {
	BufferView    int       `json:"bufferView"`
	ByteOffset    int       `json:"byteOffset"`
	ComponentType int       `json:"componentType"`
	Normalized    bool      `json:"normalized,omitempty"`
	Count         int       `json:"count"`
	Type          string    `json:"type"`
	Max           []float64 `json:"max,omitempty"`
	Min           []float64 `json:"min,omitempty"`
}

type gltfMesh struct {
	Name       string          `json:"name"`
	Primitives []gltfPrimitive `json:"primitives"`
}

type gltfPrimitive struct {
	Attributes map[string]int `json:"attributes"`
	Indices    *int           `json:"indices,omitempty"`
	Mode       int            `json:"mode"`
	Material   int            `json:"material"`
}

type gltfNode struct {
	Name string `json:"name"`
	Mesh int    `json:"mesh"`
}

type gltfBuffer struct {
	ByteLength int `json:"byteLength"`
}

type gltfBufferView struct {
	Buffer     int `json:"buffer"`
	ByteOffset int `json:"byteOffset"`
	ByteLength int `json:"byteLength"`
	Target     int `json:"target"`
}

const (
	gltfFloat        = 5126
	gltfUnsignedByte = 5121
	gltfArrayBuffer  = 34962
)

// addMesh appends a mesh of one primitive (mode 0 POINTS or 1 LINES) with float32 positions and RGBA colours.
func (s *glbScene) addMesh(name string, mode int, pos []float32, rgba []uint8) {
	n := len(pos) / 3
	posView := s.addView(func(b []byte) []byte {
		for _, v := range pos {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	})
	colView := s.addView(func(b []byte) []byte { return append(b, rgba...) })
	lo, hi := bounds(pos, 3)
	clo, chi := bounds(rgba, 4)
	acc := len(s.doc.Accessors)
	s.doc.Accessors = append(s.doc.Accessors,
		gltfAccessor{BufferView: posView, ComponentType: gltfFloat, Count: n, Type: "VEC3", Max: hi, Min: lo},
		gltfAccessor{BufferView: colView, ComponentType: gltfUnsignedByte, Normalized: true, Count: n, Type: "VEC4", Max: chi, Min: clo})
	mesh := len(s.doc.Meshes)
	s.doc.Meshes = append(s.doc.Meshes, gltfMesh{Name: name, Primitives: []gltfPrimitive{{
		Attributes: map[string]int{"POSITION": acc, "COLOR_0": acc + 1}, Mode: mode, Material: 0}}})
	s.doc.Nodes = append(s.doc.Nodes, gltfNode{Name: name, Mesh: mesh})
	s.doc.Scenes[0].Nodes = append(s.doc.Scenes[0].Nodes, len(s.doc.Nodes)-1)
}

// addView appends data to the binary buffer (4-byte aligned) and returns its bufferView index.
func (s *glbScene) addView(appendData func([]byte) []byte) int {
	off := len(s.bin)
	s.bin = appendData(s.bin)
	s.doc.BufferViews = append(s.doc.BufferViews, gltfBufferView{ByteOffset: off, ByteLength: len(s.bin) - off, Target: gltfArrayBuffer})
	for len(s.bin)%4 != 0 {
		s.bin = append(s.bin, 0)
	}
	return len(s.doc.BufferViews) - 1
}

// encode writes the GLB container: a 12-byte header, the JSON chunk padded with spaces and the BIN chunk
// padded with zeros, each to 4 bytes.
func (s *glbScene) encode(w io.Writer) error {
	js, err := json.Marshal(s.doc)
	if err != nil {
		return err
	}
	for len(js)%4 != 0 {
		js = append(js, ' ')
	}
	total := 12 + 8 + len(js)
	if len(s.bin) > 0 {
		total += 8 + len(s.bin)
	}
	if total > math.MaxUint32 {
		return fmt.Errorf("scene of %d bytes exceeds the GLB limit of 4 GiB", total)
	}
	var hdr bytes.Buffer
	hdr.WriteString("glTF")
	binary.Write(&hdr, binary.LittleEndian, [2]uint32{2, uint32(total)})
	binary.Write(&hdr, binary.LittleEndian, [2]uint32{uint32(len(js)), 0x4E4F534A}) // "JSON"
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	if len(s.bin) == 0 {
		return nil
	}
	var ch [8]byte
	binary.LittleEndian.PutUint32(ch[:], uint32(len(s.bin)))
	binary.LittleEndian.PutUint32(ch[4:], 0x004E4942) // "BIN\0"
	if _, err := w.Write(ch[:]); err != nil {
		return err
	}
	_, err = w.Write(s.bin)
	return err
}
