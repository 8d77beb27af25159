package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image/png"
	"math"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/internal/imgio"
)

// DepthResponse is the answer of POST /v1/depth. Field names follow LocalAI's
// depth response (width, height, depth, confidence, sky, extrinsics,
// intrinsics, num_points, points, point_colors, is_metric); maps are encoded
// objects instead of JSON number arrays, and every view of a scene has its
// own entry in Views.
type DepthResponse struct {
	need int64 // the request's memory estimate (checkBudget)

	Model string `json:"model"`
	// IsMetric: depth is in metres.
	IsMetric bool `json:"is_metric"`
	// Unit of depth: relative (larger = farther, unknown scale), disparity
	// (DA2 relative models: larger = nearer), focal-normalised (DA3
	// metric-large without intrinsics: metres = focal · depth / 300) or
	// metres.
	Unit string `json:"unit"`
	// Width and Height of the first view's maps.
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Views  []View `json:"views"`
	// NumPoints, Points (base64 little-endian float32 xyz, world frame) and
	// PointColors (base64 uint8 rgb) with include_points.
	NumPoints   int    `json:"num_points,omitempty"`
	Points      string `json:"points,omitempty"`
	PointColors string `json:"point_colors,omitempty"`
	// Exports holds the requested scene files by name.
	Exports map[string]Export `json:"exports,omitempty"`
	Timing  Timing            `json:"timing_ms"`
}

// View is one view's output.
type View struct {
	Width           int  `json:"width"`
	Height          int  `json:"height"`
	ProcessedWidth  int  `json:"processed_width"`
	ProcessedHeight int  `json:"processed_height"`
	Depth           *Map `json:"depth,omitempty"`
	Confidence      *Map `json:"confidence,omitempty"`
	Sky             *Map `json:"sky,omitempty"`
	// Extrinsics: world-to-camera [R | t] (3×4, OpenCV axes); Intrinsics for
	// the processed image and IntrinsicsOriginal for the input image, in
	// pixels (as da3-go pose writes them).
	Extrinsics         *[3][4]float64 `json:"extrinsics,omitempty"`
	Intrinsics         *[3][3]float64 `json:"intrinsics,omitempty"`
	IntrinsicsOriginal *[3][3]float64 `json:"intrinsics_original,omitempty"`
	// AlignScale: with given cameras, the depth was divided by this scale to
	// put it in their frame.
	AlignScale float64 `json:"align_scale,omitempty"`
	// Alignment is the fit of align_points that brought this view to metres.
	Alignment *Alignment `json:"alignment,omitempty"`
	// Undistorted is the pinhole view the image was undistorted to for the
	// model (camera_model with distortion).
	Undistorted *Undistorted `json:"undistorted,omitempty"`
}

// Undistorted is the pinhole view an image taken through a lens was
// undistorted to: same centre and axes as the lens, the input image's size.
type Undistorted struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	// Intrinsics of the view, 3×3, in its pixels.
	Intrinsics [3][3]float64 `json:"intrinsics"`
	// MappedBack: the maps, the cameras and the exports were mapped back to
	// the input image's pixels (the cameras' intrinsics are the lens's
	// pinhole part); false: they stay in this view (keep_undistorted).
	MappedBack bool `json:"mapped_back"`
}

// Alignment is a fit of metric measurements: metres = scale · depth, or for
// disparity 1 / (scale · disparity + shift); residual is the inliers' median
// relative error, inlier_share their share of the measurements.
type Alignment struct {
	Disparity   bool    `json:"disparity,omitempty"`
	Scale       float64 `json:"scale"`
	Shift       float64 `json:"shift,omitempty"`
	Residual    float64 `json:"residual"`
	InlierShare float64 `json:"inlier_share"`
	Samples     int     `json:"samples"`
}

// Map is one map in the encodings asked for (base64), row-major, top row
// first, Width × Height values.
type Map struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	F32    string `json:"f32,omitempty"`
	NPY    string `json:"npy,omitempty"`
	PNG    string `json:"png,omitempty"`
	PNG16  string `json:"png16,omitempty"`
}

// Export is one scene file.
type Export struct {
	MediaType string `json:"media_type"`
	Filename  string `json:"filename"`
	Data      string `json:"data"` // base64
}

// Timing is where the request's time went, in milliseconds.
type Timing struct {
	Queue  float64 `json:"queue"`
	Decode float64 `json:"decode"`
	Run    float64 `json:"run"`
	Encode float64 `json:"encode"`
	Total  float64 `json:"total"`
}

var b64 = base64.StdEncoding

// encodeMap encodes dm in each format; invert colour-maps low values warm
// (depth: near = warm). png16 keeps the values (export.EncodeDepthPNG16).
func encodeMap(dm export.DepthMap, formats []string, cmap imgio.Colormap, png16Step float64, invert bool) (*Map, error) {
	data, w, h := dm.Depth, dm.Width, dm.Height
	m := &Map{Width: w, Height: h}
	for _, f := range formats {
		var buf bytes.Buffer
		switch f {
		case "f32":
			m.F32 = b64.EncodeToString(float32Bytes(data))
			continue
		case "npy":
			if err := imgio.EncodeNPY(&buf, data, h, w); err != nil {
				return nil, err
			}
			m.NPY = b64.EncodeToString(buf.Bytes())
			continue
		case "png16":
			if err := export.EncodeDepthPNG16(&buf, dm, export.PNG16Options{Invert: invert, Compression: png.BestSpeed, MetricStep: png16Step}); err != nil {
				return nil, err
			}
			m.PNG16 = b64.EncodeToString(buf.Bytes())
			continue
		}
		img, err := imgio.Colorize(data, w, h, cmap, invert)
		if err != nil {
			return nil, err
		}
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&buf, img); err != nil {
			return nil, err
		}
		m.PNG = b64.EncodeToString(buf.Bytes())
	}
	return m, nil
}

// float32Bytes is data as little-endian bytes.
func float32Bytes(data []float32) []byte {
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
