package jpeg

import (
	"fmt"
	"image"
	"runtime"
	"sync"
)

// Upsampling and colour conversion as libjpeg-turbo performs them by default (jdsample.c with
// do_fancy_upsampling, jdcolor.c); see the package documentation.

// YCbCr→RGB tables of jdcolor.c's build_ycc_rgb_table: SCALEBITS = 16, FIX(x) = round(x·2^16),
// R = Y + crR[Cr], B = Y + cbB[Cb], G = Y + (cbG[Cb] + crG[Cr]) >> 16 (arithmetic shift; cbG includes the
// rounding half).
var crR, cbB, crG, cbG [256]int32

func init() {
	const scaleBits, half = 16, 1 << 15
	fix := func(x float64) int32 { return int32(x*(1<<scaleBits) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + half) >> scaleBits
		cbB[i] = (fix(1.77200)*x + half) >> scaleBits
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + half
	}
}

// clampTab[x+clampOff] is x limited to [0, 255] for x in [-384, 639] (libjpeg's sample_range_limit); every
// sum the colour conversion forms lies in [-227, 482].
var clampTab [1024]byte

const clampOff = 384

func init() {
	for i := range clampTab {
		clampTab[i] = byte(min(max(i-clampOff, 0), 255))
	}
}

// upsampler produces one component's full-resolution rows.
type upsampler struct {
	c      *component
	hr, vr int    // expansion ratios hmax/h, vmax/v
	fancy  bool   // triangle filter (h2v1, h1v2, h2v2) instead of replication
	buf    []byte // output row (nil for full-size components)
}

func (d *decoder) newUpsampler(c *component) *upsampler {
	u := &upsampler{c: c, hr: d.hmax / c.h, vr: d.vmax / c.v}
	switch {
	case u.hr == 1 && u.vr == 1:
		return u
	case u.hr == 2 && u.vr == 1, u.hr == 2 && u.vr == 2:
		// jinit_upsampler: the h2v1 and h2v2 triangle filters need more than two input columns.
		u.fancy = c.dw > 2
	case u.hr == 1 && u.vr == 2:
		u.fancy = true
	}
	u.buf = make([]byte, d.mcusX*8*d.hmax+2)
	return u
}

// row returns output row y (at least width samples).
func (u *upsampler) row(y int) []byte {
	c := u.c
	if u.hr == 1 && u.vr == 1 {
		return c.pix[y*c.stride:]
	}
	iy := y / u.vr
	near := c.pix[iy*c.stride : iy*c.stride+c.dw]
	if !u.fancy {
		// int_upsample (and h2v1/h2v2_upsample): replicate each sample hr×vr times.
		out := u.buf
		for x, v := range near {
			for k := range u.hr {
				out[x*u.hr+k] = v
			}
		}
		return out
	}
	if u.vr == 1 {
		h2v1Fancy(near, u.buf)
		return u.buf
	}
	// Vertical neighbour: the row above for the upper output row of a pair, the row below for the lower
	// one, repeating the first and last rows at the image edges (jdmainct.c's context rows).
	fy, bias := iy-1, int32(1)
	if y&1 == 1 {
		fy, bias = iy+1, 2
	}
	fy = min(max(fy, 0), c.dh-1)
	far := c.pix[fy*c.stride : fy*c.stride+c.dw]
	if u.hr == 1 {
		// h1v2_fancy_upsample.
		out := u.buf[:len(near)]
		for x := range out {
			out[x] = byte((int32(near[x])*3 + int32(far[x]) + bias) >> 2)
		}
		return u.buf
	}
	h2v2Fancy(near, far, u.buf)
	return u.buf
}

