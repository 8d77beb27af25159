package export_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

func TestCOLMAPRoundTrip(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.COLMAPOptions())
	require.NoError(t, err)
	want, err := export.NewCOLMAPModel(pc, views)
	require.NoError(t, err)
	for _, text := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, export.WriteCOLMAP(dir, pc, views, text))
		ext := map[bool]string{false: ".bin", true: ".txt"}[text]
		for _, f := range []string{"cameras", "images", "points3D"} {
			assert.FileExists(t, filepath.Join(dir, f+ext))
		}
		assertNoTemp(t, dir)
		got, err := export.ReadCOLMAP(dir)
		require.NoError(t, err)
		assert.Equal(t, want, got, "text=%v: %%.17g and binary doubles both round-trip exactly", text)
	}

	// The content is the official export's.
	require.Len(t, want.Cameras, 2)
	c := want.Cameras[1]
	assert.Equal(t, export.COLMAPCamera{ID: 2, Model: export.Pinhole, Width: 16, Height: 12, Params: []float64{20, 22, 8, 6}}, c)
	require.Len(t, want.Images, 2)
	require.Len(t, want.Points, pc.Len())
	for i, im := range want.Images {
		assert.Equal(t, uint32(i+1), im.ID)
		assert.Equal(t, uint32(i+1), im.CameraID)
		assert.Equal(t, views[i].Name, im.Name)
		e := im.Extrinsics()
		for r := range 3 {
			for k := range 4 {
				assert.InDelta(t, views[i].Camera.Extrinsics[r][k], e[r][k], 1e-12)
			}
		}
	}
	seen := map[[2]uint32]bool{}
	for j, p := range want.Points {
		assert.Equal(t, uint64(j+1), p.ID)
		assert.Equal(t, -1.0, p.Error)
		require.Len(t, p.Track, 1)
		tr := p.Track[0]
		assert.Equal(t, uint32(pc.View[j]+1), tr.ImageID)
		assert.False(t, seen[[2]uint32{tr.ImageID, tr.Point2DIdx}])
		seen[[2]uint32{tr.ImageID, tr.Point2DIdx}] = true
		p2 := want.Images[tr.ImageID-1].Points2D[tr.Point2DIdx]
		assert.Equal(t, int64(p.ID), p2.Point3DID)
		// Maps are 8×6 of a 16×12 image: pixel (u, v) is (2u, 2v) there.
		px := int(pc.Pixel[j])
		assert.Equal(t, float64(2*(px%8)), p2.X)
		assert.Equal(t, float64(2*(px/8)), p2.Y)
		assert.Equal(t, float64(pc.Points[3*j+2]), p.XYZ[2])
	}
}

// TestCOLMAPCropMapping: for cropped views the original-image intrinsics are not a pure scaling, and 2D
// points follow the affine map between the two pixel grids.
func TestCOLMAPCropMapping(t *testing.T) {
	views := scene()[:1]
	cam := *views[0].Camera
	// Resized by 2 then cropped by 3 columns: cx' = (cx + 3)·2.
	cam.IntrinsicsOriginal = [3][3]float64{{20, 0, 14}, {0, 22, 6}, {0, 0, 1}}
	views[0].Camera = &cam
	pc, err := export.NewPointCloud(views, keepAll())
	require.NoError(t, err)
	m, err := export.NewCOLMAPModel(pc, views)
	require.NoError(t, err)
	for j, p := range m.Images[0].Points2D {
		px := int(pc.Pixel[j])
		assert.Equal(t, float64(2*(px%8)+6), p.X)
		assert.Equal(t, float64(2*(px/8)), p.Y)
	}
}

