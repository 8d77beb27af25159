package model

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestInvalidInput: input errors keep their text and match both their own
// chain and ErrInvalidInput; nil stays nil; other errors do not match.
func TestInvalidInput(t *testing.T) {
	base := errors.New("no images")
	err := fmt.Errorf("run: %w", invalid(base))
	assert.ErrorIs(t, err, ErrInvalidInput)
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "run: no images", err.Error())
	assert.NoError(t, invalid(nil))
	assert.NotErrorIs(t, errors.New("out of memory"), ErrInvalidInput)
	assert.Equal(t, invalid(err), err, "marked once")
}
