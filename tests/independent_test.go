package tests

import (
	"context"
	"fmt"
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/testutil"
	"github.com/da3-go/da3-go/model"
)

// TestIndependentBatch checks Model.Independent, which runs same-size images
// as one batched graph without cross-view attention: every image's depth,
// confidence and camera equal those of the image run alone (Depth), for the
// DA3 any-view fixture (global blocks and camera tokens per image) and DA2;
// images of another size go in their own batch; chunks smaller than the
// batch give the same results.
func TestIndependentBatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, gguf string
		res        int // processed size (small: the fixtures are tiny networks)
		images     []string
	}{
		{"da3-tiny", convertFixture(t, fixture(t, "da3-tiny"), convert.Options{}), 70, []string{
			"fixtures/da3-tiny/four/images/view0.png", "fixtures/da3-tiny/four/images/view1.png",
			"fixtures/da3-tiny/four/images/view2.png", "fixtures/da2-tiny/image.png", "fixtures/da3-tiny/four/images/view3.png",
		}},
		{"da2-tiny", convertDA2Tiny(t), 98, []string{"fixtures/da2-tiny/image.png", "fixtures/da3-tiny/four/images/view1.png", "fixtures/da2-tiny/image.png"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadModel(t, tc.gguf)
			var imgs []model.Image
			for _, p := range tc.images {
				im, err := imgio.Decode(p)
				require.NoError(t, err)
				imgs = append(imgs, im)
			}
			// A mirrored copy: same size, different content.
			imgs = append(imgs, mirror(imgs[0]))
			for _, chunk := range []int{0, 2} {
				opt := model.RunOptions{ChunkSize: chunk, ProcessRes: tc.res}
				got, err := m.Independent(ctx, imgs, opt)
				require.NoError(t, err)
				require.Len(t, got, len(imgs))
				for i, im := range imgs {
					want, err := m.Depth(ctx, im, opt)
					require.NoError(t, err)
					name := fmt.Sprintf("chunk %d image %d", chunk, i)
					require.Equal(t, want.Width, got[i].Width, name)
					require.Equal(t, want.Height, got[i].Height, name)
					testutil.AllClose(t, want.Depth, got[i].Depth, 1e-5, 1e-5)
					if want.Conf != nil {
						testutil.AllClose(t, want.Conf, got[i].Conf, 1e-5, 1e-5)
					}
					if want.Camera != nil {
						require.NotNil(t, got[i].Camera, name)
						for r := 0; r < 3; r++ {
							for c := 0; c < 4; c++ {
								assert.InDelta(t, want.Camera.Extrinsics[r][c], got[i].Camera.Extrinsics[r][c], 1e-5, name)
							}
						}
						assert.InDelta(t, want.Camera.Intrinsics[0][0], got[i].Camera.Intrinsics[0][0], 1e-3, name)
					}
				}
			}
		})
	}
}

// mirror is img flipped left to right.
func mirror(img image.Image) image.Image {
	b := img.Bounds()
	out := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.Set(b.Max.X-1-(x-b.Min.X), y, img.At(x, y))
		}
	}
	return out
}
