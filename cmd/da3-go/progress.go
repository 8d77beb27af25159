package main

import (
	"io"

	"github.com/schollz/progressbar/v3"
)

// newBar returns a progress callback drawing a bar on stderr, or a no-op when
// quiet or when stderr is not a terminal. Call the returned finish when done.
func newBar(total int64, desc string, bytes, quiet bool, stderr io.Writer) (update func(done, total int64), finish func()) {
	w := stderr
	if quiet || !isTerminal(stderr) {
		w = io.Discard
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(bytes),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionSetWidth(30),
	)
	update = func(done, total int64) {
		if total > 0 && total != bar.GetMax64() {
			bar.ChangeMax64(total)
		}
		_ = bar.Set64(done)
	}
	finish = func() { _ = bar.Finish() }
	return update, finish
}
