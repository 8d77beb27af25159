package kernelcount

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The counters read 0 until a source is registered, then the source's
// values, with the variant and precision passed through.
func TestCounters(t *testing.T) {
	saved := source()
	t.Cleanup(func() { Register(saved) })
	Register(Source{})
	assert.Zero(t, Calls(3, 1))
	assert.Zero(t, WinogradCalls())
	assert.Zero(t, WindowCalls())

	type variant int
	Register(Source{
		Calls:    func(v, p int) uint64 { return uint64(10*v + p) },
		Winograd: func() uint64 { return 7 },
		Window:   func() uint64 { return 9 },
	})
	assert.Equal(t, uint64(32), Calls(variant(3), 2))
	assert.Equal(t, uint64(7), WinogradCalls())
	assert.Equal(t, uint64(9), WindowCalls())
}
