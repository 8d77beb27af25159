package lens

import (
	"fmt"
	"image"
	"math"
	"sync"
)

// Check reports options PinholeFor refuses: a balance outside [0, 1], a field of view outside (0°,
// 179°] (0 is the default, DefaultMaxFOV), or a negative size.
func (o PinholeOptions) Check() error {
	if !(o.Balance >= 0 && o.Balance <= 1) {
		return fmt.Errorf("balance %g: want a number from 0 to 1", o.Balance)
	}
	if !(o.MaxFOV == 0 || o.MaxFOV > 0 && o.MaxFOV <= 179) {
		return fmt.Errorf("field of view %g: want degrees above 0, at most 179", o.MaxFOV)
	}
	if o.Width < 0 || o.Height < 0 {
		return fmt.Errorf("invalid size %dx%d", o.Width, o.Height)
	}
	return nil
}

// Undistorters undistorts images of every size taken with one lens whose parameters are given in the
// pixels of each image (a camera without an image size, as a user gives it): one Undistorter per image
// size, made on first use. It is safe for concurrent use.
type Undistorters struct {
	base *Camera
	opt  PinholeOptions

	mu     sync.Mutex
	bySize map[image.Point]*Undistorter
}

// NewUndistorters returns the undistorters of the lens c (its size is ignored) into pinhole views chosen
// by opt (its size too: each view is the size of its image).
func NewUndistorters(c *Camera, opt PinholeOptions) (*Undistorters, error) {
	opt.Width, opt.Height = 0, 0
	if err := opt.Check(); err != nil {
		return nil, fmt.Errorf("pinhole view: %w", err)
	}
	return &Undistorters{base: c, opt: opt, bySize: map[image.Point]*Undistorter{}}, nil
}

// Camera is the lens, without an image size.
func (s *Undistorters) Camera() *Camera { return s.base }

// For returns the undistorter of images of w × h pixels; nil (and no error) when the lens is a pinhole
// camera (IsPinhole), whose images need no undistortion.
func (s *Undistorters) For(w, h int) (*Undistorter, error) {
	if s.base.IsPinhole() {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	size := image.Pt(w, h)
	if u, ok := s.bySize[size]; ok {
		return u, nil
	}
	c := s.base.WithSize(w, h)
	p, err := PinholeFor(c, s.opt)
	if err != nil {
		return nil, err
	}
	u, err := NewUndistorter(c, p)
	if err != nil {
		return nil, err
	}
	s.bySize[size] = u
	return u, nil
}

// BackMapper maps maps of an undistorted pinhole view back to the pixels of the distorted image, at the
// map's own size (the cameras rescaled to it; see Undistorter.Backward): pixels whose ray leaves the view
// are NaN. It builds the table once per map size, so that the maps of one view (depth, confidence, sky)
// share it. It is not safe for concurrent use.
type BackMapper struct {
	u  *Undistorter
	rm *Remap
}

// BackMapper returns a mapper of u's pinhole views back to its distorted images.
func (u *Undistorter) BackMapper() *BackMapper { return &BackMapper{u: u} }

// Floats maps a w × h map of the pinhole view (row-major; nil stays nil) back to the distorted image's
// pixels, w × h as well.
func (m *BackMapper) Floats(data []float32, w, h int) ([]float32, error) {
	if data == nil {
		return nil, nil
	}
	if m.rm == nil || m.rm.Width != w || m.rm.Height != h {
		m.rm = m.u.Backward(w, h, w, h)
	}
	return m.rm.Floats(data, float32(math.NaN()))
}
