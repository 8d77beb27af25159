package model_test

import (
	"context"
	"fmt"
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// TestPartsFusedAndSeparate runs the backbone, the head and the camera
// decoder through the public API, fused in one graph and as three graphs
// (features and camera tokens read back and fed in again), and checks both
// against the model's own run.
func TestPartsFusedAndSeparate(t *testing.T) {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.NotNil(t, m.Camera())
	px, err := m.Preprocess([]image.Image{photo(64, 48)}, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
	ref, err := m.Forward(ctx, px, model.RunOptions{})
	require.NoError(t, err)
	bb, head, cam := m.Backbone(), m.Head(), m.Camera()
	pixels := func(b *backend.Builder) *ggml.Tensor {
		return b.Input("pixels", px.Data, px.Width, px.Height, 3, px.Views)
	}

	fused, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
		x, grid := bb.Embed(b.G, b, pixels(b))
		f := bb.Forward(b.G, b, x, grid, 0)
		h := head.Forward(b.G, b, f.Feats, grid.PH, grid.PW)
		b.Output("depth", h.Depth)
		b.Output("conf", h.Conf)
		b.Output("pose_enc", cam.Forward(b.G, f.CamTokens[3]))
		return nil
	})
	require.NoError(t, err)

	feats, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
		x, grid := bb.Embed(b.G, b, pixels(b))
		f := bb.Forward(b.G, b, x, grid, 0)
		for k, ft := range f.Feats {
			b.Output(fmt.Sprintf("feat.%d", k), ft)
		}
		b.Output("cam_tok", f.CamTokens[3])
		return nil
	})
	require.NoError(t, err)
	grid := [2]int{px.Height / 14, px.Width / 14}
	sep, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
		var fs [4]*ggml.Tensor
		for k := range fs {
			t := feats[fmt.Sprintf("feat.%d", k)]
			fs[k] = b.Input(fmt.Sprintf("feat.%d", k), t.Data, t.Shape...)
		}
		h := head.Forward(b.G, b, fs, grid[0], grid[1])
		b.Output("depth", h.Depth)
		b.Output("conf", h.Conf)
		return nil
	})
	require.NoError(t, err)
	pose, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
		tok := feats["cam_tok"]
		b.Output("pose_enc", cam.Forward(b.G, b.Input("cam_tok", tok.Data, tok.Shape...)))
		return nil
	})
	require.NoError(t, err)

	for name, out := range map[string]map[string]backend.Tensor{"fused": fused, "separate": sep} {
		testutil.AllClose(t, ref[0].Depth, out["depth"].Data, 1e-5, 1e-5, "%s depth", name)
		testutil.AllClose(t, ref[0].Conf, out["conf"].Data, 1e-5, 1e-5, "%s conf", name)
	}
	for name, out := range map[string]map[string]backend.Tensor{"fused": fused, "separate": pose} {
		testutil.AllClose(t, ref[0].Camera.PoseEncoding[:], out["pose_enc"].Data, 1e-5, 1e-5, "%s pose encoding", name)
	}
	assert.Equal(t, []int{px.Width, px.Height}, sep["depth"].Shape[:2])
}
