package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
)

// plainDepth runs depth without alignment and returns the npy map (image size).
func plainDepth(t *testing.T, model, img, res string) (data []float32, w, h int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plain.npy")
	code, _, stderr := runCLI("depth", "-model", model, "-process-res", res, "-quiet", "-o", out, img)
	require.Equal(t, exitOK, code, stderr)
	data, shape, err := imgio.ReadNPY(out)
	require.NoError(t, err)
	require.Len(t, shape, 2)
	return data, shape[1], shape[0]
}

// reportedScale reads the scale of the report line.
func reportedScale(t *testing.T, stderr string) float64 {
	t.Helper()
	m := regexp.MustCompile(`aligned .* to metres: scale ([0-9.e+-]+), residual [0-9.]+% \(median relative error of inliers\), inliers [0-9.]+% of \d+ samples`).FindStringSubmatch(stderr)
	require.NotNil(t, m, "report line in %q", stderr)
	s, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return s
}

// TestDepthAlignDenseNPY: a dense metric map (3 × the prediction, at the
// image size, with holes) brings a DA3 model's relative depth to metres.
func TestDepthAlignDenseNPY(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	plain, w, h := plainDepth(t, m, img, "56")
	metric := make([]float32, len(plain))
	for i, v := range plain {
		metric[i] = 3 * v
		if i%4 == 0 {
			metric[i] = 0 // no measurement
		}
	}
	dir := t.TempDir()
	meas := filepath.Join(dir, "meas.npy")
	require.NoError(t, imgio.WriteNPY(meas, metric, h, w))
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "56", "-align-depth", meas, "-format", "npy,png16", "-o", out, img)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "view0_depth.npy")
	assert.Equal(t, 1, strings.Count(stderr, "view0.png to metres: "), stderr)
	s := reportedScale(t, stderr)
	assert.InDelta(t, 3, s, 0.06)

	got, _, err := imgio.ReadNPY(filepath.Join(out, "view0_depth.npy"))
	require.NoError(t, err)
	require.Len(t, got, len(plain))
	for _, i := range []int{0, len(plain) / 3, len(plain) - 1} {
		assert.InDelta(t, s*float64(plain[i]), got[i], 1e-4*s*float64(plain[i])+1e-6, "pixel %d: the prediction times the fitted scale", i)
	}
	png16, err := export.ReadDepthPNG16(filepath.Join(out, "view0_depth_16.png"))
	require.NoError(t, err)
	assert.Equal(t, export.UnitMetres, png16.Unit, "the 16-bit PNG is in millimetres of metres")
	assert.InDelta(t, got[len(got)/2], png16.Depth[len(got)/2], 1e-3)
}

// TestDepthAlignKITTIPNG: a plain 16-bit PNG in KITTI's steps (value = metres × 256, 0 where the LiDAR
// has none) aligns with -align-depth-scale 256 to the scale it holds; read as millimetres (the default) it
// would give 256/1000 of it. A bad scale is a usage error.
func TestDepthAlignKITTIPNG(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	plain, w, h := plainDepth(t, m, img, "56")
	g := image.NewGray16(image.Rect(0, 0, w, h))
	for i, v := range plain {
		if i%3 != 0 { // sparse, as LiDAR
			g.SetGray16(i%w, i/w, color.Gray16{Y: uint16(math.Round(float64(20*v) * 256))})
		}
	}
	meas := filepath.Join(t.TempDir(), "lidar.png")
	f, err := os.Create(meas)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, g))
	require.NoError(t, f.Close())
	for _, tc := range []struct {
		scale string
		want  float64
	}{{"256", 20}, {"1000", 20 * 256.0 / 1000}} {
		out := filepath.Join(t.TempDir(), "d.npy")
		code, _, stderr := runCLI("depth", "-model", m, "-process-res", "56", "-align-depth", meas, "-align-depth-scale", tc.scale, "-o", out, img)
		require.Equal(t, exitOK, code, stderr)
		assert.InDelta(t, tc.want, reportedScale(t, stderr), 0.02*tc.want, "-align-depth-scale %s", tc.scale)
	}
	code, _, stderr := runCLI("depth", "-model", m, "-align-depth", meas, "-align-depth-scale", "0", img)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "values per metre")
}

// TestDepthAlignPointsCSV: text points in pixels of the input image.
func TestDepthAlignPointsCSV(t *testing.T) {
	m := tinyDA3(t)
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	plain, w, h := plainDepth(t, m, img, "56")
	var b strings.Builder
	b.WriteString("x,y,depth_m\n")
	for k := range 60 {
		x, y := (k*37)%w, (k*53)%h
		fmt.Fprintf(&b, "%d,%d,%g\n", x, y, 2*plain[y*w+x])
	}
	pts := filepath.Join(t.TempDir(), "points.csv")
	require.NoError(t, os.WriteFile(pts, []byte(b.String()), 0o644))
	out := filepath.Join(t.TempDir(), "d.npy")
	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "56", "-align-depth", pts, "-o", out, img)
	require.Equal(t, exitOK, code, stderr)
	s := reportedScale(t, stderr)
	assert.InDelta(t, 2, s, 0.06)
	got, _, err := imgio.ReadNPY(out)
	require.NoError(t, err)
	assert.InDelta(t, s*float64(plain[5*w+7]), got[5*w+7], 1e-4*s*float64(plain[5*w+7]))

	// Too few points: a clear failure, nothing written.
	few := filepath.Join(t.TempDir(), "few.txt")
	require.NoError(t, os.WriteFile(few, []byte("1 1 2\n2 2 2\n3 3 2\n"), 0o644))
	out2 := filepath.Join(t.TempDir(), "d.npy")
	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "56", "-align-depth", few, "-o", out2, img)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "too few metric depth samples: 3 valid")
	assert.NoFileExists(t, out2)
}

