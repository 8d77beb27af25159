package vit

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model/nn"
)

// TestNormRoPE checks DA3's QK norm followed by 2-D RoPE three ways on q
// as a block sees it (heads of a fused QKV projection: strided rows): the
// fused kernel (kernels.LayerNormRoPE with RoPE2D.Table), ggml's ops (norm,
// two ropes, concat) and float64 (the norm, then each half rotated by
// pos·base^(−4i/hd) in NeoX pairs), on a local grid (positions 1 … 6) and a
// global one (all patches at 1), for heads of 16 values (the kernel's scalar
// rotation) and of 64 (DA3's, rotated in whole vectors as they are normalized).
func TestNormRoPE(t *testing.T) {
	for _, hd := range []int{16, 64} {
		t.Run(fmt.Sprintf("hd%d", hd), func(t *testing.T) { testNormRoPE(t, hd) })
	}
}

func testNormRoPE(t *testing.T, hd int) {
	const H = 3
	C := hd * H
	gr := Grid{PH: 4, PW: 6}
	T := 1 + gr.PH*gr.PW
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 3*C*T)
	for i := range x {
		x[i] = float32(3*r.NormFloat64() + 1)
	}
	w, b := make([]float32, hd), make([]float32, hd)
	for i := range w {
		w[i], b[i] = float32(1+0.3*r.NormFloat64()), float32(0.2*r.NormFloat64())
	}
	rope := &RoPE2D{Base: 100}
	for _, global := range []bool{false, true} {
		py, px := ropePositions(gr, global)
		// float64: rows of q (token t, head h) normalized, then rotated
		want := make([]float64, hd*H*T)
		for tk := 0; tk < T; tk++ {
			for h := 0; h < H; h++ {
				row := x[tk*3*C+h*hd : tk*3*C+(h+1)*hd]
				var mean, v float64
				for _, a := range row {
					mean += float64(a)
				}
				mean /= float64(hd)
				for _, a := range row {
					v += (float64(a) - mean) * (float64(a) - mean)
				}
				sc := 1 / math.Sqrt(v/float64(hd)+1e-5)
				y := make([]float64, hd)
				for i, a := range row {
					y[i] = (float64(a)-mean)*sc*float64(w[i]) + float64(b[i])
				}
				o := want[(tk*H+h)*hd : (tk*H+h+1)*hd]
				q := hd / 4
				for half, pos := range []int32{py[tk], px[tk]} {
					for i := 0; i < q; i++ {
						ang := float64(pos) * math.Pow(100, -4*float64(i)/float64(hd))
						a0, a1 := y[2*half*q+i], y[2*half*q+q+i]
						o[2*half*q+i] = a0*math.Cos(ang) - a1*math.Sin(ang)
						o[2*half*q+q+i] = a1*math.Cos(ang) + a0*math.Sin(ang)
					}
				}
			}
		}
		var outs [][]float32
		for _, fused := range []bool{true, false} {
			pol := kernels.Policy{Explicit: true, Norm: fused}
			rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2, Kernels: pol, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			out, err := rt.Run(context.Background(), backend.RunOptions{}, func(bd *backend.Builder) error {
				in := bd.Input("x", x, 3*C, T, 1)
				q := in.View(bd.G, 0, []int{hd, H, T, 1}, []int{hd * 4, 3 * C * 4, 3 * C * T * 4})
				n := nn.LayerNorm{Weight: bd.Input("w", w, hd), Bias: bd.Input("b", b, hd), Eps: 1e-5}
				p := &Pass{B: bd, Grid: gr}
				var y *ggml.Tensor
				if fused {
					y = kernels.LayerNormRoPE(bd.G, q, n.Weight, n.Bias, rope.Table(hd, p, global), n.Eps)
					assert.Equal(t, "CUSTOM", y.Op())
				} else {
					y = rope.Forward(bd.G, n.Forward(bd.G, q), p, global)
				}
				bd.Output("y", y)
				return nil
			})
			require.NoError(t, err)
			rt.Close()
			outs = append(outs, out["y"].Data)
		}
		wantF := make([]float32, len(want))
		for i, v := range want {
			wantF[i] = float32(v)
		}
		testutil.AllClose(t, wantF, outs[0], 2e-6, 2e-6) // fused
		testutil.AllClose(t, wantF, outs[1], 2e-6, 2e-6) // ggml's ops
	}
}

