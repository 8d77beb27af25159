package ggml_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
)

// TestLoaderTypeTable checks the loader's own type table (names, block and
// byte sizes, which it needs to size tensors without cgo) against ggml's type
// traits for every id up to one past the last type.
func TestLoaderTypeTable(t *testing.T) {
	for id := 0; id <= 40; id++ {
		g, l := ggml.Type(id), loader.Type(id)
		if !assert.Equal(t, g.Valid(), l.Known(), "type id %d known", id) || !g.Valid() {
			continue
		}
		assert.Equal(t, g.String(), l.String(), "type %d name", id)
		assert.Equal(t, g.BlockSize(), l.BlockSize(), "%s block size", g)
		assert.Equal(t, g.TypeSize(), l.TypeSize(), "%s type size", g)
		assert.Equal(t, g.IsQuantized(), l.Quantized(), "%s quantized", g)
		rs, err := l.RowSize(int64(2 * g.BlockSize()))
		if assert.NoError(t, err) {
			assert.Equal(t, int64(g.RowSize(2*g.BlockSize())), rs, "%s row size", g)
		}
	}
}
