package sysmem

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func limits() []Limit {
	var out []Limit
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v, ok := parseKB(string(b), "MemAvailable"); ok {
			out = append(out, Limit{Name: "MemAvailable", Free: v})
		}
	}
	if l, ok := cgroup(); ok {
		out = append(out, l)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err == nil && rl.Cur != ^uint64(0) && rl.Cur > 0 {
		used := uint64(0)
		if b, err := os.ReadFile("/proc/self/status"); err == nil {
			used, _ = parseKB(string(b), "VmSize")
		}
		free := uint64(0)
		if rl.Cur > used {
			free = rl.Cur - used
		}
		out = append(out, Limit{Name: "address-space limit (ulimit -v)", Total: rl.Cur, Used: used, Free: free, Virtual: true})
	}
	return out
}

// cgroup reads the memory limit and usage of this process's cgroup (v2,
// else v1).
func cgroup() (Limit, bool) {
	rel, rel1 := "/", "/"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				rel = p
			}
			if _, p, ok := strings.Cut(line, ":memory:"); ok {
				rel1 = p
			}
		}
	}
	num := func(path string) (uint64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 10, 64)
		return v, err == nil
	}
	for _, dir := range []string{filepath.Join("/sys/fs/cgroup", rel), "/sys/fs/cgroup"} {
		if max, ok := num(filepath.Join(dir, "memory.max")); ok {
			cur, _ := num(filepath.Join(dir, "memory.current"))
			return mk("cgroup memory.max", max, cur), true
		}
	}
	// v1: an unlimited group reports a huge number.
	for _, dir := range []string{filepath.Join("/sys/fs/cgroup/memory", rel1), "/sys/fs/cgroup/memory"} {
		if max, ok := num(filepath.Join(dir, "memory.limit_in_bytes")); ok && max < 1<<60 {
			cur, _ := num(filepath.Join(dir, "memory.usage_in_bytes"))
			return mk("cgroup memory.limit_in_bytes", max, cur), true
		}
	}
	return Limit{}, false
}

func mk(name string, total, used uint64) Limit {
	free := uint64(0)
	if total > used {
		free = total - used
	}
	return Limit{Name: name, Total: total, Used: used, Free: free}
}
