package fetch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/fetch"
)

const fakeFile = "fake-model-f32.gguf"

// fakeModel is a registry entry for a small random payload with its real digest.
func fakeModel(t *testing.T, size int) (fetch.Model, []byte) {
	t.Helper()
	payload := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 7))
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(payload)
	return fetch.Model{Name: "fake-small", Aliases: []string{"fake-small-f32"}, Family: "da2", File: fakeFile, SHA256: hex.EncodeToString(sum[:])}, payload
}

// server serves handlers in order, one per request (the last repeats), and
// records each request's Range header.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	ranges   []string
	handlers []http.HandlerFunc
}

func newServer(t *testing.T, handlers ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{handlers: handlers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		i := len(s.ranges)
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		h := s.handlers[min(i, len(s.handlers)-1)]
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// serve answers like a real file server (Range and 206 included).
func serve(payload []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+fakeFile {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, fakeFile, time.Time{}, bytes.NewReader(payload))
	}
}

// ignoreRange always answers 200 with the whole payload.
func ignoreRange(payload []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload)
	}
}

// cutAfter announces the whole payload, sends n bytes and drops the connection.
func cutAfter(payload []byte, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload[:n])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

// stallAfter sends n bytes, then nothing until the client goes away.
func stallAfter(payload []byte, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload[:n])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// opts selects the fake registry, a fresh cache and the test server.
func opts(t *testing.T, m fetch.Model, url string) fetch.Options {
	return fetch.Options{CacheDir: t.TempDir(), BaseURL: url, Registry: []fetch.Model{m}}
}

func TestResolveDownloadsVerifiesAndReuses(t *testing.T) {
	m, payload := fakeModel(t, 300_000)
	srv := newServer(t, serve(payload))
	o := opts(t, m, srv.URL)
	var last [2]int64
	calls := 0
	o.Progress = func(done, total int64) { last = [2]int64{done, total}; calls++ }

	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(o.CacheDir, fakeFile), path)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, [2]int64{int64(len(payload)), int64(len(payload))}, last)
	assert.Greater(t, calls, 1)
	marker, err := os.ReadFile(path + ".sha256")
	require.NoError(t, err)
	assert.Equal(t, m.SHA256+"  "+fakeFile+"\n", string(marker))
	assert.NoFileExists(t, path+".part")
	assert.Equal(t, []string{""}, srv.requests())

	cached, ok := fetch.Cached(m, o)
	assert.True(t, ok)
	assert.Equal(t, path, cached)

	// Reuse: by alias, by file name, in any case; no further request.
	for _, name := range []string{"fake-small", "FAKE-SMALL-F32", fakeFile, strings.TrimSuffix(fakeFile, ".gguf")} {
		p, err := fetch.Resolve(testCtx(t), name, o)
		require.NoError(t, err, name)
		assert.Equal(t, path, p)
	}
	assert.Len(t, srv.requests(), 1)

	// The marker is trusted: a verified file is not hashed again (a changed
	// file of the same size goes unnoticed, and no request is made).
	changed := bytes.Clone(payload)
	changed[0] ^= 0xFF
	require.NoError(t, os.WriteFile(path, changed, 0o644))
	p, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	assert.Equal(t, path, p)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, changed, got)
	assert.Len(t, srv.requests(), 1)
}

// TestResolveOptions: the cache directory and the base URL come from the
// options (a trailing slash on the URL is fine).
func TestResolveOptions(t *testing.T) {
	m, payload := fakeModel(t, 1000)
	srv := newServer(t, serve(payload))
	cache := t.TempDir()

	path, err := fetch.Resolve(testCtx(t), "fake-small", fetch.Options{Registry: []fetch.Model{m}, BaseURL: srv.URL + "/", CacheDir: cache})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, fakeFile), path)
	assert.Len(t, srv.requests(), 1)
}

func TestResolveResumesAfterDroppedConnection(t *testing.T) {
	m, payload := fakeModel(t, 200_000)
	const cut = 70_000
	srv := newServer(t, cutAfter(payload, cut), serve(payload))
	o := opts(t, m, srv.URL)

	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"", "bytes=" + strconv.Itoa(cut) + "-"}, srv.requests())
}

