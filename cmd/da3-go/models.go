package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/da3-go/da3-go/fetch"
)

func init() {
	register(command{
		name:    "models",
		usage:   "da3-go models [-json]",
		summary: "list the published model names -model accepts (downloaded on first use), marking the cached ones",
		run:     runModels,
	})
}

// modelRegistry replaces the published models when non-nil (tests).
var modelRegistry []fetch.Model

// fetchOptions are the download options of every command: the cache
// directory and base URL come from DA3_CACHE_DIR and DA3_MODEL_BASE_URL.
func fetchOptions() fetch.Options {
	return fetch.Options{Registry: modelRegistry, CacheDir: os.Getenv(envCacheDir), BaseURL: os.Getenv(envBaseURL)}
}

// modelsReport is what models prints; its JSON form is the -json output.
type modelsReport struct {
	CacheDir string       `json:"cache_dir"`
	Models   []modelEntry `json:"models"`
}

type modelEntry struct {
	fetch.Model
	Cached bool   `json:"cached"`
	Path   string `json:"path,omitempty"` // the cached file, when cached
}

func runModels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["models"], stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON (with aliases, SHA-256 and cache paths)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "models takes no arguments, got %d", fs.NArg())
	}
	opts := fetchOptions()
	dir, err := fetch.CacheDir(opts)
	if err != nil {
		return fail(stderr, err)
	}
	rep := modelsReport{CacheDir: dir}
	for _, m := range opts.Models() {
		e := modelEntry{Model: m}
		if path, ok := fetch.Cached(m, opts); ok {
			e.Cached, e.Path = true, path
		}
		rep.Models = append(rep.Models, e)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFAMILY\tFILE\tCACHED")
	for _, e := range rep.Models {
		cached := "-"
		if e.Cached {
			cached = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Family, e.File, cached)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "\nAliases: NAME-f32 for a NAME whose default is f32; da2-metric-hypersim-* = da2-metric-indoor-*, da2-metric-vkitti-* = da2-metric-outdoor-*.\n")
	fmt.Fprintf(stdout, "Cache: %s (set %s to change it; %s sets the download URL).\n", dir, envCacheDir, envBaseURL)
	return exitOK
}

// resolveModel turns a -model argument into a local file: a path is used as
// is, a published name is downloaded into the cache on first use, with a
// progress bar on stderr unless quiet.
func resolveModel(ctx context.Context, nameOrPath string, quiet bool, stderr io.Writer) (string, error) {
	opts := fetchOptions()
	var update func(done, total int64)
	var finish func()
	opts.Progress = func(done, total int64) {
		if update == nil {
			if !quiet {
				what := nameOrPath
				if m, ok := opts.Lookup(nameOrPath); ok {
					what = fmt.Sprintf("%s (%s)", m.Name, m.File)
				}
				dir, _ := fetch.CacheDir(opts)
				if done > 0 {
					fmt.Fprintf(stderr, "da3-go: resuming download of %s into %s at %s\n", what, dir, mib(done))
				} else {
					fmt.Fprintf(stderr, "da3-go: downloading %s into %s\n", what, dir)
				}
			}
			update, finish = newBar(total, "download", true, quiet, stderr)
		}
		update(done, total)
	}
	path, err := fetch.Resolve(ctx, nameOrPath, opts)
	if finish != nil {
		finish()
	}
	var ne *fetch.NetworkError
	switch {
	case errors.Is(err, fetch.ErrUnknownModel):
		err = fmt.Errorf("%w ('da3-go models' lists them)", err)
	case errors.As(err, &ne):
		err = fmt.Errorf("%w; pass -model /path/to/file.gguf", err)
	}
	return path, err
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
