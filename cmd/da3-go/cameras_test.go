package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

func poseDoc(t *testing.T, out string) PoseOutput {
	t.Helper()
	var doc PoseOutput
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	return doc
}

// -ray-pose: the ray head's cameras, as the library computes them; a file
// without the ray head is refused, naming the fix, before anything is
// written.
func TestRayPoseCLI(t *testing.T) {
	aux := convertFixture(t, "da3-tiny-pose", convert.Options{WithAux: true})[0]
	plain := convertFixture(t, "da3-tiny-pose", convert.Options{})[0]
	imgs := []string{fixtureImage(t, "da3-tiny/two/images/view0.png"), fixtureImage(t, "da3-tiny/two/images/view1.png")}
	code, stdout, stderr := runCLI(append([]string{"pose", "-model", aux, "-process-res", "42", "-ray-pose", "-ray-seed", "3"}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	doc := poseDoc(t, stdout)

	m, err := model.Load(context.Background(), aux, model.Options{Options: backend.Options{Device: "cpu"}})
	require.NoError(t, err)
	defer m.Close()
	var ims []model.Image
	for _, p := range imgs {
		im, err := imgio.Decode(p)
		require.NoError(t, err)
		ims = append(ims, im)
	}
	res, err := m.MultiView(context.Background(), ims, model.RunOptions{ProcessRes: 42, RayPose: true, RaySeed: 3})
	require.NoError(t, err)
	plainRes, err := m.MultiView(context.Background(), ims, model.RunOptions{ProcessRes: 42})
	require.NoError(t, err)
	for i, v := range doc.Views {
		assert.Equal(t, res[i].Camera.Extrinsics, v.Extrinsics)
		assert.Equal(t, res[i].Camera.Intrinsics, v.Intrinsics)
		assert.NotEqual(t, plainRes[i].Camera.Intrinsics, v.Intrinsics, "the ray head's cameras, not the decoder's")
	}

	out := filepath.Join(t.TempDir(), "p.json")
	code, _, stderr = runCLI(append([]string{"pose", "-model", plain, "-process-res", "42", "-ray-pose", "-o", out}, imgs...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "-with-aux")
	assert.NoFileExists(t, out)
}

// -cameras: the pose JSON of `da3-go pose` and a COLMAP model give the same
// conditioned run; the results are in the given frame; files that do not fit
// the images are refused before anything is written.
func TestCamerasCLI(t *testing.T) {
	m := convertFixture(t, "da3-tiny-pose", convert.Options{})[0]
	dir := t.TempDir()
	var imgs []string
	for i, p := range []string{"da3-tiny/four/images/view0.png", "da3-tiny/four/images/view1.png", "da3-tiny/four/images/view2.png"} {
		b, err := os.ReadFile(fixtureImage(t, p))
		require.NoError(t, err)
		dst := filepath.Join(dir, []string{"a.png", "b.png", "c.png"}[i])
		require.NoError(t, os.WriteFile(dst, b, 0o644))
		imgs = append(imgs, dst)
	}
	// Cameras from a first run, in a made-up frame: translations ×3.
	code, stdout, stderr := runCLI(append([]string{"pose", "-model", m, "-process-res", "42"}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	doc := poseDoc(t, stdout)
	for i := range doc.Views {
		for r := range 3 {
			doc.Views[i].Extrinsics[r][3] *= 3
		}
	}
	camFile := filepath.Join(dir, "cams.json")
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(camFile, b, 0o644))

	code, stdout, stderr = runCLI(append([]string{"pose", "-model", m, "-process-res", "42", "-cameras", camFile}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	got := poseDoc(t, stdout)
	for i := range got.Views {
		assert.Equal(t, doc.Views[i].Extrinsics, got.Views[i].Extrinsics, "the given cameras")
		assert.InDeltaSlice(t, doc.Views[i].IntrinsicsOrig[0][:], got.Views[i].IntrinsicsOrig[0][:], 1e-9)
	}
	outJSON := t.TempDir()
	code, _, stderr = runCLI(append([]string{"depth", "-model", m, "-process-res", "42", "-format", "npy", "-cameras", camFile, "-o", outJSON}, imgs...)...)
	require.Equal(t, 0, code, stderr)

	// The same cameras as a COLMAP model (reconstruct writes one).
	sparse := t.TempDir()
	code, _, stderr = runCLI(append([]string{"reconstruct", "-model", m, "-process-res", "42", "-format", "colmap", "-cameras", camFile, "-o", sparse}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	outCOLMAP := t.TempDir()
	code, _, stderr = runCLI(append([]string{"depth", "-model", m, "-process-res", "42", "-format", "npy", "-cameras", sparse, "-o", outCOLMAP}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	for _, n := range []string{"a_depth.npy", "b_depth.npy", "c_depth.npy"} {
		a := readNPYFloats(t, filepath.Join(outJSON, n))
		c := readNPYFloats(t, filepath.Join(outCOLMAP, n))
		assert.InDeltaSlice(t, f64(a), f64(c), 1e-3*maxAbs(a), n)
	}

	// Bad files: view count, image size, not a cameras file.
	bad := func(mutate func(d *PoseOutput)) string {
		d := poseDoc(t, string(b))
		mutate(&d)
		bb, err := json.Marshal(d)
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), "bad.json")
		require.NoError(t, os.WriteFile(p, bb, 0o644))
		return p
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"count", bad(func(d *PoseOutput) { d.Views = d.Views[:2] }), "2 views for 3 input images"},
		{"size", bad(func(d *PoseOutput) { d.Views[1].Width++ }), "is for a"},
		{"name", bad(func(d *PoseOutput) { d.Views[2].Image = "zzz.png" }), "no view for input"},
		{"garbage", camFile + ".missing", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			code, _, stderr := runCLI(append([]string{"depth", "-model", m, "-process-res", "42", "-cameras", tc.file, "-o", out}, imgs...)...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.want)
			assertEmptyDir(t, out)
		})
	}
	// A file without the camera encoder (the C++ engine's, or converted before it was kept).
	mono := convertFixture(t, "da3-tiny-mono", convert.Options{})[0]
	out := t.TempDir()
	code, _, stderr = runCLI("depth", "-model", mono, "-process-res", "42", "-cameras", camFile, "-o", out, imgs[0], imgs[1], imgs[2])
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "camera encoder")
	assertEmptyDir(t, out)
}

func f64(v []float32) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		out = append(out, float64(x))
	}
	return out
}

func maxAbs(v []float32) float64 {
	var m float64
	for _, x := range v {
		m = max(m, float64(max(x, -x)))
	}
	return m
}

// gs_ply from reconstruct and depth -gaussians on a DA3-GIANT-like model;
// other models are refused before anything is written.
func TestGaussiansCLI(t *testing.T) {
	m := convertFixture(t, "da3-tiny-gs", convert.Options{})[0]
	img := fixtureImage(t, "da3-tiny-gs/one/images/view0.png")
	out := t.TempDir()
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-process-res", "56", "-format", "gs_ply", "-o", out, img)
	require.Equal(t, 0, code, stderr)
	path := filepath.Join(out, "gs_ply", "0000.ply")
	assert.Contains(t, stdout, path)
	ply, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join("..", "..", "tests", "fixtures", "da3-tiny-gs", "one", "gs.ply"))
	require.NoError(t, err)
	header := func(b []byte) string { return string(b[:strings.Index(string(b), "end_header\n")]) }
	assert.Equal(t, header(want), header(ply), "the package's gs_ply header (same Gaussians kept)")
	assert.Equal(t, len(want), len(ply))

	file := filepath.Join(t.TempDir(), "g.ply")
	code, _, stderr = runCLI("depth", "-model", m, "-process-res", "56", "-gaussians", file, "-o", t.TempDir(), img)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, ply, b)

	plain := tinyDA3(t)
	out = t.TempDir()
	code, _, stderr = runCLI("reconstruct", "-model", plain, "-process-res", "56", "-format", "gs_ply", "-o", out, img)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "GIANT")
	assert.NoDirExists(t, filepath.Join(out, "gs_ply"))
}
