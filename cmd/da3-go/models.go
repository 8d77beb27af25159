package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/fetch"
	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/loader"
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
	GGUFRepo string       `json:"gguf_repo"` // where the published files come from
	Models   []modelEntry `json:"models"`
	// Unpublished are official checkpoints with no published GGUF: convert them.
	Unpublished []fetch.Model `json:"unpublished"`
}

type modelEntry struct {
	fetch.Model
	Cached bool   `json:"cached"`
	Path   string `json:"path,omitempty"` // the cached file, when cached
}

// ggufRepo is the Hugging Face page of the published GGUF files.
const ggufRepo = "https://huggingface.co/mudler/depth-anything.cpp-gguf"

func runModels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["models"], stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON (with aliases, SHA-256, licences, sources and cache paths)")
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
	rep := modelsReport{CacheDir: dir, GGUFRepo: ggufRepo, Unpublished: fetch.Unpublished()}
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
	if err := writeModelsTable(stdout, rep); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// writeModelsTable writes the table form of models.
func writeModelsTable(w io.Writer, rep modelsReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFAMILY\tFILE\tCACHED\tLICENCE\tSOURCE")
	for _, e := range rep.Models {
		cached := "-"
		if e.Cached {
			cached = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Family, e.File, cached, orDash(e.Licence), orDash(e.Source))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nNot published yet (no GGUF with a known SHA-256): convert the official checkpoint with `da3-go convert`:\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range rep.Unpublished {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Name, m.Family, m.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nLicences are those of the official checkpoints (SOURCE) the files of %s were converted from; "+
		"CC-BY-NC-4.0 weights are for non-commercial use only.\n", rep.GGUFRepo)
	fmt.Fprintf(w, "Aliases: NAME-f32 for a NAME whose default is f32; da2-metric-hypersim-* = da2-metric-indoor-*, da2-metric-vkitti-* = da2-metric-outdoor-*.\n")
	fmt.Fprintf(w, "Cache: %s (set %s to change it; %s sets the download URL).\n", rep.CacheDir, envCacheDir, envBaseURL)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resolvedModel is a -model argument resolved to a local file.
type resolvedModel struct {
	path string
	// model is the published model the argument named (named set).
	model fetch.Model
	named bool
	// noticed: the licence notice was printed (on download).
	noticed bool
}

// resolveModel turns a -model argument into a local file: a path is used as
// is, a published name is downloaded into the cache on first use, with a
// progress bar on stderr unless quiet, and with the licence notice of a
// non-commercial model.
func resolveModel(ctx context.Context, nameOrPath string, quiet bool, stderr io.Writer) (string, error) {
	r, err := resolveModelInfo(ctx, nameOrPath, quiet, stderr)
	return r.path, err
}

// resolveModelInfo is resolveModel, saying also which published model the
// argument named and whether its licence notice was printed.
func resolveModelInfo(ctx context.Context, nameOrPath string, quiet bool, stderr io.Writer) (resolvedModel, error) {
	opts := fetchOptions()
	var r resolvedModel
	what := nameOrPath
	if m, ok := opts.Lookup(nameOrPath); ok {
		what = fmt.Sprintf("%s (%s)", m.Name, m.File)
		r.model = m
	}
	downloaded, finish := showDownload(&opts, what, quiet, stderr)
	path, err := fetch.Resolve(ctx, nameOrPath, opts)
	finish()
	var ne *fetch.NetworkError
	switch {
	case errors.Is(err, fetch.ErrUnknownModel):
		err = fmt.Errorf("%w ('da3-go models' lists them)", err)
	case errors.As(err, &ne):
		err = fmt.Errorf("%w; pass -model /path/to/file.gguf", err)
	}
	if err != nil {
		return r, err
	}
	r.path = path
	// A file of that name in the working directory wins over the name.
	r.named = r.model.File != "" && path != nameOrPath
	if r.named && downloaded() {
		r.noticed = licenceNotice(stderr, r.model.File, r.model.Licence, r.model.Source)
	}
	return r, nil
}

// showDownload sets opts.Progress to announce a download of what and draw
// its bar (unless quiet). downloaded reports whether a download happened;
// finish ends the bar.
func showDownload(opts *fetch.Options, what string, quiet bool, stderr io.Writer) (downloaded func() bool, finish func()) {
	var update func(done, total int64)
	var end func()
	opts.Progress = func(done, total int64) {
		if update == nil {
			if !quiet {
				dir, _ := fetch.CacheDir(*opts)
				if done > 0 {
					fmt.Fprintf(stderr, "da3-go: resuming download of %s into %s at %s\n", what, dir, mib(done))
				} else {
					fmt.Fprintf(stderr, "da3-go: downloading %s into %s\n", what, dir)
				}
			}
			update, end = newBar(total, "download", true, quiet, stderr)
		}
		update(done, total)
	}
	downloaded = func() bool { return update != nil }
	finish = func() {
		if end != nil {
			end()
		}
	}
	return downloaded, finish
}

// licenceNotice prints the one-line notice of a file whose licence forbids
// commercial use, and reports whether it did.
func licenceNotice(stderr io.Writer, file, lic, source string) bool {
	if !licence.NonCommercial(lic) {
		return false
	}
	line := fmt.Sprintf("da3-go: note: %s is %s (non-commercial use only)", file, lic)
	if source != "" {
		line += ": " + source
	}
	fmt.Fprintln(stderr, line)
	return true
}

// fileLicence is the licence and source of a model file: those of the
// published model it was resolved from, else the file's general.license
// and general.source.url, else those of the published model whose file
// name it has.
func fileLicence(r resolvedModel) (lic, source string) {
	if r.named {
		return r.model.Licence, r.model.Source
	}
	if f, err := loader.Open(r.path); err == nil {
		lic, source = f.KV().StringOr(convert.KeyLicense, ""), f.KV().StringOr(convert.KeySourceURL, "")
		f.Close()
		if lic != "" {
			return lic, source
		}
	}
	if m, ok := fetchOptions().Lookup(filepath.Base(r.path)); ok {
		return m.Licence, m.Source
	}
	return "", ""
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
