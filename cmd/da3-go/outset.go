package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/safeio"
)

// madeDirs are the directories a run made for its outputs, so that what
// it leaves empty (a run that failed before writing) is removed again.
type madeDirs []string

// prepare makes dir, with its missing parents, and checks that a file can
// be created in it (atomicfile.Probe), so that an unwritable output fails
// before the model loads. The directories it makes are recorded in m.
func (m *madeDirs) prepare(dir string) error {
	if dir == "" {
		dir = "."
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		*m = append(*m, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	return atomicfile.Probe(dir)
}

// removeEmpty removes the directories m made that are empty, deepest
// first; directories holding anything stay (os.Remove refuses them).
func (m *madeDirs) removeEmpty() {
	dirs := slices.Clone(*m)
	// A directory's path is longer than its parent's.
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		os.Remove(d)
	}
}

// manifestName is the file in an output directory that lists the outputs
// of the runs into it, one path a line relative to the directory.
const manifestName = ".da3-go-outputs"

// outputSet is the files a run writes into an output directory, and what
// becomes of the outputs a previous run wrote there (its manifest):
//
//   - a planned output that exists and no manifest lists (a file that is
//     not a da3-go output) is refused before the model loads, unless
//     overwrite;
//   - the previous outputs this run replaces (replaces) but does not
//     write are removed once the run has written all of its own;
//   - the manifest then lists the run's outputs and the previous ones it
//     does not replace. Before the first output is written it lists the
//     previous ones and the planned ones, so that a run that fails halfway
//     leaves nothing the next run does not know. Each time it is written,
//     the entries another run added since (a shard of the same job into
//     the same directory) are kept; two writes at the same instant can
//     still lose one run's entries (there is no lock).
//
// Only regular files the manifest lists, inside the directory, are ever
// removed.
type outputSet struct {
	dir            string
	planned, stale []string // relative to dir
	previous, kept []string
	inputs         []string // never removed
	begun          bool
	stderr         io.Writer // where removals are logged; nil: silent
}

// planOutputSet reads dir's manifest and checks the planned outputs (paths
// under dir) against it; replaces tells which previous outputs the run
// replaces, inputs are the run's.
func planOutputSet(dir string, paths, inputs []string, replaces func(rel string) bool, overwrite bool) (*outputSet, error) {
	s := &outputSet{dir: dir, inputs: inputs}
	prev, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	s.previous = prev
	planned := map[string]bool{}
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("output %s is not under the output directory %s", p, dir)
		}
		if planned[rel] {
			continue
		}
		planned[rel] = true
		s.planned = append(s.planned, rel)
		if _, err := os.Lstat(p); err == nil && !overwrite && !slices.Contains(prev, rel) {
			return nil, fmt.Errorf("%s exists and is not an output of an earlier run into %s (%s does not list it): move it away, choose another -o, or give -overwrite to replace it",
				p, dir, manifestName)
		}
	}
	for _, rel := range prev {
		switch {
		case planned[rel]:
		case replaces(rel):
			s.stale = append(s.stale, rel)
		default:
			s.kept = append(s.kept, rel)
		}
	}
	return s, nil
}

// readManifest returns the entries of dir's manifest (none when it has
// none); entries that are not local paths are ignored.
func readManifest(dir string) ([]string, error) {
	p := filepath.Join(dir, manifestName)
	if err := atomicfile.CheckDest(p); err != nil {
		return nil, err
	}
	b, err := safeio.ReadFile(p, safeio.MaxListBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	var rels []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rel := filepath.FromSlash(line)
		if filepath.IsLocal(rel) && !slices.Contains(rels, rel) {
			rels = append(rels, rel)
		}
	}
	return rels, nil
}

// writeManifest writes dir's manifest listing rels (sorted).
func writeManifest(dir string, rels []string) error {
	rels = slices.Clone(rels)
	slices.Sort(rels)
	var b strings.Builder
	b.WriteString("# da3-go outputs in this directory: the next run into it replaces them, removing those it does not write\n")
	for _, r := range rels {
		b.WriteString(filepath.ToSlash(r))
		b.WriteByte('\n')
	}
	return atomicfile.WriteFile(filepath.Join(dir, manifestName), []byte(b.String()))
}

// begin records the planned outputs in the manifest before the first of
// them is written; it is called before every write and acts once. A nil
// set is a no-op.
func (s *outputSet) begin() error {
	if s == nil || s.begun {
		return nil
	}
	s.begun = true
	return s.writeManifest(append(slices.Clone(s.previous), s.planned...))
}

// writeManifest writes the manifest listing rels and what it lists now
// apart from the stale outputs, so that runs into dir at the same time
// (shards of one job) keep each other's outputs listed.
func (s *outputSet) writeManifest(rels []string) error {
	now, err := readManifest(s.dir)
	if err != nil {
		return err
	}
	for _, rel := range now {
		if !slices.Contains(s.stale, rel) && !slices.Contains(rels, rel) {
			rels = append(rels, rel)
		}
	}
	return writeManifest(s.dir, rels)
}

// commit removes the previous outputs the run replaced and did not write
// (and the directories under dir that leaves empty), and writes the
// manifest of the outputs now there. A nil set is a no-op.
func (s *outputSet) commit() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, rel := range s.stale {
		p := filepath.Join(s.dir, rel)
		if !regularInside(s.dir, rel) || atomicfile.CheckNotInput(p, s.inputs...) != nil {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			s.kept = append(s.kept, rel) // still there, still the previous run's
			continue
		}
		if s.stderr != nil {
			fmt.Fprintf(s.stderr, "da3-go: removed %s (an output of the previous run into %s that this run does not write)\n", p, s.dir)
		}
		for d := filepath.Dir(p); d != filepath.Clean(s.dir) && len(d) > len(filepath.Clean(s.dir)); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
	if err := s.writeManifest(append(slices.Clone(s.kept), s.planned...)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// regularInside reports whether dir/rel is a regular file reached without
// following a symbolic link below dir.
func regularInside(dir, rel string) bool {
	p := dir
	parts := strings.Split(rel, string(filepath.Separator))
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		if i < len(parts)-1 && !fi.IsDir() || i == len(parts)-1 && !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}
