// Package preprocess turns images into what the Depth Anything networks
// take: CHW float32 pixels normalised with the model's mean and std, at the
// processed size (sides multiples of the patch size for the normal methods).
//
// DA3 follows depth_anything_3.utils.io.input_processor.InputProcessor: a
// uint8 boundary resize (cv2 INTER_CUBIC when enlarging, INTER_AREA
// otherwise), then a second uint8 resize (or a centre crop) to multiples of
// the patch size, then ToTensor (u8/255 in float32) and Normalize
// ((x−mean)/std in float32). DA2 follows DepthAnythingV2.image2tensor:
// float64 image/255, one float64 INTER_CUBIC resize to the lower-bound size
// rounded to multiples of the patch size, normalisation in float64, cast to
// float32.
package preprocess

import (
	"errors"
	"fmt"
	"image"
	"math"
	"strconv"

	"github.com/da3-go/da3-go/internal/imgproc"

	"github.com/da3-go/da3-go/internal/par"
)

// Defaults of the reference implementations.
const (
	DefaultProcessRes = 504 // DA3 InputProcessor process_res
	DefaultDA2Res     = 518 // DA2 image2tensor input_size
)

// ImageNet normalisation used by every published DA2/DA3 checkpoint.
var (
	ImageNetMean = [3]float32{0.485, 0.456, 0.406}
	ImageNetStd  = [3]float32{0.229, 0.224, 0.225}
)

// CubicImpl selects which OpenCV INTER_CUBIC implementation the uint8 enlargements reproduce. The two differ
// by ±1 in about 4% of the enlarged pixel values.
type CubicImpl int

const (
	// CubicIPP (default) matches the x86-64 opencv-python wheels (5.0.0 measured), which run 8-bit
	// INTER_CUBIC through Intel IPP when both source sides are ≥ 4 px: about 2e-5 of the values still
	// differ by one (exact .5 ties decided by IPP's private operation order).
	CubicIPP CubicImpl = iota
	// CubicOpenCV is OpenCV's own 11-bit fixed-point code, bit-exact with cv2 built without IPP (ARM
	// wheels) or with cv2.ipp.setUseIPP(False).
	CubicOpenCV
)

// Options configure DA3. The zero value needs only Patch: ProcessRes 504,
// upper_bound_resize, ImageNet mean/std and the IPP cubic model.
type Options struct {
	ProcessRes int        // boundary size; 0 means DefaultProcessRes
	Shortest   bool       // the shortest side becomes ProcessRes (lower_bound_*), else the longest (upper_bound_*)
	Crop       bool       // sides floored to multiples of Patch by a centre crop (*_crop), else rounded by resizing (*_resize)
	Patch      int        // the network's patch size: processed sides are multiples of it
	Mean, Std  [3]float32 // per-channel normalisation; all-zero means ImageNetMean/ImageNetStd
	Cubic      CubicImpl  // which cv2 INTER_CUBIC to reproduce for enlargements
}

// method is the reference's process_res_method name of o.
func (o Options) method() string {
	bound, fit := "upper_bound", "resize"
	if o.Shortest {
		bound = "lower_bound"
	}
	if o.Crop {
		fit = "crop"
	}
	return bound + "_" + fit
}

// View is one preprocessed image.
type View struct {
	Pixels                []float32 // CHW planar, normalised, 3·Height·Width
	Width, Height         int       // processed size
	OrigWidth, OrigHeight int       // decoded image size
	// ScaleX, ScaleY map original to processed pixel coordinates together with the crop:
	// x_processed = x_original·ScaleX − CropX. They are the ratio of the resized (pre-crop) size to the
	// original size, covering both resize steps (intrinsics: fx, cx scale by ScaleX, then cx −= CropX).
	ScaleX, ScaleY float64
	CropX, CropY   int     // total centre-crop offsets, in resized pixels (crop methods, multi-view batches)
	RGB            []uint8 // processed image as 8-bit RGB, HWC, for colour exports
}

