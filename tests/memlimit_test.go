package tests

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
)

// runLimited runs the binary under an address-space limit of mib MiB and
// returns its exit code and stderr.
func runLimited(t *testing.T, prlimit string, mib int, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(prlimit, append([]string{fmt.Sprintf("--as=%d", mib<<20), bin}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code < 0 {
		code = 128 // killed by a signal
	}
	return code, strings.TrimSpace(stderr.String())
}

// TestAddressSpaceLimit runs the binary under prlimit --as: every limit
// gives a result or one clear line and exit 1 (never a Go fatal error, a C
// abort or a signal), a request that does not fit is refused before it runs
// with its figures and the options that lower them, and the same request
// runs when the limit allows it (or with -chunk-size 1 where that is enough).
// Below about 1.5 GiB the Go runtime itself cannot start; those limits are
// skipped (they are found by running "da3-go version").
func TestAddressSpaceLimit(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit not installed")
	}
	if testing.Short() {
		t.Skip("runs the binary about 15 times")
	}
	bin := daBinary(t)
	dir := t.TempDir()
	mdl := convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{})
	imgs := writePNGs(t, dir, "big", 2, 1600, 1200)
	out := filepath.Join(dir, "out") + "/"
	require.NoError(t, os.Mkdir(out, 0o755))
	small := []string{"depth", "-model", mdl, "-threads", "2", "-quiet", "-process-res", "140", "-o", out, imgs[0]}
	big := append([]string{"depth", "-model", mdl, "-threads", "2", "-quiet", "-process-res", "700", "-o", out}, imgs...)

	starts := func(mib int) bool { code, _ := runLimited(t, prlimit, mib, bin, "version"); return code == 0 }
	// The smallest limit that runs a small request (to 64 MiB).
	lo, hi := 1024, 6144
	for hi-lo > 64 {
		mid := (lo + hi) / 2
		if code, _ := runLimited(t, prlimit, mid, bin, small...); code == 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	base := hi
	t.Logf("a small request runs from %d MiB of address space", base)
	require.Less(t, base, 6144, "a small request does not run under any limit")

	refused, ran := 0, 0
	// From the limit where the small request just runs (the large one needs
	// about 170 MiB more, so it cannot fit there) upwards: how much address
	// space the process already uses varies by tens of MiB with the threads
	// the Go runtime and ggml start, so the refusal is looked for from base.
	for _, extra := range []int{0, 32, 64, 128, 256, 512, 1024} {
		mib := base + extra
		if !starts(mib) {
			t.Logf("%d MiB: the Go runtime does not start", mib)
			continue
		}
		code, msg := runLimited(t, prlimit, mib, bin, big...)
		t.Logf("%d MiB: exit %d %s", mib, code, msg)
		switch code {
		case 0:
			ran++
		case 1:
			require.NotContains(t, msg, "\n", "%d MiB: stderr is not one line", mib)
			require.True(t, strings.HasPrefix(msg, "da3-go: "), msg)
			switch {
			case strings.Contains(msg, "left after loading"):
				// The limit fits the small request's process but not the
				// model's load in this one (threads started vary): refused
				// before any request, with the limit's own fix.
				assert.Contains(t, msg, "raise ulimit -v")
			case strings.Contains(msg, "not enough memory"):
				refused++
				assert.Contains(t, msg, "-process-res")
			}
		default:
			t.Fatalf("%d MiB: exit %d:\n%s", mib, code, msg)
		}
	}
	assert.Positive(t, refused, "some limit must be too small for the large request")
	assert.Positive(t, ran, "some limit must be enough for the large request")

	// -max-memory refuses without any system limit.
	code, msg := runLimited(t, prlimit, 1<<20, bin, append([]string{"depth", "-max-memory", "64M"}, big[1:]...)...)
	assert.Equal(t, 1, code, msg)
	assert.Contains(t, msg, "not enough memory")
	assert.Contains(t, msg, "-max-memory")
}

// writePNGs writes n synthetic w×h PNG images named <prefix><i>.png into dir.
func writePNGs(t *testing.T, dir, prefix string, n, w, h int) []string {
	t.Helper()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%s%d.png", prefix, i))
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, png.Encode(f, hostileImageSized(w, h, i)))
		require.NoError(t, f.Close())
		paths = append(paths, p)
	}
	return paths
}
