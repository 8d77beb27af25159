package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/server"
)

// The da3-go binary, built once per test run with the same toolchain and
// CGO flags as the tests (so the build cache is reused).
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the binary's directory when the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func da3goBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "da3-go-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "da3-go")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/da3-go").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// served is a running `da3-go serve` process.
type served struct {
	url string
	cmd *exec.Cmd
	mu  sync.Mutex
	log bytes.Buffer // stderr
}

func (s *served) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// startServe runs `da3-go serve args...` on a free loopback port and waits
// until it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(da3goBinary(t), append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &served{cmd: cmd}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, "da3-go serve: listening on "); ok {
				ready <- rest
			}
		}
		close(ready)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	select {
	case url, ok := <-ready:
		require.True(t, ok, "da3-go serve exited:\n%s", s.stderr())
		s.url = url
	case <-time.After(60 * time.Second):
		t.Fatalf("da3-go serve did not start:\n%s", s.stderr())
	}
	return s
}

// cpuSeconds is the CPU time a process (all its threads) has used: utime +
// stime of /proc/PID/stat, in clock ticks of 1/100 s (USER_HZ on Linux).
func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, err := strconv.ParseFloat(fields[11], 64)
	require.NoError(t, err)
	stime, err := strconv.ParseFloat(fields[12], 64)
	require.NoError(t, err)
	return (utime + stime) / 100
}

// rssKiB is a process's resident set (VmRSS) in KiB.
func rssKiB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func depthJSON(t *testing.T, files []string, extra map[string]any) []byte {
	t.Helper()
	var imgs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		imgs = append(imgs, base64.StdEncoding.EncodeToString(b))
	}
	req := map[string]any{"images": imgs}
	for k, v := range extra {
		req[k] = v
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return b
}

