package export_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

func TestWritePLY(t *testing.T) {
	pc, err := export.NewPointCloud(scene(), export.DefaultOptions())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "scene.ply")
	require.NoError(t, export.WritePLY(path, pc))
	f := readPLY(t, path)
	assert.Equal(t, []string{"float x", "float y", "float z", "uchar red", "uchar green", "uchar blue", "float confidence"}, f.props)
	require.Len(t, f.rows, pc.Len())
	for j, r := range f.rows {
		for k := range 3 {
			assert.Equal(t, float64(pc.Points[3*j+k]), r[k])
			assert.Equal(t, float64(pc.Colors[3*j+k]), r[3+k])
		}
		assert.Equal(t, float64(pc.Conf[j]), r[6])
	}

	// Without confidence the property is left out.
	views := scene()
	for i := range views {
		views[i].Conf = nil
	}
	pc, err = export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	require.NoError(t, export.WritePLY(path, pc))
	f = readPLY(t, path)
	assert.Len(t, f.props, 6)
	assert.Len(t, f.rows, 96)
	assertNoTemp(t, filepath.Dir(path))
}

func TestWriteGLB(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "scene.glb")
	opt := export.DefaultGLBOptions()
	require.NoError(t, export.WriteGLB(path, pc, views, opt))
	g := readGLB(t, path)
	require.Len(t, g.doc.Meshes, 3, "points + one frustum per view")
	assert.Equal(t, []int{0, 1, 2}, g.doc.Scenes[0].Nodes)

	// Points: the cloud mapped by the alignment stored in the scene.
	a := g.doc.Scenes[0].Extras.HFAlignment
	assert.Equal(t, export.Alignment(views[0].Camera.Extrinsics, pc), a)
	prim := g.doc.Meshes[0].Primitives[0]
	assert.Equal(t, 0, prim.Mode)
	pos := g.floats(t, prim.Attributes["POSITION"])
	col := g.bytes(t, prim.Attributes["COLOR_0"])
	require.Len(t, pos, 3*pc.Len())
	var centred [3][]float64
	for j := range pc.Len() {
		p := pc.Points[3*j : 3*j+3]
		for k := range 3 {
			want := a[k][0]*float64(p[0]) + a[k][1]*float64(p[1]) + a[k][2]*float64(p[2]) + a[k][3]
			assert.InDelta(t, want, float64(pos[3*j+k]), 1e-6)
			centred[k] = append(centred[k], float64(pos[3*j+k]))
		}
		assert.Equal(t, append(append([]uint8{}, pc.Colors[3*j:3*j+3]...), 255), col[4*j:4*j+4])
	}
	// The first camera looks down −z in glTF axes: a = diag(1, −1, −1)·E₀ (E₀ = I) plus a translation, and
	// the median of the points is at the origin.
	assert.Equal(t, [3]float64{1, -1, -1}, [3]float64{a[0][0], a[1][1], a[2][2]})
	for k := range 3 {
		s := append([]float64{}, centred[k]...)
		sortFloats(s)
		n := len(s)
		med := s[n/2]
		if n%2 == 0 {
			med = (s[n/2-1] + s[n/2]) / 2
		}
		assert.InDelta(t, 0, med, 1e-6, "median along axis %d", k)
	}
	// Accessor bounds are the data's (the glTF validator checks them exactly).
	acc := g.doc.Accessors[prim.Attributes["POSITION"]]
	for k := range 3 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for j := range pc.Len() {
			lo, hi = min(lo, float64(pos[3*j+k])), max(hi, float64(pos[3*j+k]))
		}
		assert.Equal(t, lo, acc.Min[k])
		assert.Equal(t, hi, acc.Max[k])
	}

	// Cameras: 8 segments each; the first starts at the camera centre, which for view 0 is A·0.
	for i := 1; i <= 2; i++ {
		p := g.doc.Meshes[i].Primitives[0]
		assert.Equal(t, 1, p.Mode)
		lines := g.floats(t, p.Attributes["POSITION"])
		require.Len(t, lines, 16*3)
		colors := g.bytes(t, p.Attributes["COLOR_0"])
		assert.Equal(t, colors[:4], colors[len(colors)-4:], "one colour per camera")
		if i == 1 {
			for k := range 3 {
				assert.InDelta(t, a[k][3], float64(lines[k]), 1e-6)
			}
		}
	}
	c0 := g.bytes(t, g.doc.Meshes[1].Primitives[0].Attributes["COLOR_0"])
	c1 := g.bytes(t, g.doc.Meshes[2].Primitives[0].Attributes["COLOR_0"])
	// HSV(0.25, 0.85, 0.95) and HSV(0.75, 0.85, 0.95), truncated as the official exporter does.
	assert.Equal(t, []uint8{139, 242, 36, 255}, c0[:4])
	assert.Equal(t, []uint8{139, 36, 242, 255}, c1[:4])

	// Subsampling and no cameras.
	require.NoError(t, export.WriteGLB(path, pc, views, export.GLBOptions{MaxPoints: 7}))
	g = readGLB(t, path)
	require.Len(t, g.doc.Meshes, 1)
	assert.Equal(t, 7, g.doc.Accessors[0].Count)

	// An empty cloud without cameras is still a valid file with no buffer.
	empty := &export.PointCloud{}
	require.NoError(t, export.WriteGLB(path, empty, views, export.GLBOptions{}))
	g = readGLB(t, path)
	assert.Empty(t, g.doc.Meshes)
	assert.Empty(t, g.doc.Buffers)
	assert.Empty(t, g.bin)
	assertNoTemp(t, filepath.Dir(path))
}