// TestRoPEViews checks RoPE2D.Forward over several views: the rope nodes see
// the views as one axis of T·S rows with one position per row (the layout
// every ggml backend indexes the same way; GPU kernels do not repeat the T
// positions over a fourth axis as the CPU does), and on the CPU the result is
// bit for bit the 4-D rope with the positions broadcast over the views.
func TestRoPEViews(t *testing.T) {
	const hd, H, S = 16, 2, 3
	gr := Grid{PH: 2, PW: 3}
	T := 1 + gr.PH*gr.PW
	r := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, hd*H*T*S)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	rope := &RoPE2D{Base: 100}
	for _, global := range []bool{false, true} {
		rt, err := backend.Open(backend.Options{Device: "cpu", Threads: 2, Kernels: kernels.Policy{Explicit: true}, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		out, err := rt.Run(context.Background(), backend.RunOptions{}, func(bd *backend.Builder) error {
			in := bd.Input("x", x, hd, H, T, S)
			p := &Pass{B: bd, Grid: gr}
			y := rope.Forward(bd.G, in, p, global)
			require.Equal(t, []int{hd, H, T, S}, y.Shape())
			ropes := 0
			var walk func(n *ggml.Tensor)
			walk = func(n *ggml.Tensor) {
				if n == nil {
					return
				}
				if n.Op() == "ROPE" {
					ropes++
					assert.Equal(t, []int{hd / 2, H, T * S}, n.Shape(), "rope over T·S rows")
					assert.Equal(t, T*S, n.Src(1).Dim(0), "one position per row")
				}
				for i := range 3 {
					walk(n.Src(i))
				}
			}
			walk(y)
			assert.Equal(t, 2, ropes)
			// the 4-D form the CPU broadcasts (positions of one view)
			py, px := ropePositions(gr, global)
			posY := bd.InputI32("py", py, T)
			posX := bd.InputI32("px", px, T)
			nb := []int{in.Stride(1), in.Stride(2), in.Stride(3)}
			rp := ggml.RoPEParams{Dims: hd / 2, Mode: ggml.RoPENeoX, Base: rope.Base}
			ref := in.View(bd.G, 0, []int{hd / 2, H, T, S}, nb).RoPEExt(bd.G, posY, rp).
				Concat(bd.G, in.View(bd.G, hd/2*in.Stride(0), []int{hd / 2, H, T, S}, nb).RoPEExt(bd.G, posX, rp), 0)
			bd.Output("y", y)
			bd.Output("ref", ref)
			return nil
		})
		require.NoError(t, err)
		rt.Close()
		require.Equal(t, out["ref"].Data, out["y"].Data, "global=%v", global)
	}
}

// TestRoPETableCache: the cached tables are ropeTable's, one per key (base, head size, grid, local or
// global), computed once while they stay cached, and correct again after the cache fills up.
func TestRoPETableCache(t *testing.T) {
	c := &ropeCache{m: map[ropeKey][]float32{}}
	keys := []ropeKey{
		{base: 100, hd: 16, grid: Grid{PH: 4, PW: 6}},
		{base: 100, hd: 16, grid: Grid{PH: 4, PW: 6}, global: true},
		{base: 100, hd: 32, grid: Grid{PH: 4, PW: 6}},
		{base: 100, hd: 16, grid: Grid{PH: 6, PW: 4}},
		{base: 10, hd: 16, grid: Grid{PH: 4, PW: 6}},
	}
	want := func(k ropeKey) []float32 {
		py, px := ropePositions(k.grid, k.global)
		return ropeTable(py, px, k.hd, k.base)
	}
	for round := range 2 {
		for i, k := range keys {
			got := c.get(k)
			require.Equal(t, want(k), got, "key %d", i)
			assert.Same(t, &got[0], &c.get(k)[0], "key %d computed again", i)
			for j := range i {
				assert.NotEqual(t, c.get(keys[j]), got, "keys %d and %d share a table", j, i)
			}
		}
		for n := 0; round == 0 && n < ropeCacheMax; n++ { // fill it: the next get starts from empty
			c.get(ropeKey{base: 1000, hd: 8, grid: Grid{PH: 1, PW: n + 1}})
		}
		assert.LessOrEqual(t, len(c.m), ropeCacheMax)
	}
}
