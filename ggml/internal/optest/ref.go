package optest

import (
	"math"

	"github.com/da3-go/da3-go/ggml"
)

// MulMatRef is ggml_mul_mat: a:[K,M,a2,a3] × b:[K,N,b2,b3] -> [M,N,b2,b3],
// a broadcast over dims 2 and 3.
func MulMatRef(a, b *ND) *ND {
	K, M, N := a.Ne[0], a.Ne[1], b.Ne[1]
	r2, r3 := b.Ne[2]/a.Ne[2], b.Ne[3]/a.Ne[3]
	out := NewND(M, N, b.Ne[2], b.Ne[3])
	out.Each(func(m, n, i2, i3 int) {
		var s float64
		for k := 0; k < K; k++ {
			s += a.At(k, m, i2/r2, i3/r3) * b.At(k, n, i2, i3)
		}
		out.Set(s, m, n, i2, i3)
	})
	return out
}

// ConvRef is a 2-D cross-correlation (PyTorch conv2d without bias):
// kernel [KW,KH,IC,OC] over x [W,H,IC,N] with zero padding.
func ConvRef(k, x *ND, p ggml.Conv2DParams) *ND {
	s, pad, d := p.Norm()
	KW, KH, IC, OC := k.Ne[0], k.Ne[1], k.Ne[2], k.Ne[3]
	W, H, N := x.Ne[0], x.Ne[1], x.Ne[3]
	OW, OH := p.OutSize(W, H, KW, KH)
	out := NewND(OW, OH, OC, N)
	out.Each(func(ox, oy, oc, n int) {
		var sum float64
		for ic := 0; ic < IC; ic++ {
			for ky := 0; ky < KH; ky++ {
				for kx := 0; kx < KW; kx++ {
					ix, iy := ox*s+kx*d-pad, oy*s+ky*d-pad
					if ix >= 0 && ix < W && iy >= 0 && iy < H {
						sum += k.At(kx, ky, ic, oc) * x.At(ix, iy, ic, n)
					}
				}
			}
		}
		out.Set(sum, ox, oy, oc, n)
	})
	return out
}

// AttnRef is softmax(q·kᵀ·scale + mask)·v per head, in FlashAttnExt's
// layouts: q [D,Nq,H,B], k [D,Nk,Hkv,B], v [Dv,Nk,Hkv,B], mask [Nk,≥Nq]
// (or nil), result [Dv,H,Nq,B].
func AttnRef(q, k, v, mask *ND, scale float64) *ND {
	D, Nq, H, B := q.Ne[0], q.Ne[1], q.Ne[2], q.Ne[3]
	Nk, Hkv, Dv := k.Ne[1], k.Ne[2], v.Ne[0]
	out := NewND(Dv, H, Nq, B)
	s := make([]float64, Nk)
	for b := 0; b < B; b++ {
		for hd := 0; hd < H; hd++ {
			hk := hd / (H / Hkv)
			for i := 0; i < Nq; i++ {
				mx := math.Inf(-1)
				for j := 0; j < Nk; j++ {
					var dot float64
					for d := 0; d < D; d++ {
						dot += q.At(d, i, hd, b) * k.At(d, j, hk, b)
					}
					s[j] = dot * scale
					if mask != nil {
						s[j] += mask.At(j, i, 0, 0)
					}
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for d := 0; d < Dv; d++ {
					var acc float64
					for j := 0; j < Nk; j++ {
						acc += s[j] * v.At(d, j, hk, b)
					}
					out.Set(acc/sum, d, hd, i, b)
				}
			}
		}
	}
	return out
}
