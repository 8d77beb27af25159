package vit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/model/nn"
)

// cubicW is the Keys cubic convolution kernel with A = −0.75 (torch's
// upsample_bicubic2d).
func cubicW(x float64) float64 {
	const a = -0.75
	x = math.Abs(x)
	switch {
	case x <= 1:
		return (a+2)*x*x*x - (a+3)*x*x + 1
	case x < 2:
		return a*x*x*x - 5*a*x*x + 8*a*x - 4*a
	}
	return 0
}

// bicubicRef is torch's upsample_bicubic2d(align_corners=False) with a given
// scale factor, in float64: source = (dst + 0.5)/scale − 0.5, four taps at
// floor(source) − 1 … + 2 clamped to the border, weights W(source − tap).
// src is M×M row-major with c floats per cell.
func bicubicRef(src []float32, c, m, oh, ow int, scaleY, scaleX float64) []float64 {
	out := make([]float64, oh*ow*c)
	clamp := func(i int) int { return min(max(i, 0), m-1) }
	for oy := 0; oy < oh; oy++ {
		sy := (float64(oy)+0.5)/scaleY - 0.5
		fy := math.Floor(sy)
		for ox := 0; ox < ow; ox++ {
			sx := (float64(ox)+0.5)/scaleX - 0.5
			fx := math.Floor(sx)
			for ch := 0; ch < c; ch++ {
				var v float64
				for ky := -1; ky <= 2; ky++ {
					wy := cubicW(sy - (fy + float64(ky)))
					y := clamp(int(fy) + ky)
					for kx := -1; kx <= 2; kx++ {
						wx := cubicW(sx - (fx + float64(kx)))
						x := clamp(int(fx) + kx)
						v += wy * wx * float64(src[(y*m+x)*c+ch])
					}
				}
				out[(oy*ow+ox)*c+ch] = v
			}
		}
	}
	return out
}

func randTable(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func TestPosEmbedShortcutAndCache(t *testing.T) {
	const c, m = 3, 4
	table := randTable(rand.New(rand.NewPCG(1, 1)), (1+m*m)*c)
	p, err := NewPosEmbed(table, c, m, 0.1)
	require.NoError(t, err)
	got := p.For(m, m)
	require.Len(t, got, len(table))
	assert.Same(t, &table[0], &got[0], "the M×M grid returns the stored table itself")

	a := p.For(3, 5)
	b := p.For(3, 5)
	require.Len(t, a, (1+3*5)*c)
	assert.Same(t, &a[0], &b[0], "a second call for the same grid returns the cached slice")
	other := p.For(5, 3)
	assert.NotSame(t, &a[0], &other[0], "grids are cached by (ph, pw), not by size")
}

func TestPosEmbedBicubicMatchesTorch(t *testing.T) {
	const c, m, off = 5, 6, 0.1
	r := rand.New(rand.NewPCG(2, 3))
	table := randTable(r, (1+m*m)*c)
	p, err := NewPosEmbed(table, c, m, off)
	require.NoError(t, err)
	for _, g := range [][2]int{{3, 5}, {6, 9}, {10, 4}, {1, 1}, {1, 7}, {6, 5}, {13, 13}} {
		ph, pw := g[0], g[1]
		got := p.For(ph, pw)
		require.Len(t, got, (1+ph*pw)*c)
		assert.Equal(t, table[:c], got[:c], "cls row is copied unchanged (%dx%d)", ph, pw)
		// DINOv2: scale_factor = ((ph + 0.1)/M, (pw + 0.1)/M).
		want := bicubicRef(table[c:], c, m, ph, pw, (float64(ph)+off)/m, (float64(pw)+off)/m)
		worst := 0.0
		for i, w := range want {
			worst = max(worst, math.Abs(w-float64(got[c+i])))
		}
		assert.LessOrEqual(t, worst, 1e-5, "grid %dx%d: max |Δ| = %g", ph, pw, worst)
	}
}

// An upsample of a constant grid stays constant (the cubic weights sum to 1
// even where the taps are clamped).
func TestPosEmbedConstant(t *testing.T) {
	const c, m = 2, 4
	table := make([]float32, (1+m*m)*c)
	for i := range table {
		table[i] = 0.25
	}
	p, err := NewPosEmbed(table, c, m, 0.1)
	require.NoError(t, err)
	for _, v := range p.For(7, 3) {
		assert.InDelta(t, 0.25, v, 1e-6)
	}
}

func TestNewPosEmbedSizeError(t *testing.T) {
	_, err := NewPosEmbed(make([]float32, 10), 3, 2, 0.1)
	assert.ErrorContains(t, err, "pos_embed has 10 values")
}

func TestRoPEPositions(t *testing.T) {
	gr := Grid{PH: 2, PW: 3}
	py, px := ropePositions(gr, false)
	assert.Equal(t, []int32{0, 1, 1, 1, 2, 2, 2}, py)
	assert.Equal(t, []int32{0, 1, 2, 3, 1, 2, 3}, px)
	py, px = ropePositions(gr, true)
	assert.Equal(t, []int32{0, 1, 1, 1, 1, 1, 1}, py)
	assert.Equal(t, []int32{0, 1, 1, 1, 1, 1, 1}, px)
}

func small() Config {
	return Config{
		EmbedDim: 384, Depth: 12, Heads: 6, HeadDim: 64, MLPHidden: 1536, PatchSize: 14, PosGrid: 37,
		InterpOff: 0.1, AltStart: 4, RoPEStart: 4, QKNormStart: 4, RoPEFreq: 100, CatToken: true,
		LNEps: 1e-6, FinalEps: 1e-5, QKNormEps: 1e-5, OutLayers: []int{5, 7, 9, 11},
	}
}

func TestConfigDA3SmallPattern(t *testing.T) {
	cfg := small()
	require.NoError(t, cfg.Validate())
	var global, local []int
	for i := 0; i < cfg.Depth; i++ {
		if cfg.Global(i) {
			global = append(global, i)
		} else {
			local = append(local, i)
		}
		assert.Equal(t, i >= 4, cfg.RoPE(i), "RoPE(%d)", i)
		assert.Equal(t, i >= 4, cfg.QKNorm(i), "QKNorm(%d)", i)
	}
	assert.Equal(t, []int{5, 7, 9, 11}, global)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 6, 8, 10}, local)
	assert.Equal(t, 768, cfg.FeatureDim())

	off := cfg
	off.AltStart, off.RoPEStart, off.QKNormStart, off.CatToken = -1, -1, -1, false
	for i := 0; i < off.Depth; i++ {
		assert.False(t, off.Global(i) || off.RoPE(i) || off.QKNorm(i), "block %d with everything disabled", i)
	}
	assert.Equal(t, 384, off.FeatureDim())
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		msg  string
	}{
		{"zero depth", func(c *Config) { c.Depth = 0 }, "dims must be positive"},
		{"negative patch", func(c *Config) { c.PatchSize = -14 }, "dims must be positive"},
		{"zero pos grid", func(c *Config) { c.PosGrid = 0 }, "dims must be positive"},
		{"heads mismatch", func(c *Config) { c.Heads = 5 }, "5 heads × 64 ≠ embed dim 384"},
		{"3 out layers", func(c *Config) { c.OutLayers = []int{5, 7, 9} }, "need 4 out layers"},
		{"out layer too deep", func(c *Config) { c.OutLayers = []int{5, 7, 9, 12} }, "out layer 12 outside [0,12)"},
		{"negative out layer", func(c *Config) { c.OutLayers = []int{-1, 7, 9, 11} }, "out layer -1"},
		{"rope head dim", func(c *Config) { c.Heads, c.HeadDim, c.EmbedDim = 3, 6, 18 }, "divisible by 4, got 6"},
	}
	for _, tc := range cases {
		cfg := small()
		tc.mod(&cfg)
		assert.ErrorContains(t, cfg.Validate(), tc.msg, tc.name)
	}
	// Without RoPE a head dim not divisible by 4 is fine.
	cfg := small()
	cfg.Heads, cfg.HeadDim, cfg.EmbedDim, cfg.RoPEStart = 3, 6, 18, -1
	assert.NoError(t, cfg.Validate())
}

