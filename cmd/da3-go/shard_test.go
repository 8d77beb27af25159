package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardsPartitionInputs: for every n, the n shards of 1000 names hold
// each name exactly once, and no shard is empty.
func TestShardsPartitionInputs(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = filepath.Join("images", fmt.Sprintf("cam%d", i%3), fmt.Sprintf("frame%04d.jpg", i))
	}
	for n := 1; n <= 7; n++ {
		seen := make([]int, len(names))
		for i := 0; i < n; i++ {
			keep := selectShard(names, shard{i, n})
			assert.NotEmpty(t, keep, "shard %d/%d", i, n)
			for _, k := range keep {
				seen[k]++
			}
		}
		for k, c := range seen {
			require.Equal(t, 1, c, "n=%d: %s in %d shards", n, names[k], c)
		}
	}
	assert.Len(t, selectShard(names, shard{}), len(names), "no -shard keeps every input")
}

// TestShardKeysIgnoreMountPoint: the same images under different roots, as
// absolute or relative paths, fall in the same shards.
func TestShardKeysIgnoreMountPoint(t *testing.T) {
	rel := []string{"a/x.png", "a/y.png", "b/z.png"}
	var at1, at2 []string
	for _, r := range rel {
		at1 = append(at1, filepath.Join("/mnt/data/images", r))
		at2 = append(at2, filepath.Join("/scratch/u/images", r))
	}
	assert.Equal(t, rel, shardKeys(at1))
	assert.Equal(t, shardKeys(at1), shardKeys(at2))
	for i := 0; i < 3; i++ {
		assert.Equal(t, selectShard(at1, shard{i, 3}), selectShard(at2, shard{i, 3}))
	}
}

func TestParseShard(t *testing.T) {
	for _, ok := range []struct {
		s    string
		want shard
	}{{"", shard{}}, {"0/1", shard{0, 1}}, {"3/4", shard{3, 4}}, {" 2 / 5 ", shard{2, 5}}} {
		got, err := parseShard(ok.s)
		require.NoError(t, err, ok.s)
		assert.Equal(t, ok.want, got, ok.s)
	}
	for _, bad := range []string{"1", "4/4", "-1/4", "0/0", "1/-2", "a/b", "1/2/3", "/2"} {
		_, err := parseShard(bad)
		assert.Error(t, err, bad)
	}
}

func TestShardUsageErrors(t *testing.T) {
	img := fixtureImage(t, "da3-tiny/one/images/view0.png")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-independent", "-shard", "2/2"}, "0 ≤ i < n"},
		{[]string{"-independent", "-shard", "1"}, "-shard"},
		{[]string{"-shard", "0/2"}, "-independent"},
		{[]string{"-independent", "-shard", "0/2", "-cameras", "c.json"}, "-cameras"},
	} {
		args := append([]string{"depth", "-model", "m.gguf", "-o", t.TempDir()}, tc.args...)
		code, _, stderr := runCLI(append(args, img)...)
		assert.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.msg, tc.args)
	}
}

// wroteLines are the paths of a run's "wrote PATH" lines.
func wroteLines(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if p, ok := strings.CutPrefix(l, "wrote "); ok {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// TestDepthShards: shards 0/2 and 1/2 of four images write the four maps
// between them, each once, into one -o directory whose list then names all
// four.
func TestDepthShards(t *testing.T) {
	m := tinyDA3(t)
	dir := filepath.Dir(fixtureImage(t, "da3-tiny/four/images/view0.png"))
	out := t.TempDir()
	var all []string
	for i := 0; i < 2; i++ {
		code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "28", "-independent", "-shard", fmt.Sprintf("%d/2", i), "-o", out, dir)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stderr, fmt.Sprintf("shard %d/2: 2 of 4 images", i))
		wrote := wroteLines(stdout)
		assert.Len(t, wrote, 2, "shard %d/2: %s", i, stdout)
		all = append(all, wrote...)
	}
	assert.ElementsMatch(t, []string{"view0_depth.png", "view1_depth.png", "view2_depth.png", "view3_depth.png"}, all)
	assert.Equal(t, manifest("view0_depth.png", "view1_depth.png", "view2_depth.png", "view3_depth.png"), readFile(t, filepath.Join(out, manifestName)))
}

