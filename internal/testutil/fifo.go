package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FIFO makes a named pipe called name in a temporary folder of t and
// returns its path: a file that an open for reading waits on until a writer
// comes, the case the readers of user-named files must refuse. Where the
// file system has no named pipes (Windows) the test is skipped.
func FIFO(t testing.TB, name string) string {
	t.Helper()
	if !haveFIFO {
		t.Skip("no named pipes in this operating system's file system")
	}
	p := filepath.Join(t.TempDir(), name)
	if err := mkfifo(p); err != nil {
		t.Fatalf("mkfifo %s: %v", p, err)
	}
	return p
}

// NotBlocked runs f and returns its error; when f has not returned after
// 5 s (an open or read blocked on fifo) the test fails, after opening fifo
// for writing so that f and its goroutine can end.
func NotBlocked(t testing.TB, fifo string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			defer w.Close()
		}
		t.Fatalf("blocked on the FIFO %s for 5 s", fifo)
		return nil
	}
}