func TestResolveResumesPartFromEarlierRun(t *testing.T) {
	m, payload := fakeModel(t, 200_000)
	const cut = 50_000
	srv := newServer(t, cutAfter(payload, cut), serve(payload))
	o := opts(t, m, srv.URL)
	o.MaxAttempts = 1

	_, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run again to resume")
	part := filepath.Join(o.CacheDir, fakeFile+".part")
	fi, err := os.Stat(part)
	require.NoError(t, err)
	assert.Equal(t, int64(cut), fi.Size())

	var first [2]int64
	o.Progress = func(done, total int64) {
		if first == [2]int64{} {
			first = [2]int64{done, total}
		}
	}
	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"", "bytes=50000-"}, srv.requests())
	assert.Equal(t, [2]int64{cut, int64(len(payload))}, first, "progress starts from the resumed offset")
}

func TestResolveServerIgnoringRangeRestarts(t *testing.T) {
	m, payload := fakeModel(t, 100_000)
	srv := newServer(t, ignoreRange(payload))
	o := opts(t, m, srv.URL)
	// A .part whose bytes are wrong: appending the 200 body to it would
	// corrupt the file, so it must be discarded.
	part := filepath.Join(o.CacheDir, fakeFile+".part")
	require.NoError(t, os.WriteFile(part, bytes.Repeat([]byte{0xAA}, 30_000), 0o644))

	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"bytes=30000-"}, srv.requests())
}

func TestResolveWrongContentRangeRestarts(t *testing.T) {
	m, payload := fakeModel(t, 100_000)
	wrong := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-99999/100000")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(payload)
	}
	srv := newServer(t, wrong, serve(payload))
	o := opts(t, m, srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(o.CacheDir, fakeFile+".part"), payload[:40_000], 0o644))

	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"bytes=40000-", ""}, srv.requests())
}

func TestResolveCompletePart(t *testing.T) {
	m, payload := fakeModel(t, 10_000)
	srv := newServer(t, serve(payload)) // answers 416 to bytes=10000-
	o := opts(t, m, srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(o.CacheDir, fakeFile+".part"), payload, 0o644))

	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"bytes=10000-"}, srv.requests())
}

func TestResolveStalledTransferResumes(t *testing.T) {
	m, payload := fakeModel(t, 100_000)
	srv := newServer(t, stallAfter(payload, 20_000), serve(payload))
	o := opts(t, m, srv.URL)
	o.StallTimeout = 200 * time.Millisecond

	start := time.Now()
	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"", "bytes=20000-"}, srv.requests())
}

func TestResolveChecksumMismatch(t *testing.T) {
	m, payload := fakeModel(t, 5000)
	payload[100] ^= 1
	srv := newServer(t, serve(payload))
	o := opts(t, m, srv.URL)

	_, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.Error(t, err)
	assert.ErrorIs(t, err, fetch.ErrChecksum)
	assert.Contains(t, err.Error(), "SHA-256 mismatch")
	assert.Contains(t, err.Error(), "deleted")
	assert.Contains(t, err.Error(), m.SHA256)
	assert.NoFileExists(t, filepath.Join(o.CacheDir, fakeFile))
	assert.NoFileExists(t, filepath.Join(o.CacheDir, fakeFile+".part"))
	_, ok := fetch.Cached(m, o)
	assert.False(t, ok)
}

func TestResolveHTTPStatus(t *testing.T) {
	m, _ := fakeModel(t, 10)
	srv := newServer(t, http.NotFound)
	o := opts(t, m, srv.URL)
	_, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.Error(t, err)
	var se *fetch.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.Contains(t, err.Error(), "404 Not Found")
	assert.Contains(t, err.Error(), srv.URL+"/"+fakeFile)
	var left []string
	require.NoError(t, filepath.WalkDir(o.CacheDir, func(p string, e os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".part" {
			left = append(left, p)
		}
		return err
	}))
	assert.Empty(t, left, "a failed download left its .part")
}

func TestResolveUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	m, _ := fakeModel(t, 10)
	_, err = fetch.Resolve(testCtx(t), "fake-small", opts(t, m, "http://"+addr))
	require.Error(t, err)
	var ne *fetch.NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, addr, ne.Host)
	assert.Contains(t, err.Error(), "cannot download "+fakeFile+" from "+addr+": no network connection (this machine may have no internet access); download it elsewhere and use the local file")
	assert.Contains(t, err.Error(), "connection refused")
}