// DA3 prepares one image for a DA3 model: InputProcessor's boundary resize,
// sides to multiples of the patch, ToTensor and Normalize.
func DA3(img image.Image, opt Options) (*View, error) {
	if opt.ProcessRes == 0 {
		opt.ProcessRes = DefaultProcessRes
	}
	if opt.ProcessRes < 0 || opt.ProcessRes > imgproc.MaxSide {
		return nil, fmt.Errorf("process resolution %d out of range", opt.ProcessRes)
	}
	if opt.Patch < 1 {
		return nil, fmt.Errorf("patch size %d must be positive", opt.Patch)
	}
	if opt.Cubic != CubicIPP && opt.Cubic != CubicOpenCV {
		return nil, fmt.Errorf("invalid cubic implementation %d", int(opt.Cubic))
	}
	mean, std, err := normalisation(opt.Mean, opt.Std)
	if err != nil {
		return nil, err
	}
	rgb, err := toRGB(img)
	if err != nil {
		return nil, err
	}
	cubic := imgproc.ResizeCubicU8IPP
	if opt.Cubic == CubicOpenCV {
		cubic = imgproc.ResizeCubicU8
	}
	ow, oh := rgb.W, rgb.H

	// Step 1: boundary resize (_resize_longest_side / _resize_shortest_side).
	l := max(ow, oh)
	if opt.Shortest {
		l = min(ow, oh)
	}
	if l != opt.ProcessRes {
		scale := float64(opt.ProcessRes) / float64(l)
		w1 := max(1, int(math.RoundToEven(float64(ow)*scale)))
		h1 := max(1, int(math.RoundToEven(float64(oh)*scale)))
		if err := imgproc.CheckSize(w1, h1); err != nil {
			return nil, fmt.Errorf("resize %dx%d to %s %d: %w", ow, oh, opt.method(), opt.ProcessRes, err)
		}
		if scale > 1 {
			rgb = cubic(rgb, w1, h1)
		} else {
			rgb = imgproc.ResizeAreaU8(rgb, w1, h1)
		}
	}

	// Step 2: make both sides multiples of the patch.
	ps := opt.Patch
	p := &View{OrigWidth: ow, OrigHeight: oh}
	w, h := rgb.W, rgb.H
	if opt.Crop {
		w2, h2 := w/ps*ps, h/ps*ps
		if w2 == 0 || h2 == 0 {
			return nil, fmt.Errorf("image %dx%d resized to %dx%d: too small to crop to a multiple of %d", ow, oh, w, h, ps)
		}
		if w2 != w || h2 != h {
			p.CropX, p.CropY = (w-w2)/2, (h-h2)/2
			rgb = rgb.Crop(p.CropX, p.CropY, w2, h2)
		}
	} else {
		w2, h2 := max(1, nearestMultiple(w, ps)), max(1, nearestMultiple(h, ps))
		if err := imgproc.CheckSize(w2, h2); err != nil {
			return nil, fmt.Errorf("resize %dx%d to multiples of %d: %w", w, h, ps, err)
		}
		if w2 != w || h2 != h {
			if w2 > w || h2 > h {
				rgb = cubic(rgb, w2, h2)
			} else {
				rgb = imgproc.ResizeAreaU8(rgb, w2, h2)
			}
			w, h = w2, h2
		}
	}
	p.ScaleX, p.ScaleY = float64(w)/float64(ow), float64(h)/float64(oh)

	// Step 3: ToTensor + Normalize, float32.
	p.Width, p.Height, p.RGB = rgb.W, rgb.H, rgb.Pix
	p.Pixels = make([]float32, 3*rgb.W*rgb.H)
	n := rgb.W * rgb.H
	var lut [3][256]float32 // each byte's value, computed as the loop over pixels would
	for c := range 3 {
		for x := range 256 {
			lut[c][x] = (float32(x)/255 - mean[c]) / std[c]
		}
	}
	par.For(3, 3, func(c int) {
		plane := p.Pixels[c*n : (c+1)*n]
		for i := range plane {
			plane[i] = lut[c][rgb.Pix[3*i+c]]
		}
	})
	return p, nil
}

