package main

import (
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
)

// lensFlags are the camera-model flags of depth and reconstruct: images from a distorted or fisheye
// camera (-camera-model, or a distorted COLMAP camera of -cameras) are undistorted to a pinhole view
// before the model runs, and the outputs mapped back to the original pixels unless -keep-undistorted.
type lensFlags struct {
	on              bool // registered: the command undistorts
	model, params   string
	keep            bool
	balance, maxFOV float64

	// base is the camera of -camera-model/-camera-params, without an image size; nil: none given.
	base *lens.Camera
	// given are the lenses of -cameras' COLMAP cameras, per input (nil: a pinhole camera).
	given []*lens.Camera
	// bases are base's undistorters, per image size (nil without -camera-model).
	bases *lens.Undistorters
	// used is the undistorter applied to each input (nil: none), filled as the images are decoded.
	used map[int]*lens.Undistorter
	// told are the undistorters already described on stderr.
	told map[*lens.Undistorter]bool
}

func (l *lensFlags) register(fs *flag.FlagSet) {
	l.on = true
	fs.StringVar(&l.model, "camera-model", "", "camera model of the input images, COLMAP's: "+lens.ModelNames()+
		" (fisheye = opencv_fisheye); the images are undistorted to a pinhole view for the model and the outputs mapped back to the original pixels (see -keep-undistorted)")
	fs.StringVar(&l.params, "camera-params", "", "the -camera-model's parameters in COLMAP's order, pixels of the input images, e.g. opencv: fx,fy,cx,cy,k1,k2,p1,p2; fisheye: fx,fy,cx,cy,k1,k2,k3,k4")
	fs.BoolVar(&l.keep, "keep-undistorted", false, "with -camera-model or a distorted COLMAP camera (-cameras): keep the outputs in the undistorted pinhole view (its intrinsics are logged; COLMAP exports write PINHOLE) instead of mapping them back to the original pixels")
	fs.Float64Var(&l.balance, "undistort-balance", 0, "pinhole view of an undistorted image: 0 fills the view (the image's distorted rim is cut off), 1 keeps the whole image (black corners), or between")
	fs.Float64Var(&l.maxFOV, "undistort-fov", lens.DefaultMaxFOV, "largest field of view of the undistorted pinhole view, degrees (a fisheye's view beyond it is cut off)")
}

// parse checks the flags and reads -camera-model/-camera-params; cameras is -cameras, intrinsics
// -intrinsics.
func (l *lensFlags) parse(cameras, intrinsics string) error {
	if !l.on {
		return nil
	}
	if err := (lens.PinholeOptions{Balance: l.balance}).Check(); err != nil {
		return fmt.Errorf("-undistort-%w", err)
	}
	if err := (lens.PinholeOptions{MaxFOV: l.maxFOV}).Check(); err != nil || l.maxFOV == 0 {
		return fmt.Errorf("-undistort-fov %g: want degrees above 0, at most 179", l.maxFOV)
	}
	switch {
	case l.model == "" && l.params == "":
		return nil
	case l.model == "":
		return errors.New("-camera-params needs -camera-model")
	case l.params == "":
		return fmt.Errorf("-camera-model needs -camera-params")
	case cameras != "":
		return errors.New("-camera-model: -cameras gives the cameras (a COLMAP model's distorted cameras are undistorted); drop one")
	case intrinsics != "":
		return errors.New("-camera-model: -camera-params holds the intrinsics; drop -intrinsics")
	}
	m, err := lens.ParseModel(l.model)
	if err != nil {
		return fmt.Errorf("-camera-model: %w", err)
	}
	var p []float64
	for _, s := range strings.Split(l.params, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("-camera-params: %q is not a number", s)
		}
		p = append(p, x)
	}
	if l.base, err = lens.New(m, 0, 0, p); err != nil {
		return fmt.Errorf("-camera-params: %w", err)
	}
	l.bases, err = lens.NewUndistorters(l.base, l.options())
	return err
}

// active reports whether any image may be undistorted.
func (l *lensFlags) active() bool {
	if l.base != nil && !l.base.IsPinhole() {
		return true
	}
	for _, g := range l.given {
		if g != nil {
			return true
		}
	}
	return false
}

// mapsBack reports whether outputs are mapped back to the original pixels.
func (l *lensFlags) mapsBack() bool { return !l.keep }

func (l *lensFlags) options() lens.PinholeOptions {
	return lens.PinholeOptions{Balance: l.balance, MaxFOV: l.maxFOV}
}

