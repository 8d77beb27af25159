//go:build unix

package loader

import (
	"os"
	"syscall"
)

// openNonblock opens path read-only with O_NONBLOCK, so that opening a FIFO
// without a writer returns at once instead of waiting for one.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// clearNonblock puts a regular file back in blocking mode.
func clearNonblock(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
