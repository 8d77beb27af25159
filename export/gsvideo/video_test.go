package gsvideo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/model/gs"
	"github.com/da3-go/da3-go/model/gs/render"
)

// scene is a wall of Gaussians, one per pixel of a w×h view from the
// origin with focal f, at depth 2 on the left half and 4 on the right.
func scene(w, h int, f float64) *gs.Gaussians {
	n := w * h
	g := &gs.Gaussians{Views: 1, Width: w, Height: h, SHDim: 9, Means: make([]float32, 3*n), Scales: make([]float32, 3*n),
		Rotations: make([]float32, 4*n), Harmonics: make([]float32, 27*n), Opacities: make([]float32, n), Depth: make([]float32, n)}
	r := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			i := y*w + x
			d := 2.0
			if x >= w/2 {
				d = 4
			}
			g.Means[3*i] = float32((float64(x) + 0.5 - float64(w)/2) / f * d)
			g.Means[3*i+1] = float32((float64(y) + 0.5 - float64(h)/2) / f * d)
			g.Means[3*i+2] = float32(d)
			for a := range 3 {
				g.Scales[3*i+a] = float32(1.2 * d / f)
			}
			g.Rotations[4*i] = 1
			for c := range 3 {
				g.Harmonics[(3*i+c)*9] = float32(r.NormFloat64())
			}
			g.Opacities[i] = 1
			g.Depth[i] = float32(d)
		}
	}
	return g
}

