package model_test

import (
	"context"
	"fmt"
	"image"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/vit"
)

// noAttention replaces a block's attention: the block keeps its MLP branch.
type noAttention struct{}

func (noAttention) Forward(g *ggml.Context, x *ggml.Tensor, p *vit.Pass) *ggml.Tensor {
	return x.Scale(g, 0)
}

// A model is its parts: run the backbone alone and read an intermediate
// block, then run the whole model with one block's attention removed.
func ExampleModel_Run() {
	ctx := context.Background()
	m, err := model.Load(ctx, tinyModel(), model.Options{Options: backend.Options{Device: "cpu"}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	img := photo(64, 48)
	px, err := m.Preprocess([]image.Image{img}, model.RunOptions{ProcessRes: 56})
	if err != nil {
		panic(err)
	}

	// The backbone alone, up to block 1: its tokens [C, 1+patches].
	bb := m.Backbone()
	out, err := m.Run(ctx, backend.RunOptions{}, func(b *backend.Builder) error {
		x, grid := bb.Embed(b.G, b, b.Input("pixels", px.Data, px.Width, px.Height, 3, px.Views))
		pass := &vit.Pass{B: b, Grid: grid}
		for _, blk := range bb.Blocks[:2] {
			x = blk.Forward(b.G, x, pass)
		}
		b.Output("block1", x)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("tokens after block 1:", out["block1"].Shape)

	// A variant: block 2 without its attention.
	opt := model.RunOptions{ProcessRes: 56}
	base, err := m.Depth(ctx, img, opt)
	if err != nil {
		panic(err)
	}
	blk := bb.Blocks[2].(*vit.Block)
	attn := blk.Attn
	blk.Attn = noAttention{}
	variant, err := m.Depth(ctx, img, opt)
	blk.Attn = attn
	if err != nil {
		panic(err)
	}
	fmt.Println("depth changed:", base.Depth[0] != variant.Depth[0])
	// Output:
	// tokens after block 1: [32 13]
	// depth changed: true
}
