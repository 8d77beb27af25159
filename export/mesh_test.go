package export_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/tsdf"
	"github.com/da3-go/da3-go/lens"
)

// planeViews returns three 48×36 views of the plane z = 2 from cameras at x = −0.1, 0, 0.1 looking down
// +z, with confidence 3, except a band of columns whose depth is wrong (1.5) with confidence 1 (below
// the threshold) and a band of rows marked sky (depth 50).
func planeViews() []export.View {
	const w, h = 48, 36
	k := [3][3]float64{{160, 0, 23.5}, {0, 160, 17.5}, {0, 0, 1}}
	var views []export.View
	for vi, cx := range []float64{-0.1, 0, 0.1} {
		v := export.View{Name: "v" + strconv.Itoa(vi), Width: w, Height: h, Depth: make([]float32, w*h), Conf: make([]float32, w*h),
			Sky: make([]float32, w*h), RGB: make([]uint8, 3*w*h),
			Camera: &export.Camera{Extrinsics: [3][4]float64{{1, 0, 0, -cx}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: k}}
		for y := range h {
			for x := range w {
				i := y*w + x
				v.Depth[i], v.Conf[i] = 2, 3
				v.RGB[3*i], v.RGB[3*i+1], v.RGB[3*i+2] = 200, 100, 50
				if x >= 20 && x < 26 {
					v.Depth[i], v.Conf[i] = 1.5, 1
				}
				if y < 4 {
					v.Depth[i], v.Sky[i] = 50, 1
				}
			}
		}
		views = append(views, v)
	}
	return views
}

func TestNewMeshSelectsAndWeights(t *testing.T) {
	views := planeViews()
	m, st, err := export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: export.DefaultOptions()})
	require.NoError(t, err)
	require.NotZero(t, m.Triangles())
	// Automatic voxel: median depth 2 / 200.
	assert.True(t, st.AutoVoxel)
	assert.InDelta(t, 2.0, st.MedianDepth, 1e-9)
	assert.InDelta(t, 0.01, st.VoxelSize, 1e-12)
	assert.InDelta(t, 0.04, st.Truncation, 1e-12)
	assert.Equal(t, 3, st.Frames)
	assert.Equal(t, int64(st.Blocks)*tsdf.BlockBytes, st.Bytes)
	// The low-confidence band and the sky are left out: every vertex is on the plane, orange.
	for i := range m.Len() {
		require.InDelta(t, 2, m.Vertices[3*i+2], 1e-4, "vertex %d", i)
		require.Equal(t, []uint8{200, 100, 50}, m.Colors[3*i:3*i+3])
		require.Less(t, m.Normals[3*i+2], float32(-0.99), "normal toward the cameras")
	}
	// Keeping every pixel fuses the wrong band too (but never the sky).
	all, _, err := export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: keepAll()})
	require.NoError(t, err)
	near := 0
	for i := range all.Len() {
		if math.Abs(float64(all.Vertices[3*i+2])-1.5) < 0.01 {
			near++
		}
		require.Less(t, all.Vertices[3*i+2], float32(3))
	}
	assert.NotZero(t, near)

	// The de-ghosted point cloud is the vertices.
	pc := export.MeshCloud(m)
	assert.Equal(t, m.Len(), pc.Len())
	assert.Equal(t, m.Vertices, pc.Points)
}

// Views mapped back to a distorted lens are refused: the fusion projects voxels with a pinhole matrix.
func TestNewMeshRefusesLens(t *testing.T) {
	views := planeViews()
	l, err := lens.New(lens.OpenCVFisheye, 48, 36, []float64{30, 30, 24, 18, 0.05, -0.01, 0.002, -0.0003})
	require.NoError(t, err)
	views[1].Camera.Lens = l
	_, _, err = export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: export.DefaultOptions()})
	assert.ErrorContains(t, err, "view 1 (v1): mesh fusion needs pinhole views")
}

