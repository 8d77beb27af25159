package testutil

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/da3-go/da3-go/lens"
)

// FisheyeParams is the fisheye lens of the tests' 64×48 images (OPENCV_FISHEYE, COLMAP's order).
var FisheyeParams = []float64{30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003}

// FisheyeImage renders a textured plane 2 units away through the test fisheye lens: a 64×48 image whose
// texture seed shifts.
func FisheyeImage(seed float64) (*image.NRGBA, error) {
	c, err := lens.New(lens.OpenCVFisheye, 64, 48, FisheyeParams)
	if err != nil {
		return nil, err
	}
	img := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			r, ok := c.Unproject(float64(x)+0.5, float64(y)+0.5)
			if !ok {
				return nil, fmt.Errorf("fisheye test image: pixel (%d, %d) has no ray", x, y)
			}
			s := 2 / r[2]
			v := 0.5 + 0.5*math.Sin(3*r[0]*s+seed)*math.Cos(2*r[1]*s)
			img.SetNRGBA(x, y, color.NRGBA{uint8(40 + 200*v), uint8(200 - 150*v), uint8(100 + 50*v), 255})
		}
	}
	return img, nil
}
