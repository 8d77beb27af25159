package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml/kernels"
)

func TestDevicesTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"devices"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "a header and at least the CPU")
	assert.True(t, strings.HasPrefix(lines[0], "NAME"))
	var cpu string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "CPU ") {
			cpu = l
		}
	}
	require.NotEmpty(t, cpu, "the CPU is listed:\n%s", stdout.String())
	f := strings.Fields(cpu)
	assert.Equal(t, []string{"CPU", "CPU", "CPU"}, f[:3], "name, type, backend")
	assert.Contains(t, stdout.String(), "\nkernels on the CPU: "+kernels.DefaultVariant().String()+" ", "the active CPU kernels")
}

func TestDevicesJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"devices", "-json"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	var devs []deviceInfo
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &devs))
	require.NotEmpty(t, devs)
	var found bool
	for _, d := range devs {
		assert.NotEmpty(t, d.Name)
		assert.NotEmpty(t, d.Description)
		assert.LessOrEqual(t, d.FreeBytes, d.TotalBytes, d.Name)
		if d.Type == "CPU" {
			found = true
			assert.Equal(t, "CPU", d.Backend)
			assert.Greater(t, d.TotalBytes, uint64(0))
		}
	}
	assert.True(t, found, "a CPU device")
	assert.Contains(t, stdout.String(), `"total_bytes"`)
}

func TestDevicesUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, run(context.Background(), []string{"devices", "extra"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "takes no arguments")
	assert.Empty(t, stdout.String())
	stderr.Reset()
	assert.Equal(t, exitUsage, run(context.Background(), []string{"devices", "-bogus"}, &stdout, &stderr))
	stderr.Reset()
	assert.Equal(t, exitOK, run(context.Background(), []string{"devices", "-h"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "da3-go devices [-json]")
	assert.Empty(t, stderr.String())
}

func TestStartupChecks(t *testing.T) {
	var w bytes.Buffer
	startupChecks(&w, "amd64", false)
	assert.Contains(t, w.String(), "without AVX2")
	assert.Contains(t, w.String(), "make")
	w.Reset()
	startupChecks(&w, "amd64", true)
	assert.Empty(t, w.String())
	startupChecks(&w, "arm64", false)
	assert.Empty(t, w.String(), "AVX2 is an amd64 matter")
}