func TestNewMeshBlockLimit(t *testing.T) {
	views := planeViews()
	src := export.ViewSlice(views)
	full, _, err := export.NewMesh(src, export.MeshOptions{Points: export.DefaultOptions()})
	require.NoError(t, err)
	_, st, err := export.FuseViews(src, export.MeshOptions{Points: export.DefaultOptions()})
	require.NoError(t, err)
	limit := st.Blocks / 3

	// An automatic voxel is doubled until the volume fits.
	m, st2, err := export.NewMesh(src, export.MeshOptions{Points: export.DefaultOptions(), Volume: tsdf.Options{MaxBlocks: limit}})
	require.NoError(t, err)
	assert.Positive(t, st2.Coarsened)
	assert.InDelta(t, 0.01*math.Pow(2, float64(st2.Coarsened)), st2.VoxelSize, 1e-12)
	assert.LessOrEqual(t, st2.Blocks, limit)
	assert.Less(t, m.Len(), full.Len())

	// A voxel given is kept, and the limit is an error.
	_, _, err = export.NewMesh(src, export.MeshOptions{Points: export.DefaultOptions(), Volume: tsdf.Options{VoxelSize: 0.01, MaxBlocks: limit}})
	require.ErrorIs(t, err, tsdf.ErrTooManyBlocks)
	assert.Contains(t, err.Error(), "view ")
}

// meshPLY is a mesh PLY read by an independent parser.
type meshPLY struct {
	vertexProps []string
	verts       [][9]float64
	faces       [][3]uint32
}

func readMeshPLY(t *testing.T, b []byte) *meshPLY {
	t.Helper()
	end := bytes.Index(b, []byte("end_header\n"))
	require.Positive(t, end)
	lines := strings.Split(string(b[:end]), "\n")
	require.Equal(t, []string{"ply", "format binary_little_endian 1.0"}, lines[:2])
	var nv, nf int
	p := &meshPLY{}
	elem := ""
	for _, l := range lines[2:] {
		fs := strings.Fields(l)
		switch {
		case len(fs) == 0 || fs[0] == "comment":
		case fs[0] == "element":
			elem = fs[1]
			n, err := strconv.Atoi(fs[2])
			require.NoError(t, err)
			if elem == "vertex" {
				nv = n
			} else {
				require.Equal(t, "face", elem)
				nf = n
			}
		case fs[0] == "property" && elem == "vertex":
			p.vertexProps = append(p.vertexProps, fs[1]+" "+fs[2])
		case fs[0] == "property" && elem == "face":
			require.Equal(t, []string{"property", "list", "uchar", "uint", "vertex_indices"}, fs)
		default:
			t.Fatalf("unexpected header line %q", l)
		}
	}
	data := b[end+len("end_header\n"):]
	require.Equal(t, 27*nv+13*nf, len(data), "payload size")
	for i := range nv {
		rec := data[27*i:]
		var v [9]float64
		for k := range 6 {
			v[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(rec[4*k:])))
		}
		for k := range 3 {
			v[6+k] = float64(rec[24+k])
		}
		p.verts = append(p.verts, v)
	}
	data = data[27*nv:]
	for i := range nf {
		rec := data[13*i:]
		require.Equal(t, byte(3), rec[0])
		p.faces = append(p.faces, [3]uint32{binary.LittleEndian.Uint32(rec[1:]), binary.LittleEndian.Uint32(rec[5:]), binary.LittleEndian.Uint32(rec[9:])})
	}
	return p
}

func TestWriteMeshPLY(t *testing.T) {
	m, _, err := export.NewMesh(export.ViewSlice(planeViews()), export.MeshOptions{Points: export.DefaultOptions()})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mesh.ply")
	require.NoError(t, export.WriteMeshPLY(path, m))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	p := readMeshPLY(t, b)
	assert.Equal(t, []string{"float x", "float y", "float z", "float nx", "float ny", "float nz", "uchar red", "uchar green", "uchar blue"}, p.vertexProps)
	require.Len(t, p.verts, m.Len())
	require.Len(t, p.faces, m.Triangles())
	for _, i := range []int{0, m.Len() / 2, m.Len() - 1} {
		for k := range 3 {
			assert.Equal(t, float64(m.Vertices[3*i+k]), p.verts[i][k])
			assert.Equal(t, float64(m.Normals[3*i+k]), p.verts[i][3+k])
			assert.Equal(t, float64(m.Colors[3*i+k]), p.verts[i][6+k])
		}
	}
	for f := range p.faces {
		assert.Equal(t, [3]uint32(m.Faces[3*f:3*f+3]), p.faces[f])
	}
	assertNoTemp(t, filepath.Dir(path))

	// A mesh whose faces point past its vertices is refused; an input is never replaced.
	bad := *m
	bad.Faces = append(append([]uint32(nil), m.Faces...), 0, 1, uint32(m.Len()))
	assert.Error(t, export.WriteMeshPLY(path, &bad))
	assert.Error(t, export.WriteMeshPLY(path, m, path))
}