// TestDepthSkipExisting: after a full run, -skip-existing skips every image
// without loading the model (whose file is gone); once an output is
// removed, or emptied, only its image runs, and the other images' maps stay
// written and listed.
func TestDepthSkipExisting(t *testing.T) {
	m := tinyDA3(t)
	dir := filepath.Dir(fixtureImage(t, "da3-tiny/four/images/view0.png"))
	out := t.TempDir()
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "28", "-independent", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	require.Len(t, wroteLines(stdout), 4)
	want := manifest("view0_depth.png", "view1_depth.png", "view2_depth.png", "view3_depth.png")
	require.Equal(t, want, readFile(t, filepath.Join(out, manifestName)))

	gone := filepath.Join(t.TempDir(), "gone.gguf")
	code, stdout, stderr = runCLI("depth", "-model", gone, "-process-res", "28", "-independent", "-skip-existing", "-o", out, dir)
	require.Equal(t, 0, code, "no image left: the model is never loaded: %s", stderr)
	assert.Empty(t, wroteLines(stdout))
	assert.Contains(t, stderr, "skipped 4 of 4 images: their outputs exist")
	assert.Equal(t, want, readFile(t, filepath.Join(out, manifestName)))

	require.NoError(t, os.Remove(filepath.Join(out, "view2_depth.png")))
	code, _, stderr = runCLI("depth", "-model", gone, "-independent", "-skip-existing", "-o", out, dir)
	assert.Equal(t, 1, code, "an image left to run needs the model")
	assert.Contains(t, stderr, "gone.gguf")

	code, stdout, stderr = runCLI("depth", "-model", m, "-process-res", "28", "-independent", "-skip-existing", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"view2_depth.png"}, wroteLines(stdout))
	assert.Contains(t, stderr, "skipped 3 of 4 images")
	assert.Equal(t, want, readFile(t, filepath.Join(out, manifestName)), "the skipped images' maps stay listed")
	for i := 0; i < 4; i++ {
		assert.FileExists(t, filepath.Join(out, fmt.Sprintf("view%d_depth.png", i)))
	}

	require.NoError(t, os.Truncate(filepath.Join(out, "view1_depth.png"), 0))
	code, stdout, stderr = runCLI("depth", "-model", m, "-process-res", "28", "-independent", "-skip-existing", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"view1_depth.png"}, wroteLines(stdout), "an empty output is not finished")
}

// TestDepthSkipExistingScene: without -independent the images are one
// scene, run whole unless every output exists.
func TestDepthSkipExistingScene(t *testing.T) {
	m := tinyDA3(t)
	dir := filepath.Dir(fixtureImage(t, "da3-tiny/two/images/view0.png"))
	out := t.TempDir()
	code, _, stderr := runCLI("depth", "-model", m, "-process-res", "28", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, os.Remove(filepath.Join(out, "view1_depth.png")))
	code, stdout, stderr := runCLI("depth", "-model", m, "-process-res", "28", "-skip-existing", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"view0_depth.png", "view1_depth.png"}, wroteLines(stdout))
	assert.Contains(t, stderr, "skipped 0 of 2 images")
}

// TestOutputSetsOfConcurrentShards: two runs into one directory, planned
// before either writes (shards started together), leave a list naming the
// outputs of both.
func TestOutputSetsOfConcurrentShards(t *testing.T) {
	out := t.TempDir()
	plan := func(name string) [][]mapOutput {
		return [][]mapOutput{{{kind: "depth", format: "png", path: filepath.Join(out, name+"_depth.png")}}}
	}
	a, err := depthOutputSet(out, plan("a"), []string{"in/a.png"}, false)
	require.NoError(t, err)
	b, err := depthOutputSet(out, plan("b"), []string{"in/b.png"}, false)
	require.NoError(t, err)
	require.NoError(t, a.begin())
	require.NoError(t, b.begin())
	for _, n := range []string{"a", "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(out, n+"_depth.png"), []byte("map"), 0o644))
	}
	require.NoError(t, a.commit())
	require.NoError(t, b.commit())
	assert.Equal(t, manifest("a_depth.png", "b_depth.png"), readFile(t, filepath.Join(out, manifestName)))
}