func twoCameras(w, h int, f float64) []Camera {
	k := [3][3]float64{{f, 0, float64(w) / 2}, {0, f, float64(h) / 2}, {0, 0, 1}}
	return []Camera{
		{Extrinsics: [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: k},
		{Extrinsics: [3][4]float64{{1, 0, 0, -0.1}, {0, 1, 0, 0}, {0, 0, 1, 0}}, Intrinsics: k},
	}
}

// A view's camera comes back from its Pose unchanged: the same extrinsics,
// and for a centred principal point the same focal lengths.
func TestRenderCameraOfAView(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	rot := randRotation(r)
	var e [3][4]float64
	for i := range 3 {
		e[i] = [4]float64{rot[i][0], rot[i][1], rot[i][2], r.NormFloat64()}
	}
	c := Camera{Extrinsics: e, Intrinsics: [3][3]float64{{300, 0, 252}, {0, 310, 168}, {0, 0, 1}}}
	rc := RenderCamera(poseOf(c, 504, 336), 504, 336)
	for i := range 3 {
		assert.InDeltaSlice(t, e[i][:], rc.Extrinsics[i][:], 1e-12)
	}
	assert.InDelta(t, 300, rc.Fx, 1e-9)
	assert.InDelta(t, 310, rc.Fy, 1e-9)
	assert.Equal(t, [2]float64{252, 168}, [2]float64{rc.Cx, rc.Cy})
	// Twice the size: twice the focal lengths (the same field of view).
	rc = RenderCamera(poseOf(c, 504, 336), 1008, 672)
	assert.InDelta(t, 600, rc.Fx, 1e-9)
	// An off-centre principal point: the field of view across the middle
	// row, centred.
	c.Intrinsics[0][2] = 200
	rc = RenderCamera(poseOf(c, 504, 336), 504, 336)
	fov := math.Atan(200/300.0) + math.Atan(304/300.0)
	assert.InDelta(t, 504/(2*math.Tan(fov/2)), rc.Fx, 1e-9)
	assert.Equal(t, 252.0, rc.Cx)
}

// The raw frames are the renderer's images of the path's cameras, then
// (hcat) the coloured depth after a white gap: near red, far blue.
func TestWriteRaw(t *testing.T) {
	const w, h, f = 24, 16, 20.0
	g := scene(w, h, f)
	v, err := New(g, twoCameras(w, h, f), Options{Mode: Original, Depth: NoDepth})
	require.NoError(t, err)
	require.Equal(t, 2, v.Frames())
	var buf bytes.Buffer
	var calls []int
	require.NoError(t, v.WriteRaw(context.Background(), &buf, func(done, total int) { calls = append(calls, done, total) }))
	assert.Equal(t, []int{1, 2, 2, 2}, calls)
	require.Equal(t, 2*w*h*3, buf.Len())
	raw := bytes.Clone(buf.Bytes()[:w*h*3])
	r, err := render.New(g, render.Options{})
	require.NoError(t, err)
	for i, cam := range v.Cameras() {
		fr, err := r.Render(cam)
		require.NoError(t, err)
		assert.Equal(t, fr.RGB8(nil), buf.Bytes()[i*w*h*3:(i+1)*w*h*3], "frame %d", i)
	}

	v, err = New(g, twoCameras(w, h, f), Options{Mode: Original})
	require.NoError(t, err)
	fw, fh := v.Size()
	require.Equal(t, [2]int{2*w + 8, h}, [2]int{fw, fh})
	buf.Reset()
	require.NoError(t, v.WriteRaw(context.Background(), &buf, nil))
	require.Equal(t, 2*fw*fh*3, buf.Len())
	px := func(x, y int) []byte { o := 3 * (y*fw + x); return buf.Bytes()[o : o+3] }
	assert.Equal(t, []byte{255, 255, 255}, px(w+3, 5), "the gap")
	near, far := px(w+8+3, h/2), px(w+8+w-3, h/2)
	assert.Greater(t, int(near[0]), int(near[2]), "near: red")
	assert.Greater(t, int(far[2]), int(far[0]), "far: blue")
	for y := range h {
		assert.Equal(t, raw[3*y*w:3*(y+1)*w], buf.Bytes()[3*y*fw:3*(y*fw+w)], "row %d: the image on the left", y)
	}

	v, err = New(g, twoCameras(w, h, f), Options{Mode: Original, Depth: VCat, Width: 12, Height: 9})
	require.NoError(t, err)
	fw, fh = v.Size()
	assert.Equal(t, [2]int{12, 2*9 + 8}, [2]int{fw, fh})
}

// The colouring's range: logs of the 1st percentile of the positive depths
// and of the 99th of all.
func TestDepthRange(t *testing.T) {
	var d []float32
	for i := range 1000 {
		d = append(d, float32(i%100)) // 10 zeros, 1 … 99
	}
	near, far := depthRange([][]float32{d[:500], d[500:]})
	assert.InDelta(t, math.Log(1.89), near, 1e-5, "1st percentile of the 990 values 1…99: at 9.89")
	assert.InDelta(t, math.Log(98.01), far, 1e-5, "99th percentile of all 1000: at 989.01")
	assert.Equal(t, [3]uint8{158, 1, 66}, export.Spectral(float32(math.Inf(-1))), "zero depth: the near end")
}

// One view wanders; defaults are extend, hcat, the views' size.
func TestNewDefaults(t *testing.T) {
	const w, h, f = 24, 16, 20.0
	g := scene(w, h, f)
	v, err := New(g, twoCameras(w, h, f)[:1], Options{Mode: Interpolate})
	require.NoError(t, err)
	assert.Equal(t, Wander, v.Mode())
	assert.Equal(t, 122, v.Frames())
	v, err = New(g, twoCameras(w, h, f), Options{})
	require.NoError(t, err)
	assert.Equal(t, Extend, v.Mode())
	assert.Equal(t, 122, v.Frames())
	fw, fh := v.Size()
	assert.Equal(t, [2]int{2*w + 8, h}, [2]int{fw, fh})
	_, err = New(g, twoCameras(w, h, f), Options{Depth: "side"})
	assert.ErrorContains(t, err, "depth layout")
	_, err = New(g, nil, Options{})
	assert.Error(t, err)
}

func ffprobe(t *testing.T, path string) map[string]string {
	t.Helper()
	p, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Skip("no ffprobe")
	}
	out, err := exec.Command(p, "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
		"stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate:format=format_name", "-of", "default=noprint_wrappers=1", path).CombinedOutput()
	require.NoError(t, err, string(out))
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// EncodeMP4 writes an H.264 MP4 of the frames (odd sides padded), through
// a temporary file; without ffmpeg, or when the frames fail, nothing is
// written.
func TestEncodeMP4(t *testing.T) {
	if _, err := FindFFmpeg(""); err != nil {
		t.Skip("no ffmpeg")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "v.mp4")
	frame := bytes.Repeat([]byte{200, 30, 90}, 15*11)
	err := EncodeMP4(context.Background(), path, 15, 11, EncodeOptions{Quality: Low}, func(w io.Writer) error {
		for range 5 {
			if _, err := w.Write(frame); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	info := ffprobe(t, path)
	assert.Equal(t, "h264", info["codec_name"])
	assert.Equal(t, "yuv420p", info["pix_fmt"])
	assert.Equal(t, "5", info["nb_read_frames"])
	assert.Equal(t, "24/1", info["r_frame_rate"])
	assert.Equal(t, "16", info["width"])
	assert.Equal(t, "12", info["height"])
	assert.Contains(t, info["format_name"], "mp4")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")

	bad := filepath.Join(dir, "bad.mp4")
	boom := errors.New("boom")
	err = EncodeMP4(context.Background(), bad, 16, 12, EncodeOptions{}, func(w io.Writer) error { return boom })
	assert.ErrorIs(t, err, boom)
	assert.NoFileExists(t, bad)

	err = EncodeMP4(context.Background(), bad, 16, 12, EncodeOptions{FFmpeg: filepath.Join(dir, "no-ffmpeg")}, func(io.Writer) error { return nil })
	assert.ErrorIs(t, err, ErrNoFFmpeg)
	assert.NoFileExists(t, bad)

	// No frames, a partial frame: refused.
	err = EncodeMP4(context.Background(), bad, 16, 12, EncodeOptions{}, func(io.Writer) error { return nil })
	assert.ErrorContains(t, err, "no frames")
	assert.NoFileExists(t, bad)
	err = EncodeMP4(context.Background(), bad, 16, 12, EncodeOptions{}, func(w io.Writer) error { _, err := w.Write(frame[:100]); return err })
	assert.ErrorContains(t, err, "not a whole number of 16x12 frames")
	assert.NoFileExists(t, bad)
	// The program fails: it is named in the error.
	if _, err := exec.LookPath("false"); err == nil {
		err = EncodeMP4(context.Background(), bad, 16, 12, EncodeOptions{FFmpeg: "false"}, func(w io.Writer) error { _, err := w.Write(make([]byte, 16*12*3)); return err })
		assert.ErrorContains(t, err, "ffmpeg: exit status 1")
		assert.NoFileExists(t, bad)
	}
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

// Gaussians made by the adapter from a view (package gs: depth 3,
// red on the left, blue on the right, about a pixel each) and rendered
// from that view's camera through the path's conventions (poseOf,
// RenderCamera) give the view back: its colours where they were, its
// depth; a camera moved to the right sees the wall shifted left.
func TestAdaptedViewRendersBack(t *testing.T) {
	const w, h = 40, 30
	k := [3][3]float64{{36, 0, 20}, {0, 36, 15}, {0, 0, 1}}
	cfg := gs.GiantConfig
	n := w * h
	raw := make([]float32, cfg.Channels()*n)
	plane := func(c int) []float32 { return raw[c*n : (c+1)*n] }
	depth := make([]float32, n)
	for i := range n {
		depth[i] = 3
		plane(2)[i], plane(3)[i], plane(4)[i] = -1.609, -1.609, -1.609 // scale 5: about a pixel
		plane(8)[i] = 1                                                // the quaternion
		red := i%w < w/2
		for c, v := range map[bool][3]float32{true: {1.7, -1.7, -1.7}, false: {-1.7, -1.7, 1.7}}[red] {
			plane(9 + 9*c)[i] = v // the DC coefficient of colour c
		}
		plane(cfg.Channels() - 1)[i] = 10 // opaque
	}
	e := [3][4]float64{{1, 0, 0, 0.2}, {0, 1, 0, -0.1}, {0, 0, 1, 0.5}}
	g, err := gs.Adapt(cfg, []gs.View{{Raw: raw, Depth: depth, Extrinsics: e, Intrinsics: k}}, w, h, nil)
	require.NoError(t, err)
	r, err := render.New(g, render.Options{})
	require.NoError(t, err)
	cam := RenderCamera(poseOf(Camera{Extrinsics: e, Intrinsics: k}, w, h), w, h)
	f, err := r.Render(cam)
	require.NoError(t, err)
	at := func(f *render.Frame, x, y int) []float32 { o := 3 * (y*w + x); return f.RGB[o : o+3] }
	for y := 2; y < h-2; y++ {
		for x := 2; x < w-2; x++ {
			if x >= w/2-2 && x < w/2+2 {
				continue
			}
			c := at(f, x, y)
			if x < w/2 {
				assert.True(t, c[0] > 0.9 && c[2] < 0.1, "(%d, %d) red: %v", x, y, c)
			} else {
				assert.True(t, c[2] > 0.9 && c[0] < 0.1, "(%d, %d) blue: %v", x, y, c)
			}
			// The adapter places a Gaussian 3 along its pixel's unit ray, at
			// camera z 3·cos θ; on the slanted wall the outer neighbours,
			// nearer, are composited first: the depth lies between the pixel's
			// z and that of 4 pixels further out.
			u, v := (float64(x)+0.5-20)/36, (float64(y)+0.5-15)/36
			rr := math.Hypot(u, v)
			out := (rr + 4.0/36) / max(rr, 1e-9)
			zIn, zOut := 3/math.Sqrt(1+u*u+v*v), 3/math.Sqrt(1+(u*u+v*v)*out*out)
			d := float64(f.Depth[y*w+x])
			assert.True(t, d >= zOut-1e-3 && d <= zIn+1e-3, "(%d, %d) depth %g, want in [%g, %g]", x, y, d, zOut, zIn)
		}
	}
	// 0.5 to the right at depth 3 with f = 36: the edge moves 6 pixels left.
	moved := cam
	moved.Extrinsics[0][3] -= 0.5
	f, err = r.Render(moved)
	require.NoError(t, err)
	assert.Greater(t, at(f, w/2-8, h/2)[0], float32(0.9), "still red left of the moved edge")
	assert.Greater(t, at(f, w/2-4, h/2)[2], float32(0.9), "blue where red was")
}
