package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/safeio"
)

// inputFlags select the images a command runs on besides its positional arguments (image files and
// directories): a list file and a video.
type inputFlags struct {
	list  string
	video string
	fps   float64
	exts  string
}

func (f *inputFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.list, "list", "", "text file listing images, one path per line (relative to the file; # comments)")
	fs.StringVar(&f.video, "video", "", "video file: its frames are the images (needs the ffmpeg program)")
	fs.Float64Var(&f.fps, "fps", 1, "frames per second sampled from -video (every ⌊video fps / fps⌋-th frame, as upstream)")
	fs.StringVar(&f.exts, "ext", "jpg,jpeg,png,bmp,tif,tiff,webp", "image extensions searched in directory arguments (case-insensitive)")
}

// inputs are the images of a run: paths to decode and the names outputs are derived from (the same
// paths, except for video frames, which are named <video dir>/<video name>_<frame>.png).
type inputs struct {
	paths, names []string
	cleanup      func()
}

// expand resolves the positional arguments (files, and directories searched recursively for the -ext
// extensions, sorted), then the -list file's entries, then the -video frames, in that order.
func (f *inputFlags) expand(ctx context.Context, args []string) (*inputs, error) {
	in := &inputs{cleanup: func() {}}
	add := func(p string) {
		in.paths = append(in.paths, p)
		in.names = append(in.names, p)
	}
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", a, errors.Unwrap(err))
		}
		if !fi.IsDir() {
			add(a)
			continue
		}
		exts, err := parseExts(f.exts)
		if err != nil {
			return nil, err
		}
		found, err := findImages(a, exts)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("directory %s has no images with extensions %s", a, f.exts)
		}
		for _, p := range found {
			add(p)
		}
	}
	if f.list != "" {
		listed, err := readList(f.list)
		if err != nil {
			return nil, err
		}
		for _, p := range listed {
			add(p)
		}
	}
	if f.video != "" {
		frames, dir, err := extractFrames(ctx, f.video, f.fps)
		if err != nil {
			return nil, err
		}
		in.cleanup = func() { os.RemoveAll(dir) }
		base := strings.TrimSuffix(filepath.Base(f.video), filepath.Ext(f.video))
		for _, fr := range frames {
			in.paths = append(in.paths, fr)
			in.names = append(in.names, filepath.Join(filepath.Dir(f.video), base+"_"+filepath.Base(fr)))
		}
	}
	if len(in.paths) == 0 {
		in.cleanup()
		return nil, errUsage("no input images")
	}
	return in, nil
}

func parseExts(s string) (map[string]bool, error) {
	exts := map[string]bool{}
	for _, e := range splitList(s) {
		exts["."+strings.ToLower(strings.TrimPrefix(e, "."))] = true
	}
	if len(exts) == 0 {
		return nil, errUsage("-ext is empty")
	}
	return exts, nil
}

// findImages walks dir recursively for files with the given extensions, skipping hidden files and
// directories (names starting with "."), and returns them sorted by path.
func findImages(dir string, exts map[string]bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("search %s: %w", dir, err)
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && exts[strings.ToLower(filepath.Ext(p))] {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// readList reads a list of image paths: one a line, blank lines and lines starting with # skipped,
// relative paths taken relative to the list file's directory.
func readList(path string) ([]string, error) {
	b, err := safeio.ReadFile(path, safeio.MaxListBytes)
	if err != nil {
		return nil, fmt.Errorf("-list: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return nil, fmt.Errorf("-list %s line %d: %s is not an image file", path, line, p)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("-list %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-list %s lists no images", path)
	}
	return out, nil
}

// errNoFFmpeg names what to install when -video is used without ffmpeg.
var errNoFFmpeg = errors.New("-video needs the ffmpeg and ffprobe programs on PATH: install the ffmpeg package (Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg)")

// extractFrames decodes every k-th frame of a video, k = max(1, ⌊video fps / fps⌋) as upstream's
// VideoHandler samples, into PNG files 000000.png, 000001.png, … of a new temporary directory (the
// caller removes it).
func extractFrames(ctx context.Context, video string, fps float64) (frames []string, dir string, err error) {
	if !(fps > 0) || math.IsInf(fps, 0) {
		return nil, "", errUsage(fmt.Sprintf("-fps %g must be a positive number", fps))
	}
	fi, err := os.Stat(video)
	if err != nil {
		return nil, "", fmt.Errorf("-video: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("-video %s: not a regular file", video)
	}
	ffmpeg, err1 := exec.LookPath("ffmpeg")
	ffprobe, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		return nil, "", errNoFFmpeg
	}
	out, err := exec.CommandContext(ctx, ffprobe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=avg_frame_rate,r_frame_rate", "-of", "default=noprint_wrappers=1", video).CombinedOutput()
	if err != nil || ctx.Err() != nil {
		return nil, "", videoError(ctx, video, "ffprobe", out, err)
	}
	rate := videoRate(string(out))
	if rate <= 0 {
		return nil, "", fmt.Errorf("-video %s: ffprobe finds no video stream with a frame rate (%s)", video, strings.TrimSpace(string(out)))
	}
	step := max(1, int(rate/fps))
	dir, err = os.MkdirTemp("", "da3-go-frames-")
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	out, err = exec.CommandContext(ctx, ffmpeg, "-nostdin", "-v", "error", "-i", video,
		"-vf", "select=not(mod(n\\,"+strconv.Itoa(step)+"))", "-fps_mode", "vfr", "-start_number", "0",
		filepath.Join(dir, "%06d.png")).CombinedOutput()
	if err != nil || ctx.Err() != nil {
		return nil, "", videoError(ctx, video, "ffmpeg", out, err)
	}
	frames, err = filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil {
		return nil, "", err
	}
	if len(frames) == 0 {
		return nil, "", fmt.Errorf("-video %s: ffmpeg decoded no frames", video)
	}
	slices.Sort(frames)
	return frames, dir, nil
}

func videoError(ctx context.Context, video, tool string, out []byte, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	msg := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	if msg == "" {
		msg = err.Error()
	}
	return fmt.Errorf("-video %s: %s cannot read it: %s", video, tool, msg)
}

// videoRate parses ffprobe's avg_frame_rate (falling back to r_frame_rate), e.g. "30000/1001".
func videoRate(s string) float64 {
	rates := map[string]float64{}
	for _, l := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok {
			continue
		}
		num, den, frac := strings.Cut(v, "/")
		n, err := strconv.ParseFloat(num, 64)
		if err != nil {
			continue
		}
		if frac {
			d, err := strconv.ParseFloat(den, 64)
			if err != nil || d == 0 {
				continue
			}
			n /= d
		}
		rates[k] = n
	}
	if r := rates["avg_frame_rate"]; r > 0 {
		return r
	}
	return rates["r_frame_rate"]
}

// open expands the inputs of a command; on failure it reports the problem and returns nil and the exit
// code. The caller defers in.cleanup().
func (f *inputFlags) open(ctx context.Context, fset *flag.FlagSet, args []string, stderr io.Writer) (*inputs, int) {
	in, err := f.expand(ctx, args)
	if err != nil {
		var ue usageErr
		if errors.As(err, &ue) {
			return nil, usageError(fset, stderr, "%v", err)
		}
		return nil, fail(stderr, err)
	}
	return in, exitOK
}
