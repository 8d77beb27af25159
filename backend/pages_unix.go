//go:build unix

package backend

import "syscall"

// dropPages tells the kernel that the whole pages of data, a read-only map
// of the model file, are not needed now: they leave the resident set and
// come back from the file if read again. It is advice: a failure only keeps
// the pages.
func dropPages(data []byte) { _ = syscall.Madvise(data, syscall.MADV_DONTNEED) }
