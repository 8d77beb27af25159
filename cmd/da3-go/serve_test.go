package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/server"
)

func TestServeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-model is required"},
		{[]string{"-metric-model", "m.gguf", "-model", "a.gguf"}, "give -model first"},
		{[]string{"-model", "a.gguf", "-metric-model", "m.gguf", "-metric-model", "n.gguf"}, "two -metric-model"},
		{[]string{"-model", "a.gguf", "extra"}, "serve takes no arguments"},
		{[]string{"-model", "a.gguf", "-max-body", "0"}, "-max-body"},
	} {
		code, _, stderr := runCLI(append([]string{"serve"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want)
	}
	code, _, stderr := runCLI("serve", "-model", "/nonexistent/model.gguf", "-addr", "127.0.0.1:0")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "model.gguf")
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeNestedPair serves a model and a nested pair (-metric-model) and
// stops on cancellation (the interrupt) with exit status 0.
func TestServeNestedPair(t *testing.T) {
	pair := convertFixture(t, "da3-tiny-nested", convert.Options{})
	tiny := tinyDA3(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-quiet", "-model", "tiny=" + tiny,
			"-model", "metres=" + pair[0], "-metric-model", pair[1]}, &stdout, &stderr)
	}()
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for url == "" {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "da3-go serve: listening on "); ok {
				url = rest
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve did not start: %s", stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	var list server.ModelList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	require.Len(t, list.Data, 2)
	assert.Equal(t, "tiny", list.Data[0].Name)
	m := list.Data[1]
	assert.Equal(t, "metres", m.Name)
	assert.True(t, m.Nested && m.Metric && m.Sky && m.Camera)
	assert.Equal(t, "metres", m.Unit)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	assert.Contains(t, stderr.String(), "da3-go serve: stopped")
	assert.Empty(t, stdout.String(), "serve writes nothing on stdout")
}

// TestServeMaxImagePixels: serve takes -max-image-pixels as depth does: an
// image whose header declares more pixels is answered 413 naming the flag,
// before it is decoded. Without it, a -max-pixels above the decoder's
// default raises the per-image budget to it.
func TestServeMaxImagePixels(t *testing.T) {
	t.Cleanup(func() { imgio.SetMaxPixels(0) })
	tiny := tinyDA3(t)
	img, err := os.ReadFile(fixtureImage(t, "da3-tiny/one/images/view0.png"))
	require.NoError(t, err)
	serve := func(flags ...string) (url string, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr lockedBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"serve", "-addr", "127.0.0.1:0", "-quiet", "-model", tiny}, flags...), io.Discard, &stderr)
		}()
		deadline := time.Now().Add(30 * time.Second)
		for url == "" {
			for _, line := range strings.Split(stderr.String(), "\n") {
				if rest, ok := strings.CutPrefix(line, "da3-go serve: listening on "); ok {
					url = rest
				}
			}
			select {
			case code := <-done:
				t.Fatalf("serve exited %d: %s", code, stderr.String())
			default:
			}
			require.True(t, time.Now().Before(deadline), "serve did not start: %s", stderr.String())
			time.Sleep(10 * time.Millisecond)
		}
		return url, func() { cancel(); <-done }
	}

	url, stop := serve("-max-image-pixels", "1000")
	body, err := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(img), "process_res": 56})
	require.NoError(t, err)
	resp, err := http.Post(url+"/v1/depth", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stop()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", msg)
	assert.Contains(t, string(msg), "exceeds the budget of 1000")
	assert.Contains(t, string(msg), "-max-image-pixels")

	_, stop = serve("-max-pixels", "200000000")
	assert.Equal(t, int64(200000000), imgio.MaxPixels(), "-max-pixels above the default raises the image budget")
	stop()
	_, stop = serve("-max-pixels", "200000000", "-max-image-pixels", "5000000")
	assert.Equal(t, int64(5000000), imgio.MaxPixels())
	stop()
}

