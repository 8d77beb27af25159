package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/fetch"
)

// markCached puts a verified-looking copy of a published model in dir.
func markCached(t *testing.T, dir, name string) fetch.Model {
	t.Helper()
	m, ok := fetch.Lookup(name)
	require.True(t, ok, name)
	path := filepath.Join(dir, m.File)
	require.NoError(t, os.WriteFile(path, []byte("gguf"), 0o644))
	require.NoError(t, os.WriteFile(path+".sha256", []byte(m.SHA256+"  "+m.File+"\n"), 0o644))
	return m
}

func modelsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestModelsTable(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envCacheDir, dir)
	markCached(t, dir, "da2-small")
	markCached(t, dir, "da3-nested-metric")

	var stdout, stderr bytes.Buffer
	code := run(modelsCtx(t), []string{"models"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Empty(t, stderr.String())

	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	require.Greater(t, len(lines), len(fetch.Names())+1)
	assert.Equal(t, []string{"NAME", "FAMILY", "FILE", "CACHED", "LICENCE", "SOURCE"}, strings.Fields(lines[0]))
	rows := map[string][]string{}
	for _, l := range lines[1 : 1+len(fetch.Names())] {
		f := strings.Fields(l)
		require.Len(t, f, 6, l)
		rows[f[0]] = f[1:]
	}
	const hf = "https://huggingface.co/depth-anything/"
	assert.Len(t, rows, len(fetch.Names()))
	assert.Equal(t, []string{"da2", "depth-anything2-small-f32.gguf", "yes", "Apache-2.0", hf + "Depth-Anything-V2-Small"}, rows["da2-small"])
	assert.Equal(t, []string{"da3-nested", "depth-anything-nested-metric.gguf", "yes", "CC-BY-NC-4.0", hf + "DA3NESTED-GIANT-LARGE"}, rows["da3-nested-metric"])
	assert.Equal(t, []string{"da2-metric", "depth-anything2-metric-hypersim-small-f32.gguf", "-", "Apache-2.0", hf + "Depth-Anything-V2-Metric-Hypersim-Small"}, rows["da2-metric-indoor-small"])
	assert.Equal(t, []string{"da3", "depth-anything-base-q4_k.gguf", "-", "Apache-2.0", hf + "DA3-BASE"}, rows["da3-base-q4_k"])
	assert.Equal(t, []string{"da3", "depth-anything-large-f32.gguf", "-", "CC-BY-NC-4.0", hf + "DA3-LARGE"}, rows["da3-large"])
	assert.Regexp(t, `(?m)^  da3-large-1\.1\s+da3\s+`+hf+`DA3-LARGE-1\.1$`, stdout.String(), "unpublished names are listed")
	assert.Contains(t, stdout.String(), "convert the official checkpoint with `da3-go convert`")
	assert.Contains(t, stdout.String(), "non-commercial use only")
	assert.Contains(t, stdout.String(), "Cache: "+dir)
}

func TestModelsJSON(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envCacheDir, dir)
	cached := markCached(t, dir, "da2-metric-outdoor-base-q8_0")

	var stdout, stderr bytes.Buffer
	code := run(modelsCtx(t), []string{"models", "-json"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	var rep struct {
		CacheDir string `json:"cache_dir"`
		Models   []struct {
			Name    string   `json:"name"`
			Aliases []string `json:"aliases"`
			Family  string   `json:"family"`
			File    string   `json:"file"`
			SHA256  string   `json:"sha256"`
			Licence string   `json:"licence"`
			NC      bool     `json:"non_commercial"`
			Source  string   `json:"source"`
			Cached  bool     `json:"cached"`
			Path    string   `json:"path"`
		} `json:"models"`
		GGUFRepo    string `json:"gguf_repo"`
		Unpublished []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"unpublished"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	assert.Equal(t, dir, rep.CacheDir)
	require.Len(t, rep.Models, len(fetch.Names()))
	nCached := 0
	assert.Equal(t, "https://huggingface.co/mudler/depth-anything.cpp-gguf", rep.GGUFRepo)
	require.Len(t, rep.Unpublished, len(fetch.Unpublished()))
	assert.Equal(t, "da3-large-1.1", rep.Unpublished[0].Name)
	for _, m := range rep.Models {
		assert.Len(t, m.SHA256, 64, m.Name)
		assert.NotEmpty(t, m.Licence, m.Name)
		assert.NotEmpty(t, m.Source, m.Name)
		assert.Equal(t, m.Licence == "CC-BY-NC-4.0", m.NC, m.Name)
		if m.Cached {
			nCached++
			assert.Equal(t, cached.Name, m.Name)
			assert.Equal(t, filepath.Join(dir, cached.File), m.Path)
			assert.Equal(t, cached.SHA256, m.SHA256)
			assert.Equal(t, []string{"da2-metric-vkitti-base-q8_0"}, m.Aliases)
			assert.Equal(t, "CC-BY-NC-4.0", m.Licence)
			assert.Equal(t, "https://huggingface.co/depth-anything/Depth-Anything-V2-Metric-VKITTI-Base", m.Source)
		} else {
			assert.Empty(t, m.Path)
		}
	}
	assert.Equal(t, 1, nCached)
}

func TestModelsUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, run(modelsCtx(t), []string{"models", "extra"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "models takes no arguments")
	assert.Empty(t, stdout.String())

	stderr.Reset()
	assert.Equal(t, exitOK, run(modelsCtx(t), []string{"help", "models"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "usage: da3-go models [-json]")
	assert.Empty(t, stderr.String())
}

// fakeRegistry serves one small model from a test server through the
// environment, as a published model would be.
func fakeRegistry(t *testing.T) (m fetch.Model, payload []byte, requests *atomic.Int32) {
	t.Helper()
	payload = bytes.Repeat([]byte("depth anything "), 20_000)
	sum := sha256.Sum256(payload)
	m = fetch.Model{Name: "fake-small", Family: "da2", File: "fake-small-f32.gguf", SHA256: hex.EncodeToString(sum[:])}
	requests = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/"+m.File {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, m.File, time.Time{}, bytes.NewReader(payload))
	}))
	t.Cleanup(srv.Close)
	modelRegistry = []fetch.Model{m}
	t.Cleanup(func() { modelRegistry = nil })
	t.Setenv(envBaseURL, srv.URL)
	t.Setenv(envCacheDir, t.TempDir())
	return m, payload, requests
}

func TestResolveModelDownloadsOnce(t *testing.T) {
	m, payload, requests := fakeRegistry(t)
	dir := os.Getenv(envCacheDir)

	var stderr bytes.Buffer
	path, err := resolveModel(modelsCtx(t), "fake-small", false, &stderr)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, m.File), path)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, "da3-go: downloading fake-small (fake-small-f32.gguf) into "+dir+"\n", stderr.String())
	assert.Equal(t, int32(1), requests.Load())

	stderr.Reset()
	again, err := resolveModel(modelsCtx(t), "fake-small", false, &stderr)
	require.NoError(t, err)
	assert.Equal(t, path, again)
	assert.Empty(t, stderr.String())
	assert.Equal(t, int32(1), requests.Load())

	var stdout bytes.Buffer
	require.Equal(t, exitOK, run(modelsCtx(t), []string{"models"}, &stdout, &stderr))
	assert.Regexp(t, `(?m)^fake-small\s+da2\s+fake-small-f32\.gguf\s+yes\s+-\s+-$`, stdout.String())
}

