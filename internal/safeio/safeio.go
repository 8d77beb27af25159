// Package safeio opens and reads the files a user names (image lists, camera and config JSON, images,
// checkpoints) without trusting what the path is: anything but a regular file — a FIFO, which would
// block a reader forever, a device such as /dev/zero, which never ends, a directory — is refused
// before it is read, and whole-file reads stop at a size limit that the error names.
package safeio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Limits of the small inputs read whole.
const (
	MaxListBytes = 4 << 20  // an image list (-list): one path a line
	MaxJSONBytes = 16 << 20 // a JSON document (cameras, checkpoint configs, manifests)
)

// ErrNotRegular marks a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge marks a file larger than the limit of its kind.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading and returns it with its FileInfo, refusing anything that is not a
// regular file (an error wrapping ErrNotRegular). It never blocks on a FIFO: the file is opened
// non-blocking and checked with fstat before anything is read.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := openNonblock(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, Kind(st.Mode()))
	}
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, st, nil
}

// ReadFile reads the whole of a regular file of at most limit bytes. A larger file is refused before
// it is read (an error wrapping ErrTooLarge that names the limit), as is anything but a regular file.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, tooLarge(path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit { // it grew while being read
		return nil, tooLarge(path, int64(len(b)), limit)
	}
	return b, nil
}

func tooLarge(path string, size, limit int64) error {
	return fmt.Errorf("%s: %w: %d bytes or more, over the limit of %s for this input", path, ErrTooLarge, size, Bytes(limit))
}

// Bytes formats a byte count for messages: "16 MiB", "4 KiB", "100 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Kind names a file mode's type: "a directory", "a symbolic link", "a named
// pipe", "a socket", "a character device", "a block device", else "mode …".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}
