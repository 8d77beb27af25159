package sysmem

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKB(t *testing.T) {
	v, ok := parseKB("MemTotal:       16314344 kB\nMemAvailable:    9131100 kB\n", "MemAvailable")
	require.True(t, ok)
	assert.Equal(t, uint64(9131100)<<10, v)
	_, ok = parseKB("MemTotal: 1 kB", "MemAvailable")
	assert.False(t, ok)
}

func TestLimits(t *testing.T) {
	ls := Limits()
	if runtime.GOOS != "linux" && runtime.GOOS != "windows" {
		assert.Empty(t, ls)
		return
	}
	l, ok := Tightest(ls, false)
	require.True(t, ok, "the available memory is always there on Linux (MemAvailable) and Windows (GlobalMemoryStatusEx)")
	assert.Greater(t, l.Free, uint64(0))
	assert.NotEmpty(t, l.String())
}

func TestTightest(t *testing.T) {
	ls := []Limit{{Name: "a", Free: 5}, {Name: "b", Free: 3}, {Name: "v", Free: 1, Virtual: true}}
	l, ok := Tightest(ls, false)
	require.True(t, ok)
	assert.Equal(t, "b", l.Name)
	l, _ = Tightest(ls, true)
	assert.Equal(t, "v", l.Name)
	assert.Equal(t, "2.0 GiB", Bytes(2<<30))
	assert.Equal(t, "5 MiB", Bytes(5<<20))
}