// SizeDA3 is the processed size DA3 gives a w×h image under opt, computed
// from the sizes alone (memory planning); a non-positive side means the
// image cannot be processed.
func SizeDA3(w, h int, opt Options) (int, int) {
	if opt.ProcessRes == 0 {
		opt.ProcessRes = DefaultProcessRes
	}
	if w < 1 || h < 1 || opt.Patch < 1 {
		return 0, 0
	}
	l := max(w, h)
	if opt.Shortest {
		l = min(w, h)
	}
	if l != opt.ProcessRes {
		scale := float64(opt.ProcessRes) / float64(l)
		w = max(1, int(math.RoundToEven(float64(w)*scale)))
		h = max(1, int(math.RoundToEven(float64(h)*scale)))
	}
	if opt.Crop {
		return w / opt.Patch * opt.Patch, h / opt.Patch * opt.Patch
	}
	return max(1, nearestMultiple(w, opt.Patch)), max(1, nearestMultiple(h, opt.Patch))
}

// SizeDA2 is the processed size DA2 gives a w×h image.
func SizeDA2(w, h, inputSize, patch int) (int, int) {
	if w < 1 || h < 1 || inputSize < 1 || patch < 1 {
		return 0, 0
	}
	return da2TargetSize(w, h, inputSize, patch)
}

// nearestMultiple is InputProcessor's nearest_multiple: ties go up.
func nearestMultiple(x, p int) int {
	down := x / p * p
	up := down + p
	if up-x <= x-down {
		return up
	}
	return down
}

// CropToSmallest centre-crops every view to the smallest height and the smallest width in the batch, as
// InputProcessor does for a batch of views of different sizes (torchvision CenterCrop offsets
// round((H−minH)/2), which equal the (H−minH)//2 the reference applies to intrinsics because processed sides
// differ by multiples of the patch). Pixels, RGB, sizes and CropX/CropY are updated in place. Views that
// already have the smallest size are untouched.
func CropToSmallest(views []*View) {
	if len(views) == 0 {
		return
	}
	minW, minH := views[0].Width, views[0].Height
	for _, v := range views[1:] {
		minW, minH = min(minW, v.Width), min(minH, v.Height)
	}
	for _, v := range views {
		if v.Width == minW && v.Height == minH {
			continue
		}
		top := int(math.RoundToEven(float64(v.Height-minH) / 2))
		left := int(math.RoundToEven(float64(v.Width-minW) / 2))
		pix := make([]float32, 3*minW*minH)
		for c := range 3 {
			for y := range minH {
				src := v.Pixels[(c*v.Height+top+y)*v.Width+left:]
				copy(pix[(c*minH+y)*minW:(c*minH+y+1)*minW], src[:minW])
			}
		}
		rgb := make([]uint8, 3*minW*minH)
		for y := range minH {
			src := v.RGB[((top+y)*v.Width+left)*3:]
			copy(rgb[y*minW*3:(y+1)*minW*3], src[:minW*3])
		}
		v.Pixels, v.RGB = pix, rgb
		v.Width, v.Height = minW, minH
		v.CropX += left
		v.CropY += top
	}
}

