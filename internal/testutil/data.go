package testutil

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// SharedData returns the directory of the shared real test images (NYU, KITTI; read in place, never
// copied into the repository): $DA3_TEST_DATA, else the first shared/data with a manifest.json found
// walking up from the working directory. The test is skipped when there is none.
func SharedData(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("DA3_TEST_DATA"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err != nil {
			t.Skipf("DA3_TEST_DATA=%s has no manifest.json", d)
		}
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Skipf("shared test data: %v", err)
	}
	for {
		d := filepath.Join(dir, "shared", "data")
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err == nil {
			return d
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared test data (shared/data/manifest.json) not found above the working directory; set DA3_TEST_DATA")
		}
		dir = parent
	}
}

// ReadPNG decodes a PNG file.
func ReadPNG(t testing.TB, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}
