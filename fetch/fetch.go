// Package fetch resolves a model argument to a local GGUF file: a path is
// used as is, and a published model name (see Names) is downloaded once from
// the Hugging Face repository mudler/depth-anything.cpp-gguf into a cache
// directory, resumably, verified against its SHA-256, and reused after.
//
// The package never prints; progress is reported through Options.Progress.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/da3-go/da3-go/internal/safeio"
)

const (
	// DefaultBaseURL is where the published files are downloaded from.
	DefaultBaseURL = "https://huggingface.co/mudler/depth-anything.cpp-gguf/resolve/main"

	defaultStallTimeout = 60 * time.Second
	defaultMaxAttempts  = 5
)

// Options configure Resolve. The zero value is ready to use.
type Options struct {
	// CacheDir holds downloaded models; default DefaultCacheDir.
	CacheDir string
	// BaseURL is the URL prefix of the files; default DefaultBaseURL.
	BaseURL string
	// Progress, when set, is called as bytes arrive with the bytes of the
	// file present so far and its total size (-1 when the server does not say).
	Progress func(done, total int64)
	// Client makes the requests; default a client with connection and
	// response-header timeouts and no overall timeout.
	Client *http.Client
	// StallTimeout abandons an attempt that received nothing for this long;
	// default 60s.
	StallTimeout time.Duration
	// MaxAttempts bounds the attempts at one download: a connection lost
	// after some bytes arrived is resumed until then. Default 5; 1 disables.
	MaxAttempts int
	// Registry, when non-nil, replaces the published models (tests).
	Registry []Model
}

// Errors callers branch on.
var (
	// ErrChecksum means the downloaded file does not have the published SHA-256.
	ErrChecksum = errors.New("SHA-256 mismatch")
)

// NetworkError reports that the download server could not be reached at all
// (DNS failure, connection refused, timeout): most likely no internet access.
type NetworkError struct {
	File, Host string
	Err        error
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("cannot download %s from %s: no network connection (this machine may have no internet access); "+
		"download it elsewhere and use the local file: %v", e.File, e.Host, e.Err)
}

func (e *NetworkError) Unwrap() error { return e.Err }

// StatusError reports an HTTP answer other than success.
type StatusError struct {
	File, URL  string
	StatusCode int
	Status     string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("download %s: server answered %s for %s", e.File, e.Status, e.URL)
}

// DefaultCacheDir is os.UserCacheDir()/da3-go/models.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("model cache directory (give one): %w", err)
	}
	return filepath.Join(d, "da3-go", "models"), nil
}

// CacheDir is the cache directory opts select.
func CacheDir(opts Options) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return DefaultCacheDir()
}

func (o Options) baseURL() string {
	if o.BaseURL != "" {
		return o.BaseURL
	}
	return DefaultBaseURL
}

func (o Options) registry() (*registry, error) {
	if o.Registry == nil {
		return published_(), nil
	}
	return newRegistry(o.Registry)
}

// Resolve returns a local file for nameOrPath. An existing file is returned
// as is. A published model name (or file name) is looked up in the cache,
// and downloaded there first when missing; see Fetch. Anything else is an
// error wrapping ErrUnknownModel that suggests close names; a name of
// Unpublished is an error wrapping ErrNotPublished.
func Resolve(ctx context.Context, nameOrPath string, opts Options) (string, error) {
	fi, statErr := os.Stat(nameOrPath)
	if statErr == nil {
		if fi.IsDir() {
			return "", fmt.Errorf("model %s is a directory, not a GGUF file", nameOrPath)
		}
		return nameOrPath, nil
	}
	m, err := opts.Find(nameOrPath)
	switch {
	case err == nil:
		return Fetch(ctx, m, opts)
	case !errors.Is(err, ErrUnknownModel):
		return "", err
	case strings.ContainsRune(nameOrPath, '/') || strings.ContainsRune(nameOrPath, filepath.Separator) ||
		strings.HasSuffix(strings.ToLower(nameOrPath), ".gguf") || !errors.Is(statErr, fs.ErrNotExist):
		return "", fmt.Errorf("open model: %w", statErr)
	}
	return "", err
}

// Find looks a name up among the models opts select, as Lookup does, and
// words why it failed: a name of Unpublished gives an error wrapping
// ErrNotPublished, anything else one wrapping ErrUnknownModel that suggests
// close names.
func (o Options) Find(name string) (Model, error) {
	reg, err := o.registry()
	if err != nil {
		return Model{}, err
	}
	if m, ok := reg.lookup(name); ok {
		return m, nil
	}
	if m, ok := lookupUnpublished(name); ok {
		return Model{}, notPublishedError(m)
	}
	hint := ""
	if s := reg.suggest(name, 5); len(s) > 0 {
		hint = "; did you mean " + strings.Join(s, ", ") + "?"
	}
	return Model{}, fmt.Errorf("%w %q: no such file and no published model of that name%s", ErrUnknownModel, name, hint)
}

