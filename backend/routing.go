package backend

import (
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/ggml/kernels"
)

// DevicePolicy is the kernel policy of graphs that run on dev when it is not
// the CPU: the CPU-only kernels off, and the routing choices that keep every
// node of a DA3 or DA2 graph on the device, each decided by asking the device
// (ggml_backend_dev_supports_op) about the node as the models build it:
//
//   - Flash: attention as ggml_flash_attn_ext (f32 q, k and v, heads of 64)
//     where the device runs it, else two matrix products and a softmax;
//   - ContiguousNorm: a layer norm of a strided view (the QK norm of heads in
//     a fused QKV projection) takes a contiguous copy first where the device's
//     NORM refuses strided rows (ggml-vulkan) but takes contiguous ones;
//   - DirectConv: convolutions as ggml_conv_2d_direct where the device runs
//     it and is not CUDA (whose direct kernel is slower than im2col with
//     cuBLAS), else im2col and a matrix product.
//
// Everything the models compute on the host (interpolated position
// embeddings, RoPE positions, camera tokens, UV maps) is a graph input fed
// per call on every device.
func DevicePolicy(dev ggml.Device) kernels.Policy {
	if dev.Type() == ggml.DeviceCPU {
		return kernels.Default(true)
	}
	p := kernels.Policy{Explicit: true}
	g, err := ggml.NewContext(64)
	if err != nil {
		return kernels.Policy{Explicit: true, Flash: true}
	}
	defer g.Close()
	const hd, heads, n = 64, 4, 128
	q := g.NewTensor(ggml.TypeF32, hd, n, heads, 1)
	k := g.NewTensor(ggml.TypeF32, hd, n, heads, 1)
	v := g.NewTensor(ggml.TypeF32, hd, n, heads, 1)
	p.Flash = dev.SupportsOp(q.FlashAttnExt(g, k, v, nil, 0.125))

	qkv := g.NewTensor(ggml.TypeF32, 3*hd*heads, n, 2)
	view := qkv.View(g, 0, []int{hd, heads, n, 2}, []int{hd * 4, qkv.Stride(1), qkv.Stride(2)})
	cont := g.NewTensor(ggml.TypeF32, hd, heads, n, 2)
	p.ContiguousNorm = !dev.SupportsOp(view.Norm(g, 1e-6)) && dev.SupportsOp(cont.Norm(g, 1e-6))

	w := g.NewTensor(ggml.TypeF32, 3, 3, 32, 16)
	x := g.NewTensor(ggml.TypeF32, 24, 16, 32, 1)
	p.DirectConv = dev.Backend() != "CUDA" && dev.SupportsOp(w.Conv2DDirect(g, x, ggml.Conv2DParams{Stride: 1, Pad: 1, Dilation: 1}))
	return p
}
