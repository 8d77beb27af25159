package quantize_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/quantize"
)

func ti(name string, typ loader.Type, shape ...uint64) loader.TensorInfo {
	return loader.TensorInfo{Name: name, Type: typ, Shape: shape}
}

const f32, f16 = loader.TypeF32, loader.TypeF16

// anchor is a matrix that makes a tensor list a model file for Plan.
var anchor = ti("vit.blk.0.mlp_fc2.weight", f32, 1536, 384)

func TestPlanTable(t *testing.T) {
	cases := []struct {
		name     string
		tensor   loader.TensorInfo
		req      ggml.Type
		conv     ggml.Type
		want     ggml.Type
		matrix   bool
		fallback bool
	}{
		// ViT-S rows of 384 cannot hold a 256-block k-quant.
		{"vits qkv q4_K→q4_1", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ4K, 0, ggml.TypeQ4_1, true, true},
		{"vits proj q4_K→q4_1", ti("vit.blk.11.attn_proj.weight", f32, 384, 384), ggml.TypeQ4K, 0, ggml.TypeQ4_1, true, true},
		{"vits fc1 q4_K→q4_1", ti("vit.blk.3.mlp_fc1.weight", f32, 384, 1536), ggml.TypeQ4K, 0, ggml.TypeQ4_1, true, true},
		{"vits fc2 q4_K fits", ti("vit.blk.3.mlp_fc2.weight", f32, 1536, 384), ggml.TypeQ4K, 0, ggml.TypeQ4K, true, false},
		{"vits qkv q5_K→q5_1", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ5K, 0, ggml.TypeQ5_1, true, true},
		{"vits qkv q6_K→q8_0", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ6K, 0, ggml.TypeQ8_0, true, true},
		{"vits qkv q8_0", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ8_0, 0, ggml.TypeQ8_0, true, false},
		{"vits qkv q4_0", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ4_0, 0, ggml.TypeQ4_0, true, false},
		{"vits qkv q5_0", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ5_0, 0, ggml.TypeQ5_0, true, false},
		{"vits qkv f16", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeF16, 0, ggml.TypeF16, true, false},
		{"vits qkv bf16", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeBF16, 0, ggml.TypeBF16, true, false},
		{"vitb qkv q4_K fits", ti("vit.blk.0.attn_qkv.weight", f32, 768, 2304), ggml.TypeQ4K, 0, ggml.TypeQ4K, true, false},
		{"odd width q4_K→f16", ti("vit.blk.0.attn_qkv.weight", f32, 100, 300), ggml.TypeQ4K, 0, ggml.TypeF16, true, true},
		{"odd width q8_0→f16", ti("vit.blk.0.attn_qkv.weight", f32, 100, 300), ggml.TypeQ8_0, 0, ggml.TypeF16, true, true},
		{"odd width bf16", ti("vit.blk.0.attn_qkv.weight", f32, 100, 300), ggml.TypeBF16, 0, ggml.TypeBF16, true, false},
		// The metric branch of the nested model is quantized too.
		{"m_vit w12", ti("m_vit.blk.7.mlp_w12.weight", f32, 1536, 8192), ggml.TypeQ4K, 0, ggml.TypeQ4K, true, false},
		{"m_vit w3", ti("m_vit.blk.7.mlp_w3.weight", f32, 4096, 1536), ggml.TypeQ6K, 0, ggml.TypeQ6K, true, false},
		{"m_vit qkv vits", ti("m_vit.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ4K, 0, ggml.TypeQ4_1, true, true},
		// Camera decoder.
		{"cam bb0", ti("cam.bb0.weight", f32, 768, 768), ggml.TypeQ4K, 0, ggml.TypeQ4K, true, false},
		{"cam fc_t", ti("cam.fc_t.weight", f32, 768, 3), ggml.TypeQ8_0, 0, ggml.TypeQ8_0, true, false},
		{"cam fc_fov", ti("cam.fc_fov.weight", f32, 768, 2), ggml.TypeQ5K, 0, ggml.TypeQ5K, true, false},
		{"cam bias", ti("cam.bb0.bias", f32, 768), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		// Vectors, tokens and the position embedding stay f32.
		{"norm", ti("vit.blk.0.norm1.weight", f32, 384), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"final norm", ti("m_vit.norm.bias", f32, 1024), ggml.TypeQ8_0, 0, ggml.TypeF32, false, false},
		{"qkv bias", ti("vit.blk.0.attn_qkv.bias", f32, 1152), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"layerscale", ti("vit.blk.0.ls1", f32, 384), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"qknorm", ti("vit.blk.4.attn_qnorm.weight", f32, 64), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"pos_embed", ti("vit.pos_embed", f32, 384, 1370, 1), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"m pos_embed", ti("m_vit.pos_embed", f32, 1024, 1370, 1), ggml.TypeF16, ggml.TypeF16, ggml.TypeF32, false, false},
		{"cls", ti("vit.cls_token", f32, 384, 1, 1), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"camera token", ti("vit.camera_token", f32, 384, 2, 1), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"head norm", ti("head.norm.weight", f32, 768), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"head conv bias", ti("head.scratch.out1.bias", f32, 32), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		// Convolution kernels: f32, or f16 on request; transposed ones stay f32.
		{"conv f32", ti("head.scratch.rn1.out.weight", f32, 1, 1, 64, 64), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"conv f16", ti("head.scratch.rn1.rc1.c1.weight", f32, 3, 3, 64, 64), ggml.TypeQ4K, ggml.TypeF16, ggml.TypeF16, false, false},
		{"m_head conv f16", ti("m_head.scratch.layer1_rn.weight", f32, 3, 3, 256, 256), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF16, false, false},
		{"gs conv f16", ti("gs.merger.0.weight", f32, 3, 3, 3, 32), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF16, false, false},
		{"proj conv f16", ti("head.proj.0.weight", f32, 1, 1, 768, 48), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF16, false, false},
		{"resize.3 conv f16", ti("head.resize.3.weight", f32, 3, 3, 384, 384), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF16, false, false},
		{"patch_embed f16", ti("vit.patch_embed.weight", f32, 14, 14, 3, 384), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF16, false, false},
		{"patch_embed f32", ti("m_vit.patch_embed.weight", f32, 14, 14, 3, 1024), ggml.TypeQ8_0, 0, ggml.TypeF32, false, false},
		{"convT resize.0", ti("head.resize.0.weight", f32, 4, 4, 48, 48), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"convT m resize.1", ti("m_head.resize.1.weight", f32, 2, 2, 512, 512), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		{"convT gs resize.0", ti("gs.resize.0.weight", f32, 4, 4, 256, 256), ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, false, false},
		// Input types: quantized and f16 tensors are converted, f16 kernels
		// go back to f32 without -conv f16, non-float tensors are copied.
		{"q8_0 input to q4_K", ti("vit.blk.0.mlp_fc2.weight", loader.TypeQ8_0, 1536, 384), ggml.TypeQ4K, 0, ggml.TypeQ4K, true, false},
		{"f16 norm to f32", ti("vit.blk.0.norm1.weight", f16, 384), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"f16 conv to f32", ti("head.scratch.out1.weight", f16, 3, 3, 64, 32), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"i32 copied", ti("vit.some_index", loader.TypeI32, 16), ggml.TypeQ4K, 0, ggml.TypeI32, false, false},
		// A matrix name on a tensor that is not 2-D is not a matrix.
		{"3-D qkv", ti("vit.blk.0.attn_qkv.weight", f32, 384, 1152, 2), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		// Names close to the patterns do not match.
		{"mlp_fc3", ti("vit.blk.0.mlp_fc3.weight", f32, 384, 1536), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"head linear-like", ti("head.blk.0.attn_qkv.weight", f32, 384, 1152), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
		{"cam_enc", ti("cam_enc.bb0.weight", f32, 768, 768), ggml.TypeQ4K, 0, ggml.TypeF32, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Pure: the first-blocks rule is tested in TestPlanFirstBlocks.
			decs, err := quantize.Plan([]loader.TensorInfo{tc.tensor, anchor}, tc.req, quantize.Options{Conv: tc.conv, Pure: true})
			require.NoError(t, err)
			require.Len(t, decs, 2)
			d := decs[0]
			assert.Equal(t, tc.tensor.Name, d.Name)
			assert.Equal(t, ggml.Type(tc.tensor.Type), d.From)
			assert.Equal(t, tc.want, d.To, "type (reason: %s)", d.Reason)
			assert.Equal(t, tc.matrix, d.Matrix, "matrix")
			assert.Equal(t, tc.fallback, d.Fallback, "fallback")
			assert.NotEmpty(t, d.Reason)
			assert.NotEmpty(t, d.Group)
			assert.Equal(t, tc.tensor.Shape, d.Shape)
			if tc.fallback {
				assert.Contains(t, d.Reason, fmt.Sprintf("rows of %d do not fit the %s block of %d", tc.tensor.Shape[0], tc.req, tc.req.BlockSize()))
				assert.Contains(t, d.Reason, tc.want.String()+" is the nearest type at least as accurate")
			}
		})
	}
}

// vitsNames lists the tensors of a DA3-SMALL file (ViT-S, 12 blocks, qk-norm
// from block 4, camera decoder of width 768), as the converter names them.
func vitsTensors() []loader.TensorInfo {
	const c = 384
	ts := []loader.TensorInfo{
		ti("vit.patch_embed.weight", f32, 14, 14, 3, c), ti("vit.patch_embed.bias", f32, c),
		ti("vit.cls_token", f32, c, 1, 1), ti("vit.camera_token", f32, c, 2, 1), ti("vit.pos_embed", f32, c, 1370, 1),
		ti("vit.norm.weight", f32, c), ti("vit.norm.bias", f32, c),
	}
	for i := range 12 {
		p := fmt.Sprintf("vit.blk.%d.", i)
		ts = append(ts,
			ti(p+"norm1.weight", f32, c), ti(p+"norm1.bias", f32, c),
			ti(p+"attn_qkv.weight", f32, c, 3*c), ti(p+"attn_qkv.bias", f32, 3*c),
			ti(p+"attn_proj.weight", f32, c, c), ti(p+"attn_proj.bias", f32, c),
			ti(p+"ls1", f32, c), ti(p+"ls2", f32, c),
			ti(p+"norm2.weight", f32, c), ti(p+"norm2.bias", f32, c),
			ti(p+"mlp_fc1.weight", f32, c, 4*c), ti(p+"mlp_fc1.bias", f32, 4*c),
			ti(p+"mlp_fc2.weight", f32, 4*c, c), ti(p+"mlp_fc2.bias", f32, c))
		if i >= 4 {
			ts = append(ts, ti(p+"attn_qnorm.weight", f32, 64), ti(p+"attn_qnorm.bias", f32, 64),
				ti(p+"attn_knorm.weight", f32, 64), ti(p+"attn_knorm.bias", f32, 64))
		}
	}
	const d = 2 * c
	for _, n := range []struct {
		name string
		out  uint64
	}{{"bb0", d}, {"bb2", d}, {"fc_t", 3}, {"fc_q", 4}, {"fc_fov", 2}} {
		ts = append(ts, ti("cam."+n.name+".weight", f32, d, n.out), ti("cam."+n.name+".bias", f32, n.out))
	}
	ts = append(ts,
		ti("head.norm.weight", f32, d), ti("head.norm.bias", f32, d),
		ti("head.proj.0.weight", f32, 1, 1, d, 48), ti("head.proj.0.bias", f32, 48),
		ti("head.resize.0.weight", f32, 4, 4, 48, 48), ti("head.resize.0.bias", f32, 48),
		ti("head.resize.3.weight", f32, 3, 3, 384, 384), ti("head.resize.3.bias", f32, 384),
		ti("head.scratch.layer1_rn.weight", f32, 3, 3, 48, 64))
	return ts
}

func TestPlanViTS(t *testing.T) {
	ts := vitsTensors()
	for _, tc := range []struct {
		req                 ggml.Type
		requested, fallback int
		fallbackType        ggml.Type
	}{
		// 12 fc2 (rows of 1536) and 5 camera matrices (rows of 768) fit 256.
		{ggml.TypeQ4K, 17, 36, ggml.TypeQ4_1},
		{ggml.TypeQ5K, 17, 36, ggml.TypeQ5_1},
		{ggml.TypeQ6K, 17, 36, ggml.TypeQ8_0},
		{ggml.TypeQ8_0, 53, 0, 0},
		{ggml.TypeQ4_0, 53, 0, 0},
		{ggml.TypeF16, 53, 0, 0},
	} {
		t.Run(tc.req.String(), func(t *testing.T) {
			decs, err := quantize.Plan(ts, tc.req, quantize.Options{Pure: true})
			require.NoError(t, err)
			var req, fb int
			for _, d := range decs {
				switch {
				case d.Matrix && d.Fallback:
					fb++
					assert.Equal(t, tc.fallbackType, d.To, d.Name)
				case d.Matrix:
					req++
					assert.Equal(t, tc.req, d.To, d.Name)
				default:
					assert.Equal(t, ggml.TypeF32, d.To, d.Name)
				}
			}
			assert.Equal(t, tc.requested, req, "matrices with the requested type")
			assert.Equal(t, tc.fallback, fb, "matrices with a fallback type")
		})
	}
}

// TestPlanFirstBlocks checks the default plan: the matrices of the first
// quarter of the blocks of each backbone get q8_0 (f16 for a q8_0 request),
// the others the requested type or its fallback, and nothing changes for
// types at or above f16 or with Pure.
func TestPlanFirstBlocks(t *testing.T) {
	assert.Equal(t, []int{1, 1, 1, 2, 3, 6, 10}, []int{
		quantize.EarlyBlocks(1), quantize.EarlyBlocks(2), quantize.EarlyBlocks(4), quantize.EarlyBlocks(5),
		quantize.EarlyBlocks(12), quantize.EarlyBlocks(24), quantize.EarlyBlocks(40)})

	ts := vitsTensors() // 12 blocks: 0-2 are early
	for _, tc := range []struct {
		req, early, late ggml.Type // late: qkv (rows of 384) of blocks 3-11
		raised           int
	}{
		{ggml.TypeQ4K, ggml.TypeQ8_0, ggml.TypeQ4_1, 12},
		{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_0, 12},
		{ggml.TypeQ5K, ggml.TypeQ8_0, ggml.TypeQ5_1, 12},
		{ggml.TypeQ6K, ggml.TypeQ8_0, ggml.TypeQ8_0, 12},
		{ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeQ8_0, 12},
		{ggml.TypeBF16, ggml.TypeBF16, ggml.TypeBF16, 0},
		{ggml.TypeF16, ggml.TypeF16, ggml.TypeF16, 0},
	} {
		t.Run(tc.req.String(), func(t *testing.T) {
			decs, err := quantize.Plan(ts, tc.req, quantize.Options{})
			require.NoError(t, err)
			raised := 0
			for _, d := range decs {
				var blk int
				if _, err := fmt.Sscanf(d.Name, "vit.blk.%d.", &blk); err != nil || !d.Matrix {
					continue
				}
				if blk < 3 && tc.raised > 0 {
					raised++
					assert.True(t, d.Raised, d.Name)
					assert.Equal(t, tc.early, d.To, d.Name)
					assert.Equal(t, "vit.blk.0-2."+strings.Split(d.Name, ".")[3]+".weight", d.Group)
					assert.Contains(t, d.Reason, fmt.Sprintf("an early block (blocks 0-2 of 12), where errors grow the most: %s instead of %s", tc.early, tc.req))
				} else {
					assert.False(t, d.Raised, d.Name)
					if strings.HasSuffix(d.Name, "attn_qkv.weight") {
						assert.Equal(t, tc.late, d.To, d.Name)
					}
				}
			}
			assert.Equal(t, tc.raised, raised)

			// Pure: nothing raised.
			pure, err := quantize.Plan(ts, tc.req, quantize.Options{Pure: true})
			require.NoError(t, err)
			for _, d := range pure {
				assert.False(t, d.Raised, d.Name)
			}
		})
	}

	// Each backbone counts its own blocks: the nested model's metric branch
	// (m_vit, 24 blocks) raises 6, the any-view branch (vit, 40 blocks) 10.
	var nested []loader.TensorInfo
	for i := range 40 {
		nested = append(nested, ti(fmt.Sprintf("vit.blk.%d.attn_qkv.weight", i), f32, 1536, 4608))
	}
	for i := range 24 {
		nested = append(nested, ti(fmt.Sprintf("m_vit.blk.%d.attn_qkv.weight", i), f32, 1024, 3072))
	}
	decs, err := quantize.Plan(nested, ggml.TypeQ4K, quantize.Options{})
	require.NoError(t, err)
	count := map[string]int{}
	for _, d := range decs {
		if d.Raised {
			count[strings.Split(d.Name, ".")[0]]++
		}
	}
	assert.Equal(t, map[string]int{"vit": 10, "m_vit": 6}, count)
}

func TestPlanErrors(t *testing.T) {
	ts := []loader.TensorInfo{anchor}
	for _, typ := range []ggml.Type{ggml.TypeQ3K, ggml.TypeQ2K, ggml.TypeIQ4XS, ggml.TypeQ8_1, ggml.TypeI32} {
		_, err := quantize.Plan(ts, typ, quantize.Options{})
		require.Error(t, err, typ)
		assert.ErrorIs(t, err, quantize.ErrUnknownType, typ)
		assert.Contains(t, err.Error(), "f32, f16, bf16, q8_0, q6_K, q5_1, q5_K, q5_0, q4_1, q4_K, q4_0")
	}
	_, err := quantize.Plan(ts, ggml.TypeQ8_0, quantize.Options{Conv: ggml.TypeQ8_0})
	assert.ErrorContains(t, err, "convolution kernels can be f32 or f16, not q8_0")
	_, err = quantize.Plan([]loader.TensorInfo{ti("vit.norm.weight", f32, 384)}, ggml.TypeQ8_0, quantize.Options{})
	assert.ErrorContains(t, err, "no weight matrix")
	_, err = quantize.Plan([]loader.TensorInfo{anchor, ti("x", loader.Type(4), 32)}, ggml.TypeQ8_0, quantize.Options{})
	assert.ErrorContains(t, err, `tensor "x": unknown type`)
}

func TestParseType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ggml.Type
	}{{"f16", ggml.TypeF16}, {"BF16", ggml.TypeBF16}, {"q8_0", ggml.TypeQ8_0}, {"q6_k", ggml.TypeQ6K},
		{"Q5_K", ggml.TypeQ5K}, {"q4_k", ggml.TypeQ4K}, {"q5_0", ggml.TypeQ5_0}, {"q4_0", ggml.TypeQ4_0}, {"f32", ggml.TypeF32}} {
		got, err := quantize.ParseType(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"q3_k", "q4_k_m", "", "int8", "iq4_xs"} {
		_, err := quantize.ParseType(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, quantize.ErrUnknownType), bad)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q: known types are f32, f16, bf16, q8_0, q6_K, q5_1, q5_K, q5_0, q4_1, q4_K, q4_0", bad))
	}
}
