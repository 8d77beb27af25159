package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// newFlags makes a subcommand's flag set. Its help (-h, -help, --help,
// 'da3-go help NAME') goes to stdout; parseFlags and usageError report a
// usage problem on stderr in one line, with a pointer to the help.
func newFlags(c command, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printHelp(stdout, c, fs) }
	return fs
}

// printHelp prints a command's usage line, summary and flags.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, c.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	fmt.Fprintf(w, "\n%s\n", exitStatusHelp)
}

// exitStatusHelp documents the exit codes (the constants in main.go).
const exitStatusHelp = "Exit status: 0 on success, 1 when the command fails (a file, model or device error), 2 on a usage error (a bad flag or argument), 130 when interrupted."

// parseFlags parses args; ok is false when the caller should return code.
// Flags may come before, between or after the positional arguments
// ("depth photo.jpg -model M"), in every command; "--" ends the flags.
// fs.Args() are then the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	pos, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code, false
	}
	_ = fs.Parse(append([]string{"--"}, pos...)) // sets fs.Args() and parses nothing
	return 0, true
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments and returns the positional ones. Asked for help, it
// prints it (fs.Usage) and returns exitOK; on a bad flag it prints one line
// on fs.Output() and returns exitUsage.
func parseInterspersed(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := parseQuiet(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return nil, exitOK, false
			}
			return nil, usageError(fs, fs.Output(), "%s", flagProblem(fs, err)), false
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), 0, true
		}
		if len(rest) == 0 {
			return pos, 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseQuiet is fs.Parse without the flag package's own report (the error
// and the whole flag list): the caller reports the error.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out, help := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = help }()
	return fs.Parse(args)
}

// usageError prints a usage problem in one line, and where the help is; it
// returns exitUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "da3-go %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "Run 'da3-go help %s' for usage.\n", fs.Name())
	return exitUsage
}

// argError reports a problem found in the command's arguments: a usage
// error, unless the operating system refused a file operation (a directory
// that cannot be made, a file that cannot be read): that is a failure, exit
// 1, like any other error of the file system.
func argError(fs *flag.FlagSet, stderr io.Writer, err error) int {
	if isSystemError(err) {
		return fail(stderr, err)
	}
	return usageError(fs, stderr, "%v", err)
}

// isSystemError reports whether err comes from a system call.
func isSystemError(err error) bool {
	var pe *iofs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &se) || errors.As(err, &errno)
}

// The errors of flag.FlagSet.Parse, which flagProblem rephrases.
var (
	reUnknownFlag = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	reBadValue    = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]*): (.*)$`)
	reNoValue     = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

// flagProblem words an error of fs.Parse for the user: an unknown flag with
// the near misses among fs's flags, a bad value with what the flag wants.
func flagProblem(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUnknownFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return "unknown flag -" + m[1] + didYouMean(m[1], names, "-")
	}
	if m := reBadValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("-%s %s: %s", m[2], m[1], wantOf(fs.Lookup(m[2]), m[3]))
	}
	if m := reNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("-%s needs a value", m[1])
	}
	return msg
}

// wantOf says what a flag takes, from its type; reason is the error of its
// Set, kept for the flags that say it themselves.
func wantOf(f *flag.Flag, reason string) string {
	if strings.Contains(reason, "out of range") {
		return "out of range"
	}
	if f == nil {
		return reason
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return reason
	}
	switch g.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64:
		return "want an integer"
	case uint, uint64:
		return "want a non-negative integer"
	case float64:
		return "want a number"
	case time.Duration:
		return "want a duration such as 30s or 5m"
	}
	return reason
}

// didYouMean is "; did you mean X?" for the candidates near name (at most
// 2 edits, fewer for short names), else those name begins, else "".
func didYouMean(name string, candidates []string, prefix string) string {
	near := nearMisses(name, candidates)
	if len(near) == 0 {
		return ""
	}
	for i := range near {
		near[i] = prefix + near[i]
	}
	if len(near) == 1 {
		return "; did you mean " + near[0] + "?"
	}
	return "; did you mean " + strings.Join(near[:len(near)-1], ", ") + " or " + near[len(near)-1] + "?"
}

// nearMisses are the candidates at the smallest edit distance from name
// (at most 2, and at most half name's length), else those that begin with
// name (2 letters or more); at most 3, sorted.
func nearMisses(name string, candidates []string) []string {
	maxDist := min(2, len([]rune(name))/2)
	best, near := maxDist+1, []string(nil)
	for _, c := range candidates {
		switch d := levenshtein(strings.ToLower(name), strings.ToLower(c)); {
		case d > maxDist:
		case d < best:
			best, near = d, []string{c}
		case d == best:
			near = append(near, c)
		}
	}
	if len(near) == 0 && len(name) >= 2 {
		for _, c := range candidates {
			if strings.HasPrefix(c, name) {
				near = append(near, c)
			}
		}
	}
	sort.Strings(near)
	return near[:min(len(near), 3)]
}

// levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of runes).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
