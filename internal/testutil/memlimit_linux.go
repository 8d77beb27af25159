package testutil

import "syscall"

const canLimitMemory = true

func setMemoryLimit(limit uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}