func TestWriteMeshGLB(t *testing.T) {
	views := planeViews()
	m, _, err := export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: export.DefaultOptions()})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mesh.glb")
	require.NoError(t, export.WriteMeshGLB(path, m, views, export.DefaultGLBOptions()))
	g := readGLB(t, path)
	require.Len(t, g.doc.Meshes, 1+len(views), "the mesh and one frustum per view")
	prim := g.doc.Meshes[0].Primitives[0]
	assert.Equal(t, 4, prim.Mode, "TRIANGLES")
	require.NotNil(t, prim.Indices)

	// Positions: the vertices mapped by the alignment (the point cloud's, over the vertices).
	a := g.doc.Scenes[0].Extras.HFAlignment
	assert.Equal(t, export.Alignment(views[0].Camera.Extrinsics, export.MeshCloud(m)), a)
	pos := g.floats(t, prim.Attributes["POSITION"])
	nrm := g.floats(t, prim.Attributes["NORMAL"])
	col := g.bytes(t, prim.Attributes["COLOR_0"])
	require.Len(t, pos, 3*m.Len())
	for j := range m.Len() {
		p := m.Vertices[3*j : 3*j+3]
		var n2 float64
		for k := range 3 {
			want := a[k][0]*float64(p[0]) + a[k][1]*float64(p[1]) + a[k][2]*float64(p[2]) + a[k][3]
			require.InDelta(t, want, float64(pos[3*j+k]), 1e-5)
			n2 += float64(nrm[3*j+k]) * float64(nrm[3*j+k])
			require.Equal(t, m.Colors[3*j+k], col[4*j+k])
		}
		require.InDelta(t, 1, n2, 1e-5, "unit normal")
		// The cameras look down OpenCV +z, glTF −z: the normals toward them are +z in glTF axes.
		require.Greater(t, nrm[3*j+2], float32(0.99))
	}
	idx := g.doc.Accessors[*prim.Indices]
	assert.Equal(t, 5125, idx.ComponentType)
	assert.Equal(t, "SCALAR", idx.Type)
	assert.Equal(t, len(m.Faces), idx.Count)
	bv := g.doc.BufferViews[idx.BufferView]
	assert.Equal(t, 34963, bv.Target)
	for i, f := range m.Faces {
		require.Equal(t, f, binary.LittleEndian.Uint32(g.bin[bv.ByteOffset+4*i:]))
	}
	validateGLB(t, path)

	// Without views: no cameras, the axis flip only.
	require.NoError(t, export.WriteMeshGLB(path, m, nil, export.DefaultGLBOptions()))
	g = readGLB(t, path)
	assert.Len(t, g.doc.Meshes, 1)
	validateGLB(t, path)
}

// validateGLB runs the Khronos glTF validator on path when it is installed (npm ci in tests/exportcheck)
// and requires no errors and no warnings.
func validateGLB(t *testing.T, path string) {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "tests", "exportcheck"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "gltf-validator")); err != nil {
		t.Log("glTF validator not installed (npm ci in tests/exportcheck): not validated")
		return
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Log("node not found: not validated")
		return
	}
	cmd := exec.Command("node", filepath.Join(dir, "validate.js"), path)
	out, err := cmd.Output()
	require.NoError(t, err)
	var rep map[string]struct {
		Errors, Warnings int
		Messages         []string
	}
	require.NoError(t, json.Unmarshal(out, &rep))
	r := rep[path]
	assert.Zero(t, r.Errors, "%v", r.Messages)
	assert.Zero(t, r.Warnings, "%v", r.Messages)
}
