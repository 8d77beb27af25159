//go:build !unix

package safeio

import "os"

func openNonblock(path string) (*os.File, error) { return os.Open(path) }

func clearNonblock(*os.File) error { return nil }
