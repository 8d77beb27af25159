// Package shasum parses sha256sum-style lists ("<hex>  <file>" per line, '#'
// comments). It is shared by the table generator and its consistency test.
package shasum

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Entry is one line of a list.
type Entry struct {
	File   string
	SHA256 string // lower-case hex
}

// Parse reads a list, returning its entries sorted by file name. Blank lines
// and lines starting with '#' are skipped; a '*' before the file name (binary
// mode) is accepted. Malformed lines, bad digests and duplicate files are
// errors naming the line.
func Parse(text string) ([]Entry, error) {
	var out []Entry
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, file, ok := strings.Cut(line, " ")
		file = strings.TrimPrefix(strings.TrimSpace(file), "*")
		if !ok || file == "" {
			return nil, fmt.Errorf("line %d: want \"<sha256>  <file>\", got %q", i+1, line)
		}
		if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("line %d: %q is not a SHA-256 digest", i+1, sum)
		}
		if prev, dup := seen[file]; dup {
			return nil, fmt.Errorf("line %d: %s already listed on line %d", i+1, file, prev)
		}
		seen[file] = i + 1
		out = append(out, Entry{File: file, SHA256: strings.ToLower(sum)})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.File, b.File) })
	return out, nil
}