// h2v1Fancy is jdsample.c's h2v1_fancy_upsample: each output sample is 3/4 of the nearer input plus 1/4
// of the further one, rounding alternately down and up; the outermost outputs copy the edge inputs.
// len(in) ≥ 3.
func h2v1Fancy(in, out []byte) {
	n := len(in)
	out = out[:2*n]
	out[0] = in[0]
	out[1] = byte((int32(in[0])*3 + int32(in[1]) + 2) >> 2)
	for x := 1; x < n-1; x++ {
		v := int32(in[x]) * 3
		out[2*x] = byte((v + int32(in[x-1]) + 1) >> 2)
		out[2*x+1] = byte((v + int32(in[x+1]) + 2) >> 2)
	}
	v := int32(in[n-1])
	out[2*n-2] = byte((v*3 + int32(in[n-2]) + 1) >> 2)
	out[2*n-1] = byte(v)
}

// h2v2Fancy is jdsample.c's h2v2_fancy_upsample for one output row: column sums 3·near + far, then
// (3·this + neighbour + 8 or 7) >> 4 across. len(near) = len(far) ≥ 3.
func h2v2Fancy(near, far, out []byte) {
	n := len(near)
	far = far[:n]
	out = out[:2*n]
	this := int32(near[0])*3 + int32(far[0])
	next := int32(near[1])*3 + int32(far[1])
	out[0] = byte((this*4 + 8) >> 4)
	out[1] = byte((this*3 + next + 7) >> 4)
	last := this
	this = next
	for x := 1; x < n-1; x++ {
		next = int32(near[x+1])*3 + int32(far[x+1])
		out[2*x] = byte((this*3 + last + 8) >> 4)
		out[2*x+1] = byte((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = byte((this*3 + last + 8) >> 4)
	out[2*n-1] = byte((this*4 + 7) >> 4)
}

// image converts the decoded planes to the output image. Large images are converted in horizontal bands
// in parallel; every output row depends only on the planes.
func (d *decoder) image() (image.Image, error) {
	w, h := d.width, d.height
	if d.nComp == 1 {
		c := &d.comp[0]
		return &image.Gray{Pix: c.pix, Stride: c.stride, Rect: image.Rect(0, 0, w, h)}, nil
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bands := min(runtime.GOMAXPROCS(0), max(1, w*h/(1<<20)))
	var (
		wg    sync.WaitGroup
		once  sync.Once
		fault error
	)
	for i := range bands {
		y0, y1 := h*i/bands, h*(i+1)/bands
		wg.Go(func() {
			// A panic in another goroutine could not be recovered by the caller: report it instead.
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { fault = fmt.Errorf("jpeg: colour conversion failed: %v", r) })
				}
			}()
			d.convertRows(img, y0, y1)
		})
	}
	wg.Wait()
	if fault != nil {
		return nil, fault
	}
	return img, nil
}

// convertRows upsamples and colour-converts output rows [y0, y1).
func (d *decoder) convertRows(img *image.RGBA, y0, y1 int) {
	w := d.width
	ups := [3]*upsampler{d.newUpsampler(&d.comp[0]), d.newUpsampler(&d.comp[1]), d.newUpsampler(&d.comp[2])}
	rgb := d.isRGB()
	for y := y0; y < y1; y++ {
		r0, r1, r2 := ups[0].row(y)[:w], ups[1].row(y)[:w], ups[2].row(y)[:w]
		out := img.Pix[y*img.Stride : y*img.Stride+4*w]
		if rgb {
			for x := range w {
				o := out[4*x : 4*x+4 : 4*x+4]
				o[0], o[1], o[2], o[3] = r0[x], r1[x], r2[x], 255
			}
			continue
		}
		yccRow(out, r0, r1, r2)
	}
}

// yccRow is jdcolor.c's ycc_rgb_convert for one row, written as RGBA.
func yccRow(out, y, cb, cr []byte) {
	n := len(y)
	cb, cr, out = cb[:n], cr[:n], out[:4*n]
	for x, yv := range y {
		yy, b, r := int32(yv)+clampOff, cb[x], cr[x]
		o := out[4*x : 4*x+4 : 4*x+4]
		o[0] = clampTab[uint(yy+crR[r])&1023]
		o[1] = clampTab[uint(yy+(cbG[b]+crG[r])>>16)&1023]
		o[2] = clampTab[uint(yy+cbB[b])&1023]
		o[3] = 255
	}
}
