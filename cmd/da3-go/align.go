package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/align"
	"github.com/da3-go/da3-go/model"
)

// alignDepthUsage documents -align-depth (depth and reconstruct).
const alignDepthUsage = "metric depth measurements that bring depth to metres (scale, or scale and shift for disparity, fitted robustly): " +
	".npy or .pfm in metres, 16-bit PNG in millimetres (-align-depth-scale 256: KITTI's steps) (0 or NaN = none, any resolution), or text points \"x y depth_m\" in pixels of the input image; " +
	"for several images a comma list (one file per image, in input order) or a directory holding FILE named as each image (photo.jpg: photo.npy, photo.png, photo.pfm, photo.csv or photo.txt); " +
	"a scene's views share one scale"

// alignScaleUsage documents -align-depth-scale.
const alignScaleUsage = "the value of one metre in plain 16-bit PNG measurements of -align-depth: 1000 (millimetres, as NYU's and most depth sensors' PNGs) or 256 (KITTI's depth PNGs); da3-go's own png16 maps say their step"

// alignExts are the measurement files a -align-depth directory is searched for.
var alignExts = []string{".npy", ".png", ".pfm", ".csv", ".txt"}

// depthAligner applies -align-depth: the measurement file of each input.
type depthAligner struct {
	files  map[string]string // input path → its measurement file
	read   align.ReadOptions
	quiet  bool
	stderr io.Writer
}

// planAlign finds the measurement file of each input (paths) from the
// -align-depth value; nil without one. Files are checked now and read when
// their image's result is there.
func planAlign(spec string, pngScale float64, paths []string, quiet bool, stderr io.Writer) (*depthAligner, error) {
	if spec == "" {
		return nil, nil
	}
	if !(pngScale > 0) || math.IsInf(pngScale, 0) {
		return nil, errUsage(fmt.Sprintf("-align-depth-scale %g: want a positive number of values per metre", pngScale))
	}
	a := &depthAligner{files: map[string]string{}, read: align.ReadOptions{PNGScale: pngScale}, quiet: quiet, stderr: stderr}
	fi, err := os.Stat(spec)
	switch {
	case err == nil && fi.IsDir():
		for _, p := range paths {
			f, err := alignFileIn(spec, p)
			if err != nil {
				return nil, err
			}
			if f != "" {
				a.files[p] = f
			}
		}
		if len(a.files) == 0 {
			return nil, fmt.Errorf("-align-depth %s: no file there is named as an input image (%s)", spec, strings.Join(alignExts, ", "))
		}
		return a, nil
	case err == nil:
		if len(paths) != 1 {
			return nil, fmt.Errorf("-align-depth %s is one image's measurements, but there are %d images: give a comma list (one file per image, in input order) or a directory of files named as the images", spec, len(paths))
		}
		a.files[paths[0]] = spec
		return a, nil
	case !errors.Is(err, os.ErrNotExist) || !strings.Contains(spec, ","):
		return nil, fmt.Errorf("-align-depth: %w", err)
	}
	list := splitList(spec)
	if len(list) != len(paths) {
		return nil, fmt.Errorf("-align-depth: %d files for %d images (one per image, in input order)", len(list), len(paths))
	}
	for i, f := range list {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			if err == nil {
				err = errors.New("is a directory")
			}
			return nil, fmt.Errorf("-align-depth: %s: %w", f, err)
		}
		a.files[paths[i]] = f
	}
	return a, nil
}

// alignFileIn is the measurement file for image in dir: the one named as
// the image with an extension of alignExts (not the image itself), "" when
// there is none.
func alignFileIn(dir, image string) (string, error) {
	stem := strings.TrimSuffix(filepath.Base(image), filepath.Ext(image))
	var found []string
	for _, ext := range alignExts {
		p := filepath.Join(dir, stem+ext)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if same, err := os.Stat(image); err == nil && os.SameFile(fi, same) {
			continue
		}
		found = append(found, p)
	}
	if len(found) > 1 {
		return "", fmt.Errorf("-align-depth: %s has several measurement files: %s", image, strings.Join(found, ", "))
	}
	if len(found) == 0 {
		return "", nil
	}
	return found[0], nil
}

// alignResults brings the results of the inputs paths (one scene, or one
// image) to metres with one fit over all their measurements, scales their
// cameras' translations with the depth, and reports the fit on stderr.
func (a *depthAligner) alignResults(what string, paths []string, rs []*model.Result) error {
	samples := make([]align.Samples, len(rs))
	for i := range rs {
		file := a.files[paths[i]]
		if file == "" {
			continue
		}
		s, err := align.ReadFileWith(file, a.read)
		if err != nil {
			return err
		}
		samples[i] = s
	}
	fit, err := align.Results(rs, samples, align.Options{})
	if err != nil {
		return fmt.Errorf("-align-depth %s: %w", what, err)
	}
	if !a.quiet {
		fmt.Fprintf(a.stderr, "da3-go: aligned %s to metres: %s\n", what, fit)
	}
	return nil
}

// alignEach aligns each result alone.
func (a *depthAligner) alignEach(names, paths []string, rs []model.Result) error {
	for i := range rs {
		if err := a.alignResults(names[i], paths[i:i+1], []*model.Result{&rs[i]}); err != nil {
			return err
		}
	}
	return nil
}

// alignScene aligns the results of one scene with one fit.
func (a *depthAligner) alignScene(paths []string, rs []model.Result) error {
	ptrs := make([]*model.Result, len(rs))
	for i := range rs {
		ptrs[i] = &rs[i]
	}
	return a.alignResults(fmt.Sprintf("the scene (%d views)", len(rs)), paths, ptrs)
}