func postDepth(client *http.Client, url, contentType string, body []byte) (int, []byte, error) {
	resp, err := client.Post(url+"/v1/depth", contentType, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func mapF32(t *testing.T, m *server.Map) []float32 {
	t.Helper()
	require.NotNil(t, m)
	b, err := base64.StdEncoding.DecodeString(m.F32)
	require.NoError(t, err)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestServeEndToEnd starts the real server on a loopback port with the tiny
// DA3 fixture and checks its depth equals the library's bit for bit, then
// that SIGTERM lets the request in flight finish.
func TestServeEndToEnd(t *testing.T) {
	dir := fixture(t, "da3-tiny")
	gguf := convertFixture(t, dir, convert.Options{})
	s := startServe(t, "-model", "tiny="+gguf, "-threads", "1", "-quiet")
	views := []string{dir + "/four/images/view0.png", dir + "/four/images/view1.png", dir + "/four/images/view2.png", dir + "/four/images/view3.png"}

	m, err := model.Load(context.Background(), gguf, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	var imgs []image.Image
	for _, f := range views {
		img, err := imgio.Decode(f)
		require.NoError(t, err)
		imgs = append(imgs, img)
	}

	t.Run("JSON one view", func(t *testing.T) {
		code, body, err := postDepth(http.DefaultClient, s.url, "application/json", depthJSON(t, views[:1], map[string]any{"process_res": 56}))
		require.NoError(t, err)
		require.Equal(t, 200, code, string(body))
		var r server.DepthResponse
		require.NoError(t, json.Unmarshal(body, &r))
		want, err := m.Depth(context.Background(), imgs[0], model.RunOptions{ProcessRes: 56})
		require.NoError(t, err)
		assert.Equal(t, "tiny", r.Model)
		assert.Equal(t, want.Depth, mapF32(t, r.Views[0].Depth), "depth over HTTP equals the library's, bit for bit")
		assert.Equal(t, want.Conf, mapF32(t, r.Views[0].Confidence))
		assert.Equal(t, want.Camera.Extrinsics, *r.Views[0].Extrinsics)
	})
	t.Run("multipart four views", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, f := range views {
			w, err := mw.CreateFormFile("image", filepath.Base(f))
			require.NoError(t, err)
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			w.Write(b)
		}
		mw.WriteField("process_res", "56")
		mw.WriteField("ref_view", "middle")
		require.NoError(t, mw.Close())
		code, body, err := postDepth(http.DefaultClient, s.url, mw.FormDataContentType(), buf.Bytes())
		require.NoError(t, err)
		require.Equal(t, 200, code, string(body))
		var r server.DepthResponse
		require.NoError(t, json.Unmarshal(body, &r))
		want, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 56, RefView: model.RefMiddle})
		require.NoError(t, err)
		require.Len(t, r.Views, 4)
		for i := range want {
			assert.Equal(t, want[i].Depth, mapF32(t, r.Views[i].Depth), "view %d", i)
			assert.Equal(t, want[i].Camera.Extrinsics, *r.Views[i].Extrinsics, "view %d", i)
		}
	})
	t.Run("SIGTERM finishes the run in flight", func(t *testing.T) {
		// Four views at 1008 px keep the tiny model busy for a while.
		got := make(chan int, 1)
		go func() {
			code, _, err := postDepth(http.DefaultClient, s.url, "application/json", depthJSON(t, views, map[string]any{"process_res": 1008, "include_depth": true}))
			if err != nil {
				code = -1
			}
			got <- code
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(metrics(t, s.url), `da3_runs_in_flight{model="tiny"} 1`) {
			require.True(t, time.Now().Before(deadline), "the long request never started")
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 200, <-got, "the request in flight is answered")
		require.NoError(t, s.cmd.Wait(), "exit status 0 after a graceful shutdown:\n%s", s.stderr())
		assert.Contains(t, s.stderr(), "da3-go serve: stopped")
		_, err := http.Get(s.url + "/healthz")
		assert.Error(t, err, "no longer listening")
	})
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func metrics(t *testing.T, url string) string {
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeLoad sends 200 requests at concurrency 8 to the real server (tiny
// DA3 model, one 61×45 image at process_res 56, one run at a time on one
// thread) and reports latency p50/p99, throughput and resident memory before
// and after, and the server's CPU time per request (requests per second
// one core serves). Every request must be answered 200 and the resident memory must
// stay flat. One thread: ggml's CPU threads wait for each other spinning, so
// on a machine shared with other work (as this test's usually is) runs with
// several threads stall whenever one of them is descheduled.
//
// DA3_LOADTEST_MODEL (a GGUF), DA3_LOADTEST_IMAGE, DA3_LOADTEST_REQUESTS,
// DA3_LOADTEST_CONCURRENCY and DA3_LOADTEST_ARGS (extra serve flags, e.g.
// "-parallel 2") measure other set-ups; DA3_LOADTEST_OUT writes the figures
// as JSON.
func TestServeLoad(t *testing.T) {
	total, concurrency, warmup := envInt("DA3_LOADTEST_REQUESTS", 200), envInt("DA3_LOADTEST_CONCURRENCY", 8), 40
	dir := fixture(t, "da3-tiny")
	gguf, image, extra := os.Getenv("DA3_LOADTEST_MODEL"), os.Getenv("DA3_LOADTEST_IMAGE"), map[string]any{}
	if gguf == "" {
		gguf = convertFixture(t, dir, convert.Options{})
		extra["process_res"] = 56
	} else {
		warmup = concurrency
	}
	if image == "" {
		image = dir + "/one/images/view0.png"
	}
	args := append([]string{"-model", gguf, "-quiet", "-threads", "1", "-parallel", "1", "-max-queue", strconv.Itoa(concurrency)},
		strings.Fields(os.Getenv("DA3_LOADTEST_ARGS"))...)
	s := startServe(t, args...)
	body := depthJSON(t, []string{image}, extra)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}

	run := func(n int) (lat []time.Duration, elapsed time.Duration, failures []string) {
		var mu sync.Mutex
		jobs := make(chan struct{}, n)
		for range n {
			jobs <- struct{}{}
		}
		close(jobs)
		start := time.Now()
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				for range jobs {
					t0 := time.Now()
					code, b, err := postDepth(client, s.url, "application/json", body)
					d := time.Since(t0)
					mu.Lock()
					if err != nil || code != 200 {
						failures = append(failures, fmt.Sprintf("%d %v %.200s", code, err, b))
					} else {
						lat = append(lat, d)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return lat, time.Since(start), failures
	}
	_, _, failures := run(warmup)
	require.Empty(t, failures)
	pid := s.cmd.Process.Pid
	before, cpu0 := rssKiB(t, pid), cpuSeconds(t, pid)
	lat, elapsed, failures := run(total)
	after, cpu1 := rssKiB(t, pid), cpuSeconds(t, pid)
	require.Empty(t, failures, "every request answered 200")
	require.Len(t, lat, total)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(math.Ceil(p*float64(len(lat))))-1] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep := map[string]any{
		"requests": total, "concurrency": concurrency, "cpus": runtime.NumCPU(), "model": filepath.Base(gguf), "serve_args": args[1:],
		"p50_ms": ms(pct(0.50)), "p90_ms": ms(pct(0.90)), "p99_ms": ms(pct(0.99)), "max_ms": ms(lat[len(lat)-1]),
		"throughput_rps": float64(total) / elapsed.Seconds(), "elapsed_s": elapsed.Seconds(),
		"rss_before_mib": float64(before) / 1024, "rss_after_mib": float64(after) / 1024,
		// The server's CPU time per request, and so the requests one core
		// serves per second: a figure that other work on the machine
		// disturbs far less than the wall-clock ones.
		"server_cpu_ms_per_request": 1000 * (cpu1 - cpu0) / float64(total), "per_core_rps": float64(total) / (cpu1 - cpu0),
	}
	js, _ := json.Marshal(rep)
	t.Logf("load test: %s", js)
	if out := os.Getenv("DA3_LOADTEST_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, append(js, '\n'), 0o644))
	}
	assert.Contains(t, metrics(t, s.url), fmt.Sprintf(`da3_http_requests_total{handler="/v1/depth",code="200"} %d`, total+warmup))
	// Flat: no growth beyond allocator noise after the warm-up.
	assert.Less(t, after, before+before/4+16<<10, "RSS grew from %d to %d KiB over %d requests", before, after, total)
}
