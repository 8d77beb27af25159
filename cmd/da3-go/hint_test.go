package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model"
)

// The library's errors speak of its options; the command adds the flags.
func TestHintMapsLibraryErrors(t *testing.T) {
	assert.Contains(t, hint(fmt.Errorf("compute: %w", ggml.ErrOutOfMemory)), "-process-res")
	assert.Contains(t, hint(fmt.Errorf("x: %w", model.ErrNoRayHead)), "-with-aux")
	assert.Contains(t, hint(fmt.Errorf("x: %w", model.ErrNoCameraEncoder)), "-cameras")
	assert.Contains(t, hint(fmt.Errorf("x: %w", ggml.ErrNoDevice)), "da3-go devices")
	assert.Empty(t, hint(errors.New("anything else")))
}
