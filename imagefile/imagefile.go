// Package imagefile decodes input images exactly as the da3-go command and server do, for library
// users who feed images to package model.
//
// Use it instead of image.Decode: the reference pipelines of Depth Anything read photos through
// libjpeg-turbo, and Go's image/jpeg gives other pixels (another inverse DCT, replicated instead of
// interpolated chroma, other YCbCr→RGB rounding: tens of levels apart on real photos), which changes the
// depth. JPEGs decode here to libjpeg-turbo's pixels; PNG, BMP, TIFF, WebP and GIF use the Go decoders.
// Every image's header is checked against a pixel budget before any pixel is decoded, and hostile TIFF
// and WebP files that would make the Go decoders allocate gigabytes are refused.
//
// The command and the server decode through the same implementation (the package internal/imgio, of
// which this package is a thin wrapper), so a library program that decodes with DecodeFile and runs
// model.Model.Depth gets the depth the command writes for the same file and flags.
package imagefile

import (
	"fmt"
	"image"
	"io"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/jpeg"
)

// DefaultMaxPixels is the pixel budget when Options.MaxPixels is 0 (100 Mi pixels, as the command's
// -max-image-pixels default). Each side is also bounded by 16384 pixels, whatever the budget.
const DefaultMaxPixels = imgio.DefaultMaxPixels

// MaxSize bounds the bytes of an encoded image (1 GiB).
const MaxSize = jpeg.MaxFileSize

// ErrTooManyPixels is wrapped by the error for an image whose header declares more pixels than the
// budget or a side longer than 16384.
var ErrTooManyPixels = imgio.ErrTooManyPixels

// Options configure Decode and DecodeFile. The zero value decodes the image as stored, under
// DefaultMaxPixels.
type Options struct {
	// ExifRotate turns the image upright by its JPEG Exif orientation (phone photos are stored as
	// the sensor read them, with the rotation in a tag). The references differ, and the command follows
	// the model's: Depth Anything V2 (cv2.imread) applies it, Depth Anything 3 (PIL's Image.open)
	// does not. false keeps the pixels as stored. A rotated image is an opaque *image.RGBA (or
	// *image.Gray for grey JPEGs).
	ExifRotate bool
	// MaxPixels bounds width × height as the header declares it; 0 means DefaultMaxPixels. Memory is
	// about 4 bytes per pixel for the decoded image.
	MaxPixels int64
}

// budget is the pixel budget of o.
func (o Options) budget() int64 {
	if o.MaxPixels <= 0 {
		return DefaultMaxPixels
	}
	return o.MaxPixels
}

const raise = "imagefile.Options.MaxPixels"

// Decode reads a JPEG, PNG, BMP, TIFF, WebP or GIF image from r (at most MaxSize bytes, read whole).
func Decode(r io.Reader, opts Options) (image.Image, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("image larger than %d bytes", MaxSize)
	}
	img, o, err := imgio.DecodeBytesWithin(data, "from reader", opts.budget(), raise)
	return orient(img, o, opts, err)
}

// DecodeFile reads the image file at path, a regular file (never a FIFO or device) of at most MaxSize
// bytes. Errors name the file.
func DecodeFile(path string, opts Options) (image.Image, error) {
	img, o, err := imgio.DecodeFileWithin(path, opts.budget(), raise)
	return orient(img, o, opts, err)
}

func orient(img image.Image, o imgio.Orientation, opts Options, err error) (image.Image, error) {
	if err != nil {
		return nil, err
	}
	if opts.ExifRotate {
		img = imgio.Orient(img, o)
	}
	return img, nil
}
