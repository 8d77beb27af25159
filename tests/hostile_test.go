package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
)

// hostileImage is a small textured test image.
func hostileImage() image.Image { return hostileImageSized(40, 30, 0) }

// hostileImageSized is a w×h textured test image; seed varies it.
func hostileImageSized(w, h, seed int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(6*x + seed*40), uint8(8 * y), uint8(3 * (x + y + seed)), 255})
		}
	}
	return img
}

// hostileOutcome is what one hostile file did.
type hostileOutcome struct {
	loadErr, runErr error
	nonFinite       bool   // the run succeeded with non-finite output values
	stage           string // Result.NonFinite
	strictErr       error  // the run again with RunOptions.Strict, when stage is set
	panicked        string
}

func (o hostileOutcome) err() error {
	if o.loadErr != nil {
		return o.loadErr
	}
	return o.runErr
}

// runHostile loads path and runs one tiny depth estimate, turning a panic
// into an outcome (a crash in C still kills the process: see
// TestHostileModelsSubprocess).
func runHostile(path string) (o hostileOutcome) {
	defer func() {
		if r := recover(); r != nil {
			o.panicked = fmt.Sprintf("%v\n%s", r, debug.Stack())
		}
	}()
	ctx := context.Background()
	m, err := model.Load(ctx, path, model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	if err != nil {
		o.loadErr = err
		return o
	}
	defer m.Close()
	r, err := m.Depth(ctx, hostileImage(), model.RunOptions{ProcessRes: 28})
	if err != nil {
		o.runErr = err
		return o
	}
	for _, maps := range [][]float32{r.Depth, r.Conf, r.Sky} {
		for _, v := range maps {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				o.nonFinite = true
			}
		}
	}
	o.stage = r.NonFinite
	if o.stage != "" {
		_, o.strictErr = m.Depth(ctx, hostileImage(), model.RunOptions{ProcessRes: 28, Strict: true})
	}
	return o
}

// TestHostileModels runs every file of the hostile corpus through Load and
// one Depth in this process: none may panic, every required failure is an
// error of one line, and non-finite outputs are reported.
func TestHostileModels(t *testing.T) {
	bases := hostileBases(t)
	cases := hostileCorpus(bases)
	dir := t.TempDir()
	counts := map[string]int{}
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("case%d.gguf", i))
		require.NoError(t, os.WriteFile(path, c.build(), 0o644))
		o := runHostile(path)
		os.Remove(path)
		switch {
		case o.panicked != "":
			counts["panic"]++
			t.Errorf("%s: panic: %s", c.name, o.panicked)
			continue
		case o.err() != nil:
			counts["error"]++
			msg := o.err().Error()
			assert.NotContains(t, msg, "\n", "%s: the error is not one line", c.name)
			assert.NotEmpty(t, msg)
		case o.stage != "":
			counts["ran, non-finite values reported"]++
			assert.ErrorIs(t, o.strictErr, model.ErrNonFinite, "%s: -strict", c.name)
		case o.nonFinite:
			counts["ran, non-finite output NOT reported"]++
			t.Errorf("%s: non-finite output not reported", c.name)
		default:
			counts["ran"]++
		}
		if c.mustFail {
			assert.Error(t, o.err(), "%s: accepted", c.name)
		}
		if strings.Contains(c.name, "type-f16-matrix") {
			assert.NoError(t, o.err(), "%s: a legal file was refused", c.name)
		}
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	t.Logf("hostile models: %d files from %d bases: %s", len(cases), len(bases), strings.Join(parts, ", "))
	for _, b := range bases {
		o := runHostile(b.path)
		require.NoError(t, o.err(), "base %s", b.name)
		require.False(t, o.nonFinite, "base %s", b.name)
	}
}

