package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// meshCounts reads the vertex and face counts of a mesh PLY's header and checks that the payload has
// their size.
func meshCounts(t *testing.T, path string) (vertices, faces int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	end := bytes.Index(b, []byte("end_header\n"))
	require.Positive(t, end)
	header := string(b[:end])
	m := regexp.MustCompile(`element vertex (\d+)\n(?s:.*)element face (\d+)\n`).FindStringSubmatch(header)
	require.NotNil(t, m, header)
	vertices, _ = strconv.Atoi(m[1])
	faces, _ = strconv.Atoi(m[2])
	require.Len(t, b[end+len("end_header\n"):], 27*vertices+13*faces)
	return vertices, faces
}

// TestReconstructMesh: -format mesh_ply,mesh_glb on the tiny model's four views writes both files, prints
// them and the fusion's figures, and lists them among the run's outputs.
func TestReconstructMesh(t *testing.T) {
	m := tinyDA3(t)
	imgs, err := filepath.Glob(filepath.Join("..", "..", "tests", "fixtures", "da3-tiny", "four", "images", "*.png"))
	require.NoError(t, err)
	require.Len(t, imgs, 4)
	out := filepath.Join(t.TempDir(), "scene")
	args := append([]string{"reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-format", "mesh_ply,mesh_glb,mesh_points", "-o", out}, imgs...)
	code, stdout, stderr := runCLI(args...)
	require.Equal(t, 0, code, stderr)
	for _, f := range []string{"mesh.ply", "mesh.glb", "mesh_points.ply"} {
		assert.FileExists(t, filepath.Join(out, f))
		assert.Contains(t, stdout, "wrote "+filepath.Join(out, f)+"\n")
	}
	assert.Regexp(t, `da3-go: mesh: 4 views fused at voxel \S+ \(the median depth \S+ / 200\), truncation \S+; \d+ blocks`, stderr)
	manifest, err := os.ReadFile(filepath.Join(out, manifestName))
	require.NoError(t, err)
	assert.Contains(t, string(manifest), "\nmesh.glb\nmesh.ply\nmesh_points.ply\n")
	v, f := meshCounts(t, filepath.Join(out, "mesh.ply"))
	assert.Positive(t, v)
	assert.Positive(t, f)
	// The de-ghosted cloud is the mesh's vertices, and nothing else.
	pts, err := os.ReadFile(filepath.Join(out, "mesh_points.ply"))
	require.NoError(t, err)
	assert.Contains(t, string(pts), fmt.Sprintf("element vertex %d\n", v))
	assert.NotContains(t, string(pts), "element face")
	glb, err := os.ReadFile(filepath.Join(out, "mesh.glb"))
	require.NoError(t, err)
	assert.Equal(t, "glTF", string(glb[:4]))
	assert.Equal(t, uint32(len(glb)), binary.LittleEndian.Uint32(glb[8:]))
	assert.Contains(t, string(glb), `"mode":4`)
	assertNoTempFiles(t, out)

	// A coarser voxel given: fewer vertices, the voxel named as given.
	out2 := filepath.Join(t.TempDir(), "coarse")
	args = append([]string{"reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-format", "mesh_ply", "-voxel", "1e9", "-o", out2}, imgs...)
	code, _, stderr = runCLI(args...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "voxel 1e+09 (-voxel)")
	v2, _ := meshCounts(t, filepath.Join(out2, "mesh.ply"))
	assert.Less(t, v2, v)
}

// TestReconstructMeshStream: a streamed run fuses every frame, with its window's alignment, into one mesh.
func TestReconstructMeshStream(t *testing.T) {
	m := tinyDA3(t)
	in := filepath.Join(t.TempDir(), "frames")
	writeFrames(t, in, 7, 64, 48)
	out := filepath.Join(t.TempDir(), "scene")
	code, stdout, stderr := runCLI("reconstruct", "-model", m, "-threads", "1", "-process-res", "56", "-stream", "-window", "4", "-overlap", "2",
		"-format", "mesh_ply", "-o", out, in)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wrote "+filepath.Join(out, "mesh.ply"))
	assert.Contains(t, stderr, "mesh: 7 views fused")
	_, f := meshCounts(t, filepath.Join(out, "mesh.ply"))
	assert.Positive(t, f)
	assert.NoDirExists(t, filepath.Join(out, "stream"))
}

func TestReconstructMeshFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-voxel", "-1"}, "-voxel -1 must be a non-negative number"},
		{[]string{"-voxel", "NaN"}, "-voxel NaN must be a non-negative number"},
		{[]string{"-max-depth", "-2"}, "-max-depth -2 must be a non-negative number"},
		{[]string{"-max-blocks", "-5"}, "-max-blocks must be 0"},
		{[]string{"-format", "mesh"}, "mesh_ply, mesh_glb"},
	} {
		code, _, stderr := runCLI(append(append([]string{"reconstruct", "-model", "m.gguf"}, tc.args...), "a.png")...)
		assert.Equal(t, exitUsage, code, strings.Join(tc.args, " "))
		assert.Contains(t, stderr, tc.want)
	}
}
