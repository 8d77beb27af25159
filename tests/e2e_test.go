package tests

import (
	"context"
	"fmt"
	"image"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/model"
)

// End to end from image files: decode, preprocess exactly like the reference,
// run, and compare with the reference depth. This covers preprocessing too
// (the reference resizes with OpenCV; the default cubic model reproduces its
// IPP path to within rare one-LSB ties).
func TestEndToEndDA2FromImage(t *testing.T) {
	dir := fixture(t, "da2-tiny")
	meta := readMeta(t, dir+"/meta.json")
	m := loadModel(t, convertFixture(t, dir+"/model.pth", convert.Options{Heads: int(meta["heads"].(float64)), OutLayers: metaInts(meta, "out_layers")}))
	img, err := imgio.Decode(dir + "/image.png")
	require.NoError(t, err)
	ref := refTensors(t, dir+"/ref.safetensors")
	res, err := m.Depth(context.Background(), img, model.RunOptions{ProcessRes: int(meta["input_size"].(float64))})
	require.NoError(t, err)
	b := img.Bounds()
	require.Equal(t, b.Dx(), res.Width, "depth resized back to the image size")
	require.Equal(t, b.Dy(), res.Height)
	gate(t, "depth_orig (from image)", ref["depth_orig"].Data, res.Depth, 0.99999, 1e-4)

	res, err = m.Depth(context.Background(), img, model.RunOptions{ProcessRes: int(meta["input_size"].(float64)), ProcessedSize: true})
	require.NoError(t, err)
	gate(t, "depth (from image, processed size)", ref["depth"].Data, res.Depth, 0.99999, 1e-4)
}

func TestEndToEndDA3FromImages(t *testing.T) {
	dir := fixture(t, "da3-tiny")
	m := loadModel(t, convertFixture(t, dir, convert.Options{}))
	for _, tc := range []string{"one", "two", "four"} {
		t.Run(tc, func(t *testing.T) {
			meta := readMeta(t, dir+"/"+tc+"/meta.json")
			var imgs []image.Image
			for _, p := range meta["images"].([]any) {
				img, err := imgio.Decode(filepath.Join(dir, p.(string)))
				require.NoError(t, err)
				imgs = append(imgs, img)
			}
			ref := refTensors(t, dir+"/"+tc+"/ref.safetensors")
			res, err := m.MultiView(context.Background(), imgs, model.RunOptions{ProcessRes: int(meta["process_res"].(float64)), ProcessedSize: true})
			require.NoError(t, err)
			var depth, conf []float32
			for i, r := range res {
				depth = append(depth, r.Depth...)
				conf = append(conf, r.Conf...)
				require.NotNil(t, r.Camera, "view %d", i)
			}
			gate(t, fmt.Sprintf("%s depth (from images)", tc), ref["depth"].Data, depth, 0.99999, 1e-4)
			gate(t, fmt.Sprintf("%s conf (from images)", tc), ref["conf"].Data, conf, 0.99999, 1e-4)
		})
	}
}
