package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/loader"
)

// da3SmallShaped writes a GGUF of DA3-SMALL's shapes (ViT-S: width 384, 12
// blocks of 6 heads, MLP 1536; DualDPT head of 64 features, out channels
// 48, 96, 192, 384) with zero weights: enough to plan its graphs (memory
// estimates), not to give meaningful outputs. Its metadata is the tiny
// fixture's with the sizes changed; there is no camera encoder. With f16
// the backbone's matrices are f16.
func da3SmallShaped(t *testing.T, f16 bool) string {
	t.Helper()
	f, err := loader.Open(convertFixture(t, filepath.Join("fixtures", "da3-tiny"), convert.Options{}))
	require.NoError(t, err)
	defer f.Close()
	set := map[string]loader.Value{
		"general.name":                      loader.ValueOf[string]("da3-small-shaped"),
		"depthanything3.checkpoint_name":    loader.ValueOf[string]("da3-small-shaped"),
		"depthanything3.vit.embed_dim":      loader.ValueOf[uint32](384),
		"depthanything3.vit.depth":          loader.ValueOf[uint32](12),
		"depthanything3.vit.num_heads":      loader.ValueOf[uint32](6),
		"depthanything3.vit.head_dim":       loader.ValueOf[uint32](64),
		"depthanything3.vit.mlp_hidden":     loader.ValueOf[uint32](1536),
		"depthanything3.vit.alt_start":      loader.ValueOf[int32](4),
		"depthanything3.vit.rope_start":     loader.ValueOf[int32](4),
		"depthanything3.vit.qknorm_start":   loader.ValueOf[int32](4),
		"depthanything3.vit.pos_embed_grid": loader.ValueOf[uint32](37),
		"depthanything3.vit.out_layers":     loader.ArrayOf[int32]([]int32{5, 7, 9, 11}),
		"depthanything3.head.features":      loader.ValueOf[uint32](64),
		"depthanything3.head.out_channels":  loader.ArrayOf[int32]([]int32{48, 96, 192, 384}),
		"depthanything3.cam.dim_in":         loader.ValueOf[uint32](768),
	}
	var kv []loader.KeyValue
	for _, e := range f.KV().Entries() {
		if v, ok := set[e.Key]; ok {
			e.Value = v
		}
		if strings.HasPrefix(e.Key, "depthanything3.cam_enc.") {
			continue
		}
		kv = append(kv, e)
	}
	v := schema.ViT{C: 384, Depth: 12, Heads: 6, Hidden: 1536, Patch: 14, Rows: 1370, Grid: 37, QKNormStart: 4, CatToken: true}
	h := schema.Head{Kind: schema.HeadDualDPT, D: 768, F: 64, OC: [4]int{48, 96, 192, 384}, F2: 32, HF2: schema.HeadHidden, OutDim: 2}
	specs := append(v.Tensors("vit"), h.Tensors("head")...)
	specs = append(specs, schema.Camera(768)...)
	var ts []loader.WriterTensor
	for _, s := range specs {
		ne := s.NE()
		n := uint64(1)
		for _, d := range ne {
			n *= d
		}
		if f16 && s.Class == schema.Matrix && strings.HasPrefix(s.Name, "vit.") {
			ts = append(ts, loader.WriterTensor{Name: s.Name, Type: loader.TypeF16, Shape: ne, Data: loader.BytesTensor(make([]byte, 2*n))})
			continue
		}
		ts = append(ts, testutil.F32Tensor(t, s.Name, make([]float32, n), ne...))
	}
	return testutil.WriteGGUF(t, kv, ts)
}
