package main

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
)

// writePhoto writes a w×h PNG with a colour pattern shifted by seed.
func writePhoto(t *testing.T, path string, w, h, seed int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(4*x + 9*seed), uint8(5*y + 3*seed), uint8(100 + 20*seed), 255})
		}
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	if strings.HasSuffix(path, ".jpg") {
		require.NoError(t, jpeg.Encode(f, img, nil))
		return
	}
	require.NoError(t, png.Encode(f, img))
}

func TestReconstructWritesEveryFormat(t *testing.T) {
	m := tinyDA3(t)
	in := t.TempDir()
	a, b := filepath.Join(in, "a.png"), filepath.Join(in, "b.png")
	writePhoto(t, a, 64, 48, 0)
	writePhoto(t, b, 64, 48, 1)
	out := filepath.Join(t.TempDir(), "scene")
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "glb,ply,colmap,npz,mini_npz,depth_vis", "-o", out, a, b)
	require.Equal(t, 0, code, stderr)
	files := []string{"scene.glb", "scene.ply", "cameras.bin", "images.bin", "points3D.bin", "exports/npz/results.npz",
		"exports/mini_npz/results.npz", "depth_vis/0000.jpg", "depth_vis/0001.jpg"}
	for _, f := range files {
		assert.FileExists(t, filepath.Join(out, f))
		assert.Contains(t, stdout, filepath.Join(out, f))
	}

	// COLMAP: cameras at the original size, poses equal to the pose command's.
	sparse, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.Len(t, sparse.Cameras, 2)
	assert.Equal(t, uint64(64), sparse.Cameras[0].Width)
	assert.Equal(t, uint64(48), sparse.Cameras[0].Height)
	require.Len(t, sparse.Images, 2)
	assert.Equal(t, "a.png", sparse.Images[0].Name)
	assert.NotEmpty(t, sparse.Points)
	code, poseJSON, stderr := runCLI("pose", "-model", m, "-process-res", "56", a, b)
	require.Equal(t, 0, code, stderr)
	var doc PoseOutput
	require.NoError(t, json.Unmarshal([]byte(poseJSON), &doc))
	for i, v := range doc.Views {
		e := sparse.Images[i].Extrinsics()
		for r := range 3 {
			for k := range 4 {
				assert.InDelta(t, v.Extrinsics[r][k], e[r][k], 1e-6, "view %d extrinsics[%d][%d]", i, r, k)
			}
		}
		k, _, err := sparse.Cameras[i].Intrinsics()
		require.NoError(t, err)
		for r := range 3 {
			for c := range 3 {
				assert.InDelta(t, v.IntrinsicsOrig[r][c], k[r][c], 1e-9)
			}
		}
	}

	// NPZ: the official keys, maps at the processed size (56×42).
	z, err := zip.OpenReader(filepath.Join(out, "exports/npz/results.npz"))
	require.NoError(t, err)
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	z.Close()
	assert.Equal(t, []string{"image.npy", "depth.npy", "conf.npy", "extrinsics.npy", "intrinsics.npy"}, names)

	// GLB and PLY start with their magic.
	glb, err := os.ReadFile(filepath.Join(out, "scene.glb"))
	require.NoError(t, err)
	assert.Equal(t, "glTF", string(glb[:4]))
	ply, err := os.ReadFile(filepath.Join(out, "scene.ply"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(ply), "ply\nformat binary_little_endian 1.0\n"))
	cfg, err := jpeg.DecodeConfig(mustOpen(t, filepath.Join(out, "depth_vis/0000.jpg")))
	require.NoError(t, err)
	assert.Equal(t, [2]int{112, 42}, [2]int{cfg.Width, cfg.Height}, "image | depth at the processed size")
	assertNoTempFiles(t, out)

	// Text COLMAP, independent scenes.
	out2 := t.TempDir()
	code, _, stderr = runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "colmap,ply", "-colmap-txt", "-independent", "-quiet", "-o", out2, a, b)
	require.Equal(t, 0, code, stderr)
	for _, d := range []string{"a", "b"} {
		assert.FileExists(t, filepath.Join(out2, d, "points3D.txt"))
		assert.FileExists(t, filepath.Join(out2, d, "scene.ply"))
		s, err := export.ReadCOLMAP(filepath.Join(out2, d))
		require.NoError(t, err)
		assert.Len(t, s.Images, 1)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		assert.NotContains(t, d.Name(), "tmp", "temporary file %s left", p)
		assert.NotContains(t, d.Name(), "probe", "probe file %s left", p)
		return nil
	})
}