// FuzzLoadRun feeds mutated model files to Load and one tiny Depth; no
// input may panic, errors are one line and non-finite outputs are reported.
// An input is a recipe, small enough for the fuzzer to mutate and minimize
// quickly: a start file (byte 0 even: base byte1; odd: hostile corpus case
// bytes 1-2), a truncation (byte 3: none, or to len·b/256), then 5-byte
// edits (offset u32, value): the offset's top bit addresses the whole file,
// otherwise the header. `make fuzz-models` explores from the bases and a
// sample of the corpus.
func FuzzLoadRun(f *testing.F) {
	bases := hostileBases(f)
	cases := hostileCorpus(bases)
	for i := range bases {
		f.Add([]byte{0, byte(i), 0, 0})
	}
	for i := 0; i < len(cases); i += 25 {
		f.Add([]byte{1, byte(i), byte(i >> 8), 0})
	}
	f.Add([]byte{0, 0, 0, 0, 8, 0, 0, 0, 0xff}) // the tensor count, byte 0
	f.Add([]byte{0, 2, 0, 200})                 // truncated
	f.Fuzz(func(t *testing.T, recipe []byte) {
		if len(recipe) < 4 {
			return
		}
		var data []byte
		hdr := 0
		if recipe[0]%2 == 0 {
			b := bases[int(recipe[1])%len(bases)]
			data, hdr = bytes.Clone(b.raw), headerEnd(b)
		} else {
			data = cases[(int(recipe[1])|int(recipe[2])<<8)%len(cases)].build()
			hdr = min(len(data), 1<<16)
		}
		if tr := int(recipe[3]); tr > 0 {
			data = data[:len(data)*tr/256]
		}
		for e := recipe[4:]; len(e) >= 5 && len(data) > 0 && hdr > 0; e = e[5:] {
			off := binary.LittleEndian.Uint32(e)
			if off&(1<<31) != 0 {
				data[int(off&^(1<<31))%len(data)] = e[4]
			} else {
				data[int(off)%min(hdr, len(data))] = e[4]
			}
		}
		path := filepath.Join(t.TempDir(), "fuzz.gguf")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		o := runHostile(path)
		if o.panicked != "" {
			t.Fatalf("panic: %s", o.panicked)
		}
		if err := o.err(); err != nil {
			require.NotContains(t, err.Error(), "\n")
		}
		if o.nonFinite {
			require.NotEmpty(t, o.stage, "non-finite output not reported")
		}
	})
}

// TestHostileModelsSubprocess runs the hostile corpus through the da3-go
// binary, one process per file, with two threads: a crash in C (abort,
// segfault) or a Go fatal error would kill the in-process test without a
// report. Set DA3_HOSTILE_SUBPROCESS=1 to run it (about a minute); it builds
// the binary unless DA3_BIN names one. It logs the exit-code histogram.
func TestHostileModelsSubprocess(t *testing.T) {
	if os.Getenv("DA3_HOSTILE_SUBPROCESS") == "" {
		t.Skip("DA3_HOSTILE_SUBPROCESS not set")
	}
	bin := daBinary(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "image.png")
	fimg, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, png.Encode(fimg, hostileImage()))
	require.NoError(t, fimg.Close())
	cases := hostileCorpus(hostileBases(t))
	codes := map[int]int{}
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("case%d.gguf", i))
		require.NoError(t, os.WriteFile(path, c.build(), 0o644))
		out := filepath.Join(dir, "out.png")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "depth", "-model", path, "-threads", "2", "-process-res", "28", "-strict", "-o", out, img)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		os.Remove(path)
		code := cmd.ProcessState.ExitCode()
		if code < 0 { // killed by a signal
			code = 128 + int(cmd.ProcessState.Sys().(syscall.WaitStatus).Signal())
		}
		codes[code]++
		msg := strings.TrimSpace(stderr.String())
		switch code {
		case 0:
			assert.False(t, c.mustFail, "%s: accepted", c.name)
		case 1:
			lines := strings.Split(msg, "\n")
			assert.Len(t, lines, 1, "%s: stderr is not one line:\n%s", c.name, msg)
			assert.True(t, strings.HasPrefix(lines[len(lines)-1], "da3-go: "), "%s: %s", c.name, msg)
		default:
			t.Errorf("%s: exit %d (%v):\n%s", c.name, code, err, msg)
		}
	}
	var keys []int
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("exit %d: %d", k, codes[k]))
	}
	t.Logf("hostile models through %s: %d files: %s", bin, len(cases), strings.Join(parts, ", "))
}

// daBinary returns DA3_BIN or builds cmd/da3-go into a temporary folder
// (with the environment's CGO flags; run through make for the SIMD ones).
func daBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("DA3_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "da3-go")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/da3-go")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}