func TestNewShapesBlocks(t *testing.T) {
	cfg := small()
	m := New(cfg)
	require.Len(t, m.Blocks, 12)
	assert.Equal(t, 14, m.PatchEmbed.Params.Stride)
	assert.Equal(t, float32(1e-5), m.Norm.Eps)
	for i, l := range m.Blocks {
		b, ok := l.(*Block)
		require.True(t, ok, "block %d is a *Block", i)
		assert.Equal(t, float32(1e-6), b.Norm1.Eps)
		assert.Equal(t, float32(1e-6), b.Norm2.Eps)
		assert.IsType(t, &nn.MLP{}, b.FFN)
		a, ok := b.Attn.(*Attention)
		require.True(t, ok, "block %d's attention is an *Attention", i)
		assert.Equal(t, cfg.Heads, a.Heads)
		assert.Equal(t, cfg.Global(i), a.Global, "block %d", i)
		if i >= 4 {
			require.NotNil(t, a.QNorm, "block %d", i)
			require.NotNil(t, a.KNorm, "block %d", i)
			assert.Equal(t, float32(1e-5), a.QNorm.Eps)
		} else {
			assert.Nil(t, a.QNorm, "block %d", i)
			assert.Nil(t, a.KNorm, "block %d", i)
		}
		if cfg.RoPE(i) {
			require.NotNil(t, a.RoPE, "block %d", i)
			assert.Equal(t, cfg.RoPEFreq, a.RoPE.Base)
		} else {
			assert.Nil(t, a.RoPE, "block %d", i)
		}
	}
	cfg.SwiGLU = true
	assert.IsType(t, &nn.SwiGLU{}, New(cfg).Blocks[0].(*Block).FFN)
}

func TestGridKey(t *testing.T) {
	assert.Equal(t, "37x0", gridKey(Grid{PH: 37, PW: 0}))
	assert.Equal(t, "-3x120", gridKey(Grid{PH: -3, PW: 120}))
}
