package gsvideo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/da3-go/da3-go/internal/atomicfile"
)

// Quality is the H.264 encoding's quality (video_quality).
type Quality string

// The qualities: x264's constant rate factor and preset.
const (
	High   Quality = "high"   // crf 18, preset slow (the default)
	Medium Quality = "medium" // crf 23, preset medium
	Low    Quality = "low"    // crf 28, preset veryfast
)

var qualities = map[Quality][2]string{High: {"18", "slow"}, Medium: {"23", "medium"}, Low: {"28", "veryfast"}}

// ErrNoFFmpeg is returned when the ffmpeg program cannot be found.
var ErrNoFFmpeg = errors.New("the gs_video export needs the ffmpeg program (with libx264) on PATH: install the ffmpeg package (Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg)")

// EncodeOptions are the encoding's settings; the zero value is upstream's.
type EncodeOptions struct {
	// FFmpeg is the program ("": ffmpeg, looked up on PATH).
	FFmpeg string
	// FPS is the frame rate (0: FPS).
	FPS int
	// Quality ("": High).
	Quality Quality
}

// FindFFmpeg is the path of the ffmpeg program name ("": "ffmpeg"), looked
// up on PATH, or ErrNoFFmpeg.
func FindFFmpeg(name string) (string, error) {
	if name == "" {
		name = "ffmpeg"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w (%s: %v)", ErrNoFFmpeg, name, err)
	}
	return p, nil
}

// EncodeMP4 writes path as an H.264 MP4 (yuv420p, as moviepy's
// write_videofile does for upstream: libx264, the quality's crf and
// preset, no audio) of the raw 8-bit RGB frames of w × h pixels that
// frames writes into ffmpeg's standard input (Video.WriteRaw). Frames of
// odd sides are padded with a black row or column. ffmpeg writes a
// temporary file next to path, renamed into place when it succeeded; on
// any error nothing is left at path.
func EncodeMP4(ctx context.Context, path string, w, h int, opt EncodeOptions, frames func(io.Writer) error) error {
	ffmpeg, err := FindFFmpeg(opt.FFmpeg)
	if err != nil {
		return err
	}
	q := opt.Quality
	if q == "" {
		q = High
	}
	qp, ok := qualities[q]
	if !ok {
		return fmt.Errorf("unknown video quality %q (high, medium, low)", q)
	}
	fps := opt.FPS
	if fps == 0 {
		fps = FPS
	}
	if fps < 1 || w < 1 || h < 1 {
		return fmt.Errorf("video of %dx%d at %d fps", w, h, fps)
	}
	return atomicfile.WriteVia(path, func(tmp string) error {
		args := []string{"-hide_banner", "-loglevel", "error", "-y",
			"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", w, h), "-r", strconv.Itoa(fps), "-i", "pipe:0",
			"-an", "-c:v", "libx264", "-preset", qp[1], "-crf", qp[0], "-pix_fmt", "yuv420p"}
		if w%2 == 1 || h%2 == 1 {
			args = append(args, "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2")
		}
		args = append(args, "-f", "mp4", tmp)
		return runFFmpeg(ctx, ffmpeg, args, func(stdin io.Writer) error {
			cw := &countWriter{w: stdin}
			if err := frames(cw); err != nil {
				return err
			}
			switch size := int64(3 * w * h); {
			case cw.n == 0:
				return errors.New("no frames")
			case cw.n%size != 0:
				return fmt.Errorf("%d bytes of RGB: not a whole number of %dx%d frames", cw.n, w, h)
			}
			return nil
		})
	})
}

// runFFmpeg runs ffmpeg with args, frames writing its standard input. A
// failure of frames kills ffmpeg and is returned; a failure of ffmpeg
// (frames then meets a closed pipe) is returned with ffmpeg's last line.
func runFFmpeg(ctx context.Context, ffmpeg string, args []string, frames func(io.Writer) error) error {
	run, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(run, ffmpeg, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ffmpeg: %w", err)
	}
	werr := frames(stdin)
	ours := werr != nil && !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, os.ErrClosed)
	if ours {
		kill()
	}
	stdin.Close()
	err = cmd.Wait()
	switch {
	case ours:
		return werr
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("ffmpeg: %s", stderr.lastLine(err))
	}
	return werr
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b bytes.Buffer }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 4096 {
		rest := t.b.Bytes()[t.b.Len()-4096:]
		t.b = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return len(p), nil
}

// lastLine is the last line ffmpeg printed, else err's text.
func (t *tailBuffer) lastLine(err error) string {
	msg := strings.TrimSpace(t.b.String())
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	if msg == "" {
		return err.Error()
	}
	return msg
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
