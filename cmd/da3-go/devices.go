package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
)

func init() {
	register(command{
		name:    "devices",
		usage:   "da3-go devices [-json]",
		summary: "list the ggml devices -device accepts (CPU and loaded GPU backends) with their memory",
		run:     runDevices,
	})
}

// deviceInfo is one line of devices; its JSON form is the -json output.
type deviceInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Type        string `json:"type"`    // CPU, GPU, iGPU, accelerator
	Backend     string `json:"backend"` // the ggml backend (registry) name
	FreeBytes   uint64 `json:"free_bytes"`
	TotalBytes  uint64 `json:"total_bytes"`
}

// listDevices loads the dynamic backends found in the default directories
// (next to the executable, the checkout's ggml/vendor/lib, absolute DA3_BACKEND_PATH
// entries; see backend.DefaultBackendDirs) and describes
// every registered device.
func listDevices() []deviceInfo {
	backend.LoadBackends(append(backend.DefaultBackendDirs(), backendDirs()...))
	var out []deviceInfo
	for _, d := range ggml.Devices() {
		free, total := d.Memory()
		out = append(out, deviceInfo{
			Name: d.Name(), Description: d.Description(), Type: d.Type().String(),
			Backend: d.Backend(), FreeBytes: free, TotalBytes: total,
		})
	}
	return out
}

func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["devices"], stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "devices takes no arguments, got %d", fs.NArg())
	}
	ggml.SetLogger(slog.Default()) // the backend libraries loaded, at slog's default level
	devs := listDevices()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(devs); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tBACKEND\tFREE MiB\tTOTAL MiB\tDESCRIPTION")
	for _, d := range devs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", d.Name, d.Type, d.Backend, d.FreeBytes>>20, d.TotalBytes>>20, d.Description)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintln(stdout, "\nkernels on the CPU: "+cpuKernels())
	return exitOK
}
