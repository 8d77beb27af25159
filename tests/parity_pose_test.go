package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/camera"
)

// rayMaps converts the reference ray (S, h, w, 6) channels-last and
// ray_conf (S, h, w) into the solver's planar maps.
func rayMaps(ray, conf refTensor) []camera.RayMap {
	S, h, w := ray.Shape[0], ray.Shape[1], ray.Shape[2]
	n := h * w
	maps := make([]camera.RayMap, S)
	for v := range maps {
		m := camera.RayMap{H: h, W: w, Ray: make([]float32, 6*n), Conf: conf.Data[v*n : (v+1)*n]}
		for i := 0; i < n; i++ {
			for c := 0; c < 6; c++ {
				m.Ray[c*n+i] = ray.Data[(v*n+i)*6+c]
			}
		}
		maps[v] = m
	}
	return maps
}

func maxAbsDiff(a, b []float64) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

func flat3(ms ...camera.Mat3) []float64 {
	var out []float64
	for _, m := range ms {
		for _, r := range m {
			out = append(out, r[:]...)
		}
	}
	return out
}

func f64s(v []float32) []float64 { return floats[float64](v) }

// floats converts between float slices.
func floats[D, S ~float32 | ~float64](v []S) []D {
	out := make([]D, len(v))
	for i, x := range v {
		out[i] = D(x)
	}
	return out
}

// The ray → pose solver fed the package's own rays and confidences gives the
// package's sample matrix, homographies, QL factors, centres and poses
// (torch seeded with torch.manual_seed(seed) before the forward).
func TestParityRaySolver(t *testing.T) {
	for _, dir := range poseDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { parityRaySolver(t, dir) })
	}
}

// poseDirs are the pose oracle outputs: the committed tiny fixture, and the
// full-size ones under DA3_ORACLE_OUT named pose-* (da3_pose_oracle.py).
func poseDirs(t *testing.T) []string {
	dirs := []string{fixture(t, "da3-tiny-pose")}
	for _, c := range oracleCases(t, "pose-") {
		dirs = append(dirs, c.fixture)
	}
	return dirs
}

func parityRaySolver(t *testing.T, dir string) {
	for _, tc := range []string{"ray-synth", "ray-one", "ray-two", "ray-four"} {
		t.Run(tc, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, tc, "ref.safetensors")); err != nil {
				t.Skipf("case %s not generated", tc)
			}
			meta := readMeta(t, filepath.Join(dir, tc, "meta.json"))
			ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
			hw := metaInts(meta, "processed_hw")
			if tc == "ray-synth" {
				hw = metaInts(meta, "image_hw")
			}
			seed := uint64(meta["torch_manual_seed"].(float64))
			maps := rayMaps(ref["ray"], ref["ray_conf"])
			S, n := len(maps), maps[0].H*maps[0].W

			idx := camera.RansacSamples(n, seed)
			var gotIdx []float32
			for _, row := range idx {
				for _, p := range row {
					gotIdx = append(gotIdx, float32(p))
				}
			}
			require.Equal(t, ref["solver.idx"].Data, gotIdx, "RANSAC sample matrix")

			fits, err := camera.SolveRays(maps, hw[1], hw[0], seed)
			require.NoError(t, err)
			var A, Q, L, ext, intr []float64
			var T, focal, pp []float64
			for v, f := range fits {
				assert.Equal(t, int(ref["solver.refit_n"].Data[v]), f.RefitPoints, "view %d refit points", v)
				t.Logf("view %d: %d RANSAC inliers", v, f.Inliers)
				A = append(A, flat3(f.Homography)...)
				Q = append(Q, flat3(f.Q)...)
				L = append(L, flat3(f.L)...)
				T = append(T, f.T[:]...)
				focal = append(focal, f.Focal[:]...)
				pp = append(pp, f.PP[:]...)
				for i := 0; i < 3; i++ {
					ext = append(ext, f.Pose.Extrinsics[i][:]...)
					intr = append(intr, f.Pose.Intrinsics[i][:]...)
				}
			}
			refL := f64s(ref["solver.L"].Data)
			for v := 0; v < S; v++ { // the package divides L by L₂₂ after ql_decomposition
				l22 := refL[v*9+8]
				for i := 0; i < 9; i++ {
					refL[v*9+i] /= l22
				}
			}
			// Bounds: 1e-4 of the largest reference value (at least 1): rotations,
			// centres and the normalised homography are O(1), focal lengths in
			// half-image units and intrinsics in pixels are larger.
			for _, st := range []struct {
				name      string
				want, got []float64
			}{
				{"homography", f64s(ref["solver.A"].Data), A},
				{"Q (rotation)", f64s(ref["solver.Q"].Data), Q},
				{"L", refL, L},
				{"T", f64s(ref["solver.T"].Data), T},
				{"focal", f64s(ref["solver.focal"].Data), focal},
				{"pp", f64s(ref["solver.pp"].Data), pp},
				{"extrinsics", f64s(ref["extrinsics"].Data), ext},
				{"intrinsics", f64s(ref["intrinsics"].Data), intr},
			} {
				var m float64 = 1
				for _, x := range st.want {
					m = math.Max(m, math.Abs(x))
				}
				d := maxAbsDiff(st.want, st.got)
				t.Logf("%-13s max|d| %.3g (rel %.3g)", st.name, d, d/m)
				assert.LessOrEqual(t, d, 1e-4*m, "%s: %s", tc, st.name)
			}
			if tc == "ray-synth" {
				truth, _ := meta["truth"].([]any)
				for v, c := range truth {
					e := c.(map[string]any)["extrinsics"].([]any)
					for i := 0; i < 3; i++ {
						row := e[i].([]any)
						for j := 0; j < 4; j++ {
							assert.InDelta(t, row[j].(float64), fits[v].Pose.Extrinsics[i][j], 1e-3, fmt.Sprintf("view %d recovers the camera", v))
						}
					}
				}
			}
		})
	}
}