func sortFloats(s []float64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestWriteNPZ(t *testing.T) {
	views := scene()
	views[0].Depth[0] = 1.23456789
	views[0].Conf[0] = 1.23456789
	dir := t.TempDir()
	for _, mini := range []bool{false, true} {
		path := filepath.Join(dir, "results.npz")
		require.NoError(t, export.WriteNPZ(path, views, mini))
		var buf bytes.Buffer
		require.NoError(t, export.EncodeNPZ(&buf, views, mini))
		written, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, written, buf.Bytes(), "EncodeNPZ writes the file WriteNPZ writes")
		arrays := readNPZ(t, path)
		names := []string{"image", "depth", "conf", "extrinsics", "intrinsics"}
		if mini {
			names = names[1:]
		}
		var got []string
		for _, a := range arrays {
			got = append(got, a.name)
		}
		assert.Equal(t, names, got, "keys in the official order")
		byName := map[string]npyArray{}
		for _, a := range arrays {
			byName[a.name] = a
		}
		if !mini {
			assert.Equal(t, "|u1", byName["image"].descr)
			assert.Equal(t, []int{2, 6, 8, 3}, byName["image"].shape)
			assert.Equal(t, append(append([]uint8{}, views[0].RGB...), views[1].RGB...), byName["image"].data)
		}
		d := byName["depth"]
		assert.Equal(t, "<f4", d.descr)
		assert.Equal(t, []int{2, 6, 8}, d.shape)
		want := float32(1.234568)
		if mini {
			want = 1.2345679
		}
		assert.Equal(t, want, d.f32()[0])
		assert.Equal(t, views[1].Depth[47], d.f32()[95])
		assert.Equal(t, float32(1.23), byName["conf"].f32()[0])
		assert.Equal(t, []int{2, 3, 4}, byName["extrinsics"].shape)
		assert.Equal(t, float32(views[1].Camera.Extrinsics[0][2]), byName["extrinsics"].f32()[12+2])
		assert.Equal(t, []int{2, 3, 3}, byName["intrinsics"].shape)
		assert.Equal(t, float32(11), byName["intrinsics"].f32()[9+4])
	}

	// Without cameras and confidence the keys are left out, as upstream does.
	for i := range views {
		views[i].Camera, views[i].Conf = nil, nil
	}
	path := filepath.Join(dir, "mono.npz")
	require.NoError(t, export.WriteNPZ(path, views, false))
	var names []string
	for _, a := range readNPZ(t, path) {
		names = append(names, a.name)
	}
	assert.Equal(t, []string{"image", "depth"}, names)

	bad := scene()
	bad[1].Camera = nil
	assert.ErrorContains(t, export.WriteNPZ(path, bad, false), "in every view or in none")
	bad = scene()
	bad[1].Width, bad[1].Height = 6, 8
	assert.ErrorContains(t, export.WriteNPZ(path, bad, false), "one size")
	bad = scene()
	bad[0].RGB = nil
	assert.ErrorContains(t, export.WriteNPZ(path, bad, false), "needs the image")
	require.NoError(t, export.WriteNPZ(path, bad, true), "mini_npz has no image")
}

type npyArray struct {
	name, descr string
	shape       []int
	data        []byte
}

func (a npyArray) f32() []float32 {
	out := make([]float32, len(a.data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.data[4*i:]))
	}
	return out
}

var npyHeader = regexp.MustCompile(`^\{'descr': '([<|][a-z0-9]+)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \} *\n$`)

