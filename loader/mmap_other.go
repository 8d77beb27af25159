//go:build !unix

package loader

import (
	"io"
	"os"
)

// mapFile reads the whole file where mmap is not available.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, nil, nil
}
