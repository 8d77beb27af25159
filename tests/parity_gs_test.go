package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
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
	comparePLY(t, filepath.Join(dir, "one", "gs.ply"), g, "gs_ply records")
}

// comparePLY writes g as gs_ply and compares it with the package's file:
// the same header (properties, order, count) and records.
func comparePLY(t *testing.T, wantPath string, g *gs.Gaussians, stage string) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, gs.WritePLY(&buf, g))
	want, err := os.ReadFile(wantPath)
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
	gate(t, stage, wf, gf, 0.99999, 1e-4)
}

// 3D Gaussians end to end on the tiny DA3-GIANT-like model: the SwiGLU
// backbone, the GS head's stages, the adapter's Gaussians and the gs_ply
// file; with three given cameras the adapter's Umeyama alignment too.
func TestParityGaussians(t *testing.T) {
	dir := fixture(t, "da3-tiny-gs")
	m := loadModel(t, convertFixture(t, dir, convert.Options{WithAux: true}))
	for _, tc := range []string{"one", "three-cam"} {
		t.Run(tc, func(t *testing.T) {
			ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
			in := ref["input"]
			S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
			opt := model.RunOptions{Gaussians: true, Taps: func(string) bool { return true }}
			if tc == "three-cam" {
				for v, e := range extrinsicsOf(ref["cam.ext_in"]) {
					k := intrinsicsOf(ref["cam.ixt_in"])[v]
					opt.Extrinsics = append(opt.Extrinsics, e)
					opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]})
				}
			}
			res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, opt)
			require.NoError(t, err)
			order := viewOrder(res)
			for k := 0; k < 4; k++ {
				stageGate(t, ref, res[0].Taps, order, fmt.Sprintf("feat.%d", k), fmt.Sprintf("vit.feat.%d", k))
			}
			for _, st := range []string{"gs.reassemble.0", "gs.reassemble.3", "gs.rn.0", "gs.fusion.4", "gs.fusion.1", "gs.out1", "gs.merger", "gs.out2_in", "gs.logits"} {
				stageGate(t, ref, res[0].Taps, order, st, st)
			}
			var gsv []*gs.Gaussians
			var depth []float32
			for _, r := range res {
				require.NotNil(t, r.Gaussians)
				gsv = append(gsv, r.Gaussians)
				depth = append(depth, r.Depth...)
			}
			g := gs.Concat(gsv...)
			gate(t, "depth", ref["depth"].Data, depth, 0.99999, 1e-4)
			gate(t, "means", ref["gs.means"].Data, g.Means, 0.99999, 1e-4)
			gate(t, "scales", ref["gs.scales"].Data, g.Scales, 0.99999, 1e-4)
			gate(t, "rotations", ref["gs.rotations"].Data, g.Rotations, 0.99999, 1e-4)
			gate(t, "harmonics", ref["gs.harmonics"].Data, g.Harmonics, 0.99999, 1e-4)
			gate(t, "opacities", ref["gs.opacities"].Data, g.Opacities, 0.99999, 1e-4)
			if tc == "one" {
				comparePLY(t, filepath.Join(dir, "one", "gs.ply"), g, "gs_ply (end to end)")
			}
		})
	}
}
