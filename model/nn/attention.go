package nn

import (
	"github.com/da3-go/da3-go/ggml"
)

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
