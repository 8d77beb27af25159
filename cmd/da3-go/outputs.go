package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/da3"
	"github.com/da3-go/da3-go/internal/atomicfile"
)

// mapOutput is one file depth writes: a map kind (depth, conf, sky) in a
// format.
type mapOutput struct {
	kind, format, path string
}

// formatExt is each map format's file name ending.
var formatExt = map[string]string{"png": ".png", "png16": "_16.png", "pfm": ".pfm", "npy": ".npy"}

// outputPlan names every output of a depth run before anything runs, so
// that a bad -o fails at once and no output overwrites another
// (checkOverwrite then checks each path once its directory is made).
//
// -o is a file when it has a map extension (.png, .pfm, .npy) and is not a
// directory; then exactly one map is written and its format follows the
// extension (an explicit -format must agree). Otherwise -o is a directory
// (created if missing), or, without -o, each image's own directory. Outputs
// are <dir>/<image base>_<kind><format ending>; when two images share a base
// name, their paths relative to the images' common directory are kept under
// the -o directory (cam0/frame.jpg → out/cam0/frame_depth.png).
func outputPlan(out string, inputs, kinds, formats []string, formatSet bool) (plan [][]mapOutput, fmts []string, err error) {
	if outputIsFile(out) {
		if fi, err := os.Stat(out); err == nil && !fi.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("-o %s is not a regular file or a directory", out)
		}
		if n := len(inputs) * len(kinds) * len(formats); n != 1 {
			return nil, nil, fmt.Errorf("-o %s names one file, but %d outputs are written (%d image(s), %s, formats %s): give a directory (-o DIR/)",
				out, n, len(inputs), strings.Join(kinds, " and "), strings.Join(formats, ","))
		}
		ext := strings.ToLower(filepath.Ext(out))
		var byExt string
		switch ext {
		case ".png":
			byExt = "png"
			if formats[0] == "png16" {
				byExt = "png16"
			}
		case ".pfm", ".npy":
			byExt = ext[1:]
		default:
			return nil, nil, fmt.Errorf("-o %s: unknown map extension %q (.png, .pfm, .npy); for a directory end it with /", out, ext)
		}
		if formatSet && byExt != formats[0] {
			return nil, nil, fmt.Errorf("-o %s is a %s file but -format is %s: make them agree", out, byExt, formats[0])
		}
		formats = []string{byExt}
		plan = [][]mapOutput{{{kind: kinds[0], format: byExt, path: out}}}
	} else {
		plan = namedOutputs(out, inputs, kinds, formats, false)
		if dup := duplicateOutput(plan); dup != "" && out != "" {
			plan = namedOutputs(out, inputs, kinds, formats, true)
		}
		if dup := duplicateOutput(plan); dup != "" {
			return nil, nil, fmt.Errorf("two images would write %s (inputs with the same name in one directory, or given twice): rename one, or run them separately", dup)
		}
	}
	return plan, formats, nil
}

// outputIsFile reports whether depth's -o names the one output file: it
// has an extension, does not end with a separator and is not a directory.
func outputIsFile(out string) bool {
	if out == "" || strings.HasSuffix(out, "/") || strings.HasSuffix(out, string(filepath.Separator)) {
		return false
	}
	fi, err := os.Stat(out)
	return (err != nil || !fi.IsDir()) && filepath.Ext(out) != ""
}

// mapPaths are the paths of a plan, in order.
func mapPaths(plan [][]mapOutput) []string {
	var paths []string
	for _, outs := range plan {
		for _, o := range outs {
			paths = append(paths, o.path)
		}
	}
	return paths
}

// depthOutputSet is the output set of depth -o DIR: the maps of an image
// this run writes replace every map of that image the previous run into
// DIR wrote (whatever its kind and format), and the maps of other images
// stay.
func depthOutputSet(dir string, plan [][]mapOutput, inputs []string, overwrite bool) (*outputSet, error) {
	mine := map[string]bool{}
	for i, outs := range plan {
		if len(outs) == 0 {
			continue
		}
		d := filepath.Dir(outs[0].path)
		base := strings.TrimSuffix(filepath.Base(inputs[i]), filepath.Ext(inputs[i]))
		for _, k := range []string{"depth", "conf", "sky"} {
			for _, ext := range formatExt {
				if rel, err := filepath.Rel(dir, filepath.Join(d, base+"_"+k+ext)); err == nil {
					mine[rel] = true
				}
			}
		}
	}
	return planOutputSet(dir, mapPaths(plan), inputs, func(rel string) bool { return mine[rel] }, overwrite)
}

