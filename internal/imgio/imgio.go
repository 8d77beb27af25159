// Package imgio decodes input images and writes depth/disparity maps (PFM, NPY, 8-bit grey PNG,
// colour-mapped PNG; the 16-bit PNG is export.EncodeDepthPNG16). Every writer is atomic: it writes a
// temporary file in the destination directory and renames it over the destination, removing the temporary
// file on any error, so a failed write never leaves a truncated output (nor destroys an existing one).
//
// Maps are row-major float32, top row first, w×h values.
package imgio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registered decoders (JPEG goes through internal/jpeg)
	_ "image/png"
	"io"

	_ "golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgproc"
	"github.com/da3-go/da3-go/internal/jpeg"
	"github.com/da3-go/da3-go/internal/safeio"
)

// Decode reads a JPEG, PNG, BMP, TIFF, WebP or GIF image as stored: the Exif orientation is not applied
// (see DecodeWithOrientation). JPEGs decode to the pixels libjpeg-turbo gives, which both reference
// pipelines read (internal/jpeg). The header's declared size is checked against the pixel budget
// (MaxPixels, DefaultMaxPixels unless SetMaxPixels changed it) before any pixel is decoded, a TIFF's
// strips and tiles and a WebP's bitstream are checked against the file, and the decoded size must equal
// the declared one. Errors name the file.
func Decode(path string) (image.Image, error) {
	img, _, err := DecodeWithOrientation(path)
	return img, err
}

// DecodeWithOrientation is Decode that also returns the JPEG's Exif orientation (1 for other formats and
// for JPEGs without one), to be applied with Orient where wanted.
func DecodeWithOrientation(path string) (image.Image, Orientation, error) {
	return decodeFile(path, processBudget())
}

// DecodeFileWithin is DecodeWithOrientation under the pixel budget maxPixels instead of the process's
// (MaxPixels); raise says in the error what raises it (a flag, an option).
func DecodeFileWithin(path string, maxPixels int64, raise string) (image.Image, Orientation, error) {
	return decodeFile(path, budget{maxPixels, raise})
}

func decodeFile(path string, b budget) (image.Image, Orientation, error) {
	data, err := readImageFile(path, 0)
	if err != nil {
		return nil, 0, err
	}
	return decode(data, path, b)
}

// DecodeHeader reads an image file's header as DecodeWithOrientation checks it, without decoding any
// pixel: a file that it refuses for its header (not an image, an absurd size) is refused here with the
// same error. Only the start of the file is read when the header is there (a long sequence's files need
// not be read whole to be checked).
func DecodeHeader(path string) (Header, error) {
	const prefix = 256 << 10
	data, err := readImageFile(path, prefix)
	if err != nil {
		return Header{}, err
	}
	hd, err := DecodeHeaderBytes(data, path)
	if err != nil && len(data) == prefix {
		if data, err = readImageFile(path, 0); err != nil {
			return Header{}, err
		}
		hd, err = DecodeHeaderBytes(data, path)
	}
	return hd, err
}

// readImageFile reads an input image file, a regular, non-empty file of at most jpeg.MaxFileSize bytes:
// all of it, or its first limit bytes when limit > 0.
func readImageFile(path string, limit int64) ([]byte, error) {
	f, st, err := safeio.Open(path) // never blocks on a FIFO
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	defer f.Close()
	if st.Size() == 0 {
		return nil, fmt.Errorf("image %s: empty file", path)
	}
	if st.Size() > jpeg.MaxFileSize {
		return nil, fmt.Errorf("image %s: file larger than %d bytes", path, jpeg.MaxFileSize)
	}
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", path, err)
	}
	return data, nil
}

// DecodeBytes decodes an image held in memory exactly as DecodeWithOrientation decodes a file; name labels
// errors.
func DecodeBytes(b []byte, name string) (image.Image, Orientation, error) {
	return DecodeBytesWithin(b, name, MaxPixels(), processBudget().raise)
}

// DecodeBytesWithin is DecodeBytes under the pixel budget maxPixels instead of the process's
// (MaxPixels); raise says in the error what raises it.
func DecodeBytesWithin(b []byte, name string, maxPixels int64, raise string) (image.Image, Orientation, error) {
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("image %s: empty", name)
	}
	return decode(b, name, budget{maxPixels, raise})
}

// Header is what an image's header says.
type Header struct {
	Width, Height int
	Format        string      // jpeg, png, bmp, tiff, webp, gif
	Orientation   Orientation // the JPEG's Exif orientation, 1 otherwise
}

// DecodeHeaderBytes reads the header of an image held in memory, as the decoders check it (size within
// the pixel budget, see Decode), without decoding any pixel.
func DecodeHeaderBytes(b []byte, name string) (hd Header, err error) {
	defer func() {
		if r := recover(); r != nil {
			hd, err = Header{}, fmt.Errorf("decode image header %s: corrupt data (decoder panic: %v)", name, r)
		}
	}()
	return header(b, name, processBudget())
}

