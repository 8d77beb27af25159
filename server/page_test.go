package server

import (
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/imgio"
)

// TestPageInChromium opens the page in headless Chromium (Debian's chromium
// driven by playwright-core from server/web/viewer) at 1400×1000, uploads the
// two-view fixture, and checks: the form shows the model's default process
// res; a spinner with the elapsed seconds shows, and Run is disabled, while
// the request runs; the depth images and, beside them within the first
// screen, the 3D canvas with its control hints; the points drawn in their
// GLB colours (sRGB bytes: the renderer must not treat them as linear, which
// lightens them by about 50 levels); the camera frusta drawn large enough to
// see; and a screenshot that is not blank. DA3_PAGE_SCREENSHOT=path keeps the screenshot
// (the README's docs/serve.png comes from it). It skips when Chromium, node,
// the npm packages or the viewer bundle are missing: `make web` builds them,
// apt-get install chromium provides the browser.
func TestPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	browser := os.Getenv("CHROMIUM")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	if _, err := os.Stat(browser); err != nil {
		t.Skipf("page test skipped: no Chromium at %s (apt-get install chromium, or set CHROMIUM)", browser)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("page test skipped: node is not installed")
	}
	if _, err := os.Stat("web/viewer/node_modules/playwright-core"); err != nil {
		t.Skip("page test skipped: npm packages missing (make web)")
	}
	if !ViewerBundled() {
		t.Skip("page test skipped: the 3D viewer is not bundled (make web, then rebuild)")
	}
	_, ts := newTestServer(t, Options{})
	shot := filepath.Join(t.TempDir(), "page.png")
	out := runPageTest(t, node, browser, ts.URL, shot, false)

	type box struct{ Top, Bottom, Left, Right float64 }
	var seen struct {
		DepthWidth    int `json:"depth_width"`
		DepthHeight   int `json:"depth_height"`
		Views         int
		Points        int
		Cameras       int
		CanvasWidth   int       `json:"canvas_width"`
		CanvasHeight  int       `json:"canvas_height"`
		CanvasColours int       `json:"canvas_colours"`
		CanvasBox     box       `json:"canvas_box"`
		DepthBox      box       `json:"depth_box"`
		Hints         string    `json:"hints"`
		ProcessRes    string    `json:"process_res"`
		OtherRes      string    `json:"other_process_res"`
		GLBMean       []float64 `json:"glb_mean"`
		PointMean     []float64 `json:"point_mean"`
		PointPixels   int       `json:"point_pixels"`
		CameraPixels  int       `json:"camera_pixels"`
		Progress      struct {
			Shown       bool     `json:"shown"`
			RunDisabled bool     `json:"run_disabled"`
			Elapsed     []string `json:"elapsed"`
		} `json:"progress"`
		Downloads []string `json:"downloads"`
		Errors    []string `json:"errors"`
		Status    string   `json:"status"`
	}
	require.NoError(t, json.Unmarshal(out, &seen), "%s", out)
	t.Logf("page: %s", out)
	assert.Empty(t, seen.Errors, "no script errors in the page")
	assert.Equal(t, 2, seen.Views, "one row per view")
	hd, err := imgio.DecodeHeaderBytes(readFile(t, view0), "view0")
	require.NoError(t, err)
	assert.Equal(t, [2]int{hd.Width, hd.Height}, [2]int{seen.DepthWidth, seen.DepthHeight}, "depth image at the image size")
	assert.Greater(t, seen.Points, 100, "the GLB's point cloud reached the viewer")
	assert.Greater(t, seen.CanvasWidth, 200)
	assert.Greater(t, seen.CanvasColours, 20, "the 3D canvas is drawn, not blank")

	assert.Equal(t, "504", seen.ProcessRes, "the form shows the model's default process res (GET /v1/models)")
	assert.Equal(t, "518", seen.OtherRes, "the form follows the chosen model's default (da2-tiny)")
	assert.True(t, seen.Progress.Shown, "a progress indicator while the request runs")
	assert.True(t, seen.Progress.RunDisabled, "Run is disabled while the request runs")
	require.NotEmpty(t, seen.Progress.Elapsed)
	assert.Regexp(t, `^\d+\.\d s$`, seen.Progress.Elapsed[0], "elapsed seconds")

	const screen = 1000 // the viewport's height: the first screen
	assert.Less(t, seen.CanvasBox.Top, float64(screen), "the 3D view starts within the first screen")
	assert.LessOrEqual(t, seen.CanvasBox.Bottom, float64(screen), "the whole 3D view is within the first screen")
	assert.Greater(t, seen.CanvasBox.Bottom-seen.CanvasBox.Top, 300.0, "the 3D view has room")
	assert.GreaterOrEqual(t, seen.CanvasBox.Left, seen.DepthBox.Right, "the 3D view is beside the maps")
	assert.Less(t, seen.CanvasBox.Top, seen.DepthBox.Bottom, "the 3D view is beside the maps, not below them")
	for _, hint := range []string{"orbit", "zoom", "pan"} {
		assert.Contains(t, seen.Hints, hint, "the 3D view's control hints")
	}

	// The points' colours: the mean of the pixels points cover against the
	// mean of the GLB's point colours. They differ a little (the canvas shows
	// the points in front; the GLB has them all); a renderer that takes the
	// sRGB bytes as linear shows them about 50 levels lighter.
	require.Len(t, seen.GLBMean, 3)
	require.Len(t, seen.PointMean, 3, "the canvas has pixels covered by points")
	assert.Greater(t, seen.PointPixels, 5000, "the points cover much of the canvas")
	var glbMean, pointMean float64
	for k := range 3 {
		assert.InDelta(t, seen.GLBMean[k], seen.PointMean[k], 25, "channel %d of the points' colour, rendered vs GLB", k)
		glbMean += seen.GLBMean[k] / 3
		pointMean += seen.PointMean[k] / 3
	}
	assert.InDelta(t, glbMean, pointMean, 15, "the points' brightness, rendered vs GLB")

	// The cameras: two frusta, drawn over the points, big enough to see.
	assert.Equal(t, 2, seen.Cameras)
	assert.Greater(t, seen.CameraPixels, 800, "the camera frusta cover a visible part of the canvas")
	for _, want := range []string{"view0_depth.npy", "view0_depth.png", "view0_depth_16.png", "view0_depth.f32", "view1_confidence.npy",
		"cameras.json", "scene.glb", "scene.ply", "results.npz", "results_mini.npz", "colmap.zip", "response.json"} {
		assert.Contains(t, seen.Downloads, want)
	}

	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, distinctColours(img), 200, "the screenshot is not blank")
	if keep := os.Getenv("DA3_PAGE_SCREENSHOT"); keep != "" {
		b, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(keep, b, 0o644))
	}

	// The same page from a binary built without npm: depth and downloads,
	// and a sentence saying the viewer is not bundled.
	s, err := New(context.Background(), Options{Models: []ModelSpec{{Path: da3Tiny}}, Threads: 1, Logger: quietLog})
	require.NoError(t, err)
	defer s.Close()
	s.noViewer = true
	s.handler = s.routes()
	bare := httptest.NewServer(s.Handler())
	defer bare.Close()
	out = runPageTest(t, node, browser, bare.URL, shot, true)
	var fallback struct {
		Missing      string   `json:"missing"`
		ViewerHidden bool     `json:"viewer_hidden"`
		HintsHidden  bool     `json:"hints_hidden"`
		ProcessRes   string   `json:"process_res"`
		Views        int      `json:"views"`
		Downloads    []string `json:"downloads"`
		Errors       []string `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(out, &fallback), "%s", out)
	assert.Contains(t, fallback.Missing, "not bundled")
	assert.True(t, fallback.ViewerHidden)
	assert.True(t, fallback.HintsHidden, "no control hints without the viewer")
	assert.Equal(t, "504", fallback.ProcessRes)
	assert.Equal(t, 2, fallback.Views)
	assert.Contains(t, fallback.Downloads, "scene.glb", "the exports download without the viewer")
	assert.Empty(t, fallback.Errors)
}

// runPageTest runs pagetest.mjs against url and returns its JSON line.
func runPageTest(t *testing.T, node, browser, url, shot string, noViewer bool) []byte {
	t.Helper()
	abs := func(p string) string { a, err := filepath.Abs(p); require.NoError(t, err); return a }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "pagetest.mjs", url+"/", shot, abs(view0), abs(view1))
	cmd.Dir = "web/viewer"
	cmd.Env = append(os.Environ(), "CHROMIUM="+browser)
	if noViewer {
		cmd.Env = append(cmd.Env, "EXPECT_NO_VIEWER=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "pagetest.mjs: %s", stderr.String())
	return out
}

func distinctColours(img image.Image) int {
	seen := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
		}
	}
	return len(seen)
}
