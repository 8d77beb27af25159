package server

import (
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExportsNeedNoDisk: with a temporary directory the server cannot
// write, every export (the COLMAP zip included) is still answered: the
// server encodes them in memory. Before, the COLMAP zip went through a
// temporary directory and a failure was a 422 naming the server's path.
func TestExportsNeedNoDisk(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	tmp := filepath.Join(t.TempDir(), "gone", "tmp")
	t.Setenv("TMPDIR", tmp)
	names := exportsFor(s.pools[0].info)
	resp, body := postJSON(t, ts.URL, DepthRequest{Images: []string{enc64(readFile(t, view0)), enc64(readFile(t, view1))}, ProcessRes: 56, Exports: names})
	require.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
	assert.NotContains(t, string(body), tmp)
	r := decodeResponse(t, body)
	assert.Contains(t, r.Exports, "colmap")
}

// TestServerFaults: errors of the server's own file system are its fault
// (507 when out of space, else 500) and name none of its paths; other
// errors are left to the caller.
func TestServerFaults(t *testing.T) {
	full := fmt.Errorf("export: %w", &fs.PathError{Op: "write", Path: "/srv/da3/tmp/x.bin", Err: syscall.ENOSPC})
	ae := serverFault(full)
	require.NotNil(t, ae)
	assert.Equal(t, http.StatusInsufficientStorage, ae.Status)
	assert.NotContains(t, ae.Msg, "/srv")
	denied := &fs.PathError{Op: "open", Path: "/srv/da3/tmp", Err: syscall.EACCES}
	ae = serverFault(denied)
	require.NotNil(t, ae)
	assert.Equal(t, http.StatusInternalServerError, ae.Status)
	assert.NotContains(t, ae.Msg, "/srv")
	assert.Nil(t, serverFault(fmt.Errorf("views of different sizes")))
}