// TestDepthAlignDisparity: DA2's disparity is fitted with scale and shift
// in inverse depth and written in metres.
func TestDepthAlignDisparity(t *testing.T) {
	m := tinyDA2(t)
	img := fixtureImage(t, "da2-tiny/image.png")
	disp, w, h := plainDepth(t, m, img, "84")
	lo := float32(math.Inf(1))
	for _, v := range disp {
		lo = min(lo, v)
	}
	const s = 0.5
	shift := 1 - s*float64(lo) // every inverse depth ≥ 1
	truth := make([]float32, len(disp))
	for i, v := range disp {
		truth[i] = float32(1 / (s*float64(v) + shift))
	}
	meas := filepath.Join(t.TempDir(), "meas.pfm")
	require.NoError(t, imgio.WritePFM(meas, truth, w, h))
	out := filepath.Join(t.TempDir(), "d.npy")
	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "84", "-align-depth", meas, "-o", out, img)
	require.Equal(t, exitOK, code, stderr)
	rep := regexp.MustCompile(`image\.png to metres: inverse depth = ([0-9.e+-]+)·disparity ([+-][0-9.e+-]+), residual`).FindStringSubmatch(stderr)
	require.NotNil(t, rep, stderr)
	fs, _ := strconv.ParseFloat(rep[1], 64)
	ft, _ := strconv.ParseFloat(rep[2], 64)
	assert.InDelta(t, s, fs, 0.01*s)
	assert.InDelta(t, shift, ft, 0.01*math.Abs(shift)+0.005)
	got, _, err := imgio.ReadNPY(out)
	require.NoError(t, err)
	// The map is fitted and converted at the processed size, then resized:
	// the image-size maps agree closely, though not exactly at edges.
	errs := make([]float64, len(got))
	for i := range got {
		errs[i] = math.Abs(float64(got[i])/float64(truth[i]) - 1)
	}
	slices.Sort(errs)
	assert.Less(t, errs[len(errs)/2], 0.01, "median relative error of the metres")
	assert.Less(t, errs[len(errs)*95/100], 0.05)
}

// TestReconstructAlignScene: two views, a directory of measurement files
// named as the images, one scale for the scene.
func TestReconstructAlignScene(t *testing.T) {
	m := tinyDA3(t)
	imgs := []string{fixtureImage(t, "da3-tiny/two/images/view0.png"), fixtureImage(t, "da3-tiny/two/images/view1.png")}
	// The scene's depth (both views, one scale) from a plain run.
	plainDir := t.TempDir()
	code, _, stderr := runCLI(append([]string{"depth", "-model", m, "-process-res", "42", "-quiet", "-format", "npy", "-o", plainDir}, imgs...)...)
	require.Equal(t, exitOK, code, stderr)
	meas := t.TempDir()
	for _, name := range []string{"view0", "view1"} {
		d, shape, err := imgio.ReadNPY(filepath.Join(plainDir, name+"_depth.npy"))
		require.NoError(t, err)
		for i := range d {
			d[i] *= 5
		}
		require.NoError(t, imgio.WriteNPY(filepath.Join(meas, name+".npy"), d, shape...))
	}
	out := t.TempDir()
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "npz", "-align-depth", meas, "-o", out}, imgs...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "da3-go: aligned the scene (2 views) to metres: "), stderr)
	assert.InDelta(t, 5, reportedScale(t, stderr), 0.1)

	// depth over the same scene: one fit too.
	code, _, stderr = runCLI(append([]string{"depth", "-model", m, "-process-res", "42", "-format", "npy", "-align-depth", meas, "-o", t.TempDir()}, imgs...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "da3-go: aligned the scene (2 views) to metres: ")

	// One file for two images is ambiguous: a usage error before the model loads.
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-align-depth", filepath.Join(meas, "view0.npy"), "-o", t.TempDir()}, imgs...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "one image's measurements, but there are 2 images")
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-align-depth", filepath.Join(meas, "view0.npy"), "-format", "gs_ply", "-o", t.TempDir()}, imgs...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "does not rescale the 3D Gaussians")

	// A comma list, in input order.
	list := filepath.Join(meas, "view0.npy") + "," + filepath.Join(meas, "view1.npy")
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "npz", "-align-depth", list, "-o", t.TempDir()}, imgs...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.InDelta(t, 5, reportedScale(t, stderr), 0.1)
}
