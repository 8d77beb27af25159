package vulkan

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/camera"
	"github.com/da3-go/da3-go/model/nested"
	"github.com/da3-go/da3-go/model/stream"
)

// Parity of the device with the CPU on every model family's tiny fixture,
// f32 products. Each case runs the CPU and the device on the same GGUF and
// input and gates every output (compare); the device's graphs must run
// whole on it (onDevice).

// The DA3 any-view fixture from its images: one view, two views of
// different sizes (cropped to one processed size), four views (the
// reference view chosen by saddle_balanced on a graph of its own first).
func TestParityDA3(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
	for _, tc := range []string{"one", "two", "four"} {
		t.Run(tc, func(t *testing.T) {
			imgs, meta := caseImages(t, "da3-tiny", tc)
			opt := model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true}
			want, err := cpu.MultiView(context.Background(), imgs, opt)
			require.NoError(t, err)
			got, err := vk.MultiView(context.Background(), imgs, opt)
			require.NoError(t, err)
			onDevice(t, vk)
			compare(t, want, got, relF32, "depth", "conf", "extrinsics", "intrinsics")
		})
	}
}

// The pose fixture (converted with its auxiliary ray head and camera
// encoder) on two views: cameras from the camera decoder, from the ray head
// through the RANSAC solver (RayPose), and known cameras conditioning the
// network (Extrinsics, ViewIntrinsics; the depth is then aligned to their
// scale).
func TestParityPose(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny-pose", convert.Options{WithAux: true}))
	dir := fixtureDir("da3-tiny-pose")
	px := fixtureInput(t, filepath.Join(dir, "cam-two"))
	ref := refTensors(t, filepath.Join(dir, "cam-two", "ref.safetensors"))
	known := model.RunOptions{}
	ixt := intrinsicsOf(ref["cam.ixt_in"])
	for v, e := range extrinsicsOf(ref["cam.ext_in"]) {
		known.Extrinsics = append(known.Extrinsics, e)
		known.ViewIntrinsics = append(known.ViewIntrinsics, model.Intrinsics{Fx: ixt[v][0][0], Fy: ixt[v][1][1], Cx: ixt[v][0][2], Cy: ixt[v][1][2]})
	}
	for _, tc := range []struct {
		name string
		opt  model.RunOptions
	}{
		{"decoder", model.RunOptions{}},
		{"ray", model.RunOptions{RayPose: true, RaySeed: 7}},
		{"known", known},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := cpu.Forward(context.Background(), px, tc.opt)
			require.NoError(t, err)
			got, err := vk.Forward(context.Background(), px, tc.opt)
			require.NoError(t, err)
			onDevice(t, vk)
			compare(t, want, got, relF32, "depth", "conf", "extrinsics", "intrinsics")
			if tc.name == "known" {
				require.NotZero(t, want[0].AlignScale)
				gateScalar(t, "align scale", want[0].AlignScale, got[0].AlignScale, relF32)
			}
		})
	}
}

// DA3-GIANT's Gaussian head: one view, and three views with known cameras.
func TestParityGaussians(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny-gs", convert.Options{WithAux: true}))
	dir := fixtureDir("da3-tiny-gs")
	for _, tc := range []string{"one", "three-cam"} {
		t.Run(tc, func(t *testing.T) {
			px := fixtureInput(t, filepath.Join(dir, tc))
			opt := model.RunOptions{Gaussians: true}
			if tc == "three-cam" {
				ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
				ixt := intrinsicsOf(ref["cam.ixt_in"])
				for v, e := range extrinsicsOf(ref["cam.ext_in"]) {
					opt.Extrinsics = append(opt.Extrinsics, e)
					opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: ixt[v][0][0], Fy: ixt[v][1][1], Cx: ixt[v][0][2], Cy: ixt[v][1][2]})
				}
			}
			want, err := cpu.Forward(context.Background(), px, opt)
			require.NoError(t, err)
			got, err := vk.Forward(context.Background(), px, opt)
			require.NoError(t, err)
			onDevice(t, vk)
			compare(t, want, got, relF32, "depth", "conf", "extrinsics", "gs.means", "gs.opacities")
		})
	}
}

// The nested model (any-view branch over three views, metric branch per
// view, aligned into metres) from the fixture's images.
func TestParityNested(t *testing.T) {
	need(t)
	paths := convert.OutputPaths(convert.FamilyDA3Nested, gguf(t, "da3-tiny-nested", convert.Options{}))
	require.Len(t, paths, 2)
	load := func(dev string) *nested.Model {
		m, err := nested.Load(context.Background(), paths[0], paths[1], model.Options{Options: backend.Options{Device: dev, Threads: 2, Logger: quiet}})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	cpu, vk := load("cpu"), load(device)
	imgs, meta := caseImages(t, "da3-tiny-nested", "three")
	opt := model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true}
	want, err := cpu.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	got, err := vk.MultiView(context.Background(), imgs, opt)
	require.NoError(t, err)
	onDevice(t, vk.AnyView())
	onDevice(t, vk.Metric())
	compare(t, want.Views, got.Views, relF32, "depth", "conf", "sky", "extrinsics")
	gateScalar(t, "scale to metres", float64(want.Scale), float64(got.Scale), relF32)
}

// The monocular model's depth and sky.
func TestParityMono(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny-mono", convert.Options{}))
	imgs, meta := caseImages(t, "da3-tiny-mono", "one")
	opt := model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true}
	want, err := cpu.Depth(context.Background(), imgs[0], opt)
	require.NoError(t, err)
	got, err := vk.Depth(context.Background(), imgs[0], opt)
	require.NoError(t, err)
	onDevice(t, vk)
	compare(t, []model.Result{*want}, []model.Result{*got}, relF32, "depth", "sky")
}

