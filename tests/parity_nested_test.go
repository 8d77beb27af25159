package tests

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/nested"
)

// Parity of the nested model (any-view branch + metric branch aligned into
// metres) against the official NestedDepthAnything3Net: every stage of both
// branches, the alignment on the reference's own branch outputs, and the
// aligned outputs end to end, from the reference input and from the images.
func TestParityNested(t *testing.T) {
	t.Run("da3-tiny-nested", func(t *testing.T) { parityNested(t, "da3-tiny-nested") })
	for _, c := range oracleCases(t, "da3nested-") {
		t.Run(filepath.Base(c.fixture), func(t *testing.T) { parityNested(t, c.fixture) })
	}
}

func parityNested(t *testing.T, name string) {
	ctx := context.Background()
	dir := fixture(t, name)
	paths := convert.OutputPaths(convert.FamilyDA3Nested, convertFixture(t, dir, convert.Options{}))
	nm, err := nested.Load(ctx, paths[0], paths[1], model.Options{Options: backend.Options{Device: "cpu"}})
	require.NoError(t, err)
	t.Cleanup(func() { nm.Close() })
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	ran := 0
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "ref.safetensors")); err != nil {
			continue
		}
		ran++
		t.Run(e.Name(), func(t *testing.T) { parityNestedCase(t, nm, filepath.Join(dir, e.Name()), !filepath.IsAbs(dir)) })
	}
	require.NotZero(t, ran, "no case in %s", dir)
}

// committed: the case is a committed fixture, whose images da3-go must
// preprocess to exactly the reference's input.
func parityNestedCase(t *testing.T, nm *nested.Model, dir string, committed bool) {
	ctx := context.Background()
	meta := readMeta(t, dir+"/meta.json")
	ref := refTensors(t, dir+"/ref.safetensors")
	in := ref["input"]
	S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
	n := 3 * w * h
	all := model.RunOptions{Taps: func(string) bool { return true }}

	// Any-view branch, every stage.
	av, err := nm.AnyView().Forward(ctx, model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, all)
	require.NoError(t, err)
	compareDA3Stages(t, ref, "av.", av, int(meta["ref_view"].(float64)))

	// Metric branch, every stage, one view at a time as its backbone does.
	taps := map[string]backend.Tensor{}
	var mDepth, mSky []float32
	for v := 0; v < S; v++ {
		mr, err := nm.Metric().Forward(ctx, model.Pixels{Data: in.Data[v*n : (v+1)*n], Width: w, Height: h, Views: 1}, all)
		require.NoError(t, err)
		for k, tp := range mr[0].Taps {
			taps[k] = backend.Tensor{Data: append(taps[k].Data, tp.Data...)}
		}
		mDepth, mSky = append(mDepth, mr[0].Depth...), append(mSky, mr[0].Sky...)
	}
	compareMonoStages(t, ref, "m.", taps)
	gate(t, "m.sky", ref["m.sky"].Data, mSky, 0.99999, 1e-4)
	nonSky := ref["nonsky"].Data
	for i, s := range mSky {
		require.Equal(t, nonSky[i] == 1, s < nested.SkyThreshold, "pixel %d: sky %g, reference sky %g", i, s, ref["m.sky"].Data[i])
	}
	onNonSky := func(v []float32) []float32 {
		var out []float32
		for i, x := range v {
			if nonSky[i] == 1 {
				out = append(out, x)
			}
		}
		return out
	}
	// Only the non-sky metric depth enters the alignment (the branch's own
	// sky fill is joint over the views upstream, per view here).
	gate(t, "m.depth_raw (non-sky)", onNonSky(ref["m.depth_raw"].Data), onNonSky(mDepth), 0.99999, 1e-4)

	// The alignment alone, on the reference's branch outputs.
	hw := h * w
	views := make([]nested.View, S)
	for v := 0; v < S; v++ {
		k := ref["av.intrinsics"].Data[9*v:]
		sl := func(name string) []float32 { return append([]float32(nil), ref[name].Data[v*hw:(v+1)*hw]...) }
		views[v] = nested.View{Depth: sl("av.depth"), Conf: sl("av.conf"), MetricDepth: sl("m.depth"), Sky: sl("m.sky"),
			Focal: (float64(k[0]) + float64(k[4])) / 2}
	}
	al, err := nested.Align(views)
	require.NoError(t, err)
	var depth, conf []float32
	for _, v := range views {
		depth, conf = append(depth, v.Depth...), append(conf, v.Conf...)
	}
	t.Logf("alignment on the reference branches: scale %.7g (ref %.7g), median conf %.7g (ref %.7g), %d fit / %d non-sky pixels (ref %v / %v), sky depth %.7g (ref %.7g)",
		al.Scale, ref["scale"].Data[0], al.MedianConf, ref["median_conf"].Data[0], al.Pixels, al.NonSky,
		meta["align_pixels"], meta["nonsky_pixels"], al.SkyDepth, ref["sky_depth"].Data[0])
	assert.Equal(t, int(meta["nonsky_pixels"].(float64)), al.NonSky, "non-sky pixels")
	assert.Equal(t, int(meta["align_pixels"].(float64)), al.Pixels, "pixels in the fit")
	assert.Equal(t, ref["median_conf"].Data[0], al.MedianConf, "median confidence (exact float32 quantile)")
	relGate(t, "scale (reference branches)", ref["scale"].Data[0], al.Scale, 1e-5)
	relGate(t, "sky depth (reference branches)", ref["sky_depth"].Data[0], al.SkyDepth, 1e-5)
	gate(t, "aligned depth (reference branches)", ref["depth"].Data, depth, 0.99999, 1e-5)
	gate(t, "aligned conf (reference branches)", ref["conf"].Data, conf, 0.99999, 1e-6)

	// End to end from the reference input.
	out, err := nm.Forward(ctx, model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, model.RunOptions{})
	require.NoError(t, err)
	checkNestedOutput(t, "", ref, meta, out)

	// End to end from the image files, through the preprocessing.
	var imgs []model.Image
	for _, p := range meta["images"].([]any) {
		img, err := imgio.Decode(filepath.Join(filepath.Dir(dir), p.(string)))
		require.NoError(t, err)
		imgs = append(imgs, img)
	}
	out, err = nm.MultiView(ctx, imgs, model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true})
	require.NoError(t, err)
	// The reference's input as 8-bit RGB against da3-go's processed images:
	// OpenCV's IPP INTER_CUBIC decides rare rounding ties by its own
	// operation order, and a one-LSB input difference moves a random
	// network's outputs by ~1e-4 relative, so the outputs are gated only
	// when the inputs are identical (the committed fixtures' are).
	if diff := rgbDiff(in.Data, out.Views, nm.AnyView().Config()); diff > 0 {
		require.False(t, committed, "%d input values differ from the reference's", diff)
		t.Logf("from images: %d of %d input values differ from the reference's by the preprocessing's rounding ties; outputs not gated (the tensor-input gates above hold)", diff, len(in.Data))
		return
	}
	checkNestedOutput(t, "from images: ", ref, meta, out)
}

