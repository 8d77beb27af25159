package testutil

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

const memChildEnv = "DA3_TEST_MEMLIMIT_CHILD"

// memChildDone is printed by a child that ran its hostile case to the end.
const memChildDone = "memory-limited child: done"

// UnderMemoryLimit runs hostile in a child process (this test binary again, running only this
// test) whose address space may grow by at most extra bytes over what it has mapped when hostile
// starts (RLIMIT_AS; the Go runtime reserves much address space it never touches, so an absolute
// limit would depend on the Go version), so that a decoder that tries to allocate gigabytes dies
// there with "fatal error: out of memory" instead of taking the machine: the test fails unless the
// child returns normally. Code before the call runs in the child too, without the limit (build the
// hostile file there). It returns the child's output (hostile's t.Log lines included) and how long
// the child ran. In the child, UnderMemoryLimit runs hostile and ends the test, so the code after
// the call runs in the parent only. Top-level tests only.
func UnderMemoryLimit(t *testing.T, extra uint64, hostile func(t *testing.T)) (string, time.Duration) {
	t.Helper()
	if os.Getenv(memChildEnv) == t.Name() {
		if err := setMemoryLimit(extra); err != nil {
			t.Fatalf("limit the address space to %d more bytes: %v", extra, err)
		}
		hostile(t)
		if !t.Failed() {
			t.Log(memChildDone)
		}
		t.SkipNow() // the parent judges the child
	}
	if !canLimitMemory {
		t.Skip("no RLIMIT_AS on this system: the memory-limited case is not run")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), memChildEnv+"="+t.Name(), "GOTRACEBACK=single")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("the child with %d MiB more address space failed: %v\n%s", extra>>20, err, out)
	}
	if !strings.Contains(string(out), memChildDone) {
		t.Fatalf("the child with %d MiB more address space did not finish its case:\n%s", extra>>20, out)
	}
	return string(out), elapsed
}
