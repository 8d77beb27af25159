// Package vit is the DINOv2 ViT backbone of Depth Anything V2 and 3 as a ggml
// graph: patch embedding, cls token, interpolated position embedding, pre-norm
// blocks with LayerScale, and for DA3 any-view models the camera tokens, 2-D
// RoPE, QK-norm, alternating local/global attention and reference-view
// selection.
//
// Layout: tokens are [C, T, S] in ggml order (channels fastest, T = 1 + Np
// tokens per view, S views); token 0 is the cls (or camera) token and patch
// token t = row·pw + col. Pixels are [W, H, 3, S].
package vit

import "fmt"

// Config is the backbone's hyper-parameters, read from GGUF metadata.
type Config struct {
	EmbedDim  int
	Depth     int
	Heads     int
	HeadDim   int
	MLPHidden int
	SwiGLU    bool // FFN type: SwiGLU (ViT-g) instead of MLP
	PatchSize int
	PosGrid   int     // M: pos_embed holds M²+1 rows (37 for img_size 518)
	InterpOff float32 // interpolate_offset, 0.1

	// DA3 any-view features; -1 disables.
	AltStart    int
	RoPEStart   int
	QKNormStart int
	RoPEFreq    float32
	CatToken    bool

	LNEps     float32 // block norms (1e-6)
	FinalEps  float32 // final norm: 1e-5 for DA3, 1e-6 for DA2
	QKNormEps float32 // 1e-5

	OutLayers []int
}

// Validate checks the config for consistency.
func (c Config) Validate() error {
	switch {
	case c.EmbedDim <= 0 || c.Depth <= 0 || c.Heads <= 0 || c.HeadDim <= 0 || c.PatchSize <= 0 || c.PosGrid <= 0:
		return fmt.Errorf("vit config: dims must be positive: %+v", c)
	case c.Heads*c.HeadDim != c.EmbedDim:
		return fmt.Errorf("vit config: %d heads × %d ≠ embed dim %d", c.Heads, c.HeadDim, c.EmbedDim)
	case len(c.OutLayers) != 4:
		return fmt.Errorf("vit config: need 4 out layers, got %v", c.OutLayers)
	case c.RoPEStart >= 0 && c.HeadDim%4 != 0:
		return fmt.Errorf("vit config: 2-D RoPE needs a head dim divisible by 4, got %d", c.HeadDim)
	}
	for _, l := range c.OutLayers {
		if l < 0 || l >= c.Depth {
			return fmt.Errorf("vit config: out layer %d outside [0,%d)", l, c.Depth)
		}
	}
	return nil
}

// Global reports whether block i attends over all views jointly.
func (c Config) Global(i int) bool { return c.AltStart >= 0 && i >= c.AltStart && i%2 == 1 }

// RoPE reports whether block i applies 2-D RoPE.
func (c Config) RoPE(i int) bool { return c.RoPEStart >= 0 && i >= c.RoPEStart }

// QKNorm reports whether block i normalises q and k.
func (c Config) QKNorm(i int) bool { return c.QKNormStart >= 0 && i >= c.QKNormStart }

// FeatureDim is the channel count of the out-layer features (2C with cat_token).
func (c Config) FeatureDim() int {
	if c.CatToken {
		return 2 * c.EmbedDim
	}
	return c.EmbedDim
}
