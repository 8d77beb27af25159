package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/da3-go/da3-go/ggml"
)

// Version is set at link time (-ldflags "-X main.Version=...").
var Version = "dev"

func init() {
	register(command{name: "version", usage: "da3-go version", summary: "print the version, ggml source and CPU features", run: runVersion})
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["version"], stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	v := Version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "da3-go %s (%s, %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "ggml from %s@%s (headers %s)\n", ggml.ModulePath, ggml.LinkedVersion(), ggml.HeaderVersion())
	fmt.Fprintf(stdout, "CPU backend features: %s\n", strings.Join(ggml.CPUFeatures(), " "))
	return exitOK
}
