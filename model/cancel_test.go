package model_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
)

// TestCancelledRun: a cancelled context stops a run before its graph (and
// during preprocessing), with context.Canceled, which is not an input error;
// a bad input is one, and the model runs normally afterwards.
func TestCancelledRun(t *testing.T) {
	m, err := model.Load(context.Background(), tinyModel(), model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	imgs := []model.Image{photo(64, 48), photo(64, 48)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, run := range map[string]func() error{
		"MultiView":   func() error { _, err := m.MultiView(ctx, imgs, model.RunOptions{ProcessRes: 56}); return err },
		"Independent": func() error { _, err := m.Independent(ctx, imgs, model.RunOptions{ProcessRes: 56}); return err },
	} {
		err := run()
		assert.ErrorIs(t, err, context.Canceled, name)
		assert.NotErrorIs(t, err, model.ErrInvalidInput, name)
	}
	_, err = m.MultiView(context.Background(), nil, model.RunOptions{})
	assert.ErrorIs(t, err, model.ErrInvalidInput, "no images")
	_, err = m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: 56})
	require.NoError(t, err)
}