// TestServeModelFlagsUsage: serve checks the model-loading flags as depth
// does: a bad value is a usage error naming the flag, before any model is
// read.
func TestServeModelFlagsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-precision", "xyz"}, `-precision "xyz": want f32, bf16, int8 or int8c`},
		{[]string{"-kernels", "fast"}, `-kernels "fast"`},
		{[]string{"-narrow-convs"}, "-narrow-convs needs -precision bf16 or int8"},
		{[]string{"-max-device-memory", "lots"}, "-max-device-memory"},
		{[]string{"-threads", "-1"}, "-threads -1"},
	} {
		code, _, stderr := runCLI(append([]string{"serve", "-model", "/nonexistent/model.gguf"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.NotContains(t, stderr, "model.gguf:", "%v: refused before the model is read", tc.args)
	}
}

// TestServeModelFlags: serve loads its models with -kernels, -precision,
// -narrow-convs, -max-device-memory, -device and -threads as depth reads
// them, and serves requests with them.
func TestServeModelFlags(t *testing.T) {
	tiny := tinyDA3(t)
	img, err := os.ReadFile(fixtureImage(t, "da3-tiny/one/images/view0.png"))
	require.NoError(t, err)
	orig := newServer
	t.Cleanup(func() { newServer = orig })
	given := make(chan server.Options, 1)
	newServer = func(ctx context.Context, o server.Options) (*server.Server, error) {
		given <- o
		return orig(ctx, o)
	}
	// serve starts serve with flags, posts one image and returns the
	// options it gave the server.
	serve := func(flags ...string) server.Options {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stderr lockedBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"serve", "-addr", "127.0.0.1:0", "-quiet", "-model", tiny}, flags...), io.Discard, &stderr)
		}()
		var url string
		deadline := time.Now().Add(30 * time.Second)
		for url == "" {
			for _, line := range strings.Split(stderr.String(), "\n") {
				if rest, ok := strings.CutPrefix(line, "da3-go serve: listening on "); ok {
					url = rest
				}
			}
			select {
			case code := <-done:
				t.Fatalf("serve %v exited %d: %s", flags, code, stderr.String())
			default:
			}
			require.True(t, time.Now().Before(deadline), "serve did not start: %s", stderr.String())
			time.Sleep(10 * time.Millisecond)
		}
		body, err := json.Marshal(map[string]any{"image": base64.StdEncoding.EncodeToString(img), "process_res": 56})
		require.NoError(t, err)
		resp, err := http.Post(url+"/v1/depth", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%v: %s", flags, msg)
		cancel()
		assert.Equal(t, exitOK, <-done, stderr.String())
		return <-given
	}

	o := serve("-device", "cpu", "-threads", "1", "-kernels", "none", "-max-device-memory", "1G")
	assert.Equal(t, "cpu", o.Device)
	assert.Equal(t, 1, o.Threads)
	assert.Equal(t, kernels.Policy{Explicit: true, Variant: kernels.VariantOff}, o.Load.Kernels)
	assert.Equal(t, kernels.PrecisionF32, o.Load.Kernels.Precision)
	assert.Equal(t, int64(1<<30), o.Load.MaxDeviceMemory)

	o = serve()
	assert.Zero(t, o.Load.Kernels, "-kernels auto: the zero policy, the device's default")
	assert.Zero(t, o.Load.MaxDeviceMemory)

	if !kernels.PrecisionRuns(kernels.VariantAuto, kernels.PrecisionBF16) {
		t.Skip("this CPU lacks AVX512_BF16: -precision bf16 not tested")
	}
	o = serve("-device", "cpu", "-precision", "bf16", "-narrow-convs")
	assert.Equal(t, kernels.PrecisionBF16, o.Load.Kernels.Precision)
	assert.Equal(t, kernels.ConvsNarrow, o.Load.Kernels.Convs)
	o = serve("-device", "cpu", "-precision", "bf16", "-narrow-convs=false")
	assert.Equal(t, kernels.ConvsF32, o.Load.Kernels.Convs)
}
