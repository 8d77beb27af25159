package imagefile_test

import (
	"fmt"

	"github.com/da3-go/da3-go/imagefile"
)

// A phone photo stored sideways (Exif orientation 6: rotate 90° clockwise to show it upright): decoded as
// stored, as Depth Anything 3's reference sees it, and turned upright, as Depth Anything V2's does.
func ExampleDecodeFile() {
	const path = "../internal/jpeg/testdata/exif_o6.jpg"
	stored, err := imagefile.DecodeFile(path, imagefile.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	upright, err := imagefile.DecodeFile(path, imagefile.Options{ExifRotate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stored:", stored.Bounds().Size())
	fmt.Println("upright:", upright.Bounds().Size())

	_, err = imagefile.DecodeFile(path, imagefile.Options{MaxPixels: 100})
	fmt.Println(err)
	// Output:
	// stored: (24,16)
	// upright: (16,24)
	// image ../internal/jpeg/testdata/exif_o6.jpg (jpeg): image size 24x16: 384 pixels exceeds the budget of 100 (raise it with imagefile.Options.MaxPixels)
}