// rgbDiff counts the values of the reference input (normalised, CHW per
// view) that are not da3-go's processed 8-bit images (HWC).
func rgbDiff(input []float32, views []model.Result, cfg model.Config) int {
	mean, std := cfg.Mean, cfg.Std
	diff := 0
	for v, r := range views {
		n := r.Width * r.Height
		for c := 0; c < 3; c++ {
			for i := 0; i < n; i++ {
				x := input[(3*v+c)*n+i]
				u := math.Round(float64(x*std[c]+mean[c]) * 255)
				if float64(r.RGB[3*i+c]) != u {
					diff++
				}
			}
		}
	}
	return diff
}

// checkNestedOutput gates a nested run's aligned outputs against the oracle.
func checkNestedOutput(t *testing.T, what string, ref map[string]refTensor, meta map[string]any, out *nested.Output) {
	t.Helper()
	var depth, conf, sky []float32
	for _, r := range out.Views {
		assert.Equal(t, model.Metres, r.Unit)
		depth, conf, sky = append(depth, r.Depth...), append(conf, r.Conf...), append(sky, r.Sky...)
	}
	t.Logf("%sscale %.7g (ref %.7g), %d fit / %d non-sky pixels", what, out.Scale, ref["scale"].Data[0], out.Pixels, out.NonSky)
	assert.Equal(t, int(meta["nonsky_pixels"].(float64)), out.NonSky, "%snon-sky pixels", what)
	relGate(t, what+"scale", ref["scale"].Data[0], out.Scale, 1e-4)
	relGate(t, what+"sky depth", ref["sky_depth"].Data[0], out.SkyDepth, 1e-4)
	gate(t, what+"depth (metres)", ref["depth"].Data, depth, 0.99999, 1e-4)
	gate(t, what+"conf", ref["conf"].Data, conf, 0.99999, 1e-4)
	gate(t, what+"sky", ref["m.sky"].Data, sky, 0.99999, 1e-4)
	compareCameras(t, ref["extrinsics"].Data, ref["intrinsics"].Data, out.Views)
}

// relGate checks one scalar: |got − want| ≤ rel·|want|.
func relGate(t *testing.T, what string, want, got float32, rel float64) {
	t.Helper()
	d := math.Abs(float64(got) - float64(want))
	t.Logf("%-34s %.8g vs %.8g: |d| %.3g (%.2g relative)", what, got, want, d, d/math.Abs(float64(want)))
	if d > rel*math.Abs(float64(want)) {
		t.Errorf("%s: %.8g, want %.8g within %g relative", what, got, want, rel)
	}
}
