package nn

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// Attention is softmax(q·kᵀ·scale)·v per head for q [hd, H, n, B] and k, v
// [hd, H, nk, B] (rows contiguous, any strides above), giving [hd, H, n, B]
// contiguous: reshape to [hd·H, n, B] for the output projection. The graph's
// kernel policy (kernels.PolicyOf) chooses how: the fused CPU kernel
// (Attention), ggml_flash_attn_ext (Flash), or two matrix products and a
// softmax with the queries in chunks whose scores stay under ScoreBytes.
func Attention(g *ggml.Context, q, k, v *ggml.Tensor, scale float32) *ggml.Tensor {
	p := kernels.PolicyOf(g)
	if p.Attention && kernels.AttentionFits(q, k, v) {
		return kernels.Attention(g, q, k, v, scale)
	}
	q = q.Permute(g, 0, 2, 1, 3) // [hd, n, H, B]
	k = k.Permute(g, 0, 2, 1, 3)
	v = v.Permute(g, 0, 2, 1, 3)
	if p.Flash {
		return q.FlashAttnExt(g, k.Cont(g), v.Cont(g), nil, scale) // [hd, H, n, B]
	}
	return scoresAttention(g, q, k, v, scale, p.ScoreBytes).Cont(g)
}

// scoresAttention is softmax(q·kᵀ·scale)·v as two matrix products on
// contiguous operands, q [hd, n, H, B], k and v [hd, nk, H, B], giving
// [hd, H, n, B] (a permuted view). Queries are processed in chunks so that
// each chunk's score matrix stays under limit bytes (0: 256 MiB).
func scoresAttention(g *ggml.Context, q, k, v *ggml.Tensor, scale float32, limit int64) *ggml.Tensor {
	hd, n, H, batch := q.Dim(0), q.Dim(1), q.Dim(2), q.Dim(3)
	nk := k.Dim(1)
	q, k = q.Cont(g), k.Cont(g)
	vt := v.Permute(g, 1, 0, 2, 3).Cont(g) // [nk, hd, H, B]
	if limit <= 0 {
		limit = 256 << 20
	}
	chunk := int(limit / (int64(nk) * int64(H) * int64(batch) * 4))
	chunk = max(1, min(chunk, n))
	var o *ggml.Tensor
	for start := 0; start < n; start += chunk {
		c := min(chunk, n-start)
		qc := q
		if c < n {
			qc = q.View(g, start*q.Stride(1), []int{hd, c, H, batch}, []int{q.Stride(1), q.Stride(2), q.Stride(3)}).Cont(g)
		}
		kq := MatMul(g, k, qc).SoftMaxExt(g, nil, scale, 0) // [nk, c, H, B]
		oc := MatMul(g, vt, kq)                             // [hd, c, H, B]
		if o == nil {
			o = oc
		} else {
			o = o.Concat(g, oc, 1)
		}
	}
	return o.Permute(g, 0, 2, 1, 3) // [hd, H, n, B]
}

// Resize resamples x [W, H, C, N] to [w, h, C, N] as x.Interpolate(g, w, h,
// mode) does, with the bilinear CPU kernel when the graph's kernel policy
// allows it (Resize), the mode is bilinear (with or without
// ScaleAlignCorners, no antialias) and x is F32 and contiguous.
func Resize(g *ggml.Context, x *ggml.Tensor, w, h int, mode ggml.ScaleMode) *ggml.Tensor {
	if kernels.PolicyOf(g).Resize && (mode == ggml.ScaleBilinear || mode == ggml.ScaleBilinear|ggml.ScaleAlignCorners) && kernels.BilinearFits(x, w, h) {
		return kernels.Bilinear(g, x, w, h, mode&ggml.ScaleAlignCorners != 0)
	}
	return x.Interpolate(g, w, h, mode)
}