func TestQuaternionMatchesRotation(t *testing.T) {
	// Rotations hitting each branch of the conversion (trace > 0, and each largest diagonal).
	for _, axis := range [][3]float64{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}, {1, 1, 1}, {0.3, -0.5, 0.8}} {
		for _, ang := range []float64{0.1, 1.5, 3.0, math.Pi} {
			n := math.Sqrt(axis[0]*axis[0] + axis[1]*axis[1] + axis[2]*axis[2])
			x, y, z := axis[0]/n, axis[1]/n, axis[2]/n
			c, s := math.Cos(ang), math.Sin(ang)
			r := [3][3]float64{
				{c + x*x*(1-c), x*y*(1-c) - z*s, x*z*(1-c) + y*s},
				{y*x*(1-c) + z*s, c + y*y*(1-c), y*z*(1-c) - x*s},
				{z*x*(1-c) - y*s, z*y*(1-c) + x*s, c + z*z*(1-c)},
			}
			v := scene()[:1]
			cam := *v[0].Camera
			for i := range 3 {
				copy(cam.Extrinsics[i][:3], r[i][:])
			}
			v[0].Camera = &cam
			m, err := export.NewCOLMAPModel(&export.PointCloud{}, v)
			require.NoError(t, err)
			q := m.Images[0].Q
			assert.InDelta(t, 1, q[0]*q[0]+q[1]*q[1]+q[2]*q[2]+q[3]*q[3], 1e-12)
			e := m.Images[0].Extrinsics()
			for i := range 3 {
				for k := range 3 {
					assert.InDelta(t, r[i][k], e[i][k], 1e-12, "axis %v angle %v", axis, ang)
				}
			}
		}
	}
}

func TestCOLMAPWriteErrors(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.COLMAPOptions())
	require.NoError(t, err)
	views[1].Name = views[0].Name
	assert.ErrorContains(t, export.WriteCOLMAP(t.TempDir(), pc, views, false), "same image name")
	views[1].Name = "a\nb"
	assert.ErrorContains(t, export.WriteCOLMAP(t.TempDir(), pc, views, false), "invalid image name")

	// A failure while writing the third file leaves none of the three behind.
	views = scene()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "points3D.bin"), 0o755))
	require.Error(t, export.WriteCOLMAP(dir, pc, views, false))
	assert.NoFileExists(t, filepath.Join(dir, "cameras.bin"))
	assert.NoFileExists(t, filepath.Join(dir, "images.bin"))
	assertNoTemp(t, dir)
	// A missing directory is an error too.
	assert.Error(t, export.WriteCOLMAP(filepath.Join(dir, "missing"), pc, views, false))
}

func TestReadCOLMAPText(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644)) }
	write("cameras.txt", "# comment\n\n1 SIMPLE_RADIAL 640 480 500 320 240 0.01\n2 OPENCV 10 10 1 2 3 4 0 0 0 0\n")
	write("images.txt", "# c\n1 1 0 0 0 1 2 3 1 dir/my image.jpg\n\n2 0.7071067811865476 0 0.7071067811865476 0 0 0 0 2 b.png\n10.5 20 -1 3 4 1\n")
	write("points3D.txt", "1 0.5 0.25 2 255 0 10 0.7 2 0\n")
	m, err := export.ReadCOLMAP(dir)
	require.NoError(t, err)
	require.Len(t, m.Cameras, 2)
	k, distorted, err := m.Cameras[0].Intrinsics()
	require.NoError(t, err)
	assert.True(t, distorted)
	assert.Equal(t, [3][3]float64{{500, 0, 320}, {0, 500, 240}, {0, 0, 1}}, k)
	k, _, err = m.Cameras[1].Intrinsics()
	require.NoError(t, err)
	assert.Equal(t, [3][3]float64{{1, 0, 3}, {0, 2, 4}, {0, 0, 1}}, k)
	require.Len(t, m.Images, 2)
	assert.Equal(t, "dir/my image.jpg", m.Images[0].Name)
	assert.Empty(t, m.Images[0].Points2D)
	assert.Equal(t, []export.COLMAPPoint2D{{X: 10.5, Y: 20, Point3DID: -1}, {X: 3, Y: 4, Point3DID: 1}}, m.Images[1].Points2D)
	e := m.Images[1].Extrinsics() // 90° about y
	assert.InDelta(t, 1, e[0][2], 1e-12)
	assert.InDelta(t, -1, e[2][0], 1e-12)
	assert.Equal(t, []export.COLMAPPoint3D{{ID: 1, XYZ: [3]float64{0.5, 0.25, 2}, RGB: [3]uint8{255, 0, 10}, Error: 0.7,
		Track: []export.COLMAPTrackElement{{ImageID: 2, Point2DIdx: 0}}}}, m.Points)
}

