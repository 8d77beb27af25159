package tests

import (
	"bytes"
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
)

// TestInterruptLatency: Ctrl-C (SIGINT) during a running graph stops the
// command within a second (ggml's abort callback stops the graph after the
// node in flight), with exit code 130 and no output or temporary file left;
// a second Ctrl-C exits at once. The run is a multi-view scene of the tiny
// DA3 model at a resolution where the graph takes several seconds, so the
// signal lands inside the computation.
func TestInterruptLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary on multi-second graphs")
	}
	bin := daBinary(t)
	dir := t.TempDir()
	mdl := convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{})
	imgs := writePNGs(t, dir, "v", 10, 1000, 750)
	out := filepath.Join(dir, "out")

	run := func(signals int) (code int, latency time.Duration, stderr string) {
		args := append([]string{"depth", "-model", mdl, "-process-res", "1008", "-threads", "2", "-o", out + "/"}, imgs...)
		cmd := exec.Command(bin, args...)
		var eb bytes.Buffer
		cmd.Stderr = &eb
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		// Decoding and loading take well under this; the scene's graph
		// takes several seconds more (about 7 s on 2 cores of an AMD EPYC).
		select {
		case <-done:
			t.Fatalf("the run ended before the signal: %s", eb.String())
		case <-time.After(1500 * time.Millisecond):
		}
		sent := time.Now()
		for range signals {
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("still running 30 s after Ctrl-C: %s", eb.String())
		}
		return cmd.ProcessState.ExitCode(), time.Since(sent), eb.String()
	}

	code, latency, stderr := run(1)
	t.Logf("one Ctrl-C: exit %d after %v", code, latency)
	assert.Equal(t, 130, code, stderr)
	assert.Less(t, latency, time.Second, "Ctrl-C took %v to stop the run", latency)
	assert.Contains(t, stderr, "stopping")

	code, latency, stderr = run(2)
	t.Logf("two Ctrl-C: exit %d after %v", code, latency)
	assert.Equal(t, 130, code, stderr)
	assert.Less(t, latency, time.Second)

	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.Name() == ".da3-go-outputs" {
			continue // the list of the run's outputs, not a temporary file
		}
		assert.False(t, strings.HasPrefix(e.Name(), "."), "temporary file %s left", e.Name())
		assert.False(t, strings.HasSuffix(e.Name(), "_depth.png"), "a scene stopped before its end wrote %s", e.Name())
	}
}
