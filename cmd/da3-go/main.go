package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/sysmem"
	"github.com/da3-go/da3-go/model"
)

func main() {
	ggml.LimitMallocArenas(2)
	// The Go heap grows to twice its live size between collections; under a
	// cgroup limit it is asked to collect before it would cross it.
	for _, l := range sysmem.Limits() {
		if !l.Virtual && l.Total > 0 {
			debug.SetMemoryLimit(int64(l.Total / 10 * 9))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	interrupts(cancel, os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// interrupts makes the first Ctrl-C (or SIGTERM) cancel the command, which
// stops a running graph within a node and keeps the outputs already
// written, and the second exit at once, removing the temporary files of
// unfinished writes.
func interrupts(cancel context.CancelFunc, stderr io.Writer) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		fmt.Fprintln(stderr, "da3-go: stopping (press Ctrl-C again to quit at once)")
		<-sigs
		imgio.RemovePending()
		fmt.Fprintln(stderr, "da3-go: interrupted")
		os.Exit(exitInterrupted)
	}()
}

// Exit codes, as doc.go and exitStatusHelp document them.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// command is one subcommand. run gets the arguments after the subcommand's name.
type command struct {
	name, usage, summary string
	run                  func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; each command's file calls it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// run is the whole program; tests call it directly with buffers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(ctx, []string{"-h"}, stdout, stderr)
			}
			return unknownCommand(stderr, "da3-go help", args[1])
		}
		usage(stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		return unknownCommand(stderr, "da3-go", name)
	}
	applyKernelsEnv(stderr)
	return c.run(ctx, args[1:], stdout, stderr)
}

// unknownCommand reports a command name that is not one, with the near
// misses; it returns exitUsage.
func unknownCommand(stderr io.Writer, prefix, name string) int {
	names := []string{"help"}
	for n := range commands {
		names = append(names, n)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q%s\n", prefix, name, didYouMean(name, names, ""))
	fmt.Fprintln(stderr, "Run 'da3-go help' for usage.")
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "da3-go runs Depth Anything 3 and Depth Anything V2 models (GGUF) on the CPU and ggml GPU backends.")
	fmt.Fprintln(w, "\nUsage:\n\n\tda3-go <command> [flags] [arguments]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "\t%-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'da3-go help <command>' for a command's flags.")
	fmt.Fprintf(w, "\n%s\n", exitStatusHelp)
}

// fail prints err and returns the exit code for it.
func fail(stderr io.Writer, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "da3-go: interrupted")
		return exitInterrupted
	}
	if h := hint(err); h != "" {
		fmt.Fprintf(stderr, "da3-go: %v (%s)\n", err, h)
	} else {
		fmt.Fprintf(stderr, "da3-go: %v\n", err)
	}
	return exitFailure
}

// hint maps a library error to the flags that address it: the library's
// errors speak of its options, the command line of its flags.
func hint(err error) string {
	switch {
	case errors.Is(err, ggml.ErrOutOfMemory):
		return "lower -process-res, use a smaller -chunk-size, -device cpu, or a quantized model"
	case errors.Is(err, model.ErrNoRayHead):
		return "-ray-pose needs a file from da3-go convert -with-aux"
	case errors.Is(err, model.ErrNoCameraEncoder):
		return "-cameras needs a file from this version of da3-go convert"
	case errors.Is(err, ggml.ErrNoDevice):
		return "'da3-go devices' lists them"
	}
	return ""
}

// setupLog routes slog (and ggml's log) to stderr at the level asked for.
func setupLog(stderr io.Writer, verbose, quiet bool) {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	} else if quiet {
		level = slog.LevelError
	}
	h := slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}})
	setLogger(slog.New(h))
}

// setLogger makes l the command's log: slog's default, which the command
// passes to the library calls that take a logger, and ggml's (process-global;
// the library discards it unless set).
func setLogger(l *slog.Logger) {
	slog.SetDefault(l)
	ggml.SetLogger(l)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// collect runs the garbage collector between a multi-view run and the
// writing of its outputs. The run leaves its large buffers (pixels, the
// backbone's features: hundreds of MiB for tens of views) as garbage; left to
// its pacing, the Go heap may grow to twice the live size before it
// collects, so the writers' allocations would stack on top of that garbage
// (64 frames of DA3-SMALL: up to 550 MiB more peak RSS, depending on when
// the last collection fell).
func collect() { runtime.GC() }
