package ggml

import (
	"log/slog"
	"sync/atomic"
)

// discard is the logger of a library that was not given one: it drops everything.
var discard = slog.New(slog.DiscardHandler)

var logger atomic.Pointer[slog.Logger]

func init() { logger.Store(discard) }

// SetLogger routes ggml's own log (its C messages: backend initialisation, allocation failures,
// warnings of loaded backends) to l, and returns the previous logger. ggml's log is process-global, so
// this is too. nil, the default, discards it: a library prints nothing unless asked. ggml's "info" is
// logged at Debug, its warnings at Warn and errors at Error, each with src=ggml.
func SetLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = discard
	}
	return logger.Swap(l)
}

// Logger is the logger SetLogger set (a discarding one by default). Process-global messages about
// ggml's backend libraries (package backend's LoadBackends) go there too.
func Logger() *slog.Logger { return logger.Load() }
