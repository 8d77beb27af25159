package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/loader"
)

func init() {
	register(command{
		name:    "convert",
		usage:   "da3-go convert [-type f32|f16] [-name N] [-heads N] [-out-layers a,b,c,d] [-max-depth M] [-with-aux] SRC OUT.gguf",
		summary: "convert an official checkpoint (.pth, .safetensors or a Hugging Face model directory) to GGUF",
		run:     runConvert,
	})
}

// runConvert converts SRC to OUT.gguf. A nested DA3 checkpoint yields
// OUT-anyview.gguf and OUT-metric.gguf.
func runConvert(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["convert"], stdout, stderr)
	typ := fs.String("type", "f32", "storage type of weight matrices and convolution kernels: f32 or f16 (norms, biases, tokens stay f32)")
	name := fs.String("name", "", "model name for general.name and checkpoint_name (default: the checkpoint's directory or file name)")
	heads := fs.Int("heads", 0, "attention heads (default: inferred; needed for non-standard embed dims)")
	outLayers := fs.String("out-layers", "", "four comma-separated backbone layers fed to the head (default: config.json or the standard table)")
	maxDepth := fs.Float64("max-depth", 0, "Depth Anything V2 metric model: maximum depth in metres (20 indoor, 80 outdoor)")
	withAux := fs.Bool("with-aux", false, "keep the auxiliary ray head of DA3 any-view models (needed by -ray-pose)")
	quiet := fs.Bool("quiet", false, "no progress bar and no result line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return usageError(fs, stderr, "want SRC and OUT.gguf, got %d arguments", fs.NArg())
	}
	opts := convert.Options{Name: *name, Heads: *heads, MaxDepth: float32(*maxDepth), WithAux: *withAux}
	switch *typ {
	case "f32", "F32":
		opts.Type = loader.TypeF32
	case "f16", "F16":
		opts.Type = loader.TypeF16
	default:
		return usageError(fs, stderr, "-type %q: want f32 or f16 (use quantize for other types)", *typ)
	}
	if *heads < 0 {
		return usageError(fs, stderr, "-heads %d: must be positive", *heads)
	}
	if *maxDepth < 0 {
		return usageError(fs, stderr, "-max-depth %v: must be positive", *maxDepth)
	}
	if *outLayers != "" {
		for _, s := range splitList(*outLayers) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return usageError(fs, stderr, "-out-layers %q: %q is not a layer index", *outLayers, s)
			}
			opts.OutLayers = append(opts.OutLayers, n)
		}
		if len(opts.OutLayers) != 4 {
			return usageError(fs, stderr, "-out-layers %q: want 4 layers", *outLayers)
		}
	}
	src, dst := fs.Arg(0), fs.Arg(1)
	// The output is checked, and its directory made, before the checkpoint
	// is read; a nested checkpoint's two files once its family is known.
	var made madeDirs
	defer made.removeEmpty()
	if err := made.prepare(filepath.Dir(dst)); err != nil {
		return fail(stderr, err)
	}
	if err := atomicfile.Check(dst, src); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	fam, err := convert.Inspect(src)
	if err != nil {
		return fail(stderr, err)
	}
	outs := convert.OutputPaths(fam, dst)
	for _, p := range outs {
		if err := atomicfile.Check(p, src); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
	}
	// Depth Anything V2's metric checkpoints hold the same tensors as the
	// relative ones (only the head's last activation differs), so their file
	// name is the one sign: without -max-depth they would become relative
	// models.
	if fam == convert.FamilyDA2 && *maxDepth == 0 && looksMetricDA2(src) {
		return usageError(fs, stderr, "%s looks like a Depth Anything V2 metric checkpoint: give -max-depth (20 for the Hypersim indoor models, 80 for the VKITTI outdoor ones), or rename it if it is a relative model", src)
	}
	update, finish := newBar(-1, "converting", true, *quiet, stderr)
	opts.Progress = update
	err = convert.Convert(ctx, src, dst, opts)
	finish()
	if err != nil {
		return fail(stderr, err)
	}
	if !*quiet {
		for _, p := range outs {
			fmt.Fprintf(stdout, "wrote %s (%v)\n", p, fam)
		}
	}
	return exitOK
}

// looksMetricDA2 reports whether a checkpoint's file name is that of a
// Depth Anything V2 metric model (depth_anything_v2_metric_hypersim_vits.pth
// and the like).
func looksMetricDA2(path string) bool {
	n := strings.ToLower(filepath.Base(path))
	return strings.Contains(n, "metric") || strings.Contains(n, "hypersim") || strings.Contains(n, "vkitti")
}
