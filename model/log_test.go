package model_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
)

// captureStderr returns what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stderr
	os.Stderr = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	defer func() { os.Stderr = old }()
	f()
	require.NoError(t, w.Close())
	return string(<-done)
}

// A library call prints nothing unless given a logger: not on stderr, not on slog's default logger
// (which a program may have pointed anywhere); with one, the load's INFO lines go there.
func TestLoadLogsOnlyToItsLogger(t *testing.T) {
	path := tinyModel()
	ctx := context.Background()
	var dflt bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&dflt, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	stderr := captureStderr(t, func() {
		m, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
		require.NoError(t, err)
		_, err = m.Depth(ctx, photo(40, 30), model.RunOptions{ProcessRes: 28})
		require.NoError(t, err)
		require.NoError(t, m.Close())
	})
	assert.Empty(t, stderr, "nothing on stderr")
	assert.Empty(t, dflt.String(), "nothing on slog's default logger")

	var logs bytes.Buffer
	m, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	assert.Contains(t, logs.String(), "level=INFO msg=device name=CPU")
	assert.Contains(t, logs.String(), "level=INFO msg=\"model loaded\"")
	assert.Empty(t, dflt.String())
}
