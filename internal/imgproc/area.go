package imgproc

import (
	"fmt"
	"math"
	"runtime"
	"sort"

	"github.com/da3-go/da3-go/internal/par"
)

// ResizeAreaU8 is cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA) on a uint8 RGB image, for
// downscaling (w ≤ src.W and h ≤ src.H; one side may stay equal). Like cv2 it takes one of two paths:
//
//   - integer fast path when both scale factors src/dst are integers (to within DBL_EPSILON, computed as
//     cv2 does, 1/(dst/src) in double): k×k block sums in int; 2×2 blocks round half up ((s+2)>>2),
//     larger blocks round_half_even(float32(sum)·float32(1/area));
//   - otherwise the generic table path (computeResizeAreaTab + ResizeArea_Invoker): float32 weights equal
//     to the overlap lengths over min(scale, in − d·scale), accumulated per source row in float32, one
//     round-half-even at the end.
//
// INTER_AREA upscaling falls back to a bilinear variant in cv2; it is not implemented and panics.
// A same-size resize copies.
func ResizeAreaU8(src *RGB8, w, h int) *RGB8 {
	src.check("ResizeAreaU8")
	mustPositive("ResizeAreaU8", w, h)
	if w > src.W || h > src.H {
		panic(fmt.Sprintf("imgproc: ResizeAreaU8 %dx%d -> %dx%d upscales", src.W, src.H, w, h))
	}
	if w == src.W && h == src.H {
		return src.Clone()
	}
	return &RGB8{W: w, H: h, Pix: resizeAreaU8(src.Pix, src.W, src.H, 3, w, h)}
}

func resizeAreaU8(src []uint8, sw, sh, cn, dw, dh int) []uint8 {
	scaleX := 1 / (float64(dw) / float64(sw))
	scaleY := 1 / (float64(dh) / float64(sh))
	iscaleX := int(math.RoundToEven(scaleX))
	iscaleY := int(math.RoundToEven(scaleY))
	const dblEpsilon = 0x1p-52
	if math.Abs(scaleX-float64(iscaleX)) < dblEpsilon && math.Abs(scaleY-float64(iscaleY)) < dblEpsilon {
		return resizeAreaFastU8(src, sw, sh, cn, dw, dh, iscaleX, iscaleY)
	}
	return resizeAreaGenericU8(src, sw, sh, cn, dw, dh, scaleX, scaleY)
}

// resizeAreaFastU8 is ResizeAreaFast_Invoker<uchar, int, ResizeAreaFastVec<uchar, …>>.
func resizeAreaFastU8(src []uint8, sw, sh, cn, dw, dh, kx, ky int) []uint8 {
	dst := make([]uint8, dw*dh*cn)
	area := kx * ky
	scale := float32(1) / float32(area)
	fast2x2 := kx == 2 && ky == 2 && (cn == 1 || cn == 3 || cn == 4)
	rowLen := sw * cn
	dwidth1 := (sw / kx) * cn // output values whose block lies fully inside the row
	width := dw * cn
	for dy := range dh {
		D := dst[dy*width : (dy+1)*width]
		sy0 := dy * ky
		if sy0 >= sh {
			continue // zero row
		}
		full := 0
		if sy0+ky <= sh {
			full = dwidth1
		}
		dx := 0
		if fast2x2 {
			S, N := src[sy0*rowLen:], src[(sy0+1)*rowLen:]
			for ; dx < full; dx++ {
				i := (dx/cn)*2*cn + dx%cn
				D[dx] = uint8((int(S[i]) + int(S[i+cn]) + int(N[i]) + int(N[i+cn]) + 2) >> 2)
			}
		}
		for ; dx < full; dx++ {
			base := sy0*rowLen + (dx/cn)*kx*cn + dx%cn
			sum := 0
			for sy := range ky {
				for sx := range kx {
					sum += int(src[base+sy*rowLen+sx*cn])
				}
			}
			D[dx] = satU8(int32(math.RoundToEven(float64(float32(sum) * scale))))
		}
		for ; dx < width; dx++ { // partial blocks at the right or bottom edge
			sx0 := (dx/cn)*kx*cn + dx%cn
			sum, count := 0, 0
			for sy := 0; sy < ky && sy0+sy < sh; sy++ {
				for sx := 0; sx < kx*cn && sx0+sx < rowLen; sx += cn {
					sum += int(src[(sy0+sy)*rowLen+sx0+sx])
					count++
				}
			}
			if count > 0 {
				D[dx] = satU8(int32(math.RoundToEven(float64(float32(sum) / float32(count)))))
			}
		}
	}
	return dst
}