func header(data []byte, name string, b budget) (Header, error) {
	hd := Header{Orientation: OrientNormal}
	if bytes.HasPrefix(data, []byte{0xff, 0xd8}) {
		h, err := jpeg.DecodeHeaderBytes(data)
		if err != nil {
			return Header{}, fmt.Errorf("decode image header %s (jpeg): %w", name, err)
		}
		hd = Header{Width: h.Width, Height: h.Height, Format: "jpeg", Orientation: Orientation(max(h.Orientation, 1))}
	} else {
		var cfg image.Config
		var format string
		var err error
		if isTIFF(data) {
			// Decoded from a ReaderAt, not through image.DecodeConfig's bufio.Reader: given a plain
			// reader, x/image/tiff buffers everything up to the farthest offset the file names.
			if err := checkTIFF(data); err != nil {
				return Header{}, fmt.Errorf("decode image header %s (tiff): %w", name, err)
			}
			cfg, err = tiff.DecodeConfig(bytes.NewReader(data))
			format = "tiff"
		} else {
			if err := checkWebP(data, b); err != nil {
				return Header{}, fmt.Errorf("decode image header %s (webp): %w", name, err)
			}
			cfg, format, err = image.DecodeConfig(bytes.NewReader(data))
		}
		if err != nil {
			if errors.Is(err, image.ErrFormat) {
				return Header{}, fmt.Errorf("decode image %s: unknown format (want JPEG, PNG, BMP, TIFF, WebP or GIF)", name)
			}
			return Header{}, fmt.Errorf("decode image header %s: %w", name, err)
		}
		hd.Width, hd.Height, hd.Format = cfg.Width, cfg.Height, format
	}
	if err := checkBudget(hd.Width, hd.Height, b); err != nil {
		return Header{}, fmt.Errorf("image %s (%s): %w", name, hd.Format, err)
	}
	return hd, nil
}

func decode(data []byte, name string, b budget) (img image.Image, o Orientation, err error) {
	// Some decoders have panicked on hostile input in the past: never let that escape.
	defer func() {
		if r := recover(); r != nil {
			img, o, err = nil, 0, fmt.Errorf("decode image %s: corrupt data (decoder panic: %v)", name, r)
		}
	}()
	hd, err := header(data, name, b)
	if err != nil {
		return nil, 0, err
	}
	switch hd.Format {
	case "jpeg":
		img, err = jpeg.DecodeBytes(data)
	case "tiff":
		img, err = tiff.Decode(bytes.NewReader(data)) // a ReaderAt (see header)
	default:
		img, _, err = image.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("decode image %s (%s): %w", name, hd.Format, err)
	}
	if err := checkBounds(name, hd.Format, img, hd.Width, hd.Height); err != nil {
		return nil, 0, err
	}
	return img, hd.Orientation, nil
}

func checkBounds(name, format string, img image.Image, w, h int) error {
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		return fmt.Errorf("image %s (%s): decoded %dx%d but header says %dx%d", name, format, b.Dx(), b.Dy(), w, h)
	}
	return nil
}

// writeAtomic streams write's output into a temporary file next to path and renames it to path once
// everything (including Close) succeeded (atomicfile.Write: only a regular file is replaced). On error
// the temporary file is removed and path is untouched.
func writeAtomic(path string, write func(w io.Writer) error) error {
	return atomicfile.Write(path, write)
}

// WriteAtomic writes path through a temporary file in the same directory that is renamed into place once
// write and the file's Close succeeded, so path is never left half-written (nor an existing file destroyed).
// write's output is buffered. It is atomicfile.Write, whose rules apply.
func WriteAtomic(path string, write func(w io.Writer) error) error {
	return atomicfile.Write(path, write)
}

// Pending is an output complete in a temporary file but not yet visible (atomicfile.Pending).
type Pending = atomicfile.Pending

// WritePending writes write's output into a temporary file next to path and returns it uncommitted
// (atomicfile.WritePending).
func WritePending(path string, write func(w io.Writer) error) (*Pending, error) {
	return atomicfile.WritePending(path, write)
}

// RemovePending removes the temporary files of the writes in progress (atomicfile.RemovePending).
func RemovePending() { atomicfile.RemovePending() }

func checkMap(data []float32, w, h int) error {
	if err := imgproc.CheckSize(w, h); err != nil {
		return err
	}
	if len(data) != w*h {
		return fmt.Errorf("%dx%d map needs %d values, got %d", w, h, w*h, len(data))
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory that is renamed into place, so path is never left half-written.
func WriteFileAtomic(path string, data []byte) error { return atomicfile.WriteFile(path, data) }
