package tests

import (
	"bytes"
	"errors"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
)

// TestSIGTERMLiveness: SIGTERM (what a service manager or `kill` sends)
// a second into a long depth run of many images, batch after batch, ends
// the process within a few seconds with exit code 130 and a message; the
// maps already written are whole files and no temporary file is left. A
// liveness bound, generous for a loaded machine (the graph in flight stops
// at its next node, or inside a kernel).
func TestSIGTERMLiveness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary for seconds")
	}
	bin := daBinary(t)
	dir := t.TempDir()
	mdl := convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{})
	imgs := writePNGs(t, dir, "f", 24, 640, 480)
	out := filepath.Join(dir, "out")
	args := append([]string{"depth", "-model", mdl, "-independent", "-process-res", "1008", "-chunk-size", "4",
		"-threads", "2", "-format", "png,npy", "-o", out + "/"}, imgs...)
	cmd := exec.Command(bin, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatalf("the run ended before the signal: %s", eb.String())
	case <-time.After(time.Second):
	}
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30 s after SIGTERM: %s", eb.String())
	}
	latency := time.Since(sent)
	t.Logf("SIGTERM: exit %d after %v", cmd.ProcessState.ExitCode(), latency)
	assert.Equal(t, 130, cmd.ProcessState.ExitCode(), eb.String())
	assert.Less(t, latency, 3*time.Second, "SIGTERM took %v to end the run", latency)
	assert.Contains(t, eb.String(), "da3-go: stopping")
	assert.Contains(t, eb.String(), "da3-go: interrupted")

	// A run stopped before its first map removes the directory it made.
	entries, err := os.ReadDir(out)
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
	assert.Less(t, len(entries), 2*len(imgs), "the run was stopped before its end")
	for _, e := range entries {
		p := filepath.Join(out, e.Name())
		if e.Name() == ".da3-go-outputs" {
			continue // the list of the run's outputs, not a temporary file
		}
		require.False(t, strings.HasPrefix(e.Name(), "."), "temporary file %s left", e.Name())
		switch filepath.Ext(e.Name()) {
		case ".png":
			f, err := os.Open(p)
			require.NoError(t, err)
			_, err = png.Decode(f)
			f.Close()
			assert.NoError(t, err, "%s is whole", e.Name())
		case ".npy":
			_, shape, err := imgio.ReadNPY(p)
			assert.NoError(t, err, "%s is whole", e.Name())
			assert.Equal(t, []int{480, 640}, shape)
		}
	}
}
