package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export/gsvideo"
	"github.com/da3-go/da3-go/model/gs"
)

// TestGSVideoStopsWithRequest: the fly-through video, the longest export, stops when its request ends
// (the client gone or the timeout passed) instead of rendering and encoding every frame; with the request
// alive the same scene gives an MP4.
func TestGSVideoStopsWithRequest(t *testing.T) {
	if !haveFFmpeg() {
		t.Skip("gs_video needs ffmpeg")
	}
	const w, h, f = 32, 24, 30.0
	n := w * h
	g := &gs.Gaussians{Views: 1, Width: w, Height: h, SHDim: 9, Means: make([]float32, 3*n), Scales: make([]float32, 3*n),
		Rotations: make([]float32, 4*n), Harmonics: make([]float32, 27*n), Opacities: make([]float32, n), Depth: make([]float32, n)}
	for i := range n { // a wall at depth 2, one Gaussian a pixel
		x, y := i%w, i/w
		g.Means[3*i], g.Means[3*i+1], g.Means[3*i+2] = float32((float64(x)-w/2)/f*2), float32((float64(y)-h/2)/f*2), 2
		g.Scales[3*i], g.Scales[3*i+1], g.Scales[3*i+2] = 0.1, 0.1, 0.1
		g.Rotations[4*i], g.Opacities[i], g.Depth[i] = 1, 1, 2
		g.Harmonics[27*i] = float32(x) / w
	}
	cams := []gsvideo.Camera{{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
		Intrinsics: [3][3]float64{{f, 0, w / 2}, {0, f, h / 2}, {0, 0, 1}}}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err := exporters["gs_video"].encode(&scene{ctx: ctx, splats: g, cams: cams})
	require.ErrorIs(t, err, context.Canceled)
	t.Logf("stopped after %v", time.Since(start))

	mp4, err := exporters["gs_video"].encode(&scene{ctx: context.Background(), splats: g, cams: cams})
	require.NoError(t, err)
	require.Greater(t, len(mp4), 8)
	assert.Equal(t, "ftyp", string(mp4[4:8]), "an MP4 file")
}