// DA2 prepares one image for a DA2 model as DepthAnythingV2.image2tensor does: float64 image/255,
// lower-bound resize to inputSize (0 means 518) with sides rounded to multiples of the patch (never below
// inputSize), one float64 INTER_CUBIC resize, (x − mean)/std in float64, cast to float32. Mean and std are
// widened through their shortest decimal form (float32 0.485 becomes float64 0.485), as the reference's
// Python floats are. RGB holds the resized image rounded and clamped to 8 bits.
func DA2(img image.Image, inputSize, patch int, mean, std [3]float32) (*View, error) {
	if inputSize == 0 {
		inputSize = DefaultDA2Res
	}
	if inputSize < 0 || inputSize > imgproc.MaxSide {
		return nil, fmt.Errorf("input size %d out of range", inputSize)
	}
	if patch < 1 {
		return nil, fmt.Errorf("patch size %d must be positive", patch)
	}
	m32, s32, err := normalisation(mean, std)
	if err != nil {
		return nil, err
	}
	rgb, err := toRGB(img)
	if err != nil {
		return nil, err
	}
	ow, oh := rgb.W, rgb.H
	nw, nh := da2TargetSize(ow, oh, inputSize, patch)
	if err := imgproc.CheckSize(nw, nh); err != nil {
		return nil, fmt.Errorf("resize %dx%d to lower bound %d: %w", ow, oh, inputSize, err)
	}
	n := ow * oh
	src := &imgproc.Planar64{W: ow, H: oh, C: 3, Pix: make([]float64, 3*n)}
	par.For(3, 3, func(c int) {
		for i := range n {
			src.Pix[c*n+i] = unit8[rgb.Pix[3*i+c]]
		}
	})
	res := imgproc.ResizeCubicF64(src, nw, nh)
	p := &View{
		Width: nw, Height: nh, OrigWidth: ow, OrigHeight: oh,
		ScaleX: float64(nw) / float64(ow), ScaleY: float64(nh) / float64(oh),
		Pixels: make([]float32, len(res.Pix)),
		RGB:    make([]uint8, len(res.Pix)),
	}
	m := nw * nh
	var mc, sc [3]float64
	for c := range 3 {
		mc[c], sc[c] = widen(m32[c]), widen(s32[c])
	}
	par.For(3, 3, func(part int) { // thirds of the pixels: RGB interleaves the channels
		for i := m * part / 3; i < m*(part+1)/3; i++ {
			for c := range 3 {
				v := res.Pix[c*m+i]
				p.Pixels[c*m+i] = float32((v - mc[c]) / sc[c])
				p.RGB[3*i+c] = uint8(max(0, min(255, math.RoundToEven(v*255))))
			}
		}
	})
	return p, nil
}

// unit8 is x/255 in float64 for every byte x (image/255.0 of DA2's preprocessing).
var unit8 = func() (t [256]float64) {
	for i := range t {
		t[i] = float64(i) / 255
	}
	return t
}()

// da2TargetSize is Resize(keep_aspect_ratio, ensure_multiple_of=patch, resize_method="lower_bound").get_size.
func da2TargetSize(w, h, size, patch int) (int, int) {
	scaleH, scaleW := float64(size)/float64(h), float64(size)/float64(w)
	if scaleW > scaleH {
		scaleH = scaleW
	} else {
		scaleW = scaleH
	}
	constrain := func(x float64) int {
		ps := float64(patch)
		y := math.RoundToEven(x/ps) * ps
		if y < float64(size) {
			y = math.Ceil(x/ps) * ps
		}
		if y > math.MaxInt32 {
			return math.MaxInt32 // rejected by CheckSize
		}
		return int(y)
	}
	return constrain(scaleW * float64(w)), constrain(scaleH * float64(h))
}

// widen converts a float32 to the float64 with the same shortest decimal representation.
func widen(v float32) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
	if err != nil {
		return float64(v)
	}
	return f
}

func normalisation(mean, std [3]float32) ([3]float32, [3]float32, error) {
	if mean == ([3]float32{}) && std == ([3]float32{}) {
		return ImageNetMean, ImageNetStd, nil
	}
	for c, s := range std {
		if !(s > 0) || math.IsInf(float64(s), 0) || math.IsNaN(float64(mean[c])) || math.IsInf(float64(mean[c]), 0) {
			return mean, std, fmt.Errorf("invalid normalisation for channel %d: mean %g, std %g", c, mean[c], s)
		}
	}
	return mean, std, nil
}

func toRGB(img image.Image) (*imgproc.RGB8, error) {
	if img == nil {
		return nil, errors.New("nil image")
	}
	b := img.Bounds()
	if err := imgproc.CheckSize(b.Dx(), b.Dy()); err != nil {
		return nil, err
	}
	return imgproc.FromImage(img), nil
}
