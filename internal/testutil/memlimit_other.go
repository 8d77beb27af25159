//go:build !linux

package testutil

import "errors"

const canLimitMemory = false

func setMemoryLimit(uint64) error { return errors.New("RLIMIT_AS is only set on Linux") }