// Cached reports the cache path of m and whether it holds a verified copy.
func Cached(m Model, opts Options) (path string, ok bool) {
	dir, err := CacheDir(opts)
	if err != nil {
		return "", false
	}
	path = filepath.Join(dir, m.File)
	return path, verified(path, m.SHA256)
}

// Fetch returns the cached copy of m, downloading it first when the cache
// has no verified copy. The download goes to <file>.part, resumes an
// existing .part with a Range request, is verified against m.SHA256 and is
// then renamed into place; a <file>.sha256 marker records the verification
// so later calls do not hash the file again. Cancelling ctx keeps the .part.
func Fetch(ctx context.Context, m Model, opts Options) (string, error) {
	if m.File == "" {
		return "", notPublishedError(m)
	}
	dir, err := CacheDir(opts)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("model cache: %w", err)
	}
	final := filepath.Join(dir, m.File)
	if verified(final, m.SHA256) {
		return final, nil
	}
	// A file without a marker (copied in by hand, or a crash before the
	// marker was written) is hashed once; a wrong one is replaced.
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() {
		sum, err := hashFile(ctx, final)
		if err != nil {
			return "", err
		}
		if sum == m.SHA256 {
			return final, writeMarker(final, m)
		}
		if err := os.Remove(final); err != nil {
			return "", fmt.Errorf("remove corrupt %s: %w", final, err)
		}
	}
	d := &download{m: m, final: final, part: final + ".part", opts: opts}
	if err := d.run(ctx); err != nil {
		return "", err
	}
	return final, nil
}

// markerPath is the file recording that path was verified.
func markerPath(path string) string { return path + ".sha256" }

// verified reports whether path exists and its marker records sha.
func verified(path, sha string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	b, err := safeio.ReadFile(markerPath(path), 4<<10)
	if err != nil {
		return false
	}
	sum, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	return strings.EqualFold(sum, sha)
}

// writeMarker records, in sha256sum format, that path has m's digest.
func writeMarker(path string, m Model) error {
	tmp := markerPath(path) + ".tmp"
	if err := os.WriteFile(tmp, []byte(m.SHA256+"  "+m.File+"\n"), 0o644); err != nil {
		return fmt.Errorf("write checksum marker: %w", err)
	}
	if err := os.Rename(tmp, markerPath(path)); err != nil {
		return fmt.Errorf("write checksum marker: %w", err)
	}
	return nil
}

// hashFile returns the lower-case hex SHA-256 of a file.
func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// download is one file's transfer into final via part.
type download struct {
	m           Model
	final, part string
	opts        Options
	url, host   string
}

// errRestart asks run for a fresh attempt from byte 0 (the .part was unusable).
var errRestart = errors.New("restart download")

// errStalled is the cancel cause of an attempt that received nothing for too long.
var errStalled = errors.New("download stalled")

// retryable is an error from the middle of a transfer: the next attempt resumes.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

func (d *download) run(ctx context.Context) error {
	u, err := url.Parse(strings.TrimRight(d.opts.baseURL(), "/") + "/" + url.PathEscape(d.m.File))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("download %s: bad base URL %q (want an http(s) URL)", d.m.File, d.opts.baseURL())
	}
	d.url, d.host = u.String(), u.Host
	attempts := d.opts.MaxAttempts
	if attempts <= 0 {
		attempts = defaultMaxAttempts
	}
	for i := 1; ; i++ {
		err := d.attempt(ctx)
		if err == nil {
			break
		}
		// An attempt that received nothing (a 404, an unreachable host)
		// leaves no empty .part behind.
		if fi, serr := os.Stat(d.part); serr == nil && fi.Size() == 0 {
			os.Remove(d.part)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("download %s: %w (the partial download %s is kept for resuming)", d.m.File, ctx.Err(), d.part)
		}
		var r retryable
		if (errors.As(err, &r) || errors.Is(err, errRestart)) && i < attempts {
			continue
		}
		if errors.As(err, &r) {
			return fmt.Errorf("%w (gave up after %d attempts; run again to resume from %s)", err, i, d.part)
		}
		return err
	}
	sum, err := hashFile(ctx, d.part)
	if err != nil {
		return err
	}
	if sum != d.m.SHA256 {
		if rmErr := os.Remove(d.part); rmErr != nil {
			return fmt.Errorf("download %s: %w (got %s, want %s); remove %s: %v", d.m.File, ErrChecksum, sum, d.m.SHA256, d.part, rmErr)
		}
		return fmt.Errorf("download %s from %s: %w (got %s, want %s); the download was deleted, run again to retry",
			d.m.File, d.host, ErrChecksum, sum, d.m.SHA256)
	}
	if err := os.Rename(d.part, d.final); err != nil {
		return fmt.Errorf("download %s: %w", d.m.File, err)
	}
	return writeMarker(d.final, d.m)
}