func extrinsicsOf(r refTensor) []camera.Extrinsics {
	S := r.Shape[0]
	rows := r.Shape[1] // 3 or 4
	out := make([]camera.Extrinsics, S)
	for v := range out {
		for i := 0; i < 3; i++ {
			for j := 0; j < 4; j++ {
				out[v][i][j] = float64(r.Data[(v*rows+i)*4+j])
			}
		}
	}
	return out
}

func intrinsicsOf(r refTensor) []camera.Mat3 {
	out := make([]camera.Mat3, r.Shape[0])
	for v := range out {
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				out[v][i][j] = float64(r.Data[v*9+i*3+j])
			}
		}
	}
	return out
}

// The host maths of the pose-conditioned path against the package: the
// extrinsics normalisation, the camera encoder's input encoding, the
// alignment scale, and the intrinsics mapped to the processed images.
func TestParityGivenCameraMaths(t *testing.T) {
	dir := fixture(t, "da3-tiny-pose")
	for _, tc := range []string{"cam-one", "cam-two", "cam-four"} {
		t.Run(tc, func(t *testing.T) {
			meta := readMeta(t, filepath.Join(dir, tc, "meta.json"))
			ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
			hw := metaInts(meta, "processed_hw")
			given := extrinsicsOf(ref["cam.ext_in"])
			norm := camera.NormalizeExtrinsics(given)
			var gotNorm, gotEnc []float64
			ixt := intrinsicsOf(ref["cam.ixt_in"])
			for v, e := range norm {
				for i := 0; i < 3; i++ {
					gotNorm = append(gotNorm, e[i][:]...)
				}
				enc := camera.EncodePose(camera.Invert(e), ixt[v], hw[1], hw[0])
				gotEnc = append(gotEnc, f64s(enc[:])...)
			}
			var wantNorm []float64
			for _, e := range extrinsicsOf(ref["cam.ext_norm"]) {
				for i := 0; i < 3; i++ {
					wantNorm = append(wantNorm, e[i][:]...)
				}
			}
			d := maxAbsDiff(wantNorm, gotNorm)
			t.Logf("normalised extrinsics max|d| %.3g", d)
			assert.LessOrEqual(t, d, 1e-5)
			gate(t, "cam_enc pose encoding", ref["cam_enc.pose_enc"].Data, f32s(gotEnc), 0.99999, 1e-5)

			s := camera.AlignScale(extrinsicsOf(ref["pred_extrinsics"]), given)
			want := meta["align_scale_f64"].(float64)
			t.Logf("align scale %.9g (reference %.9g, %s)", s, want, meta["align"])
			assert.InDelta(t, want, s, 1e-5*want)

			// Original-image intrinsics to the processed image.
			user := intrinsicsOf(ref["cam.ixt_user"])
			sizes := meta["orig_sizes_wh"].([]any)
			for v := range user {
				wh := sizes[v].([]any)
				ow, oh := wh[0].(float64), wh[1].(float64)
				// The processed size before the batch crop follows from the
				// processed intrinsics' scale; the crop is what remains.
				sx, sy := ixt[v][0][0]/user[v][0][0], ixt[v][1][1]/user[v][1][1]
				rw, rh := math.Round(sx*ow), math.Round(sy*oh)
				cropX, cropY := int(rw)-hw[1], int(rh)-hw[0]
				got := camera.ProcessIntrinsics(user[v], rw/ow, rh/oh, cropX/2, cropY/2)
				for i := 0; i < 2; i++ {
					for j := 0; j < 3; j++ {
						assert.InDelta(t, ixt[v][i][j], got[i][j], 1e-4*math.Abs(ixt[v][i][j])+1e-4, "view %d K[%d][%d]", v, i, j)
					}
				}
			}
		})
	}
}

