package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Version is set at link time (-ldflags "-X main.Version=...").
var Version = "dev"

func init() {
	register(command{name: "version", usage: "da3-go version", summary: "print the version, ggml source and CPU features", run: runVersion})
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["version"], stdout, stderr)
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
	fmt.Fprintln(stdout, "CPU kernels: "+cpuKernels())
	return exitOK
}

// cpuKernels says which CPU kernels run (the variant chosen by CPUID or
// DA3_KERNELS) and which precisions this CPU offers them in.
func cpuKernels() string {
	v := kernels.DefaultVariant()
	var precs []string
	for _, p := range []kernels.Precision{kernels.PrecisionF32, kernels.PrecisionBF16, kernels.PrecisionInt8, kernels.PrecisionInt8Channel} {
		if v != kernels.VariantOff && kernels.PrecisionRuns(v, p) {
			precs = append(precs, p.String())
		}
	}
	if v == kernels.VariantAVX2 && kernels.PrecisionRuns(v, kernels.PrecisionInt8Channel) {
		form, _ := kernels.SetAVX2Int8Form(-1)
		precs[len(precs)-1] += fmt.Sprintf(" (%s, DA3_AVX2_INT8)", form)
	}
	line := fmt.Sprintf("%s (best for this CPU: %s; CPU features: %s; precisions: %s)", v, kernels.BestVariant(),
		strings.Join(kernels.CPUFeatures(), " "), strings.Join(precs, " "))
	if v == kernels.VariantOff {
		line = fmt.Sprintf("off, ggml's ops (DA3_KERNELS=off; best for this CPU: %s)", kernels.BestVariant())
	}
	return line
}