// Depth Anything V2, relative (disparity) and metric.
func TestParityDA2(t *testing.T) {
	need(t)
	for _, tc := range []struct{ name, src string }{
		{"da2-tiny", "da2-tiny/model.pth"},
		{"da2-tiny-metric", "da2-tiny-metric/hf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu, vk := pair(t, gguf(t, tc.src, da2Options(t, tc.name)))
			require.Equal(t, model.DA2, vk.Config().Arch)
			imgs := images(t, tc.name+"/image.png")
			opt := model.RunOptions{ProcessRes: 70, ProcessedSize: true}
			want, err := cpu.Depth(context.Background(), imgs[0], opt)
			require.NoError(t, err)
			got, err := vk.Depth(context.Background(), imgs[0], opt)
			require.NoError(t, err)
			onDevice(t, vk)
			compare(t, []model.Result{*want}, []model.Result{*got}, relF32, "depth")
		})
	}
}

// Model.Independent: same-size images as one batched graph (no attention
// across them), an image of another size in a batch of its own.
func TestParityIndependent(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
	imgs := images(t, "da3-tiny/four/images/view0.png", "da3-tiny/four/images/view1.png",
		"da3-tiny/four/images/view3.png", "da3-tiny/four/images/view2.png")
	opt := model.RunOptions{ProcessRes: 42, ProcessedSize: true}
	want, err := cpu.Independent(context.Background(), imgs, opt)
	require.NoError(t, err)
	got, err := vk.Independent(context.Background(), imgs, opt)
	require.NoError(t, err)
	onDevice(t, vk)
	compare(t, want, got, relF32, "depth", "conf", "extrinsics")
}

// Streaming: eight frames in windows of four overlapping by two, each
// window a multi-view run, merged into one world frame; the merged depth
// and cameras of every frame.
func TestParityStream(t *testing.T) {
	need(t)
	cpu, vk := pair(t, gguf(t, "da3-tiny", convert.Options{}))
	frames := streamFrames(8, 48, 32)
	opt := stream.Options{Window: 4, Overlap: 2, Run: model.RunOptions{ProcessRes: 42}}
	run := func(m *model.Model) []model.Result {
		o := opt
		o.Dir, o.Logger = t.TempDir(), quiet
		r, st, err := stream.Run(context.Background(), m, frames, o)
		require.NoError(t, err)
		require.Equal(t, 3, st.Windows)
		out := make([]model.Result, len(frames))
		for i := range out {
			out[i], err = r.Result(i)
			require.NoError(t, err)
		}
		return out
	}
	want, got := run(cpu), run(vk)
	onDevice(t, vk)
	compare(t, want, got, relF32, "depth", "conf", "extrinsics")
}

// The inputs of a fixture case (its reference input tensor, normalised
// pixels of the processed views).
func fixtureInput(t *testing.T, dir string) model.Pixels {
	t.Helper()
	in := refTensors(t, filepath.Join(dir, "ref.safetensors"))["input"]
	return model.Pixels{Data: in.Data, Width: in.Shape[4], Height: in.Shape[3], Views: in.Shape[1]}
}

// refTensor is a fixture's reference tensor (torch order shape).
type refTensor struct {
	Data  []float32
	Shape []int
}

// refTensors reads a fixture case's reference tensors.
func refTensors(t *testing.T, path string) map[string]refTensor {
	t.Helper()
	ck, err := convert.OpenSafetensors(path)
	require.NoError(t, err)
	defer ck.Close()
	out := map[string]refTensor{}
	for _, name := range ck.Names() {
		tt, ok := ck.Tensor(name)
		require.True(t, ok, name)
		data, err := tt.Float32s()
		require.NoError(t, err)
		shape := make([]int, len(tt.Shape))
		for i, d := range tt.Shape {
			shape[i] = int(d)
		}
		out[name] = refTensor{Data: data, Shape: shape}
	}
	return out
}

// extrinsicsOf reads (S, 3|4, 4) world-to-camera matrices.
func extrinsicsOf(r refTensor) [][3][4]float64 {
	rows := r.Shape[1]
	out := make([][3][4]float64, r.Shape[0])
	for v := range out {
		for i := range 3 {
			for j := range 4 {
				out[v][i][j] = float64(r.Data[(v*rows+i)*4+j])
			}
		}
	}
	return out
}

// intrinsicsOf reads (S, 3, 3) intrinsics.
func intrinsicsOf(r refTensor) []camera.Mat3 {
	out := make([]camera.Mat3, r.Shape[0])
	for v := range out {
		for i := range 3 {
			for j := range 3 {
				out[v][i][j] = float64(r.Data[v*9+i*3+j])
			}
		}
	}
	return out
}

// streamFrames returns n synthetic frames of w×h pixels: a pattern sliding
// to the right.
func streamFrames(n, w, h int) []stream.Frame {
	frames := make([]stream.Frame, n)
	for i := range frames {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				u := float64(x+3*i) / float64(w)
				img.SetNRGBA(x, y, color.NRGBA{uint8(128 + 100*math.Sin(7*u)), uint8(128 + 100*math.Cos(5*float64(y)/float64(h)+u)),
					uint8(40 * (x / 8 % 4)), 255})
			}
		}
		frames[i] = stream.Frame{Name: fmt.Sprintf("f%02d.png", i), Open: func() (model.Image, error) { return img, nil }}
	}
	return frames
}