func f32s(v []float64) []float32 { return floats[float32](v) }

// saddle_sim_range picks the package's reference view (non-zero, with a
// margin) and the outputs in input order match end to end.
func TestParitySimRange(t *testing.T) {
	for _, dir := range poseDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { paritySimRange(t, dir) })
	}
}

func paritySimRange(t *testing.T, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "sim-four", "ref.safetensors")); err != nil {
		t.Skip("case sim-four not generated")
	}
	ref := refTensors(t, filepath.Join(dir, "sim-four", "ref.safetensors"))
	m, err := model.Load(context.Background(), convertFixture(t, dir, convert.Options{}), model.Options{Options: backend.Options{Device: "cpu"}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	in := ref["input"]
	S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
	res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, model.RunOptions{RefView: model.RefSaddleSimRange})
	require.NoError(t, err)
	var order []float32
	for _, i := range viewOrder(res) {
		order = append(order, float32(i))
	}
	assert.Equal(t, ref["view_order"].Data, order, "view order (reference view first)")
	gateOutputs(t, ref, res, "")
}

// gateOutputs compares the views' depth, confidence and camera-decoder
// pose encodings (in input order) with the reference's.
func gateOutputs(t *testing.T, ref map[string]refTensor, res []model.Result, note string) {
	t.Helper()
	var depth, conf, pose []float32
	for _, r := range res {
		depth = append(depth, r.Depth...)
		conf = append(conf, r.Conf...)
		pose = append(pose, r.Camera.PoseEncoding[:]...)
	}
	gate(t, "depth"+note, ref["depth"].Data, depth, 0.99999, 1e-4)
	gate(t, "conf", ref["conf"].Data, conf, 0.99999, 1e-4)
	gate(t, "pose_enc", ref["pose_enc"].Data, pose, 0.99999, 1e-4)
}

// stageGate compares a tap (network position order) with a reference stage
// (original view order).
func stageGate(t *testing.T, ref map[string]refTensor, taps map[string]backend.Tensor, order []int, refName, tapName string) {
	t.Helper()
	want, ok := ref[refName]
	require.True(t, ok, "reference %s", refName)
	got, ok := taps[tapName]
	if !assert.True(t, ok, "tap %s missing", tapName) {
		return
	}
	data := got.Data
	if S := len(order); S > 1 {
		data = toOriginal(data, order, len(data)/S)
	}
	gate(t, refName, want.Data, data, 0.99999, 1e-4)
}

// viewOrder is the order in which the network processed the views:
// order[position] = input index.
func viewOrder(res []model.Result) []int {
	order := make([]int, len(res))
	for i, r := range res {
		order[r.Position] = i
	}
	return order
}

// poseGate compares cameras: extrinsics max|d| ≤ 1e-4, intrinsics
// (pixels) max|d| ≤ 1e-4 of the largest.
func poseGate(t *testing.T, res []model.Result, wantExt, wantIntr []float32) {
	t.Helper()
	poseGateWithin(t, res, wantExt, wantIntr, 1e-4, 1e-4)
}