func (d *download) client() *http.Client {
	if d.opts.Client != nil {
		return d.opts.Client
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// attempt requests the rest of the file after what .part holds and appends
// it. It returns nil once the body was received completely.
func (d *download) attempt(ctx context.Context) error {
	f, err := os.OpenFile(d.part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("download %s: %w", d.m.File, err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("download %s: %w", d.m.File, err)
	}

	stall := d.opts.StallTimeout
	if stall <= 0 {
		stall = defaultStallTimeout
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer watchdog.Stop()

	req, err := http.NewRequestWithContext(actx, http.MethodGet, d.url, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", d.m.File, err)
	}
	req.Header.Set("User-Agent", "da3-go")
	req.Header.Set("Accept-Encoding", "identity") // byte ranges of the file itself
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := d.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(context.Cause(actx), errStalled) {
			return &NetworkError{File: d.m.File, Host: d.host, Err: fmt.Errorf("no answer within %v: %w", stall, err)}
		}
		if isNetworkError(err) {
			return &NetworkError{File: d.m.File, Host: d.host, Err: err}
		}
		return fmt.Errorf("download %s from %s: %w", d.m.File, d.host, err)
	}
	defer resp.Body.Close()

	total := int64(-1)
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		start, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			// Not the range asked for: start over.
			if err := f.Truncate(0); err != nil {
				return fmt.Errorf("download %s: %w", d.m.File, err)
			}
			return errRestart
		}
		total = size
	case resp.StatusCode == http.StatusOK:
		// The whole file (a server ignoring Range answers 200 too): start over.
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("download %s: %w", d.m.File, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("download %s: %w", d.m.File, err)
		}
		have, total = 0, resp.ContentLength
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		// The .part may already be complete; otherwise start over.
		if _, size, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && size == have {
			return nil
		}
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("download %s: %w", d.m.File, err)
		}
		return errRestart
	default:
		return &StatusError{File: d.m.File, URL: d.url, StatusCode: resp.StatusCode, Status: resp.Status}
	}

	pw := &progressWriter{w: f, done: have, total: total, progress: d.opts.Progress, onWrite: func() { watchdog.Reset(stall) }}
	if pw.progress != nil {
		pw.progress(have, total)
	}
	n, copyErr := io.Copy(pw, resp.Body)
	if syncErr := f.Sync(); copyErr == nil && syncErr != nil {
		return fmt.Errorf("download %s: %w", d.m.File, syncErr)
	}
	if copyErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(context.Cause(actx), errStalled) {
			copyErr = fmt.Errorf("nothing received for %v", stall)
		}
		var pe *os.PathError
		if errors.As(copyErr, &pe) { // a local write failure (disk full…) is not retried
			return fmt.Errorf("download %s: %w", d.m.File, copyErr)
		}
		err := fmt.Errorf("download %s from %s: connection lost after %d of %s bytes: %w", d.m.File, d.host, pw.done, sizeString(total), copyErr)
		if n > 0 {
			return retryable{err}
		}
		return err
	}
	if total >= 0 && pw.done != total {
		return retryable{fmt.Errorf("download %s from %s: got %d of %d bytes", d.m.File, d.host, pw.done, total)}
	}
	return nil
}

func sizeString(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

// parseContentRange reads "bytes START-END/SIZE" or "bytes */SIZE"; size is
// -1 when given as "*".
func parseContentRange(h string) (start, size int64, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, sz, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, false
	}
	size = -1
	if sz != "*" {
		v, err := strconv.ParseInt(sz, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, false
		}
		size = v
	}
	if rng == "*" {
		return -1, size, size >= 0
	}
	s, _, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(s, 10, 64)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	return start, size, true
}

// isNetworkError reports a failure to reach the server at all.
func isNetworkError(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) || (errors.As(err, &netErr) && netErr.Timeout())
}

// progressWriter counts bytes written and reports them.
type progressWriter struct {
	w           io.Writer
	done, total int64
	progress    func(done, total int64)
	onWrite     func()
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	p.onWrite()
	if p.progress != nil {
		p.progress(p.done, p.total)
	}
	return n, err
}
