package tests

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/gs"
)

// gsAdapterInput builds the adapter's views from a fixture case: the head's
// logits (S, 38, H, W) are already the planar channel order the adapter takes.
func gsAdapterInput(ref map[string]refTensor, depthName, extName, ixtName string) ([]gs.View, int, int) {
	lg := ref["gs.logits"]
	S, C, h, w := lg.Shape[0], lg.Shape[1], lg.Shape[2], lg.Shape[3]
	n := h * w
	exts := extrinsicsOf(ref[extName])
	ixts := intrinsicsOf(ref[ixtName])
	views := make([]gs.View, S)
	for v := range views {
		views[v] = gs.View{Raw: lg.Data[v*C*n : (v+1)*C*n], Depth: ref[depthName].Data[v*n : (v+1)*n], Extrinsics: exts[v], Intrinsics: ixts[v]}
	}
	return views, w, h
}

// The Gaussian adapter fed the package's head output, depth and cameras
// gives the package's Gaussians (means, scales, rotations, harmonics with
// the SH rotation, opacities); with given cameras its poses are aligned to
// them (Umeyama scale clamped to [1/3, 3]).
func TestParityGaussianAdapter(t *testing.T) {
	dir := fixture(t, "da3-tiny-gs")
	for _, tc := range []struct {
		name, depth, ext, ixt string
		given                 bool
	}{
		{"one", "depth", "extrinsics", "intrinsics", false},
		{"three-cam", "depth_raw", "pred_extrinsics", "pred_intrinsics", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := refTensors(t, filepath.Join(dir, tc.name, "ref.safetensors"))
			views, w, h := gsAdapterInput(ref, tc.depth, tc.ext, tc.ixt)
			var given []camera.Extrinsics
			if tc.given {
				given = extrinsicsOf(ref["cam.ext_norm"])
			}
			g, err := gs.Adapt(gs.GiantConfig, views, w, h, given)
			require.NoError(t, err)
			gate(t, "means", ref["gs.means"].Data, g.Means, 0.99999, 1e-4)
			gate(t, "scales", ref["gs.scales"].Data, g.Scales, 0.99999, 1e-4)
			gate(t, "rotations", ref["gs.rotations"].Data, g.Rotations, 0.99999, 1e-4)
			gate(t, "harmonics", ref["gs.harmonics"].Data, g.Harmonics, 0.99999, 1e-4)
			gate(t, "opacities", ref["gs.opacities"].Data, g.Opacities, 0.99999, 1e-4)
		})
	}
}

// readPLY parses a binary little-endian gs_ply file: its header and records.
func readPLY(t *testing.T, b []byte) (string, [][]float32) {
	t.Helper()
	i := bytes.Index(b, []byte("end_header\n"))
	require.Positive(t, i)
	header := string(b[:i+len("end_header\n")])
	body := b[i+len("end_header\n"):]
	require.Zero(t, len(body)%(17*4))
	recs := make([][]float32, len(body)/(17*4))
	for r := range recs {
		recs[r] = make([]float32, 17)
		for j := range recs[r] {
			recs[r][j] = math.Float32frombits(binary.LittleEndian.Uint32(body[(r*17+j)*4:]))
		}
	}
	return header, recs
}

// gs_ply: the same header (properties and order), the same Gaussians
// selected (border, depth quantile) in the same order, the same values.
func TestParityGaussianPLY(t *testing.T) {
	dir := fixture(t, "da3-tiny-gs")
	ref := refTensors(t, filepath.Join(dir, "one", "ref.safetensors"))
	views, w, h := gsAdapterInput(ref, "depth", "extrinsics", "intrinsics")
	g, err := gs.Adapt(gs.GiantConfig, views, w, h, nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, gs.WritePLY(&buf, g, ref["depth"].Data))
	want, err := os.ReadFile(filepath.Join(dir, "one", "gs.ply"))
	require.NoError(t, err)
	wh, wrec := readPLY(t, want)
	gh, grec := readPLY(t, buf.Bytes())
	assert.Equal(t, wh, gh, "header")
	require.Len(t, grec, len(wrec), "Gaussians kept")
	var wf, gf []float32
	for i := range wrec {
		wf = append(wf, wrec[i]...)
		gf = append(gf, grec[i]...)
	}
	gate(t, "gs_ply records", wf, gf, 0.99999, 1e-4)
}
