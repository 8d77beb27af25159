package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/da3-go/da3-go/ggml"
)

// The start-up check runs from init, so it precedes every command (help and
// version included) without a hook in run: a CPU backend compiled without
// AVX2 on amd64 (cgo's default CGO_CFLAGS carry no -march) is about 35 times
// slower, which users should learn before waiting for a depth map.
func init() {
	startupChecks(os.Stderr, runtime.GOARCH, ggml.HasAVX2())
}

// startupChecks writes the start-up warnings for the given architecture and
// CPU build to w.
func startupChecks(w io.Writer, goarch string, hasAVX2 bool) {
	if goarch == "amd64" && !hasAVX2 {
		fmt.Fprintln(w, "da3-go: warning: the ggml CPU backend was built without AVX2 (CGO_CFLAGS had no -march), so it runs about 35x slower; rebuild with make (or make PORTABLE=1)")
	}
}