func TestReadCOLMAPRejectsBadFiles(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.COLMAPOptions())
	require.NoError(t, err)
	good := t.TempDir()
	require.NoError(t, export.WriteCOLMAP(good, pc, views, false))
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(good, name))
		require.NoError(t, err)
		return b
	}
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cases := []struct {
		name, file string
		content    func() []byte
		want       string
	}{
		{"truncated cameras", "cameras.bin", func() []byte { b := read("cameras.bin"); return b[:len(b)-3] }, "unexpected EOF"},
		{"huge camera count", "cameras.bin", func() []byte { return u64(1 << 60) }, "declared"},
		{"unknown model", "cameras.bin", func() []byte {
			b := read("cameras.bin")
			binary.LittleEndian.PutUint32(b[12:], 99)
			return b
		}, "unknown model id 99"},
		{"trailing bytes", "cameras.bin", func() []byte { return append(read("cameras.bin"), 0) }, "unexpected bytes"},
		{"huge 2D count", "images.bin", func() []byte {
			b := read("images.bin")
			i := strings.Index(string(b), "img0.jpg\x00") + len("img0.jpg\x00")
			copy(b[i:], u64(1<<40))
			return b
		}, "2D points declared"},
		{"unterminated name", "images.bin", func() []byte {
			b := append(u64(1), make([]byte, 4+7*8+4)...)
			return append(b, strings.Repeat("a", 100)...)
		}, "unexpected EOF"},
		{"huge track", "points3D.bin", func() []byte {
			b := read("points3D.bin")
			copy(b[8+8+24+3+8:], u64(1<<50))
			return b
		}, "track elements declared"},
		{"empty points", "points3D.bin", func() []byte { return nil }, "unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"cameras.bin", "images.bin", "points3D.bin"} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), read(f), 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file), tc.content(), 0o644))
			_, err := export.ReadCOLMAP(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.file)
		})
	}

	text := []struct{ name, file, content, want string }{
		{"bad model", "cameras.txt", "1 NOPE 1 1 1 1 1\n", "unknown COLMAP camera model"},
		{"param count", "cameras.txt", "1 PINHOLE 1 1 1 1 1\n", "takes 4 parameters, got 3"},
		{"bad number", "images.txt", "1 1 0 0 x 0 0 0 1 a.png\n\n", "bad number"},
		{"missing points line", "images.txt", "1 1 0 0 0 0 0 0 1 a.png", "missing the POINTS2D line"},
		{"ragged points", "images.txt", "1 1 0 0 0 0 0 0 1 a.png\n1 2\n", "not a multiple of 3"},
		{"short point", "points3D.txt", "1 0 0 0 1 2\n", "point line needs"},
		{"colour range", "points3D.txt", "1 0 0 0 1 2 300 0\n", "bad integer"},
	}
	for _, tc := range text {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"cameras.txt", "images.txt", "points3D.txt"} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644))
			_, err := export.ReadCOLMAP(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.file+": line")
		})
	}
	_, err = export.ReadCOLMAP(t.TempDir())
	assert.ErrorContains(t, err, "neither cameras.bin nor cameras.txt")
}

func TestCOLMAPPoses(t *testing.T) {
	views := scene()
	pc, err := export.NewPointCloud(views, export.COLMAPOptions())
	require.NoError(t, err)
	m, err := export.NewCOLMAPModel(pc, views)
	require.NoError(t, err)
	poses, err := m.Poses([]string{"/data/img1.jpg", "img0.jpg"})
	require.NoError(t, err)
	assert.Equal(t, "img1.jpg", poses[0].Name)
	assert.Equal(t, 16, poses[0].Width)
	assert.Equal(t, views[1].Camera.IntrinsicsOriginal, poses[0].Intrinsics)
	assert.False(t, poses[0].Distorted)
	for r := range 3 {
		for k := range 4 {
			assert.InDelta(t, views[1].Camera.Extrinsics[r][k], poses[0].Extrinsics[r][k], 1e-12)
		}
	}
	_, err = m.Poses([]string{"img0.jpg"})
	assert.ErrorContains(t, err, "COLMAP model has 2 images, but 1 input images were given")
	_, err = m.Poses([]string{"img0.jpg", "nope.jpg"})
	assert.ErrorContains(t, err, "nope.jpg: no image of that name")
	_, err = m.Poses([]string{"img0.jpg", "a/img0.jpg"})
	assert.ErrorContains(t, err, "match the same COLMAP image")
	m.Images[1].CameraID = 9
	_, err = m.Poses([]string{"img0.jpg", "img1.jpg"})
	assert.ErrorContains(t, err, "camera 9 not in the model")
}