func TestResolveModelQuietAndResume(t *testing.T) {
	m, payload, requests := fakeRegistry(t)
	dir := os.Getenv(envCacheDir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.File+".part"), payload[:1<<20/4], 0o644))

	var stderr bytes.Buffer
	path, err := resolveModel(modelsCtx(t), m.File, true, &stderr)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Empty(t, stderr.String())
	assert.Equal(t, int32(1), requests.Load())

	// Not quiet: the resumed offset is reported.
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.File+".part"), payload[:1<<20/4], 0o644))
	_, err = resolveModel(modelsCtx(t), "fake-small", false, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "da3-go: resuming download of fake-small (fake-small-f32.gguf) into "+dir+" at 0.2 MiB\n", stderr.String())
}

func TestResolveModelPathsAndErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "local.gguf")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	var stderr bytes.Buffer
	path, err := resolveModel(modelsCtx(t), file, false, &stderr)
	require.NoError(t, err)
	assert.Equal(t, file, path)

	_, err = resolveModel(modelsCtx(t), "da2-smal", false, &stderr)
	require.ErrorIs(t, err, fetch.ErrUnknownModel)
	assert.Contains(t, err.Error(), "did you mean da2-small")
	assert.Contains(t, err.Error(), "'da3-go models'")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	t.Setenv(envBaseURL, "http://"+addr)
	t.Setenv(envCacheDir, t.TempDir())
	_, err = resolveModel(modelsCtx(t), "da2-small", false, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot download depth-anything2-small-f32.gguf from "+addr+": no network connection")
	assert.Empty(t, stderr.String())
	assert.Equal(t, exitFailure, fail(&stderr, err))
	assert.True(t, strings.HasPrefix(stderr.String(), "da3-go: cannot download"))
}

func TestResolveModelInterrupted(t *testing.T) {
	_, _, requests := fakeRegistry(t)
	ctx, cancel := context.WithCancel(modelsCtx(t))
	cancel()
	var stderr bytes.Buffer
	_, err := resolveModel(ctx, "fake-small", false, &stderr)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, exitInterrupted, fail(&stderr, err))
	assert.Equal(t, int32(0), requests.Load())
}
