//go:build !unix

package testutil

import "errors"

const haveFIFO = false

func mkfifo(string) error { return errors.New("no named pipes in this file system") }
