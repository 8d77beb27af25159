// Package nn holds the layers shared by the Depth Anything graphs: Linear,
// LayerNorm, Conv2D, ConvTranspose2D, LayerScale, MLP and SwiGLU. Each is a
// plain struct of weights bound by `gguf` struct tags (see model/bind) with a
// Forward method that adds its ops to a ggml graph.
//
// Layout conventions (ggml order, ne0 fastest): tokens are [C, T, ...]; feature
// maps are [W, H, C, N]; a Linear weight is [in, out] (PyTorch (out, in)
// reversed); a Conv2d kernel is [KW, KH, IC, OC]; a ConvTranspose2d kernel is
// [KW, KH, OC, IC].
package nn

import "github.com/da3-go/da3-go/ggml"

// Builder is what graph code needs from the runtime beyond the ggml context:
// host-computed inputs (position embeddings, RoPE positions, UV tables) and
// taps that expose intermediate tensors for parity tests. backend.Builder
// implements it.
type Builder interface {
	// Input adds an F32 graph input with the given shape (ggml order) whose
	// data is copied in before compute.
	Input(name string, data []float32, shape ...int) *ggml.Tensor
	// InputI32 adds an I32 graph input.
	InputI32(name string, data []int32, shape ...int) *ggml.Tensor
	// Tap marks t as an output named name when taps are enabled, and returns t.
	Tap(name string, t *ggml.Tensor) *ggml.Tensor
	// Tapping reports whether Tap(name, ...) adds an output, for graph code
	// that makes the tensor only to tap it (e.g. a map it computes in strips).
	Tapping(name string) bool
	// Check adds a finiteness probe on t: the sum of its values, read back
	// as the output "check."+name, is NaN or Inf when a value of t is. Call
	// it where t is made, so t is not kept alive longer.
	Check(name string, t *ggml.Tensor)
}
