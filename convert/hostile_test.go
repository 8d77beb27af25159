package convert

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/internal/testutil"
)

// dupBombPth writes a .pth whose data.pkl is None followed by n DUP opcodes
// (deflated, so the file is small): every DUP pushes the same value again.
func dupBombPth(t *testing.T, path string, n int) {
	f, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(f)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Deflate})
	require.NoError(t, err)
	_, err = w.Write([]byte{opProto, 2, opNone})
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{opDup}, 1<<20)
	for done := 0; done < n; done += len(chunk) {
		_, err = w.Write(chunk[:min(len(chunk), n-done)])
		require.NoError(t, err)
	}
	_, err = w.Write([]byte{opStop})
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}

// TestPickleDupBombUnderMemoryLimit: a .pth whose pickle is a 100 MB run of
// DUP would need 1.6 GB of stack (and twice that while it grows); the VM
// stops at its stack bound, with 1 GiB of address space to spare.
func TestPickleDupBombUnderMemoryLimit(t *testing.T) {
	// Built before the limit is set (in the child too): only reading it is limited.
	path := filepath.Join(t.TempDir(), "dup.pth")
	dupBombPth(t, path, 100<<20)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	out, took := testutil.UnderMemoryLimit(t, 1<<30, func(t *testing.T) {
		start := time.Now()
		_, err := OpenPth(path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "pickle exceeds the limit of 1048576 values on the stack")
		t.Logf("%d-byte file refused in %v: %v", fi.Size(), time.Since(start), err)
	})
	t.Logf("child (1 GiB more address space) ran %v:\n%s", took, out)
}

func TestPickleBounds(t *testing.T) {
	rep := func(head []byte, unit []byte, n int, tail ...byte) []byte {
		b := append([]byte{opProto, 2}, head...)
		b = append(b, bytes.Repeat(unit, n)...)
		return append(b, tail...)
	}
	longPut := func(n int) []byte { // None, then n LONG_BINPUTs of distinct indices
		b := []byte{opProto, 2, opNone}
		for i := range n {
			b = append(b, opLongBinPut)
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
		}
		return append(b, opStop)
	}
	for _, tc := range []struct {
		name string
		pkl  []byte
		want string
	}{
		{"stack", rep([]byte{opNone}, []byte{opDup}, maxPickleStack+1, opStop), "1048576 values on the stack"},
		{"objects", rep(nil, []byte{opNone, opPop}, maxPickleObjects+1, opNone, opStop), "8388608 values in all"},
		{"memo", longPut(maxPickleMemo + 1), "1048576 memo entries"},
		{"marks", rep(nil, []byte{opMark}, maxPickleMarks+1, opStop), "65536 open MARKs"},
		{"nested tuples", rep([]byte{opEmptyTuple}, []byte{opNone, opTuple2}, maxPickleDepth+1, opStop), "64 nested tuples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := unpickle(tc.pkl)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "pickle exceeds the limit of "+tc.want)
		})
	}
	// Nesting below the bound is fine.
	v, err := unpickle(rep([]byte{opEmptyTuple}, []byte{opNone, opTuple2}, maxPickleDepth-1, opStop))
	require.NoError(t, err)
	assert.IsType(t, pyTuple{}, v)
}

// TestPickleGlobalsRefused: a pickle naming anything but torch, collections
// or numpy reconstruction helpers is no checkpoint, even though the VM would
// never call it.
func TestPickleGlobalsRefused(t *testing.T) {
	system := newPickle().global("os", "system").str("touch /tmp/pwned").op(opTuple1, opReduce, opStop).Bytes()
	stackGlobal := newPickle().str("builtins").str("eval").op(opStackGlobal).str("1").op(opTuple1, opReduce, opStop).Bytes()
	for name, pkl := range map[string][]byte{"os.system": system, "builtins.eval": stackGlobal} {
		t.Run(name, func(t *testing.T) {
			_, err := unpickle(pkl)
			require.ErrorIs(t, err, ErrNotCheckpoint)
			assert.Contains(t, err.Error(), "not a checkpoint: it names the global "+name)

			path := writeFile(t, t.TempDir(), "evil.pth", buildPth(t, pkl, nil, zip.Store))
			_, err = OpenCheckpoint(path)
			require.ErrorIs(t, err, ErrNotCheckpoint)
			assert.Contains(t, err.Error(), path)
		})
	}
	// What torch.save writes stays allowed.
	good, st := stateDictPickle([]pthTensor{{"w", []int{2}, []float32{1, 2}}})
	c, err := OpenCheckpoint(writeFile(t, t.TempDir(), "good.pth", buildPth(t, good, st, zip.Store)))
	require.NoError(t, err)
	c.Close()
}

// TestLegacyPthNamed: a .pth in torch.save's legacy format (a bare pickle
// that starts with a magic number) is named as such, not misread as a
// safetensors file.
func TestLegacyPthNamed(t *testing.T) {
	legacy := []byte{opProto, 2, opLong1, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'}
	dir := t.TempDir()
	for _, name := range []string{"legacy.pth", "model.bin"} {
		path := writeFile(t, dir, name, legacy)
		_, err := OpenCheckpoint(path)
		require.ErrorIs(t, err, ErrLegacyPth)
		assert.Contains(t, err.Error(), "legacy (non-zip) PyTorch pickle format is not supported: re-save with torch.save(..., _use_new_zipfile_serialization=True)")
		assert.NotContains(t, err.Error(), "safetensors")
	}
	// A safetensors file whose header length starts 0x80 0x02 is still one.
	js := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	js += strings.Repeat(" ", 0x280-len(js))
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
	st = append(st, 0, 0, 0x80, 0x3f)
	c, err := OpenCheckpoint(writeFile(t, dir, "w.safetensors", st))
	require.NoError(t, err)
	c.Close()
}

func TestSafetensorsOverlapRefused(t *testing.T) {
	js := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`
	b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
	b = append(b, make([]byte, 12)...)
	path := writeFile(t, t.TempDir(), "x.safetensors", b)
	_, err := OpenSafetensors(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tensors "a" [0, 8] and "b" [4, 12] overlap in the data section`)
	assert.Contains(t, err.Error(), path)
}