// areaTab is one DecimateAlpha entry: output index di receives alpha × source index si.
type areaTab struct {
	di, si int
	alpha  float32
}

// computeResizeAreaTab mirrors cv2's function of the same name (indices in elements, cn interleaved).
func computeResizeAreaTab(ssize, dsize, cn int, scale float64) []areaTab {
	tab := make([]areaTab, 0, 2*ssize)
	for dx := range dsize {
		fsx1 := float64(dx) * scale
		fsx2 := fsx1 + scale
		cellWidth := min(scale, float64(ssize)-fsx1)
		sx1, sx2 := int(math.Ceil(fsx1)), int(math.Floor(fsx2))
		sx2 = min(sx2, ssize-1)
		sx1 = min(sx1, sx2)
		if float64(sx1)-fsx1 > 1e-3 {
			tab = append(tab, areaTab{dx * cn, (sx1 - 1) * cn, float32((float64(sx1) - fsx1) / cellWidth)})
		}
		for sx := sx1; sx < sx2; sx++ {
			tab = append(tab, areaTab{dx * cn, sx * cn, float32(1.0 / cellWidth)})
		}
		if fsx2-float64(sx2) > 1e-3 {
			tab = append(tab, areaTab{dx * cn, sx2 * cn, float32(min(min(fsx2-float64(sx2), 1), cellWidth) / cellWidth)})
		}
	}
	return tab
}

// resizeAreaGenericU8 is ResizeArea_Invoker<uchar, float>. Each output row is the sum of its own run
// of ytab's entries, so bands of output rows run in their own goroutines with the results of one loop.
func resizeAreaGenericU8(src []uint8, sw, sh, cn, dw, dh int, scaleX, scaleY float64) []uint8 {
	xtab := computeResizeAreaTab(sw, dw, cn, scaleX)
	ytab := computeResizeAreaTab(sh, dh, 1, scaleY)
	width := dw * cn
	rowLen := sw * cn
	dst := make([]uint8, dh*width)
	bands := min(runtime.GOMAXPROCS(0), dh)
	par.For(bands, bands, func(band int) {
		// the entries of output rows [dh·band/bands, dh·(band+1)/bands)
		lo, hi := dh*band/bands, dh*(band+1)/bands
		y0 := sort.Search(len(ytab), func(k int) bool { return ytab[k].di >= lo })
		y1 := sort.Search(len(ytab), func(k int) bool { return ytab[k].di >= hi })
		if y0 >= y1 {
			return
		}
		buf := make([]float32, width)
		sum := make([]float32, width)
		flush := func(dy int) {
			D := dst[dy*width : (dy+1)*width]
			for i, v := range sum {
				D[i] = satU8(int32(math.RoundToEven(float64(v))))
			}
		}
		prevDy := ytab[y0].di
		for _, yt := range ytab[y0:y1] { // the loop of one band's rows, as the whole loop has it
			beta := yt.alpha
			S := src[yt.si*rowLen : (yt.si+1)*rowLen]
			clear(buf)
			for _, xt := range xtab {
				for c := range cn {
					buf[xt.di+c] = buf[xt.di+c] + float32(float32(S[xt.si+c])*xt.alpha)
				}
			}
			if yt.di != prevDy {
				flush(prevDy)
				for i, v := range buf {
					sum[i] = beta * v
				}
				prevDy = yt.di
			} else {
				for i, v := range buf {
					sum[i] = sum[i] + float32(beta*v)
				}
			}
		}
		flush(prevDy)
	})
	return dst
}
