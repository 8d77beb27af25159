package imgio

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	require.NoError(t, err)
	return v
}
