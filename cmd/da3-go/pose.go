package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

func init() {
	register(command{
		name:    "pose",
		usage:   "da3-go pose -model M.gguf [flags] IMAGE|DIR... [-list FILE] [-video FILE -fps N]",
		summary: "estimate the cameras (extrinsics, intrinsics) of images taken as views of one scene; prints JSON",
		run:     runPose,
	})
}

// PoseView is one view in the pose JSON.
type PoseView struct {
	Image           string        `json:"image"`
	Width           int           `json:"width"`
	Height          int           `json:"height"`
	ProcessedWidth  int           `json:"processed_width"`
	ProcessedHeight int           `json:"processed_height"`
	Extrinsics      [3][4]float64 `json:"extrinsics"`
	Intrinsics      [3][3]float64 `json:"intrinsics"`
	IntrinsicsOrig  [3][3]float64 `json:"intrinsics_original"`
}

// PoseOutput is the pose command's JSON document.
type PoseOutput struct {
	Model      string `json:"model"`
	Convention string `json:"convention"`
	// TranslationUnit: "metres" for the nested model, else "relative"
	// (the scene's scale is unknown).
	TranslationUnit string     `json:"translation_unit"`
	Views           []PoseView `json:"views"`
}

func runPose(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["pose"], stdout, stderr)
	var f modelFlags
	var inf inputFlags
	f.register(fs)
	inf.register(fs)
	out := fs.String("o", "-", "output JSON file, or - for stdout")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	setupLog(stderr, f.verbose, f.quiet)
	if f.model == "" {
		return usageError(fs, stderr, "-model is required")
	}
	opt, err := f.runOptions()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	in, code := inf.open(ctx, fs, fs.Args(), stderr)
	if in == nil {
		return code
	}
	defer in.cleanup()
	inputs := in.names
	var made madeDirs
	defer made.removeEmpty()
	if *out != "-" {
		// Checked, and its directory made, before anything runs.
		if err := made.prepare(filepath.Dir(*out)); err != nil {
			return fail(stderr, fmt.Errorf("-o: %w", err))
		}
		if err := checkOverwrite([][]mapOutput{{{path: *out}}}, in.paths); err != nil {
			return argError(fs, stderr, fmt.Errorf("-o: %w", err))
		}
	}
	imgs, m, code := f.open(ctx, fs, in.paths, stderr)
	if m == nil {
		return code
	}
	defer m.Close()
	f.given.apply(&opt)
	if !m.Capabilities().Camera {
		return fail(stderr, fmt.Errorf("%w: %s is a %s model; pose needs a DA3 any-view model (da3-small, -base, -large, -giant)", model.ErrNoCamera, f.model, m.Config().Arch))
	}
	bar := newSceneBar(viewCount(len(imgs)), f.quiet, stderr)
	opt.Progress = bar.tell
	res, err := m.MultiView(ctx, imgs, opt)
	bar.finish()
	if err != nil {
		return fail(stderr, err)
	}
	doc := PoseOutput{Model: m.Config().Name, Convention: "extrinsics: world-to-camera [R|t], OpenCV axes (x right, y down, z forward); intrinsics in pixels",
		TranslationUnit: "relative"}
	if res[0].Unit == model.Metres {
		doc.TranslationUnit = "metres"
	}
	for i, r := range res {
		warnNonFinite(stderr, inputs[i], &r)
		c := r.Camera
		doc.Views = append(doc.Views, PoseView{Image: inputs[i], Width: r.OrigWidth, Height: r.OrigHeight,
			ProcessedWidth: r.ProcessedWidth, ProcessedHeight: r.ProcessedHeight,
			Extrinsics: c.Extrinsics, Intrinsics: c.Intrinsics, IntrinsicsOrig: c.IntrinsicsOriginal})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fail(stderr, err)
	}
	b = append(b, '\n')
	if *out == "-" {
		_, err = stdout.Write(b)
	} else {
		err = imgio.WriteFileAtomic(*out, b)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if *out != "-" && !f.quiet {
		fmt.Fprintf(stdout, "wrote %s\n", *out)
	}
	return exitOK
}