// poseGateWithin is poseGate with bounds: extrinsics max|d| ≤ extBound,
// intrinsics max|d| ≤ intrRel of the largest reference intrinsic.
func poseGateWithin(t *testing.T, res []model.Result, wantExt, wantIntr []float32, extBound, intrRel float64) {
	t.Helper()
	var ext, intr []float64
	for _, r := range res {
		require.NotNil(t, r.Camera)
		for i := 0; i < 3; i++ {
			ext = append(ext, r.Camera.Extrinsics[i][:]...)
			intr = append(intr, r.Camera.Intrinsics[i][:]...)
		}
	}
	we, wi := f64s(wantExt), f64s(wantIntr)
	if len(we) != len(ext) { // reference 4×4
		var e []float64
		for v := 0; v < len(res); v++ {
			e = append(e, we[v*16:v*16+12]...)
		}
		we = e
	}
	de, di := maxAbsDiff(we, ext), maxAbsDiff(wi, intr)
	var mi float64
	for _, x := range wi {
		mi = math.Max(mi, math.Abs(x))
	}
	t.Logf("%-22s max|d| %.3g;  intrinsics max|d| %.3g (rel %.3g)", "extrinsics", de, di, di/mi)
	assert.LessOrEqual(t, de, extBound, "extrinsics")
	assert.LessOrEqual(t, di, intrRel*mi, "intrinsics")
}

// raySensitivity measures how far the ray → pose solver's poses move when
// its input rays and confidences move by one float32 rounding (relative
// noise 2⁻²³ ≈ 1.2e-7 on every value, three seeded draws): the largest
// change of the extrinsics, and of the intrinsics relative to their largest
// value. The refit keeps the 8000 most confident rays of a sort, so where
// tens of thousands of confidences lie within a rounding of each other
// (full-size maps) the chosen set, and with it the pose, changes under any
// perturbation that large; the official solver behaves the same (measured on
// the full-size DA3-SMALL four-view case with the package's own rays: 9.4e-5
// under 1e-7 relative noise, 3.1e-4 under 1e-6).
func raySensitivity(t *testing.T, maps []camera.RayMap, w, h int, seed uint64) (ext, intrRel float64) {
	t.Helper()
	pose := func(ms []camera.RayMap) (e, k []float64) {
		fits, err := camera.SolveRays(ms, w, h, seed)
		require.NoError(t, err)
		for _, f := range fits {
			for i := 0; i < 3; i++ {
				e = append(e, f.Pose.Extrinsics[i][:]...)
				k = append(k, f.Pose.Intrinsics[i][:]...)
			}
		}
		return e, k
	}
	e0, k0 := pose(maps)
	var mk float64
	for _, x := range k0 {
		mk = math.Max(mk, math.Abs(x))
	}
	rng := rand.New(rand.NewPCG(7, uint64(len(maps))))
	const eps = 1.0 / (1 << 23)
	for range 3 {
		noisy := make([]camera.RayMap, len(maps))
		for v, m := range maps {
			n := camera.RayMap{H: m.H, W: m.W, Ray: make([]float32, len(m.Ray)), Conf: make([]float32, len(m.Conf))}
			for i, x := range m.Ray {
				n.Ray[i] = x * float32(1+eps*rng.NormFloat64())
			}
			for i, x := range m.Conf {
				n.Conf[i] = x * float32(1+eps*rng.NormFloat64())
			}
			noisy[v] = n
		}
		e, k := pose(noisy)
		ext = math.Max(ext, maxAbsDiff(e0, e))
		intrRel = math.Max(intrRel, maxAbsDiff(k0, k)/mk)
	}
	return ext, intrRel
}

// Ray pose end to end: the auxiliary ray head's stages and the poses the
// solver finds on the engine's own rays, against use_ray_pose.
func TestParityRayPose(t *testing.T) {
	for _, dir := range poseDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { parityRayPose(t, dir) })
	}
}

