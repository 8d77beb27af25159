package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
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
