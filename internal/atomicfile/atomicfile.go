// Package atomicfile is the one place where da3-go writes output files: a
// file is written to a temporary name in its destination's directory and
// renamed into place once complete, so a destination is never left
// half-written, and the checks every output needs are made before anything
// runs.
//
// Rules, the same for the CLI, the server, the C API and the export package:
//
//   - only a regular file is ever replaced (and only by a regular file):
//     a directory, device node, FIFO, socket or symbolic link at the
//     destination is refused (CheckDest);
//   - an output never replaces one of its inputs, by path or as the same
//     file through another path or a hard link (CheckNotInput);
//   - temporary files are named TempPrefix + "<pid>-<random>" whatever the
//     destination's name, so a name that fits the file system also fits its
//     temporary file, and the leftovers of a killed process are recognisable:
//     RemoveStale removes those of processes no longer running.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/da3-go/da3-go/internal/safeio"
)

// TempPrefix starts the names of the temporary files (".da3-tmp-<pid>-<random>").
const TempPrefix = ".da3-tmp-"

// MaxName is the longest file name (in bytes) CheckDest accepts: NAME_MAX
// of the common file systems (ext4, XFS, Btrfs, APFS, NTFS in UTF-16 units).
const MaxName = 255

// ErrNotRegular is wrapped by the errors of destinations that exist and are
// not regular files.
var ErrNotRegular = errors.New("not a regular file")

// ErrInput is wrapped by the errors of outputs that would replace an input.
var ErrInput = errors.New("would overwrite the input")

// CheckDest checks, before anything is computed, that path can be written
// by Write: its name is not empty, fits MaxName, and what is there now (if
// anything) is a regular file. It does not create the directory.
func CheckDest(path string) error {
	base := filepath.Base(path)
	if path == "" || base == "." || base == string(filepath.Separator) || strings.HasSuffix(path, string(filepath.Separator)) {
		return fmt.Errorf("output %q: not a file name", path)
	}
	if len(base) > MaxName {
		return fmt.Errorf("output %s: the file name is %d bytes long, at most %d", path, len(base), MaxName)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("output %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("output %s is %s, %w: only regular files are replaced", path, safeio.Kind(fi.Mode()), ErrNotRegular)
	}
	return nil
}

// CheckNotInput refuses an output path that names one of inputs: the same
// cleaned absolute path, or the same file (os.SameFile: another path, a
// symbolic link, a hard link). Empty inputs are skipped.
func CheckNotInput(path string, inputs ...string) error {
	if len(inputs) == 0 {
		return nil
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	out := abs(path)
	ofi, oerr := os.Stat(path)
	for _, in := range inputs {
		if in == "" {
			continue
		}
		if abs(in) == out {
			return fmt.Errorf("output %s %w %s", path, ErrInput, in)
		}
		if oerr != nil {
			continue
		}
		if ifi, err := os.Stat(in); err == nil && os.SameFile(ofi, ifi) {
			return fmt.Errorf("output %s %w %s (the same file)", path, ErrInput, in)
		}
	}
	return nil
}

// Check is CheckDest and CheckNotInput.
func Check(path string, inputs ...string) error {
	if err := CheckDest(path); err != nil {
		return err
	}
	return CheckNotInput(path, inputs...)
}

// Probe checks that a file can be created in the directory dir, by
// creating and removing a temporary file there: permission bits do not
// tell (root writes through them, a read-only mount refuses whatever they
// say). The probe is named like the temporary files, so one a killed
// process left is removed by RemoveStale.
func Probe(dir string) error {
	f, err := os.CreateTemp(dir, TempPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return fmt.Errorf("output directory %s is not writable: %w", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPath is the cause of a *fs.PathError (its path, a random temporary
// name, says nothing), else err.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Write writes path through a temporary file in the same directory that is
// renamed into place once write and the file's Close succeeded; on error
// path is untouched and the temporary file removed. write's output is
// buffered. Check's rules apply (with the inputs given).
func Write(path string, write func(w io.Writer) error, inputs ...string) error {
	p, err := WritePending(path, write, inputs...)
	if err != nil {
		return err
	}
	return p.Commit()
}

// WriteFile is Write of data.
func WriteFile(path string, data []byte, inputs ...string) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, inputs...)
}

// WriteVia writes path through a temporary file in the same directory
// that produce fills by its name (an external program writing the file),
// renamed into place once produce succeeded; on error path is untouched and
// the temporary file removed. Check's rules apply (with the inputs given).
func WriteVia(path string, produce func(tmp string) error, inputs ...string) (err error) {
	if err := Check(path, inputs...); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	pending.Store(tmp, struct{}{})
	p := &Pending{path: path, tmp: tmp, inputs: inputs}
	defer func() {
		if err != nil {
			p.Abort()
		}
	}()
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = produce(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.Commit()
}

// Pending is an output whose content is complete in a temporary file next
// to its destination but not yet visible there. Outputs made of several
// files (a COLMAP model) write every file as a Pending first and commit them
// only once all were written, so a failure leaves none of them behind.
type Pending struct {
	path, tmp string
	inputs    []string
}

// WritePending writes write's output into a temporary file next to path and
// returns it uncommitted. On error the temporary file is removed.
func WritePending(path string, write func(w io.Writer) error, inputs ...string) (p *Pending, err error) {
	if err := Check(path, inputs...); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	pending.Store(tmp, struct{}{})
	defer func() {
		if err != nil {
			f.Close() // may already be closed; the error is irrelevant then
			os.Remove(tmp)
			pending.Delete(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err = write(bw); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Pending{path: path, tmp: tmp, inputs: inputs}, nil
}

// Commit renames the temporary file to the destination, checking again
// that the destination is still a regular file (or absent) and not an
// input. A nil or already committed Pending is a no-op.
func (p *Pending) Commit() error {
	if p == nil || p.tmp == "" {
		return nil
	}
	tmp := p.tmp
	p.tmp = ""
	defer pending.Delete(tmp)
	if err := Check(p.path, p.inputs...); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", p.path, err)
	}
	return nil
}

// Abort removes the temporary file; the destination is untouched. A nil or
// committed Pending is a no-op.
func (p *Pending) Abort() {
	if p == nil || p.tmp == "" {
		return
	}
	os.Remove(p.tmp)
	pending.Delete(p.tmp)
	p.tmp = ""
}

// pending holds the temporary files of writes in progress.
var pending sync.Map

// RemovePending removes the temporary files of the writes in progress, for
// a program about to exit at once (a second Ctrl-C): their destinations
// are untouched, and no temporary file is left behind.
func RemovePending() {
	pending.Range(func(k, _ any) bool {
		os.Remove(k.(string))
		return true
	})
}

// RemoveStale removes from dir the temporary files (TempPrefix) that
// processes no longer running left behind (killed while writing), and
// returns their paths. Files of running processes, of this one, and every
// other file are left alone; a missing dir is not an error.
func RemoveStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := tempPID(e.Name())
		if !ok || !e.Type().IsRegular() || pid == os.Getpid() || running(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// tempPID parses the process id of a temporary file's name.
func tempPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, TempPrefix)
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	return pid, err == nil && pid > 0
}
