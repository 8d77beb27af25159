package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/server"
)

// withLicence gives the fake registry's model a licence.
func withLicence(lic, source string) {
	modelRegistry[0].Licence, modelRegistry[0].Source = lic, source
	modelRegistry[0].NonCommercial = strings.Contains(lic, "-NC")
}

const (
	ncSource = "https://huggingface.co/depth-anything/DA3-LARGE"
	ncNotice = "da3-go: note: fake-small-f32.gguf is CC-BY-NC-4.0 (non-commercial use only): " + ncSource + "\n"
)

func TestFetchCommandNotice(t *testing.T) {
	m, payload, requests := fakeRegistry(t)
	withLicence("CC-BY-NC-4.0", ncSource)
	dir := os.Getenv(envCacheDir)

	code, stdout, stderr := runCLI("fetch", "-quiet", "fake-small")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, filepath.Join(dir, m.File)+"\n", stdout)
	assert.Equal(t, ncNotice, stderr, "one line, naming the licence")
	got, err := os.ReadFile(filepath.Join(dir, m.File))
	require.NoError(t, err)
	assert.Equal(t, payload, got)

	// Cached: no download, the notice again (fetch is asked for the model).
	code, _, stderr = runCLI("fetch", "fake-small")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, ncNotice, stderr)
	assert.Equal(t, int32(1), requests.Load())

	withLicence("Apache-2.0", "https://huggingface.co/depth-anything/DA3-SMALL")
	code, stdout, stderr = runCLI("fetch", "fake-small")
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr, "no notice for a permissive licence")
	assert.Equal(t, filepath.Join(dir, m.File)+"\n", stdout)
}

func TestFetchCommandErrors(t *testing.T) {
	t.Setenv(envCacheDir, t.TempDir())
	t.Setenv(envBaseURL, "http://127.0.0.1:1")
	code, stdout, stderr := runCLI("fetch", "da3-large-1.1")
	assert.Equal(t, exitFailure, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "da3-go: model da3-large-1.1: no published GGUF yet: convert the official checkpoint with `da3-go convert`")
	assert.Contains(t, stderr, "https://huggingface.co/depth-anything/DA3-LARGE-1.1")
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)

	code, _, stderr = runCLI("fetch", "da3-smal")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "did you mean da3-small")

	code, _, stderr = runCLI("fetch")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "want one or more model names")

	// -model with a -1.1 name fails the same clear way.
	code, _, stderr = runCLI("depth", "-model", "da3-giant-1.1", fixtureImage(t, "da3-tiny/one/images/view0.png"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "no published GGUF yet: convert the official checkpoint with `da3-go convert`")
}

func TestResolveModelNoticeOnDownload(t *testing.T) {
	fakeRegistry(t)
	withLicence("CC-BY-NC-4.0", ncSource)
	dir := os.Getenv(envCacheDir)
	var stderr strings.Builder
	_, err := resolveModel(modelsCtx(t), "fake-small", true, &stderr)
	require.NoError(t, err)
	assert.Equal(t, ncNotice, stderr.String(), "quiet: no progress, but the licence notice")

	stderr.Reset()
	_, err = resolveModel(modelsCtx(t), "fake-small", false, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stderr.String(), "cached: nothing downloaded, nothing said")

	// A permissive model: the download is announced, without a notice.
	require.NoError(t, os.Remove(filepath.Join(dir, "fake-small-f32.gguf")))
	withLicence("Apache-2.0", "https://huggingface.co/depth-anything/DA3-SMALL")
	_, err = resolveModel(modelsCtx(t), "fake-small", false, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "da3-go: downloading fake-small (fake-small-f32.gguf) into "+dir+"\n", stderr.String())
}

// TestServeLicenceNotice: serve names the licence of a cached
// non-commercial model once and hands licence and source to the server.
func TestServeLicenceNotice(t *testing.T) {
	fakeRegistry(t)
	withLicence("CC-BY-NC-4.0", ncSource)
	code, _, stderr := runCLI("fetch", "-quiet", "fake-small")
	require.Equal(t, exitOK, code, stderr)

	orig := newServer
	t.Cleanup(func() { newServer = orig })
	given := make(chan server.Options, 1)
	newServer = func(ctx context.Context, o server.Options) (*server.Server, error) {
		given <- o
		return nil, errors.New("not started in this test")
	}
	code, _, stderr = runCLI("serve", "-addr", "127.0.0.1:0", "-model", "fake-small")
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, ncNotice+"da3-go: not started in this test\n", stderr)
	o := <-given
	require.Len(t, o.Models, 1)
	assert.Equal(t, "CC-BY-NC-4.0", o.Models[0].Licence)
	assert.Equal(t, ncSource, o.Models[0].Source)

	withLicence("Apache-2.0", "https://huggingface.co/depth-anything/DA3-SMALL")
	code, _, stderr = runCLI("serve", "-addr", "127.0.0.1:0", "-model", "fake-small")
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, "da3-go: not started in this test\n", stderr, "no notice for Apache-2.0")
	assert.Equal(t, "Apache-2.0", (<-given).Models[0].Licence)
}

// TestConvertInfoLicence: convert records the model card's licence as
// general.license, info prints it, and serve gives a notice for the file.
func TestConvertInfoLicence(t *testing.T) {
	src := filepath.Join("..", "..", "tests", "fixtures", "da3-tiny")
	if _, err := os.Stat(filepath.Join(src, "model.safetensors")); err != nil {
		t.Skipf("fixture %s not present", src)
	}
	ckpt := filepath.Join(t.TempDir(), "DA3-TINY")
	require.NoError(t, os.Mkdir(ckpt, 0o755))
	for _, f := range []string{"model.safetensors", "config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(ckpt, f), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(ckpt, "README.md"), []byte("---\nlicense: cc-by-nc-4.0\n---\n# DA3 tiny\n"), 0o644))
	out := filepath.Join(t.TempDir(), "tiny.gguf")
	code, _, stderr := runCLI("convert", "-quiet", ckpt, out)
	require.Equal(t, exitOK, code, stderr)

	code, stdout, stderr := runCLI("info", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^licence:\s+CC-BY-NC-4\.0 \(non-commercial use only\)$`, stdout)
	assert.Regexp(t, `(?m)^\s+general\.license\s+string\s+"CC-BY-NC-4\.0"$`, stdout)
	code, stdout, _ = runCLI("info", "-json", out)
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, `"licence": "CC-BY-NC-4.0"`)

	orig := newServer
	t.Cleanup(func() { newServer = orig })
	newServer = func(ctx context.Context, o server.Options) (*server.Server, error) {
		return nil, errors.New("not started in this test")
	}
	_, _, stderr = runCLI("serve", "-addr", "127.0.0.1:0", "-model", out)
	assert.Equal(t, "da3-go: note: tiny.gguf is CC-BY-NC-4.0 (non-commercial use only)\nda3-go: not started in this test\n", stderr)
}
