package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lastLine is the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// TestUsageErrorsAreOneLine: a bad flag, a bad value, a wrong argument and
// an unknown command are one line naming the problem (with the near misses)
// and one pointing to the help, on stderr, exit 2; never the flag list.
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"near miss", []string{"depth", "-fromat", "png", "a.png"}, "da3-go depth: unknown flag -fromat; did you mean -format?"},
		{"double dash", []string{"depth", "--fromat=png"}, "da3-go depth: unknown flag -fromat; did you mean -format?"},
		{"prefix", []string{"depth", "-proc", "5"}, "da3-go depth: unknown flag -proc; did you mean -process-res, -process-res-method or -processed-size?"},
		{"nothing near", []string{"depth", "-zzzzzz"}, "da3-go depth: unknown flag -zzzzzz"},
		{"short", []string{"info", "-x", "f.gguf"}, "da3-go info: unknown flag -x"},
		{"int value", []string{"depth", "-threads", "many"}, `da3-go depth: -threads "many": want an integer`},
		{"uint value", []string{"pose", "-ray-seed=-1"}, `da3-go pose: -ray-seed "-1": want a non-negative integer`},
		{"bool value", []string{"depth", "-v=maybe"}, `da3-go depth: -v "maybe": want true or false`},
		{"own bool value", []string{"depth", "-exif-rotate=sideways"}, `da3-go depth: -exif-rotate "sideways": want true or false`},
		{"func value", []string{"depth", "-max-image-pixels", "-3"}, `da3-go depth: -max-image-pixels "-3": want a positive number of pixels`},
		{"out of range", []string{"serve", "-max-body", "99999999999999999999"}, `da3-go serve: -max-body "99999999999999999999": out of range`},
		{"no value", []string{"depth", "-o"}, "da3-go depth: -o needs a value"},
		{"missing model", []string{"depth", "a.png"}, "da3-go depth: -model is required"},
		{"wrong arguments", []string{"info"}, "da3-go info: want one GGUF file, got 0 arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			cmd := tc.args[0]
			assert.Equal(t, tc.want+"\nRun 'da3-go help "+cmd+"' for usage.\n", stderr)
		})
	}
}

func TestUsageUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dpeth", "x.png"}, `da3-go: unknown command "dpeth"; did you mean depth?`},
		{[]string{"qunatize"}, `da3-go: unknown command "qunatize"; did you mean quantize?`},
		{[]string{"recon"}, `da3-go: unknown command "recon"; did you mean reconstruct?`},
		{[]string{"frobnicate"}, `da3-go: unknown command "frobnicate"`},
		{[]string{"help", "psoe"}, `da3-go help: unknown command "psoe"; did you mean pose?`},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Empty(t, stdout, tc.args)
		assert.Equal(t, tc.want+"\nRun 'da3-go help' for usage.\n", stderr, tc.args)
	}
}

func TestUsageNearMisses(t *testing.T) {
	flags := []string{"format", "o", "model", "metric-model", "process-res", "process-res-method", "v"}
	assert.Equal(t, []string{"format"}, nearMisses("fromat", flags))
	assert.Equal(t, []string{"model"}, nearMisses("mdoel", flags))
	assert.Equal(t, []string{"metric-model"}, nearMisses("metric_model", flags))
	assert.Equal(t, []string{"process-res", "process-res-method"}, nearMisses("proc", flags))
	assert.Empty(t, nearMisses("x", flags), "one letter is near every short flag: no guess")
	assert.Empty(t, nearMisses("quality", flags))
	assert.Equal(t, 2, levenshtein("fromat", "format"))
	assert.Equal(t, 3, levenshtein("kitten", "sitting"))
	assert.Equal(t, 5, levenshtein("", "depth"))
}

// TestHelpGoesToStdout: -h, -help, --help and 'da3-go help CMD' print the
// command's help on stdout and exit 0, for every command.
func TestHelpGoesToStdout(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, args := range [][]string{{n, "-h"}, {n, "-help"}, {n, "--help"}, {"help", n}} {
			code, stdout, stderr := runCLI(args...)
			assert.Equal(t, exitOK, code, args)
			assert.Empty(t, stderr, args)
			assert.True(t, strings.HasPrefix(stdout, "usage: "+commands[n].usage+"\n"), "%v: %q", args, stdout)
			assert.Contains(t, stdout, "Exit status: 0 on success", args)
		}
	}
	code, stdout, stderr := runCLI("depth", "-h")
	require.Equal(t, exitOK, code)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "\n  -format string\n", "the flags are listed")

	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, stdout, stderr := runCLI(args...)
		assert.Equal(t, exitOK, code, args)
		assert.Empty(t, stderr, args)
		assert.Contains(t, stdout, "Commands:", args)
		assert.Contains(t, stdout, "2 on a usage error", args)
	}
}

