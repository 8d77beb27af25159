package main

import (
	"context"
	"fmt"
	"image"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/quantize"
)

func init() {
	register(command{
		name:    "quantize",
		usage:   "da3-go quantize [-type T] [-conv f32|f16] [-pure] [-dry-run] [-check IMAGE] IN.gguf OUT.gguf",
		summary: "convert a model's weight matrices to a smaller type (f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0)",
		run:     runQuantize,
	})
}

// runQuantize quantizes IN to OUT, or prints the plan with -dry-run.
func runQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["quantize"], stdout, stderr)
	typName := fs.String("type", "q8_0", "type of the weight matrices: "+typeList())
	convName := fs.String("conv", "f32", "type of the convolution kernels: f32 or f16")
	pure := fs.Bool("pure", false, "give every weight matrix the requested type (by default the first quarter of the blocks get q8_0, or f16 for -type q8_0)")
	dryRun := fs.Bool("dry-run", false, "print the plan (type and reason per tensor group, resulting size) and write nothing")
	check := fs.String("check", "", "after quantizing, run IN and OUT on `IMAGE` and print how closely depth (and pose) agree")
	threads := fs.Int("threads", 0, "threads converting rows (0 = all cores)")
	device := fs.String("device", "auto", "device for -check: auto, cpu or a device name such as CUDA0")
	quiet := fs.Bool("quiet", false, "no progress bar and no result line")
	pos, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	typ, err := quantize.ParseType(*typName)
	if err != nil {
		return usageError(fs, stderr, "-type: %v", err)
	}
	var conv ggml.Type
	switch strings.ToLower(*convName) {
	case "f32":
		conv = ggml.TypeF32
	case "f16":
		conv = ggml.TypeF16
	default:
		return usageError(fs, stderr, "-conv %q: want f32 or f16", *convName)
	}
	if *threads < 0 {
		return usageError(fs, stderr, "-threads %d: must not be negative", *threads)
	}
	switch {
	case *dryRun && *check != "":
		return usageError(fs, stderr, "-check needs a real run, not -dry-run")
	case *dryRun && (len(pos) < 1 || len(pos) > 2):
		return usageError(fs, stderr, "want IN.gguf (and optionally OUT.gguf), got %d arguments", len(pos))
	case !*dryRun && len(pos) != 2:
		return usageError(fs, stderr, "want IN.gguf and OUT.gguf, got %d arguments", len(pos))
	}
	var made madeDirs
	defer made.removeEmpty()
	if !*dryRun { // OUT is checked, and its directory made, before the work
		if err := made.prepare(filepath.Dir(pos[1])); err != nil {
			return fail(stderr, err)
		}
		if err := atomicfile.CheckDest(pos[1]); err != nil {
			return fail(stderr, err)
		}
	}
	var img image.Image
	if *check != "" { // before the work, so that a bad image fails fast
		if img, err = imgio.Decode(*check); err != nil {
			return fail(stderr, fmt.Errorf("check: %w", err))
		}
	}
	in, err := resolveModel(ctx, pos[0], *quiet, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	opts := quantize.Options{
		Conv:    conv,
		Pure:    *pure,
		Threads: *threads,
		Warn:    func(s string) { fmt.Fprintf(stderr, "da3-go: warning: %s\n", s) },
	}
	if *dryRun {
		rep, err := quantize.DryRun(ctx, in, typ, opts)
		if err != nil {
			return fail(stderr, err)
		}
		if err := writePlan(stdout, pos[0], rep); err != nil {
			return fail(stderr, fmt.Errorf("write output: %w", err))
		}
		return exitOK
	}
	out := pos[1]
	update, finish := newBar(-1, "quantizing", true, *quiet, stderr)
	opts.Progress = update
	rep, err := quantize.Run(ctx, in, out, typ, opts)
	finish()
	if err != nil {
		return fail(stderr, err)
	}
	if !*quiet {
		fmt.Fprintf(stdout, "wrote %s: %s, %s → %s (%.1f%%)\n", out, matrixSummary(rep),
			humanBytes(uint64(rep.InSize)), humanBytes(uint64(rep.OutSize)), 100*float64(rep.OutSize)/float64(rep.InSize))
	}
	if *check != "" {
		setupLog(stderr, false, *quiet)
		bar := newItemBar(2, "check", *quiet, stderr)
		err := checkQuantized(ctx, img, *check, in, out, *device, *threads, stdout, bar)
		bar.finish()
		if err != nil {
			return fail(stderr, fmt.Errorf("check: %w", err))
		}
	}
	return exitOK
}

func typeList() string {
	var names []string
	for _, t := range quantize.Types() {
		names = append(names, strings.ToLower(t.String()))
	}
	return strings.Join(names, ", ")
}

// matrixSummary says which types the weight matrices got.
func matrixSummary(rep quantize.Report) string {
	n := rep.Requested + rep.Fallback + rep.Raised
	if rep.Fallback == 0 && rep.Raised == 0 {
		return fmt.Sprintf("%d weight matrices %s", n, rep.Type)
	}
	types := func(pick func(quantize.Decision) bool) string {
		var ts []string
		for _, d := range rep.Decisions {
			if d.Matrix && pick(d) && !slices.Contains(ts, d.To.String()) {
				ts = append(ts, d.To.String())
			}
		}
		return strings.Join(ts, "/")
	}
	parts := []string{fmt.Sprintf("%d %s", rep.Requested, rep.Type)}
	if rep.Fallback > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (rows that do not fit the %s block)",
			rep.Fallback, types(func(d quantize.Decision) bool { return d.Fallback && !d.Raised }), rep.Type))
	}
	if rep.Raised > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (first blocks; -pure to quantize them too)",
			rep.Raised, types(func(d quantize.Decision) bool { return d.Raised })))
	}
	return fmt.Sprintf("%d weight matrices: %s", n, strings.Join(parts, ", "))
}

// writePlan prints the dry-run plan: one line per tensor group and decision.
func writePlan(w io.Writer, in string, rep quantize.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan: %s to %s (convolution kernels %s)\n\n", printable(in), rep.Type, rep.Conv)
	rows := [][]string{{"GROUP", "N", "FROM", "TO", "SIZE", "NOW", "REASON"}}
	for _, g := range rep.Groups {
		rows = append(rows, []string{printable(g.Group), strconv.Itoa(g.Count), g.From.String(), g.To.String(),
			humanBytes(uint64(g.InBytes)), humanBytes(uint64(g.OutBytes)), g.Reason})
	}
	writeColumns(&b, rows, []bool{false, true, false, false, true, true, false})
	fmt.Fprintf(&b, "\n%s\n", matrixSummary(rep))
	fmt.Fprintf(&b, "file size: %s → %s (%.1f%%)\n", humanBytes(uint64(rep.InSize)), humanBytes(uint64(rep.OutSize)),
		100*float64(rep.OutSize)/float64(rep.InSize))
	_, err := io.WriteString(w, b.String())
	return err
}