func parityRayPose(t *testing.T, dir string) {
	m := loadModel(t, convertFixture(t, dir, convert.Options{WithAux: true}))
	for _, tc := range []string{"ray-one", "ray-two", "ray-four"} {
		t.Run(tc, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, tc, "ref.safetensors")); err != nil {
				t.Skipf("case %s not generated", tc)
			}
			meta := readMeta(t, filepath.Join(dir, tc, "meta.json"))
			ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
			in := ref["input"]
			S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
			res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, model.RunOptions{RayPose: true,
				RaySeed: uint64(meta["torch_manual_seed"].(float64)), Taps: func(string) bool { return true }})
			require.NoError(t, err)
			order := viewOrder(res)
			stageGate(t, ref, res[0].Taps, order, "aux.out1", "head.aux.out1")
			stageGate(t, ref, res[0].Taps, order, "aux.logits", "head.aux.logits")
			var depth []float32
			for _, r := range res {
				depth = append(depth, r.Depth...)
			}
			gate(t, "depth", ref["depth"].Data, depth, 0.99999, 1e-4)
			// The poses: within 1e-4, or within twice the solver's own
			// movement under one float32 rounding of its input rays where that
			// is larger (two float32 implementations of the network cannot
			// agree to better than a rounding; the ray maps themselves are
			// gated above, and the solver on identical rays to 1e-6 in
			// TestParityRaySolver).
			se, si := raySensitivity(t, rayMaps(ref["ray"], ref["ray_conf"]), w, h, uint64(meta["torch_manual_seed"].(float64)))
			t.Logf("%-22s extrinsics %.3g, intrinsics %.3g of max under one rounding of the rays", "solver sensitivity", se, si)
			poseGateWithin(t, res, ref["extrinsics"].Data, ref["intrinsics"].Data, math.Max(1e-4, 2*se), math.Max(1e-4, 2*si))
		})
	}
}

// Given cameras end to end: the camera encoder's stages, the backbone with
// the given camera tokens, the head, and the aligned depth in the given
// scale, against the package's pose-conditioned inference path.
func TestParityGivenCameras(t *testing.T) {
	for _, dir := range poseDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { parityGivenCameras(t, dir) })
	}
}

func parityGivenCameras(t *testing.T, dir string) {
	m := loadModel(t, convertFixture(t, dir, convert.Options{}))
	for _, tc := range []string{"cam-one", "cam-two", "cam-four"} {
		t.Run(tc, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, tc, "ref.safetensors")); err != nil {
				t.Skipf("case %s not generated", tc)
			}
			meta := readMeta(t, filepath.Join(dir, tc, "meta.json"))
			ref := refTensors(t, filepath.Join(dir, tc, "ref.safetensors"))
			in := ref["input"]
			S, h, w := in.Shape[1], in.Shape[3], in.Shape[4]
			opt := model.RunOptions{Taps: func(string) bool { return true }}
			for v, e := range extrinsicsOf(ref["cam.ext_in"]) {
				k := intrinsicsOf(ref["cam.ixt_in"])[v]
				opt.Extrinsics = append(opt.Extrinsics, e)
				opt.ViewIntrinsics = append(opt.ViewIntrinsics, model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]})
			}
			res, err := m.Forward(context.Background(), model.Pixels{Data: in.Data, Width: w, Height: h, Views: S}, opt)
			require.NoError(t, err)
			taps := res[0].Taps
			order := viewOrder(res)
			assert.Equal(t, []int{0, 1, 2, 3}[:S], order, "no reference view with given cameras")
			for _, st := range [][2]string{
				{"cam_enc.pose_enc", "cam_enc.pose_enc"}, {"cam_enc.branch", "cam_enc.branch"},
				{"cam_enc.token_norm", "cam_enc.token_norm"}, {"cam_enc.trunk.0", "cam_enc.trunk.0"},
				{"cam_enc.tokens", "cam_enc.tokens"}, {"after_cam_token", "vit.cam_injected"},
				{"feat.3", "vit.feat.3"}, {"cam_tok.3", "vit.cam_tok.3"}, {"logits", "head.logits"},
			} {
				stageGate(t, ref, taps, order, st[0], st[1])
			}
			gateOutputs(t, ref, res, " (aligned)")
			s := meta["align_scale_f64"].(float64)
			t.Logf("align scale %.9g (reference %.9g)", res[0].AlignScale, s)
			assert.InDelta(t, s, res[0].AlignScale, 1e-4*s)
			poseGate(t, res, ref["extrinsics"].Data, ref["intrinsics"].Data)
		})
	}
}