func TestResolveCancelKeepsPartForResume(t *testing.T) {
	m, payload := fakeModel(t, 100_000)
	const sent = 30_000
	srv := newServer(t, stallAfter(payload, sent), serve(payload))
	o := opts(t, m, srv.URL)
	ctx, cancel := context.WithCancel(testCtx(t))
	o.Progress = func(done, total int64) {
		if done >= sent {
			cancel()
		}
	}
	_, err := fetch.Resolve(ctx, "fake-small", o)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	fi, err := os.Stat(filepath.Join(o.CacheDir, fakeFile+".part"))
	require.NoError(t, err)
	assert.Equal(t, int64(sent), fi.Size())

	o.Progress = nil
	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{"", "bytes=30000-"}, srv.requests())
}

func TestResolveCachedWithoutMarker(t *testing.T) {
	m, payload := fakeModel(t, 4000)
	srv := newServer(t, serve(payload))
	o := opts(t, m, srv.URL)
	final := filepath.Join(o.CacheDir, fakeFile)

	// A correct file copied in by hand is hashed once and kept.
	require.NoError(t, os.WriteFile(final, payload, 0o644))
	path, err := fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	assert.Equal(t, final, path)
	assert.Empty(t, srv.requests())
	assert.FileExists(t, final+".sha256")

	// A marker for another digest (the table changed) and a wrong file:
	// re-downloaded.
	require.NoError(t, os.WriteFile(final, []byte("stale"), 0o644))
	require.NoError(t, os.WriteFile(final+".sha256", []byte(strings.Repeat("0", 64)+"  "+fakeFile+"\n"), 0o644))
	path, err = fetch.Resolve(testCtx(t), "fake-small", o)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, []string{""}, srv.requests())
}

func TestResolvePathsAndUnknownNames(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "model.gguf")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	o := fetch.Options{CacheDir: t.TempDir(), BaseURL: "http://127.0.0.1:1"}

	path, err := fetch.Resolve(testCtx(t), file, o)
	require.NoError(t, err)
	assert.Equal(t, file, path)

	_, err = fetch.Resolve(testCtx(t), dir, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a directory")

	_, err = fetch.Resolve(testCtx(t), filepath.Join(dir, "missing.gguf"), o)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, fetch.ErrUnknownModel)

	for _, tc := range []struct{ name, input, want string }{
		{"typo", "da2-smal", "did you mean da2-small"},
		{"swapped", "da3-lrage", "da3-large"},
		{"prefix", "da2-metric-indoor", "da2-metric-indoor-small"},
		{"nothing close", "zzzzzzzzzzzz", "no such file and no published model of that name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetch.Resolve(testCtx(t), tc.input, o)
			require.Error(t, err)
			assert.ErrorIs(t, err, fetch.ErrUnknownModel)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "da3-go", "library errors do not name the command")
			assert.NotContains(t, err.Error(), "Names", "nor a Go identifier")
		})
	}
	_, err = fetch.Resolve(testCtx(t), "zzzzzzzzzzzz", o)
	assert.NotContains(t, err.Error(), "did you mean")
}

func TestResolveBadBaseURL(t *testing.T) {
	m, _ := fakeModel(t, 10)
	_, err := fetch.Resolve(testCtx(t), "fake-small", opts(t, m, "ftp://example.invalid"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad base URL")
	assert.False(t, errors.Is(err, fetch.ErrChecksum))
}

func TestOptionsRegistry(t *testing.T) {
	m, _ := fakeModel(t, 10)
	o := fetch.Options{Registry: []fetch.Model{m}}
	assert.Equal(t, []fetch.Model{m}, o.Models())
	got, ok := o.Lookup("Fake-Small-F32")
	assert.True(t, ok)
	assert.Equal(t, m, got)
	_, ok = o.Lookup("da2-small")
	assert.False(t, ok, "the override replaces the published models")

	def := fetch.Options{}
	assert.Equal(t, fetch.Names(), def.Models())
	got, ok = def.Lookup("da2-small")
	assert.True(t, ok)
	assert.Equal(t, "depth-anything2-small-f32.gguf", got.File)
}
