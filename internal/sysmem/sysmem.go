// Package sysmem reports the memory this process may still use: the
// system's available memory, the cgroup limit and the address-space limit
// (ulimit -v), each with what is already used against it.
package sysmem

import (
	"fmt"
	"strings"
)

// Limit is one bound on the memory the process may use.
type Limit struct {
	// Name says which bound ("MemAvailable", "cgroup memory.max", ...).
	Name string
	// Total is the bound; Used is what counts against it now; Free is
	// what is left (Total − Used, or the available figure itself).
	Total, Used, Free uint64
	// Virtual: the bound counts address space (mapped but untouched
	// memory included), not resident memory.
	Virtual bool
}

func (l Limit) String() string {
	if l.Total == 0 || l.Used == 0 {
		return fmt.Sprintf("%s %s", l.Name, Bytes(max(l.Free, l.Total)))
	}
	return fmt.Sprintf("%s %s, %s in use", l.Name, Bytes(l.Total), Bytes(l.Used))
}

// Bytes formats n as MiB or GiB.
func Bytes(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// Limits returns the bounds that apply now (none where the platform has no
// way to tell, or nothing is limited).
func Limits() []Limit { return limits() }

// Tightest returns the limit with the least free memory of the given kind
// (resident or virtual), and false if there is none.
func Tightest(ls []Limit, virtual bool) (Limit, bool) {
	var best Limit
	ok := false
	for _, l := range ls {
		if l.Virtual == virtual && (!ok || l.Free < best.Free) {
			best, ok = l, true
		}
	}
	return best, ok
}

// parseKB reads "Key:   123 kB" lines of /proc files.
func parseKB(text, key string) (uint64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		var v uint64
		if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &v); err == nil {
			return v << 10, true
		}
	}
	return 0, false
}
