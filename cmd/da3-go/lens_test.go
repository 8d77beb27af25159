package main

import (
	"encoding/binary"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/testutil"
)

// fisheyeParams is the fisheye camera of the CLI tests' 64×48 images, COLMAP's order.
const fisheyeParams = "30,30,32.2,23.7,0.05,-0.01,0.002,-0.0003"

// writeFisheyePhoto renders a textured plane through the test fisheye camera into a 64×48 PNG.
func writeFisheyePhoto(t *testing.T, path string, seed float64) {
	t.Helper()
	img, err := testutil.FisheyeImage(seed)
	require.NoError(t, err)
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, png.Encode(f, img))
}

// npyShape reads an .npy file's shape line.
func npyShape(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	hl := int(binary.LittleEndian.Uint16(b[8:10]))
	return string(b[10 : 10+hl])
}

// -camera-model fisheye: the outputs are at the input size, in the fisheye frame (NaN beyond the
// undistorted view), and the COLMAP export carries the OPENCV_FISHEYE camera; -keep-undistorted keeps
// the pinhole view; a COLMAP model with the fisheye cameras (-cameras) undistorts instead of warning.
func TestCameraModelCLI(t *testing.T) {
	m := convertFixture(t, "da3-tiny-pose", convert.Options{})[0]
	in := t.TempDir()
	a, b := filepath.Join(in, "a.png"), filepath.Join(in, "b.png")
	writeFisheyePhoto(t, a, 0)
	writeFisheyePhoto(t, b, 0.4)
	fe := []string{"-camera-model", "fisheye", "-camera-params", fisheyeParams}

	// depth: maps of the input size, NaN on the rim the pinhole view leaves out.
	out := t.TempDir()
	code, _, stderr := runCLI(append(append([]string{"depth", "-model", m, "-process-res", "42", "-format", "npy,png", "-o", out}, fe...), a)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "undistorted from the OPENCV_FISHEYE camera to a 64x48 PINHOLE view")
	assert.Contains(t, stderr, "mapped back to the original pixels")
	assert.Contains(t, npyShape(t, filepath.Join(out, "a_depth.npy")), "(48, 64)")
	d := readNPYFloats(t, filepath.Join(out, "a_depth.npy"))
	require.Len(t, d, 64*48)
	nan := 0
	for _, v := range d {
		if math.IsNaN(float64(v)) {
			nan++
		} else {
			assert.Greater(t, v, float32(0))
		}
	}
	assert.Greater(t, nan, 0, "the fisheye rim")
	assert.Less(t, nan, 64*48/2)
	assert.False(t, math.IsNaN(float64(d[24*64+32])), "the centre maps back")

	// -keep-undistorted: the pinhole view, filled.
	keep := t.TempDir()
	code, _, stderr = runCLI(append(append([]string{"depth", "-model", m, "-process-res", "42", "-format", "npy", "-keep-undistorted", "-o", keep}, fe...), a)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "stay in the pinhole view (-keep-undistorted)")
	for _, v := range readNPYFloats(t, filepath.Join(keep, "a_depth.npy")) {
		require.False(t, math.IsNaN(float64(v)))
	}

	// reconstruct: COLMAP carries the fisheye camera at the input size; the points come from the
	// mapped-back views.
	scene := t.TempDir()
	code, _, stderr = runCLI(append(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "colmap,ply,depth_vis", "-o", scene}, fe...), a, b)...)
	require.Equal(t, 0, code, stderr)
	sparse, err := export.ReadCOLMAP(scene)
	require.NoError(t, err)
	require.Len(t, sparse.Cameras, 2)
	for _, c := range sparse.Cameras {
		assert.Equal(t, export.OpenCVFisheye, c.Model)
		assert.Equal(t, []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003}, c.Params)
		assert.Equal(t, uint64(64), c.Width)
		assert.Equal(t, uint64(48), c.Height)
	}
	assert.NotEmpty(t, sparse.Points)
	assert.FileExists(t, filepath.Join(scene, "scene.ply"))

	// -keep-undistorted: PINHOLE cameras.
	scene2 := t.TempDir()
	code, _, stderr = runCLI(append(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "colmap", "-keep-undistorted", "-o", scene2}, fe...), a, b)...)
	require.Equal(t, 0, code, stderr)
	sparse2, err := export.ReadCOLMAP(scene2)
	require.NoError(t, err)
	assert.Equal(t, export.Pinhole, sparse2.Cameras[0].Model)

	// -cameras with the fisheye COLMAP model: undistorted, no warning, maps at the input size.
	out3 := t.TempDir()
	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "42", "-format", "npy", "-cameras", scene, "-o", out3, a, b)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "warning")
	assert.Contains(t, stderr, "undistorted from the OPENCV_FISHEYE camera")
	assert.Contains(t, npyShape(t, filepath.Join(out3, "b_depth.npy")), "(48, 64)")
	// pose does not undistort: it warns as before.
	code, _, stderr = runCLI("pose", "-model", m, "-process-res", "42", "-cameras", scene, a, b)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "lens distortion, which this command ignores")
}

// Bad camera-model flags are usage errors, before anything runs.
func TestCameraModelFlags(t *testing.T) {
	img := filepath.Join(t.TempDir(), "a.png")
	writeFisheyePhoto(t, img, 0)
	points := filepath.Join(t.TempDir(), "a.csv")
	require.NoError(t, os.WriteFile(points, []byte("10 10 1.5\n20 20 1.6\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-camera-model", "fisheye"}, "needs -camera-params"},
		{[]string{"-camera-params", "1,2,3"}, "needs -camera-model"},
		{[]string{"-camera-model", "opencv", "-camera-params", "1,2,3"}, "takes 8 parameters"},
		{[]string{"-camera-model", "fov", "-camera-params", "1,2,3,4,5"}, "unsupported camera model"},
		{[]string{"-camera-model", "opencv", "-camera-params", "1,2,x,4,0,0,0,0"}, "not a number"},
		{[]string{"-camera-model", "fisheye", "-camera-params", fisheyeParams, "-intrinsics", "1,1,1,1"}, "drop -intrinsics"},
		{[]string{"-camera-model", "fisheye", "-camera-params", fisheyeParams, "-undistort-balance", "2"}, "-undistort-balance"},
		{[]string{"-camera-model", "fisheye", "-camera-params", fisheyeParams, "-align-depth", points}, "add -keep-undistorted"},
	} {
		for _, cmd := range []string{"depth", "reconstruct"} {
			code, _, stderr := runCLI(append(append([]string{cmd, "-model", "x.gguf", "-o", t.TempDir()}, tc.args...), img)...)
			assert.Equal(t, 2, code, "%s %v: %s", cmd, tc.args, stderr)
			assert.Contains(t, stderr, tc.want, "%s %v", cmd, tc.args)
		}
	}
}
