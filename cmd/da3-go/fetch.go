package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/da3-go/da3-go/fetch"
)

func init() {
	register(command{
		name:    "fetch",
		usage:   "da3-go fetch [-quiet] NAME...",
		summary: "download published models into the cache (verified against their SHA-256) and print their paths",
		run:     runFetch,
	})
}

// runFetch downloads each named published model (unless cached) and prints
// its cache path on stdout; a model whose licence forbids commercial use
// gets a one-line notice on stderr.
func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["fetch"], stdout, stderr)
	quiet := fs.Bool("quiet", false, "no progress bar")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "want one or more model names ('da3-go models' lists them)")
	}
	for _, name := range fs.Args() {
		path, err := fetchOne(ctx, name, *quiet, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintln(stdout, path)
	}
	return exitOK
}

// fetchOne downloads one published model by name; paths are not names.
func fetchOne(ctx context.Context, name string, quiet bool, stderr io.Writer) (string, error) {
	opts := fetchOptions()
	m, err := opts.Find(name)
	if errors.Is(err, fetch.ErrUnknownModel) {
		err = fmt.Errorf("%w ('da3-go models' lists them)", err)
	}
	if err != nil {
		return "", err
	}
	_, finish := showDownload(&opts, fmt.Sprintf("%s (%s)", m.Name, m.File), quiet, stderr)
	path, err := fetch.Fetch(ctx, m, opts)
	finish()
	var ne *fetch.NetworkError
	if errors.As(err, &ne) {
		err = fmt.Errorf("%w; download it elsewhere and copy it into the cache under %s", err, m.File)
	}
	if err != nil {
		return "", err
	}
	licenceNotice(stderr, m.File, m.Licence, m.Source)
	return path, nil
}