// namedOutputs names the outputs <dir>/<base>_<kind><ending>, with dir the
// -o directory (plus, with keepDirs, the image's directory relative to the
// images' common directory) or the image's own.
func namedOutputs(out string, inputs, kinds, formats []string, keepDirs bool) [][]mapOutput {
	common := ""
	if keepDirs {
		common = commonDir(inputs)
	}
	plan := make([][]mapOutput, len(inputs))
	for i, in := range inputs {
		dir := out
		if dir == "" {
			dir = filepath.Dir(in)
		} else if keepDirs {
			if rel, err := filepath.Rel(common, filepath.Dir(absPath(in))); err == nil && !strings.HasPrefix(rel, "..") {
				dir = filepath.Join(out, rel)
			}
		}
		base := strings.TrimSuffix(filepath.Base(in), filepath.Ext(in))
		for _, k := range kinds {
			for _, f := range formats {
				plan[i] = append(plan[i], mapOutput{kind: k, format: f, path: filepath.Join(dir, base+"_"+k+formatExt[f])})
			}
		}
	}
	return plan
}

// commonDir is the deepest directory holding every input.
func commonDir(inputs []string) string {
	var common string
	for i, in := range inputs {
		d := filepath.Dir(absPath(in))
		if i == 0 {
			common = d
			continue
		}
		for common != filepath.Dir(common) && !strings.HasPrefix(d+string(filepath.Separator), common+string(filepath.Separator)) {
			common = filepath.Dir(common)
		}
	}
	return common
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// duplicateOutput returns a path planned twice, or "".
func duplicateOutput(plan [][]mapOutput) string {
	seen := map[string]bool{}
	for _, outs := range plan {
		for _, o := range outs {
			p := absPath(o.path)
			if seen[p] {
				return o.path
			}
			seen[p] = true
		}
	}
	return ""
}

// checkOverwrite refuses outputs that are inputs (by path, or the same file
// under another name), that would replace something other than a regular
// file, or whose names are too long (atomicfile.Check, the rule every
// writer applies).
func checkOverwrite(plan [][]mapOutput, inputs []string) error {
	for _, outs := range plan {
		for _, o := range outs {
			if err := atomicfile.Check(o.path, inputs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// runOutputs are what a run writes into: the list of its outputs in -o DIR
// (nil without one) and the directories it made.
type runOutputs struct {
	set  *outputSet
	made madeDirs
}

// finish lists a successful run's outputs and removes the directories the
// run made that stayed empty; it returns the run's exit code.
func (o *runOutputs) finish(code int, stderr io.Writer) int {
	if code == exitOK {
		if err := o.set.commit(); err != nil {
			code = fail(stderr, err)
		}
	}
	o.made.removeEmpty()
	return code
}

// staged is a command that runs in stages: validate its flags, plan its
// outputs from the inputs (before the model loads), run the loaded model.
type staged interface {
	validate() error
	plan(in *inputs) error
	run(ctx context.Context, m da3.Runner) error
	written() *runOutputs
}

// runStages runs s once its flags are parsed: validate, open the inputs,
// plan, load the model, run; each error reported with its exit code, and
// the run's outputs finished (listed, empty directories removed).
func runStages(ctx context.Context, fs *flag.FlagSet, mf *modelFlags, inf *inputFlags, s staged, stderr io.Writer) (code int) {
	if err := s.validate(); err != nil {
		return exitFor(fs, stderr, err)
	}
	in, code := inf.open(ctx, fs, fs.Args(), stderr)
	if in == nil {
		return code
	}
	defer in.cleanup()
	defer func() { code = s.written().finish(code, stderr) }()
	if err := s.plan(in); err != nil {
		if errors.Is(err, errNothingToRun) {
			return exitOK
		}
		return exitFor(fs, stderr, err)
	}
	m, code := mf.loadModel(ctx, fs, stderr)
	if m == nil {
		return code
	}
	defer m.Close()
	if err := s.run(ctx, m); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}
