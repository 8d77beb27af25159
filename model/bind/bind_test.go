package bind_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model/bind"
	"github.com/da3-go/da3-go/model/dpt"
	"github.com/da3-go/da3-go/model/nn"
	"github.com/da3-go/da3-go/model/vit"
)

// fakeSource hands out distinct tensors for a fixed set of names.
type fakeSource struct {
	g     *ggml.Context
	names map[string]*ggml.Tensor
}

func newFakeSource(t *testing.T, names ...string) *fakeSource {
	g, err := ggml.NewContext(len(names) + 1)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	s := &fakeSource{g: g, names: map[string]*ggml.Tensor{}}
	for _, n := range names {
		s.names[n] = g.NewTensor(ggml.TypeF32, 1).SetName(n)
	}
	return s
}

func (s *fakeSource) Tensor(name string) *ggml.Tensor { return s.names[name] }

type testBlock struct {
	Norm nn.LayerNorm  `gguf:"norm"`
	LS   nn.LayerScale `gguf:"ls1"`
	Opt  *ggml.Tensor  `gguf:"extra,optional"`
	Alt  *ggml.Tensor  `gguf:"new_name,alt:old_name"`
	FFN  nn.FFN
}

type testModel struct {
	Tok    *ggml.Tensor `gguf:"tok"`
	Blocks []testBlock  `gguf:"blk"`
	Skip   *nn.Conv2D   `gguf:"absent"` // nil: not part of this config
	Cfg    struct{ N int }
}

func TestBindResolvesNames(t *testing.T) {
	m := &testModel{Blocks: make([]testBlock, 2)}
	m.Blocks[0].FFN = &nn.MLP{}
	m.Blocks[1].FFN = &nn.SwiGLU{}
	src := newFakeSource(t, "r.tok",
		"r.blk.0.norm.weight", "r.blk.0.norm.bias", "r.blk.0.ls1", "r.blk.0.old_name",
		"r.blk.0.mlp_fc1.weight", "r.blk.0.mlp_fc1.bias", "r.blk.0.mlp_fc2.weight",
		"r.blk.1.norm.weight", "r.blk.1.norm.bias", "r.blk.1.ls1", "r.blk.1.new_name", "r.blk.1.extra",
		"r.blk.1.mlp_w12.weight", "r.blk.1.mlp_w3.weight")
	require.NoError(t, bind.Struct(m, src, "r"))
	assert.Equal(t, "r.tok", m.Tok.Name())
	assert.Equal(t, "r.blk.0.ls1", m.Blocks[0].LS.Gamma.Name(), "untagged leaf takes the parent path")
	assert.Equal(t, "r.blk.0.old_name", m.Blocks[0].Alt.Name(), "alt name used as fallback")
	assert.Equal(t, "r.blk.1.new_name", m.Blocks[1].Alt.Name())
	assert.Nil(t, m.Blocks[0].Opt, "optional missing stays nil")
	assert.Equal(t, "r.blk.1.extra", m.Blocks[1].Opt.Name())
	assert.Nil(t, m.Blocks[0].FFN.(*nn.MLP).FC2.Bias, "optional bias")
	assert.Equal(t, "r.blk.1.mlp_w3.weight", m.Blocks[1].FFN.(*nn.SwiGLU).W3.Weight.Name())
	assert.Nil(t, m.Skip)
}

func TestBindListsEveryMissingTensor(t *testing.T) {
	m := &testModel{Blocks: make([]testBlock, 2)}
	m.Blocks[0].FFN, m.Blocks[1].FFN = &nn.MLP{}, &nn.MLP{}
	src := newFakeSource(t, "r.tok", "r.blk.0.norm.weight")
	err := bind.Struct(m, src, "r")
	var me *bind.MissingError
	require.ErrorAs(t, err, &me)
	want := []string{"r.blk.0.ls1", "r.blk.0.mlp_fc1.weight", "r.blk.0.mlp_fc2.weight", "r.blk.0.new_name", "r.blk.0.norm.bias",
		"r.blk.1.ls1", "r.blk.1.mlp_fc1.weight", "r.blk.1.mlp_fc2.weight", "r.blk.1.new_name", "r.blk.1.norm.bias", "r.blk.1.norm.weight"}
	assert.Equal(t, want, me.Names)
	assert.Contains(t, err.Error(), "lacks 11 required tensors")
}

// The real backbone and head bind exactly the GGUF names of the C++ engine
// depth-anything.cpp (convert writes the same).
func TestBoundNamesMatchSchema(t *testing.T) {
	cfg := vit.Config{EmbedDim: 64, Depth: 6, Heads: 1, HeadDim: 64, PatchSize: 14, PosGrid: 37, AltStart: 4, RoPEStart: 4, QKNormStart: 4, OutLayers: []int{1, 3, 5, 5}}
	names := bind.Names(vit.New(cfg), "vit")
	assert.Contains(t, names, "vit.blk.4.attn_qnorm.weight")
	assert.NotContains(t, names, "vit.blk.3.attn_qnorm.weight", "qk-norm only from qknorm_start")
	assert.Contains(t, names, "vit.blk.0.ls1")
	assert.Contains(t, names, "vit.camera_token")
	assert.Contains(t, names, "vit.patch_embed.bias")
	assert.Len(t, names, 5+2+6*14+2*4, "tokens, patch embed, pos, norm; 14 per block; qk-norm in blocks 4 and 5")

	h := dpt.New(dpt.Config{Kind: dpt.DualDPT})
	hn := bind.Names(h, "head")
	for _, n := range []string{"head.norm.weight", "head.proj.3.bias", "head.resize.0.weight", "head.resize.3.bias",
		"head.scratch.layer4_rn.weight", "head.scratch.rn1.rc1.c2.bias", "head.scratch.rn4.rc2.c1.weight",
		"head.scratch.rn4.out.weight", "head.scratch.out2b.bias"} {
		assert.Contains(t, hn, n)
	}
	assert.NotContains(t, hn, "head.scratch.rn4.rc1.c1.weight", "DA3 refinenet4 has no rc1")
	assert.NotContains(t, hn, "head.scratch.sky_out2a.weight")
	mono := bind.Names(dpt.New(dpt.Config{Kind: dpt.Mono}), "head")
	assert.Contains(t, mono, "head.scratch.sky_out2b.weight")
	assert.NotContains(t, mono, "head.norm.weight")
	assert.True(t, sort.StringsAreSorted(hn))
}