// readNPZ reads every member of an .npz with an independent .npy parser.
func readNPZ(t *testing.T, path string) []npyArray {
	t.Helper()
	z, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer z.Close()
	var out []npyArray
	for _, f := range z.File {
		assert.Equal(t, zip.Deflate, f.Method, "savez_compressed deflates")
		r, err := f.Open()
		require.NoError(t, err)
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		require.Equal(t, "\x93NUMPY\x01\x00", string(b[:8]))
		hl := int(binary.LittleEndian.Uint16(b[8:]))
		require.Zero(t, (10+hl)%64, "data aligned to 64 bytes")
		m := npyHeader.FindStringSubmatch(string(b[10 : 10+hl]))
		require.NotNil(t, m, "header %q", b[10:10+hl])
		a := npyArray{name: strings.TrimSuffix(f.Name, ".npy"), descr: m[1], data: b[10+hl:]}
		n := 1
		for _, s := range strings.Split(m[2], ",") {
			if s = strings.TrimSpace(s); s != "" {
				d, err := strconv.Atoi(s)
				require.NoError(t, err)
				a.shape = append(a.shape, d)
				n *= d
			}
		}
		size := map[string]int{"<f4": 4, "|u1": 1}[a.descr]
		require.Equal(t, n*size, len(a.data), "%s payload", a.name)
		out = append(out, a)
	}
	return out
}

func TestWriteDepthVis(t *testing.T) {
	v := scene()[0]
	img, err := export.DepthVis(&v)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 16, 6), img.Bounds())
	r, g, b, _ := img.At(3, 2).RGBA()
	assert.Equal(t, [3]uint8{v.RGB[3*(2*8+3)], v.RGB[3*(2*8+3)+1], v.RGB[3*(2*8+3)+2]}, [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)})
	// Depth grows with the column: the nearest pixel is red (Spectral's low end), the farthest blue.
	near, far := img.RGBAAt(8, 0), img.RGBAAt(15, 5)
	assert.Greater(t, near.R, near.B)
	assert.Greater(t, far.B, far.R)

	dir := t.TempDir()
	require.NoError(t, export.WriteDepthVis(filepath.Join(dir, "0000.png"), &v))
	f, err := os.Open(filepath.Join(dir, "0000.png"))
	require.NoError(t, err)
	dec, err := png.Decode(f)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, img.Bounds(), dec.Bounds())
	assert.Equal(t, img.RGBAAt(9, 3), color.RGBAModel.Convert(dec.At(9, 3)))

	require.NoError(t, export.WriteDepthVis(filepath.Join(dir, "0000.jpg"), &v))
	jb, err := os.ReadFile(filepath.Join(dir, "0000.jpg"))
	require.NoError(t, err)
	_, err = jpeg.Decode(bytes.NewReader(jb))
	require.NoError(t, err)

	v.RGB = nil
	assert.ErrorContains(t, export.WriteDepthVis(filepath.Join(dir, "x.jpg"), &v), "needs the image")
	assertNoTemp(t, dir)
}

// assertNoTemp fails when a temporary output file was left in dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "tmp", "temporary file left behind")
	}
}

// TestWritersRefuseTheirInputs: a view's Source is never replaced by any
// writer, and a device is never replaced by a file.
func TestWritersRefuseTheirInputs(t *testing.T) {
	dir := t.TempDir()
	views := scene()
	src := filepath.Join(dir, "view0.png")
	require.NoError(t, os.WriteFile(src, []byte("the input image"), 0o644))
	views[0].Source = src
	pc, err := export.NewPointCloud(views, export.DefaultOptions())
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"ply", func() error { return export.WritePLY(src, pc) }},
		{"ply (sub)", func() error { return export.WritePLY(src, pc.Subsample(10, 1)) }},
		{"glb", func() error { return export.WriteGLB(src, pc, views, export.DefaultGLBOptions()) }},
		{"npz", func() error { return export.WriteNPZ(src, views, false) }},
		{"depth_vis", func() error { return export.WriteDepthVis(src, &views[0]) }},
		{"colmap", func() error { return export.WriteCOLMAP(dir, pc, views, false) }}, // last: it moves the Source
	} {
		name, write := tc.name, tc.write
		if name == "colmap" {
			views[0].Source = filepath.Join(dir, "images.bin")
			require.NoError(t, os.WriteFile(views[0].Source, []byte("the input image"), 0o644))
		}
		err := write()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "would overwrite the input", name)
	}
	for _, p := range []string{src, filepath.Join(dir, "images.bin")} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "the input image", string(b))
	}
	assert.NoFileExists(t, filepath.Join(dir, "cameras.bin"), "no file of a refused COLMAP model is left")
	assertNoTemp(t, dir)
	err = export.WriteNPZ("/dev/null", views, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
}
