package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
)

// convertFixture converts a committed tiny checkpoint (tests/fixtures/NAME)
// and returns the GGUF paths convert wrote (two for the nested model).
func convertFixture(t *testing.T, name string, opts convert.Options) []string {
	t.Helper()
	src := filepath.Join("..", "..", "tests", "fixtures", name)
	if _, err := os.Stat(filepath.Join(src, "model.safetensors")); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	fam, err := convert.Inspect(src)
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, convert.Convert(context.Background(), src, dst, opts))
	return convert.OutputPaths(fam, dst)
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing written")
}

func TestDepthNestedPair(t *testing.T) {
	pair := convertFixture(t, "da3-tiny-nested", convert.Options{})
	require.Len(t, pair, 2)
	imgs := []string{fixtureImage(t, "da3-tiny-nested/three/images/view0.png"), fixtureImage(t, "da3-tiny-nested/three/images/view1.png")}
	out := t.TempDir()
	args := append([]string{"depth", "-model", pair[0], "-metric-model", pair[1], "-process-res", "42", "-format", "pfm", "-conf", "-sky", "-o", out}, imgs...)
	code, stdout, stderr := runCLI(args...)
	require.Equal(t, 0, code, stderr)
	for _, name := range []string{"view0_depth.pfm", "view0_conf.pfm", "view0_sky.pfm", "view1_depth.pfm"} {
		assert.FileExists(t, filepath.Join(out, name))
		assert.Contains(t, stdout, name)
	}
	assert.NotContains(t, stderr, "NOT metres")

	code, stdout, stderr = runCLI(append([]string{"pose", "-model", pair[0], "-metric-model", pair[1], "-process-res", "42"}, imgs...)...)
	require.Equal(t, 0, code, stderr)
	var doc PoseOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, "metres", doc.TranslationUnit)
	require.Len(t, doc.Views, 2)

	// The nested model takes no intrinsics; the halves must be the right
	// kinds; a metric half alone is not an any-view model.
	bad := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"intrinsics", []string{"-model", pair[0], "-metric-model", pair[1], "-intrinsics", "50,50,20,14"}, "nested model takes its focal length"},
		{"swapped halves", []string{"-model", pair[1], "-metric-model", pair[0]}, "any-view branch"},
		{"relative metric half", []string{"-model", pair[0], "-metric-model", pair[0]}, "metric branch"},
		{"missing metric half", []string{"-model", pair[0], "-metric-model", filepath.Join(bad, "nope.gguf")}, "-metric-model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append(append([]string{"depth", "-o", bad}, tc.args...), imgs[0])...)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, tc.want)
			assertEmptyDir(t, bad)
		})
	}
}

func TestDepthMetricUnits(t *testing.T) {
	metric := convertFixture(t, "da3-tiny-mono", convert.Options{Name: "da3-tiny-metric"})[0]
	img := fixtureImage(t, "da3-tiny-mono/one/images/view0.png")

	// Without a focal: written, with a plain statement that it is not metres.
	out := t.TempDir()
	code, _, stderr := runCLI("depth", "-model", metric, "-process-res", "70", "-format", "pfm", "-o", out, img)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "NOT metres")
	assert.Contains(t, stderr, "-intrinsics")

	// Asked for metres without a focal: a clear error, nothing written.
	out = t.TempDir()
	code, _, stderr = runCLI("depth", "-metric", "-model", metric, "-process-res", "70", "-format", "pfm", "-o", out, img)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "needs the camera's focal length")
	assert.Contains(t, stderr, "-intrinsics fx,fy,cx,cy")
	assertEmptyDir(t, out)

	// With the focal: metres, no note.
	code, _, stderr = runCLI("depth", "-metric", "-intrinsics", "50,60,22,30", "-model", metric, "-process-res", "70", "-format", "pfm", "-o", out, img)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "NOT metres")
	assert.FileExists(t, filepath.Join(out, "view0_depth.pfm"))

	// Relative models cannot give metres and do not take intrinsics.
	relative := tinyDA3(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-metric"}, "predicts relative depth, not metres"},
		{[]string{"-intrinsics", "50,60,22,30"}, "does not use them"},
	} {
		out := t.TempDir()
		code, _, stderr := runCLI(append(append([]string{"depth", "-model", relative, "-o", out}, tc.args...), img)...)
		assert.Equal(t, 1, code, stderr)
		assert.Contains(t, stderr, tc.want)
		assertEmptyDir(t, out)
	}

	// Malformed intrinsics are usage errors.
	for _, k := range []string{"50,60", "50,60,22,x", "0,60,22,30", "50,-1,22,30", "50,60,NaN,30"} {
		code, _, stderr := runCLI("depth", "-model", metric, "-intrinsics", k, img)
		assert.Equal(t, 2, code, "%s: %s", k, stderr)
		assert.Contains(t, stderr, "-intrinsics")
	}
}