// undistorter returns the undistorter for input i of the given size: from -cameras' lens of the
// input, else -camera-model's; nil when the camera is a pinhole one.
func (l *lensFlags) undistorter(i int, size image.Point) (*lens.Undistorter, error) {
	if i >= 0 && i < len(l.given) && l.given[i] != nil {
		p, err := lens.PinholeFor(l.given[i], l.options())
		if err != nil {
			return nil, err
		}
		return lens.NewUndistorter(l.given[i], p)
	}
	if l.bases == nil {
		return nil, nil
	}
	u, err := l.bases.For(size.X, size.Y)
	if err != nil {
		return nil, fmt.Errorf("-camera-model: %w", err)
	}
	return u, nil
}

// pinholeIntrinsics are the intrinsics of the model's view of an image of the given size: the
// undistorted view's pinhole camera, or -camera-model's own pinhole camera; nil without -camera-model.
func (l *lensFlags) pinholeIntrinsics(size image.Point) (*model.Intrinsics, error) {
	if l.base == nil {
		return nil, nil
	}
	k := l.base.K()
	if u, err := l.undistorter(-1, size); err != nil {
		return nil, err
	} else if u != nil {
		k = u.Pinhole.K()
	}
	return &model.Intrinsics{Fx: k[0][0], Fy: k[1][1], Cx: k[0][2], Cy: k[1][2]}, nil
}

// undistort undistorts input i (named name) when its camera is distorted, records the undistorter and
// says what it does once per camera (unless quiet).
func (l *lensFlags) undistort(i int, img image.Image, name string, quiet bool, stderr io.Writer) (image.Image, error) {
	if !l.on {
		return img, nil
	}
	b := img.Bounds()
	u, err := l.undistorter(i, image.Pt(b.Dx(), b.Dy()))
	if err != nil || u == nil {
		return img, err
	}
	out, err := u.Image(img)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if l.used == nil {
		l.used, l.told = map[int]*lens.Undistorter{}, map[*lens.Undistorter]bool{}
	}
	l.used[i] = u
	if !quiet && !l.told[u] {
		l.told[u] = true
		fmt.Fprintf(stderr, "da3-go: %s: %s\n", name, describeUndistortion(u, l.keep))
	}
	return out, nil
}

// describeUndistortion is the log line of an undistortion: the two cameras and where the outputs are.
func describeUndistortion(u *lens.Undistorter, keep bool) string {
	fx, fy := u.Pinhole.Focal()
	cx, cy := u.Pinhole.PrincipalPoint()
	where := "the outputs are mapped back to the original pixels"
	if keep {
		where = "the outputs stay in the pinhole view (-keep-undistorted)"
	}
	return fmt.Sprintf("undistorted from the %s camera to a %dx%d PINHOLE view fx=%.6g fy=%.6g cx=%.6g cy=%.6g; %s",
		u.Distorted.Model, u.Pinhole.Width, u.Pinhole.Height, fx, fy, cx, cy, where)
}

// backFor returns the undistorter to map input i's outputs back with, nil when they stay as they are.
func (l *lensFlags) backFor(i int) *lens.Undistorter {
	if l == nil || l.keep {
		return nil
	}
	return l.used[i]
}

// mapBack maps a map of input i's result (data, mw × mh, covering the undistorted view) back to the
// original pixels at the same size (model.Result.MapBackMap); data is returned unchanged when input i
// was not undistorted. *bm holds the table of input i's maps (nil before the first).
func (l *lensFlags) mapBack(i int, r *model.Result, data []float32, mw, mh int, bm **lens.BackMapper) ([]float32, error) {
	u := l.backFor(i)
	if u == nil || data == nil {
		return data, nil
	}
	if *bm == nil {
		*bm = u.BackMapper()
	}
	out, err := r.MapBackMap(*bm, data, mw, mh)
	if errors.Is(err, model.ErrCroppedLens) {
		return nil, fmt.Errorf("%w: use upper_bound_resize, or -keep-undistorted", err)
	}
	return out, err
}

// mapBackViews maps the views of results first, first+1, … back to the original pixels
// (model.DistortViews).
func (l *lensFlags) mapBackViews(views []export.View, res []model.Result, first int) error {
	us := make([]*lens.Undistorter, len(views))
	for i := range us {
		us[i] = l.backFor(first + i)
	}
	err := model.DistortViews(views, res, us)
	if errors.Is(err, model.ErrCroppedLens) {
		return fmt.Errorf("%w: use upper_bound_resize, or -keep-undistorted", err)
	}
	return err
}

// noStream refuses a streamed run of undistorted images.
func (l *lensFlags) noStream() error {
	if l.active() {
		return errors.New("-camera-model: streamed runs (windows of frames) do not undistort images; run them as one scene (-no-stream) or one by one (-independent)")
	}
	return nil
}
