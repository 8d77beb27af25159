package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/internal/testutil"
)

// writeFlatPNG writes a w×h 8-bit grey PNG of one value: a few tens of KB
// on disk that decode to w·h pixels.
func writeFlatPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		buf.Write(n[:])
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		buf.WriteString(typ)
		buf.Write(data)
		binary.BigEndian.PutUint32(n[:], c.Sum32())
		buf.Write(n[:])
	}
	hdr := make([]byte, 13)
	binary.BigEndian.PutUint32(hdr[0:], uint32(w))
	binary.BigEndian.PutUint32(hdr[4:], uint32(h))
	hdr[8], hdr[9] = 8, 0 // 8-bit grey
	chunk("IHDR", hdr)
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	require.NoError(t, err)
	row := bytes.Repeat([]byte{120}, w+1)
	row[0] = 0 // no filter
	for range h {
		_, err := zw.Write(row)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

// TestDepthLargeImageUnderMemoryLimit: a small PNG declaring 6000×6000
// pixels, written at the image size in every format with confidence, needs
// more memory than a process allowed 640 MiB more address space has: depth
// refuses it before decoding, naming the figures and -processed-size, which
// then runs under the same limit, as does an image of ordinary size with
// every format. (Before, the maps were all resized at once and each PNG
// held an 8-byte copy of its map: the run died of an out-of-memory fault.)
func TestDepthLargeImageUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 36-megapixel image")
	}
	mdl := tinyDA3(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.png")
	writeFlatPNG(t, big, 6000, 6000)
	small := filepath.Join(dir, "small.png")
	writeFlatPNG(t, small, 640, 480)
	// The backend libraries the process would load (ggml-vulkan with its
	// driver, where make vulkan built it; the command's default device is
	// auto, which looks for GPUs) are loaded before the limit: they take
	// address space of their own, not the run's.
	rt, err := backend.Open(backend.Options{Device: "auto", Threads: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rt.Close()
	testutil.UnderMemoryLimit(t, 640<<20, func(t *testing.T) {
		out := filepath.Join(dir, "out")
		code, _, stderr := runCLI("depth", "-model", mdl, "-threads", "1", "-format", "png,png16,pfm,npy", "-conf", "-quiet", "-o", out+"/", big)
		assert.Equal(t, exitFailure, code, stderr)
		assert.Contains(t, stderr, "not enough memory for the maps of ")
		assert.Contains(t, stderr, "(6000x6000)")
		assert.Contains(t, stderr, "use -processed-size")
		assert.Contains(t, stderr, "fewer -format entries")
		entries, _ := os.ReadDir(out)
		assert.Empty(t, entries, "nothing written")

		code, _, stderr = runCLI("depth", "-model", mdl, "-threads", "1", "-format", "png,png16,pfm,npy", "-conf", "-quiet", "-processed-size", "-o", out+"/", big)
		require.Equal(t, exitOK, code, stderr)
		assert.FileExists(t, filepath.Join(out, "big_conf.npy"))

		code, _, stderr = runCLI("depth", "-model", mdl, "-threads", "1", "-format", "png,png16,pfm,npy", "-conf", "-quiet", "-o", out+"/", small)
		require.Equal(t, exitOK, code, stderr)
		assert.FileExists(t, filepath.Join(out, "small_depth.png"))
	})
}
