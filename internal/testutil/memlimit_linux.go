package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const canLimitMemory = true

// setMemoryLimit limits the address space to what the process has mapped now (the Go runtime
// reserves a lot of address space it never touches, more in some versions than others) plus extra.
func setMemoryLimit(extra uint64) error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	var now uint64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return fmt.Errorf("VmSize %q: %w", v, err)
			}
			now = kb << 10
		}
	}
	if now == 0 {
		return fmt.Errorf("no VmSize in /proc/self/status")
	}
	limit := now + extra
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}
