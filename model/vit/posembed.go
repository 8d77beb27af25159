package vit

import (
	"fmt"
	"math"
	"sync"
)

// PosEmbed holds the learned position embedding on the host ([M²+1] rows of C
// floats) and caches its interpolation per patch grid. The interpolation is
// input-independent, so it is computed once per grid and fed to graphs as an
// input: nothing is read back from device memory while a graph is built.
type PosEmbed struct {
	C, M  int
	Off   float32
	table []float32 // (1+M²)·C, row r = table[r·C:(r+1)·C]

	mu    sync.Mutex
	cache map[[2]int][]float32
}

// NewPosEmbed wraps a host copy of pos_embed ([C, 1+M², 1] in ggml order).
func NewPosEmbed(table []float32, c, m int, offset float32) (*PosEmbed, error) {
	if len(table) != (1+m*m)*c {
		return nil, fmt.Errorf("pos_embed has %d values, want (1+%d²)·%d", len(table), m, c)
	}
	return &PosEmbed{C: c, M: m, Off: offset, table: table, cache: map[[2]int][]float32{}}, nil
}

// For returns the embedding for a ph×pw patch grid: (1+ph·pw)·C floats, row 0
// the cls row, then patch rows in row-major order. Like DINOv2's
// interpolate_pos_encoding: the stored table when ph = pw = M, otherwise
// bicubic (A = −0.75, align_corners=False, no antialias, clamped borders)
// with torch's scale-factor coordinate mapping, s = (n + offset)/M.
func (p *PosEmbed) For(ph, pw int) []float32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := [2]int{ph, pw}
	if v, ok := p.cache[key]; ok {
		return v
	}
	var out []float32
	if ph == p.M && pw == p.M {
		out = p.table
	} else {
		out = make([]float32, (1+ph*pw)*p.C)
		copy(out, p.table[:p.C])
		bicubic(out[p.C:], p.table[p.C:], p.C, p.M, ph, pw, p.Off)
	}
	p.cache[key] = out
	return out
}

// cubicCoeffs are torch's get_cubic_upsample_coefficients with A = −0.75.
func cubicCoeffs(t float32) [4]float32 {
	const a = float32(-0.75)
	c1 := func(x float32) float32 { return ((a+2)*x-(a+3))*x*x + 1 }
	c2 := func(x float32) float32 { return ((a*x-5*a)*x+8*a)*x - 4*a }
	return [4]float32{c2(t + 1), c1(t), c1(1 - t), c2(2 - t)}
}

// bicubic resamples the M×M grid src (row-major, C floats per cell) to ph×pw
// into dst, as torch's upsample_bicubic2d with scale factors (n+off)/M.
func bicubic(dst, src []float32, c, m, ph, pw int, off float32) {
	// torch: scale used for the mapping is 1/scale_factor computed in double,
	// then the float opmath source index scale·(dst+0.5)−0.5.
	sy := float32(1.0 / (float64(float32(ph)+off) / float64(m)))
	sx := float32(1.0 / (float64(float32(pw)+off) / float64(m)))
	if off == 0 {
		sy, sx = float32(float64(m)/float64(ph)), float32(float64(m)/float64(pw))
	}
	type tap struct {
		idx [4]int
		w   [4]float32
	}
	taps := func(n int, scale float32) []tap {
		ts := make([]tap, n)
		for d := 0; d < n; d++ {
			real := scale*(float32(d)+0.5) - 0.5
			fl := float32(math.Floor(float64(real)))
			t := real - fl
			i0 := int(fl)
			var tp tap
			tp.w = cubicCoeffs(t)
			for k := 0; k < 4; k++ {
				tp.idx[k] = min(max(i0-1+k, 0), m-1)
			}
			ts[d] = tp
		}
		return ts
	}
	ty, tx := taps(ph, sy), taps(pw, sx)
	row := make([]float32, 4*c)
	for oy := 0; oy < ph; oy++ {
		for ox := 0; ox < pw; ox++ {
			o := dst[(oy*pw+ox)*c : (oy*pw+ox+1)*c]
			// Interpolate along x for each of the 4 source rows, then along y.
			for k := 0; k < 4; k++ {
				r := row[k*c : (k+1)*c]
				y := ty[oy].idx[k]
				for ch := 0; ch < c; ch++ {
					var v float32
					for j := 0; j < 4; j++ {
						v += src[(y*m+tx[ox].idx[j])*c+ch] * tx[ox].w[j]
					}
					r[ch] = v
				}
			}
			for ch := 0; ch < c; ch++ {
				var v float32
				for k := 0; k < 4; k++ {
					v += row[k*c+ch] * ty[oy].w[k]
				}
				o[ch] = v
			}
		}
	}
}