// goIdentifier matches what a message must not name: CamelCase words (a
// Go type, field or function) and option structs.
var goIdentifier = regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z]\w*\b|\b\w*Options\b|\(Names\b|\bset [A-Z]\w+`)

// properNames are CamelCase words that are not Go identifiers.
var properNames = map[string]bool{"MiB": true, "GiB": true, "KiB": true, "TiB": true, "EiB": true, "NaN": true,
	"WebP": true, "PyTorch": true, "TorchScript": true, "RoPE": true, "ImageNet": true, "WxH": true}

// goIdentifiers are the Go identifiers msg names, leaving out paths (a
// temporary directory holds the test's name).
func goIdentifiers(msg string) []string {
	msg = regexp.MustCompile(`\S*/\S*`).ReplaceAllString(msg, "")
	var found []string
	for _, w := range goIdentifier.FindAllString(msg, -1) {
		if !properNames[w] {
			found = append(found, w)
		}
	}
	return found
}

// TestExitCodesAndMessages runs the CLI's error paths: each exits with the
// documented code and says what went wrong in at most two lines of stderr,
// in the terms of the command line (flags, files), never Go identifiers.
func TestExitCodesAndMessages(t *testing.T) {
	da2 := tinyDA2(t)
	da3 := tinyDA3(t)
	img := fixtureImage(t, "da2-tiny/image.png")
	view0, view1 := fixtureImage(t, "da3-tiny/two/images/view0.png"), fixtureImage(t, "da3-tiny/two/images/view1.png")
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notGGUF, []byte("not a model\n"), 0o644))
	missing := filepath.Join(dir, "missing.png")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"unknown flag", []string{"depth", "-fromat", "png"}, exitUsage, []string{"-fromat", "-format"}},
		{"unknown command", []string{"dpeth"}, exitUsage, []string{"dpeth", "depth"}},
		{"bad value", []string{"pose", "-chunk-size", "x"}, exitUsage, []string{"-chunk-size"}},
		{"bad format", []string{"depth", "-model", da2, "-format", "jpg", img}, exitUsage, []string{`-format "jpg"`}},
		{"missing image", []string{"depth", "-model", da2, "-quiet", missing}, exitFailure, []string{missing}},
		{"missing model", []string{"depth", "-model", filepath.Join(dir, "none.gguf"), "-quiet", img}, exitFailure, []string{"none.gguf", "no such file"}},
		{"unknown model name", []string{"depth", "-model", "da3-smal", "-quiet", img}, exitFailure, []string{"da3-small", "da3-go models"}},
		{"output directory", []string{"depth", "-model", da2, "-quiet", "-o", "/proc/x", img}, exitFailure, []string{"/proc/x"}},
		{"DA2 to pose", []string{"pose", "-model", da2, "-quiet", img}, exitFailure, []string{da2, "DA3 any-view"}},
		{"ray pose without the ray head", []string{"pose", "-model", da3, "-quiet", "-process-res", "42", "-ray-pose", view0, view1}, exitFailure, []string{"da3-tiny.gguf", "ray head", "-with-aux"}},
		{"conf of DA2", []string{"depth", "-model", da2, "-quiet", "-conf", "-o", dir + "/", img}, exitFailure, []string{da2, "confidence"}},
		{"stream of DA2", []string{"depth", "-model", da2, "-quiet", "-stream", "-o", dir + "/", img}, exitFailure, []string{da2, "-stream"}},
		{"3D of DA2", []string{"reconstruct", "-model", da2, "-quiet", "-o", filepath.Join(dir, "scene"), img}, exitFailure, []string{da2}},
		{"convert without heads", []string{"convert", filepath.Join("..", "..", "tests", "fixtures", "da2-tiny", "model.pth"), filepath.Join(dir, "x.gguf")}, exitFailure, []string{"-heads"}},
		{"info of a non-GGUF", []string{"info", notGGUF}, exitFailure, []string{notGGUF, "not a GGUF file"}},
		{"quantize a non-GGUF", []string{"quantize", "-quiet", notGGUF, filepath.Join(dir, "q.gguf")}, exitFailure, []string{notGGUF, "not a GGUF file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			for _, w := range tc.want {
				assert.Contains(t, stderr, w)
			}
			assert.LessOrEqual(t, strings.Count(stderr, "\n"), 2, "at most two lines: %q", stderr)
			assert.NotContains(t, stderr, "Flags:", "no flag list")
			assert.Empty(t, goIdentifiers(stderr), "Go identifiers in %q", stderr)
			assert.NotContains(t, stderr, `"model"`, "the file is named, not the checkpoint")
		})
	}
}

// TestMessagesNameNoGoIdentifiers scans the error messages written in the
// repository's sources (fmt.Errorf, errors.New and the CLI's and server's
// message helpers) for Go identifiers: a user reads flags and concepts,
// not struct fields.
func TestMessagesNameNoGoIdentifiers(t *testing.T) {
	root := filepath.Join("..", "..")
	makers := map[string]bool{"fmt.Errorf": true, "errors.New": true, "usageError": true, "errUsage": true,
		"errorf": true, "badRequest": true, "unprocessable": true, "tooLarge": true, "http.Error": true}
	fset := token.NewFileSet()
	var bad []string
	scanned := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "testutil", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || !makers[callName(c)] {
				return true
			}
			for _, a := range c.Args {
				for _, s := range literals(a) {
					if ids := goIdentifiers(s); len(ids) > 0 {
						bad = append(bad, fmt.Sprintf("%s: %v in %q", fset.Position(c.Pos()), ids, s))
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, scanned, 100, "the scan found the sources")
	assert.Empty(t, bad, "messages naming Go identifiers:\n%s", strings.Join(bad, "\n"))
}

// callName is "pkg.Func" or "Func" for a call.
func callName(c *ast.CallExpr) string {
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok {
			return x.Name + "." + fn.Sel.Name
		}
	case *ast.Ident:
		return fn.Name
	}
	return ""
}

// literals are the string constants of an argument, with constant
// concatenations joined.
func literals(e ast.Expr) []string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			if s, err := strconv.Unquote(x.Value); err == nil {
				return []string{s}
			}
		}
	case *ast.BinaryExpr:
		a, b := literals(x.X), literals(x.Y)
		if len(a) == 1 && len(b) == 1 {
			return []string{a[0] + b[0]}
		}
		return append(a, b...)
	case *ast.ParenExpr:
		return literals(x.X)
	}
	return nil
}