func TestReconstructBadInput(t *testing.T) {
	m := tinyDA3(t)
	in := t.TempDir()
	a := filepath.Join(in, "a.png")
	writePhoto(t, a, 64, 48, 0)

	code, _, stderr := runCLI("reconstruct", "-model", m, "-format", "obj", a)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown -format "obj"`)
	code, _, stderr = runCLI("reconstruct", "-model", m, "-conf-percentile", "120", a)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "out of range")
	code, _, stderr = runCLI("reconstruct", "-model", m)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no input images")

	// An output directory that cannot be created fails before the model runs, and writes nothing.
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-o", filepath.Join(blocker, "out"), a)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "output directory")
	assert.Empty(t, stdout)

	// Models without a camera cannot place points in 3D; NPZ still works.
	da2 := tinyDA2(t)
	out := t.TempDir()
	code, _, stderr = runCLI("reconstruct", "-model", da2, "-process-res", "84", "-format", "glb", "-o", out, a)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "model has no camera head")
	assertEmptyDir(t, out)
	code, _, stderr = runCLI("reconstruct", "-model", da2, "-process-res", "84", "-format", "mini_npz,depth_vis", "-quiet", "-o", out, a)
	require.Equal(t, exitOK, code, stderr)
	assert.FileExists(t, filepath.Join(out, "exports/mini_npz/results.npz"))
}

func TestImageNames(t *testing.T) {
	assert.Equal(t, []string{"a.jpg", "b.jpg", "a_2.jpg", "a_3.jpg"}, imageNames([]string{"x/a.jpg", "b.jpg", "y/a.jpg", "a.jpg"}))
}

func TestInputsDirectoryAndList(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b.png", "a.JPG", "sub/c.png", "sub/deeper/d.webp", ".hidden/e.png", ".f.png", "notes.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644))
	}
	f := inputFlags{exts: "jpg,jpeg,png,webp"}
	in, err := f.expand(t.Context(), []string{dir})
	require.NoError(t, err)
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, err := filepath.Rel(dir, p)
			require.NoError(t, err)
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	assert.Equal(t, []string{"a.JPG", "b.png", "sub/c.png", "sub/deeper/d.webp"}, rel(in.paths), "recursive, by extension, sorted, hidden skipped")
	assert.Equal(t, in.paths, in.names)

	f.exts = "png"
	in, err = f.expand(t.Context(), []string{dir, filepath.Join(dir, "notes.txt")})
	require.NoError(t, err)
	assert.Equal(t, []string{"b.png", "sub/c.png", "notes.txt"}, rel(in.paths), "files are taken as given")

	list := filepath.Join(dir, "sub", "list.txt")
	require.NoError(t, os.WriteFile(list, []byte("# views\nc.png\n\n  "+filepath.Join(dir, "b.png")+"  \n"), 0o644))
	f = inputFlags{list: list, exts: "png"}
	in, err = f.expand(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"sub/c.png", "b.png"}, rel(in.paths), "relative to the list file")

	require.NoError(t, os.WriteFile(list, []byte("c.png\nmissing.png\n"), 0o644))
	_, err = f.expand(t.Context(), nil)
	assert.ErrorContains(t, err, "line 2")
	assert.ErrorContains(t, err, "missing.png is not an image file")
	require.NoError(t, os.WriteFile(list, []byte("# nothing\n"), 0o644))
	_, err = f.expand(t.Context(), nil)
	assert.ErrorContains(t, err, "lists no images")

	empty := t.TempDir()
	_, err = (&inputFlags{exts: "png"}).expand(t.Context(), []string{empty})
	assert.ErrorContains(t, err, "has no images")
	_, err = (&inputFlags{exts: "png"}).expand(t.Context(), []string{filepath.Join(empty, "nope.png")})
	assert.ErrorContains(t, err, "no such file")
	_, err = (&inputFlags{exts: "png"}).expand(t.Context(), nil)
	assert.ErrorContains(t, err, "no input images")

	// Through the CLI: a directory of views.
	m := tinyDA3(t)
	photos := t.TempDir()
	writePhoto(t, filepath.Join(photos, "1.png"), 64, 48, 0)
	writePhoto(t, filepath.Join(photos, "x", "2.jpg"), 64, 48, 1)
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "56", "-o", t.TempDir(), photos)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "1_depth.png")
	assert.Contains(t, stdout, "2_depth.png")
	assert.Contains(t, stderr, "running 2 images as views of one scene")
}

// makeVideo encodes n frames into an MJPEG AVI at 10 fps with ffmpeg.
func makeVideo(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		writePhoto(t, filepath.Join(dir, "f"+string(rune('a'+i))+".png"), 64, 48, i)
	}
	video := filepath.Join(t.TempDir(), "clip.avi")
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-framerate", "10", "-pattern_type", "glob", "-i", filepath.Join(dir, "f*.png"),
		"-c:v", "mjpeg", "-q:v", "3", video)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return video
}

func TestVideoInput(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed (apt-get install ffmpeg): video input not tested")
	}
	video := makeVideo(t, 6)
	f := inputFlags{video: video, fps: 5, exts: "png"} // 10 fps video, every 2nd frame
	in, err := f.expand(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, in.paths, 3)
	frameDir := filepath.Dir(in.paths[0])
	assert.Equal(t, filepath.Join(filepath.Dir(video), "clip_000000.png"), in.names[0])
	assert.Equal(t, filepath.Join(filepath.Dir(video), "clip_000002.png"), in.names[2])
	img, err := os.Open(in.paths[1])
	require.NoError(t, err)
	cfg, err := png.DecodeConfig(img)
	img.Close()
	require.NoError(t, err)
	assert.Equal(t, 64, cfg.Width)
	in.cleanup()
	assert.NoDirExists(t, frameDir, "frames removed")

	f.fps = 100 // more than the video has: every frame
	in, err = f.expand(t.Context(), nil)
	require.NoError(t, err)
	assert.Len(t, in.paths, 6)
	in.cleanup()

	// A file ffmpeg cannot read.
	bad := filepath.Join(t.TempDir(), "bad.mp4")
	require.NoError(t, os.WriteFile(bad, []byte("not a video at all"), 0o644))
	_, err = (&inputFlags{video: bad, fps: 1}).expand(t.Context(), nil)
	assert.ErrorContains(t, err, "bad.mp4: ffprobe cannot read it")
	_, err = (&inputFlags{video: video, fps: 0}).expand(t.Context(), nil)
	assert.ErrorContains(t, err, "-fps 0 must be a positive number")

	// End to end: frames as views of one scene.
	m := tinyDA3(t)
	out := t.TempDir()
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-process-res", "56", "-video", video, "-fps", "5", "-format", "colmap", "-o", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "images.bin")
	s, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.Len(t, s.Images, 3)
	assert.Equal(t, "clip_000000.png", s.Images[0].Name)
}

func TestVideoWithoutFFmpeg(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	video := filepath.Join(t.TempDir(), "clip.mp4")
	require.NoError(t, os.WriteFile(video, []byte("x"), 0o644))
	_, err := (&inputFlags{video: video, fps: 1}).expand(t.Context(), nil)
	require.ErrorIs(t, err, errNoFFmpeg)
	assert.Contains(t, err.Error(), "install the ffmpeg package")
	code, _, stderr := runCLI("depth", "-model", "unused.gguf", "-video", video)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "apt-get install ffmpeg")
}

// TestReconstructMetric: the nested pair gives a scene in metres with sky; the DA3 metric model with
// -intrinsics gives a point cloud in metres at the world origin.
func TestReconstructMetric(t *testing.T) {
	pair := convertFixture(t, "da3-tiny-nested", convert.Options{})
	imgs := []string{fixtureImage(t, "da3-tiny-nested/three/images/view0.png"), fixtureImage(t, "da3-tiny-nested/three/images/view1.png")}
	out := t.TempDir()
	code, _, stderr := runCLI(append([]string{"reconstruct", "-model", pair[0], "-metric-model", pair[1], "-process-res", "42",
		"-format", "glb,ply,colmap,npz", "-quiet", "-o", out}, imgs...)...)
	require.Equal(t, exitOK, code, stderr)
	s, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	assert.Len(t, s.Images, 2)
	assert.FileExists(t, filepath.Join(out, "scene.glb"))

	metric := convertFixture(t, "da3-tiny-mono", convert.Options{Name: "da3-tiny-metric"})[0]
	img := fixtureImage(t, "da3-tiny-mono/one/images/view0.png")
	out = t.TempDir()
	code, _, stderr = runCLI("reconstruct", "-model", metric, "-process-res", "70", "-format", "ply", "-o", out, img)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "or -intrinsics fx,fy,cx,cy")
	assertEmptyDir(t, out)
	npzOut := t.TempDir()
	code, _, stderr = runCLI("reconstruct", "-model", metric, "-process-res", "70", "-format", "mini_npz", "-o", npzOut, img)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "NOT metres", "without a focal the output is said not to be metres")
	code, _, stderr = runCLI("reconstruct", "-model", metric, "-process-res", "70", "-intrinsics", "50,60,22,30",
		"-format", "ply,colmap", "-keep-sky", "-quiet", "-o", out, img)
	require.Equal(t, exitOK, code, stderr)
	// The same run's depth in metres at the processed size: the cloud's z is that depth (camera at the origin).
	dout := t.TempDir()
	code, _, stderr = runCLI("depth", "-model", metric, "-process-res", "70", "-intrinsics", "50,60,22,30", "-processed-size",
		"-format", "npy", "-quiet", "-o", dout, img)
	require.Equal(t, exitOK, code, stderr)
	depth := readNPYFloats(t, filepath.Join(dout, "view0_depth.npy"))
	s, err = export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.NotEmpty(t, s.Points)
	k, _, err := s.Cameras[0].Intrinsics()
	require.NoError(t, err)
	assert.Equal(t, [3][3]float64{{50, 0, 22}, {0, 60, 30}, {0, 0, 1}}, k, "COLMAP camera: the given intrinsics")
	n := 0
	for _, d := range depth {
		if d > 0 {
			n++
		}
	}
	assert.Equal(t, n, len(s.Points), "no confidence, sky kept: every pixel with a positive depth")
	minZ, maxZ := s.Points[0].XYZ[2], s.Points[0].XYZ[2]
	for _, p := range s.Points {
		minZ, maxZ = min(minZ, p.XYZ[2]), max(maxZ, p.XYZ[2])
	}
	dmin, dmax := depth[0], depth[0]
	for _, d := range depth {
		dmin, dmax = min(dmin, d), max(dmax, d)
	}
	assert.InDelta(t, float64(dmin), minZ, 1e-5*float64(dmax))
	assert.InDelta(t, float64(dmax), maxZ, 1e-5*float64(dmax))
}

func readNPYFloats(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	hl := int(binary.LittleEndian.Uint16(b[8:10]))
	data := b[10+hl:]
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// TestReconstructCOLMAPTracks: -format colmap_tracks writes the three files of a model whose points are
// each observed by two or more images and whose 2D points all belong to a track; with -format colmap
// too it is a usage error.
func TestReconstructCOLMAPTracks(t *testing.T) {
	m := tinyDA3(t)
	in := t.TempDir()
	a, b := filepath.Join(in, "a.png"), filepath.Join(in, "b.png")
	writePhoto(t, a, 64, 48, 0)
	writePhoto(t, b, 64, 48, 0) // the same photo twice: the views agree
	out := filepath.Join(t.TempDir(), "scene")
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "colmap_tracks", "-o", out, a, b)
	require.Equal(t, 0, code, stderr)
	for _, f := range []string{"cameras.bin", "images.bin", "points3D.bin"} {
		assert.Contains(t, stdout, filepath.Join(out, f))
	}
	s, err := export.ReadCOLMAP(out)
	require.NoError(t, err)
	require.Len(t, s.Images, 2)
	require.NotEmpty(t, s.Points, "two views of the same photo share points")
	n2d := 0
	for _, im := range s.Images {
		n2d += len(im.Points2D)
	}
	nobs := 0
	for _, p := range s.Points {
		assert.GreaterOrEqual(t, len(p.Track), 2)
		nobs += len(p.Track)
	}
	assert.Equal(t, n2d, nobs, "every 2D point is an observation of a track")

	code, _, stderr = runCLI("reconstruct", "-model", m, "-format", "colmap,colmap_tracks", "-o", t.TempDir(), a, b)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "pick one")
}
