package main

import (
	"encoding/json"
	"image"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadList: mutated -list files never panic, and every path returned is an existing file.
func FuzzReadList(f *testing.F) {
	f.Add([]byte("# views\na.png\n\n  b.png  \n"))
	f.Add([]byte("a.png\r\nmissing.png\n"))
	dir := f.TempDir() // one per worker process, which runs its inputs one at a time
	for _, n := range []string{"a.png", "b.png"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	list := filepath.Join(dir, "list.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(list, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths, err := readList(list)
		if err != nil {
			return
		}
		for _, p := range paths {
			if fi, err := os.Stat(p); err != nil || fi.IsDir() {
				t.Fatalf("listed %q, which is not a file", p)
			}
		}
	})
}

// FuzzCamerasJSON: mutated -cameras JSON documents never panic, and the cameras accepted are one
// per input.
func FuzzCamerasJSON(f *testing.F) {
	doc := PoseOutput{Model: "m", Convention: "opencv", TranslationUnit: "relative", Views: []PoseView{{
		Image: "a.png", Width: 4, Height: 3,
		Extrinsics:     [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
		IntrinsicsOrig: [3][3]float64{{2, 0, 2}, {0, 2, 1.5}, {0, 0, 1}},
	}}}
	b, err := json.Marshal(doc)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"views":[]}`))
	imgs := []image.Image{image.NewGray(image.Rect(0, 0, 4, 3))}
	path := filepath.Join(f.TempDir(), "cams.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := loadCameras(path, []string{"a.png"}, imgs)
		if err != nil {
			return
		}
		if len(g.extrinsics) != 1 || len(g.intrinsics) != 1 {
			t.Fatalf("%d cameras for one input", len(g.extrinsics))
		}
	})
}
