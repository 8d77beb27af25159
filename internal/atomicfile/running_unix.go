//go:build unix

package atomicfile

import (
	"errors"
	"syscall"
)

// running reports whether a process with that id exists (signal 0). A
// process of another user counts as running.
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
