package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/lens"
)

// DepthRequest is the body of POST /v1/depth: JSON with base64 images, or a
// multipart form whose file parts are the images and whose other fields carry
// the same names as the JSON (lists comma-separated or repeated). It follows
// LocalAI's depth request (model, image, include_*, points_conf_thresh,
// exports) and adds several views, the CLI's options and the map encodings.
type DepthRequest struct {
	// Model selects a loaded model by name; empty selects the first.
	Model string `json:"model,omitempty"`
	// Image is one image, base64 (standard or URL alphabet, padding
	// optional) or a data: URI. URLs are not fetched.
	Image string `json:"image,omitempty"`
	// Images are several views of one scene (DA3 any-view models), or
	// independent images with Independent (or with models that take one view).
	Images []string `json:"images,omitempty"`

	// ProcessRes is the network's processed resolution (0: the model's default).
	ProcessRes int `json:"process_res,omitempty"`
	// ProcessResMethod: upper_bound_resize (default), lower_bound_resize,
	// upper_bound_crop, lower_bound_crop.
	ProcessResMethod string `json:"process_res_method,omitempty"`
	// RefView for three or more views: saddle_balanced (default), first, middle.
	RefView string `json:"ref_view,omitempty"`
	// Independent runs each image alone instead of as views of one scene.
	Independent bool `json:"independent,omitempty"`
	// ProcessedSize returns the maps at the network's processed size instead
	// of the image size.
	ProcessedSize bool `json:"processed_size,omitempty"`
	// ExifRotate turns JPEGs upright by their Exif orientation (phone
	// photos); unset: as the model's reference pipeline does (GET /v1/models
	// exif_rotate: DA2 models yes, DA3 no).
	ExifRotate *bool `json:"exif_rotate,omitempty"`
	// Intrinsics [fx, fy, cx, cy] of the camera of the input images, in their
	// pixels: the DA3 metric model (metric-large) then gives metres.
	Intrinsics []float64 `json:"intrinsics,omitempty"`

	// AlignPoints are metric depth measurements (metres) at pixels of the
	// input images (LiDAR, ToF, stereo points): depth, points, exports and
	// the cameras' translations come back in metres, fitted robustly to them
	// (one fit for a scene, one per image with independent; each view's
	// alignment reports the fit). Not with cameras or the gs_ply export.
	AlignPoints []AlignPoint `json:"align_points,omitempty"`

	// Tile runs each image on overlapping tiles at full detail plus one
	// global pass, merged into one map at the image size (detail in large
	// photos): "on", "auto" (images whose longer side is at least 4× the
	// process resolution) or "off" (default). Each image runs alone
	// (several images of a DA3 any-view model need independent); not with
	// processed_size, include_points, exports or cameras. TileSize is the
	// tiles' side in pixels of the image (0: a quarter of the longer side,
	// within 1–4× the process resolution).
	Tile     string `json:"tile,omitempty"`
	TileSize int    `json:"tile_size,omitempty"`

	// Outputs wanted. With none of the include_* flags set, depth,
	// confidence, pose and sky are returned (those the model has).
	IncludeDepth      bool `json:"include_depth,omitempty"`
	IncludeConfidence bool `json:"include_confidence,omitempty"`
	IncludePose       bool `json:"include_pose,omitempty"`
	IncludeSky        bool `json:"include_sky,omitempty"`
	// IncludePoints returns the scene's point cloud at the processed
	// resolution, world frame, with colours: the pixels whose confidence is
	// at least PointsConfThresh (clamped to the confidence's range), or with
	// no threshold the official exporter's selection (confidence ≥ 1.05
	// clamped to its 40th–90th percentiles); sky pixels are left out.
	IncludePoints    bool    `json:"include_points,omitempty"`
	PointsConfThresh float32 `json:"points_conf_thresh,omitempty"`
	// Exports are scene files returned base64 in the response's exports:
	// glb (points and camera frusta), ply, npz, mini_npz, colmap (zip of the
	// binary model), mesh_ply and mesh_glb (the views' depth fused into one
	// triangle mesh), as da3-go reconstruct writes them.
	Exports []string `json:"exports,omitempty"`

	// MapFormats are the encodings of each map: f32 (default: little-endian
	// float32, row-major, base64), npy, png (colour-mapped 8-bit), png16
	// (16-bit grey keeping the values: metric depth in steps of png16_step,
	// other maps min-max normalised with the mapping back in tEXt chunks;
	// read with export.DecodeDepthPNG16).
	MapFormats []string `json:"map_formats,omitempty"`
	// PNG16Step is the metres a level of a metric png16 map stands for:
	// 0.001 (default, millimetres: up to 65.535 m), 0.00390625 (KITTI's
	// 1/256 m: up to 256 m) or any positive step.
	PNG16Step float64 `json:"png16_step,omitempty"`
	// Colormap of png maps: turbo (default) or gray.
	Colormap string `json:"colormap,omitempty"`

	// RayPose estimates the cameras from the auxiliary ray head instead of
	// the camera decoder (models converted with -with-aux; GET /v1/models
	// ray_pose), RaySeed seeds its RANSAC.
	RayPose bool   `json:"ray_pose,omitempty"`
	RaySeed uint64 `json:"ray_seed,omitempty"`
	// Cameras are known cameras of the images, one per image: the DA3
	// any-view model is conditioned on them and the results are in their
	// frame and scale. In a multipart form, a JSON array.
	Cameras []GivenCamera `json:"cameras,omitempty"`

	// CameraModel is the COLMAP camera model of the input images' lens, as
	// da3-go's -camera-model takes it (opencv, full_opencv, opencv_fisheye or
	// fisheye, radial, …, any case), and CameraParams its parameters in
	// COLMAP's order, in pixels of the input images (opencv: fx, fy, cx, cy,
	// k1, k2, p1, p2; fisheye: fx, fy, cx, cy, k1…k4). Each image is
	// undistorted to a pinhole view for the model and the maps, cameras and
	// exports mapped back to the input images' pixels (NaN where the pinhole
	// view does not reach) unless KeepUndistorted. Not with cameras or
	// intrinsics (the parameters hold the intrinsics).
	CameraModel  string    `json:"camera_model,omitempty"`
	CameraParams []float64 `json:"camera_params,omitempty"`
	// KeepUndistorted leaves the outputs in the undistorted pinhole view
	// (each view's undistorted.intrinsics).
	KeepUndistorted bool `json:"keep_undistorted,omitempty"`
	// UndistortBalance chooses the pinhole view: 0 (default) fills it with
	// the image (its distorted rim is cut off), 1 keeps the whole image
	// (black corners), or between. UndistortFOV caps its field of view in
	// degrees (0: 150; at most 179).
	UndistortBalance float64 `json:"undistort_balance,omitempty"`
	UndistortFOV     float64 `json:"undistort_fov,omitempty"`
}

// GivenCamera is one image's known camera.
type GivenCamera struct {
	// Extrinsics: world-to-camera [R | t], 3×4, OpenCV axes.
	Extrinsics [3][4]float64 `json:"extrinsics"`
	// Intrinsics [fx, fy, cx, cy] in pixels of the original image.
	Intrinsics [4]float64 `json:"intrinsics"`
}

// mapFormats are the accepted map encodings.
var mapFormats = []string{"f32", "npy", "png", "png16"}

// parsed is a validated request: the options and the undecoded images.
type parsed struct {
	req    DepthRequest
	images [][]byte
	names  []string           // per image, for error messages
	sizes  []image.Point      // per image, from its header (validate)
	lens   *lens.Undistorters // camera_model's (validate), nil without
}

// readRequest reads and validates a request body (JSON or multipart) of at
// most limit bytes.
func readRequest(w http.ResponseWriter, r *http.Request, limit int64) (*parsed, *apiError) {
	if r.ContentLength > limit {
		return nil, tooLarge("request body of %d bytes exceeds the limit of %d bytes (-max-body)", r.ContentLength, limit)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil && r.Header.Get("Content-Type") != "" {
		return nil, errorf(http.StatusUnsupportedMediaType, kindMediaType, "bad Content-Type %q: %v", r.Header.Get("Content-Type"), err)
	}
	var p *parsed
	var aerr *apiError
	switch ct {
	case "application/json", "":
		p, aerr = readJSON(r.Body, limit)
	case "multipart/form-data":
		p, aerr = readMultipart(r.Body, params["boundary"])
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, kindMediaType, "unsupported Content-Type %q: send application/json or multipart/form-data", ct)
	}
	if aerr != nil {
		return nil, aerr
	}
	return p, nil
}

// bodyError turns a read error into the answer: 413 past the size limit, else 400.
func bodyError(what string, err error) *apiError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge("request body exceeds the limit of %d bytes (-max-body)", mbe.Limit)
	}
	return badRequest("%s: %v", what, err)
}

func readJSON(body io.Reader, limit int64) (*parsed, *apiError) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req DepthRequest
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyError("", err)
		}
		if errors.Is(err, io.EOF) {
			return nil, badRequest("empty request body: send a JSON object with \"image\" or \"images\"")
		}
		return nil, badRequest("invalid JSON request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("invalid JSON request: data after the JSON object")
	}
	p := &parsed{req: req}
	all := req.Images
	if req.Image != "" {
		all = append([]string{req.Image}, all...)
	}
	for i, s := range all {
		b, err := decodeBase64Image(s)
		if err != nil {
			return nil, badRequest("image %d: %v", i, err)
		}
		p.images = append(p.images, b)
		p.names = append(p.names, fmt.Sprintf("%d", i))
	}
	p.req.Image, p.req.Images = "", nil
	return p, nil
}

// decodeBase64Image decodes a base64 image or a data: URI.
func decodeBase64Image(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return nil, errors.New("URLs are not fetched: send the image bytes base64-encoded")
	}
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return nil, errors.New("data URI is not base64 (want data:image/...;base64,...)")
		}
		s = data
	}
	if s == "" {
		return nil, errors.New("empty")
	}
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %v", err)
	}
	return b, nil
}

// maxFieldBytes bounds a multipart text field.
const maxFieldBytes = 64 << 10

func readMultipart(body io.Reader, boundary string) (*parsed, *apiError) {
	if boundary == "" {
		return nil, badRequest("multipart/form-data without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	p := &parsed{}
	fields := map[string][]string{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyError("reading multipart body", err)
		}
		name := part.FormName()
		if part.FileName() != "" || name == "image" || name == "images" {
			b, err := io.ReadAll(part)
			if err != nil {
				return nil, bodyError("reading image part", err)
			}
			label := part.FileName()
			if label == "" {
				label = fmt.Sprintf("%d", len(p.images))
			}
			p.images = append(p.images, b)
			p.names = append(p.names, label)
			continue
		}
		b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil {
			return nil, bodyError("reading field "+name, err)
		}
		if len(b) > maxFieldBytes {
			return nil, badRequest("field %q is longer than %d bytes", name, maxFieldBytes)
		}
		fields[name] = append(fields[name], string(b))
	}
	if err := setFields(&p.req, fields); err != nil {
		return nil, err
	}
	return p, nil
}

// setFields fills req from form fields named by its JSON tags.
func setFields(req *DepthRequest, fields map[string][]string) *apiError {
	v := reflect.ValueOf(req).Elem()
	t := v.Type()
	byName := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		byName[name] = i
	}
	for name, vals := range fields {
		i, ok := byName[name]
		if !ok || name == "image" || name == "images" {
			return badRequest("unknown field %q", name)
		}
		if err := setField(v.Field(i), name, vals); err != nil {
			return err
		}
	}
	return nil
}

// setField sets a request field from the values of its form field (the
// last one, but for lists).
func setField(f reflect.Value, name string, vals []string) *apiError {
	last := strings.TrimSpace(vals[len(vals)-1])
	switch f.Kind() {
	case reflect.String:
		f.SetString(last)
	case reflect.Bool:
		b, err := strconv.ParseBool(last)
		if err != nil {
			return badRequest("field %q: %q is not a boolean", name, last)
		}
		f.SetBool(b)
	case reflect.Pointer: // *bool
		b, err := strconv.ParseBool(last)
		if err != nil {
			return badRequest("field %q: %q is not a boolean", name, last)
		}
		f.Set(reflect.ValueOf(&b))
	case reflect.Int:
		n, err := strconv.Atoi(last)
		if err != nil {
			return badRequest("field %q: %q is not an integer", name, last)
		}
		f.SetInt(int64(n))
	case reflect.Uint64:
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			return badRequest("field %q: %q is not an unsigned integer", name, last)
		}
		f.SetUint(n)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(last, f.Type().Bits())
		if err != nil {
			return badRequest("field %q: %q is not a number", name, last)
		}
		f.SetFloat(x)
	case reflect.Slice:
		return setListField(f, name, vals)
	default:
		panic("server: unhandled request field kind " + f.Kind().String())
	}
	return nil
}

// setListField sets a slice field: a JSON array of structs (the last
// value), or a list of strings or numbers, repeated and/or comma-separated.
func setListField(f reflect.Value, name string, vals []string) *apiError {
	if f.Type().Elem().Kind() == reflect.Struct { // a JSON array
		last := strings.TrimSpace(vals[len(vals)-1])
		if err := json.Unmarshal([]byte(last), f.Addr().Interface()); err != nil {
			return badRequest("field %q: not a JSON array of %s: %v", name, f.Type().Elem().Name(), err)
		}
		return nil
	}
	// repeated and/or comma-separated
	var list []string
	for _, s := range vals {
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				list = append(list, e)
			}
		}
	}
	switch f.Type().Elem().Kind() {
	case reflect.String:
		f.Set(reflect.ValueOf(list))
	case reflect.Float64:
		nums := make([]float64, len(list))
		for i, e := range list {
			x, err := strconv.ParseFloat(e, 64)
			if err != nil {
				return badRequest("field %q: %q is not a number", name, e)
			}
			nums[i] = x
		}
		f.Set(reflect.ValueOf(nums))
	default:
		panic("server: unhandled request list field " + name)
	}
	return nil
}

// limits are the per-request limits of the server.
type limits struct {
	maxViews      int
	maxPixels     int64 // sum over the request's images
	maxProcessRes int
}

// validate checks the options and the images' headers (format and size)
// without decoding any pixel.
func (p *parsed) validate(lim limits, m ModelInfo, canExport func(string) bool) *apiError {
	if err := p.validateOptions(lim); err != nil {
		return err
	}
	if err := p.validateOutputs(m, canExport); err != nil {
		return err
	}
	if err := p.validateLens(); err != nil {
		return err
	}
	if err := p.validateIntrinsics(m); err != nil {
		return err
	}
	if err := p.validateAlign(); err != nil {
		return err
	}
	if err := p.validateTile(m); err != nil {
		return err
	}
	if err := p.validateModelOutputs(m); err != nil {
		return err
	}
	return p.readSizes(lim)
}

// validateOptions checks the number of images and the run options.
func (p *parsed) validateOptions(lim limits) *apiError {
	q := &p.req
	if len(p.images) == 0 {
		return badRequest("no image: send \"image\" (or \"images\") as base64 in JSON, or image files in a multipart form")
	}
	if len(p.images) > lim.maxViews {
		return tooLarge("%d images exceed the limit of %d per request (-max-views)", len(p.images), lim.maxViews)
	}
	if q.ProcessRes < 0 || q.ProcessRes > lim.maxProcessRes { // below the patch size: the model refuses it (422)
		return badRequest("process_res %d out of range (0..%d, 0 for the model's default)", q.ProcessRes, lim.maxProcessRes)
	}
	if _, err := p.runOptions().modelOptions(); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// validateOutputs checks the map formats, the colour map, the exports
// (known, and possible with the model) and the point clouds' threshold.
func (p *parsed) validateOutputs(m ModelInfo, canExport func(string) bool) *apiError {
	q := &p.req
	for _, f := range q.MapFormats {
		if !slices.Contains(mapFormats, f) {
			return badRequest("unknown map format %q (%s)", f, strings.Join(mapFormats, ", "))
		}
	}
	if _, err := imgio.ParseColormap(orDefault(q.Colormap, "turbo")); err != nil {
		return badRequest("%v", err)
	}
	for _, e := range q.Exports {
		if !canExport(e) {
			return badRequest("unknown export %q (%s)", e, strings.Join(allExports(), ", "))
		}
		if exporters[e].camera && !m.Camera {
			return unprocessable("model %q (%s) has no camera head: the %s export needs a DA3 any-view model", m.Name, m.Arch, e)
		}
		if gaussianExport(e) && !m.Gaussians {
			return unprocessable("model %q (%s) has no Gaussian head: %s needs DA3-GIANT", m.Name, m.Arch, e)
		}
		if e == "gs_video" && !haveFFmpeg() {
			return unprocessable("the gs_video export needs ffmpeg, which this server does not have")
		}
	}
	if q.PointsConfThresh < 0 || q.PointsConfThresh != q.PointsConfThresh {
		return badRequest("points_conf_thresh must be a number ≥ 0")
	}
	if q.PNG16Step < 0 || q.PNG16Step != q.PNG16Step || math.IsInf(q.PNG16Step, 0) {
		return badRequest("png16_step must be a positive number of metres")
	}
	return nil
}

// validateIntrinsics checks given intrinsics, and that the model uses them.
func (p *parsed) validateIntrinsics(m ModelInfo) *apiError {
	k := p.req.Intrinsics
	if k == nil {
		return nil
	}
	if len(k) != 4 {
		return badRequest("intrinsics: want [fx, fy, cx, cy] in pixels of the input images, got %d numbers", len(k))
	}
	for _, v := range k {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return badRequest("intrinsics: %v is not finite", k)
		}
	}
	if !(k[0] > 0 && k[1] > 0) {
		return badRequest("intrinsics: focal lengths fx %g, fy %g must be positive pixels", k[0], k[1])
	}
	if !m.Intrinsics {
		return unprocessable("model %q (%s, %s depth) does not use intrinsics: only the DA3 metric model (metric-large) turns its output into metres with them", m.Name, m.Arch, m.Unit)
	}
	return nil
}

// validateModelOutputs checks that the model gives the outputs asked for
// and takes the given cameras.
func (p *parsed) validateModelOutputs(m ModelInfo) *apiError {
	q := &p.req
	if q.IncludeConfidence && !m.Confidence {
		return unprocessable("model %q (%s) has no confidence output", m.Name, m.Arch)
	}
	if q.IncludeSky && !m.Sky {
		return unprocessable("model %q (%s) has no sky output", m.Name, m.Arch)
	}
	if q.RayPose && !m.RayPose {
		return unprocessable("model %q (%s) cannot estimate poses from rays: ray_pose needs a DA3 any-view file converted with `da3-go convert -with-aux`", m.Name, m.Arch)
	}
	if q.Cameras != nil {
		if !m.Camera {
			return unprocessable("model %q (%s) cannot take given cameras: they need a DA3 any-view model", m.Name, m.Arch)
		}
		if len(q.Cameras) != len(p.images) {
			return badRequest("cameras: %d cameras for %d images (one per image)", len(q.Cameras), len(p.images))
		}
	}
	if (q.IncludePose || q.IncludePoints) && !m.Camera {
		return unprocessable("model %q (%s) has no camera head: poses and point clouds need a DA3 any-view model", m.Name, m.Arch)
	}
	return nil
}

// readSizes reads the images' sizes from their headers into p.sizes and
// checks the total number of pixels.
func (p *parsed) readSizes(lim limits) *apiError {
	var total int64
	p.sizes = p.sizes[:0]
	for i, b := range p.images {
		hd, err := imgio.DecodeHeaderBytes(b, p.names[i])
		if errors.Is(err, imgio.ErrTooManyPixels) {
			return tooLarge("%v", err) // names the image and the flag
		}
		if err != nil {
			return unprocessable("%v", err) // names the image
		}
		total += int64(hd.Width) * int64(hd.Height)
		p.sizes = append(p.sizes, image.Pt(hd.Width, hd.Height))
	}
	if total > lim.maxPixels {
		return tooLarge("images of %d pixels in all exceed the limit of %d pixels per request (-max-pixels)", total, lim.maxPixels)
	}
	return nil
}

func (p *parsed) runOptions() runOptions {
	q := p.req
	return runOptions{processRes: q.ProcessRes, method: q.ProcessResMethod, refView: q.RefView, processedSize: q.ProcessedSize,
		intrinsics: q.Intrinsics, rayPose: q.RayPose, raySeed: q.RaySeed, cameras: q.Cameras, gaussians: slices.ContainsFunc(q.Exports, gaussianExport),
		align: alignSamples(q.AlignPoints, len(p.images)), lens: p.lens, keepUndistorted: q.KeepUndistorted,
		tile: q.Tile, tileSize: q.TileSize}
}

// wants reports which maps and cameras the response carries.
type wants struct{ depth, conf, pose, sky bool }

func (p *parsed) wants(m ModelInfo) wants {
	q := p.req
	if !q.IncludeDepth && !q.IncludeConfidence && !q.IncludePose && !q.IncludeSky && !q.IncludePoints && len(q.Exports) == 0 {
		return wants{depth: true, conf: m.Confidence, pose: m.Camera, sky: m.Sky}
	}
	return wants{depth: q.IncludeDepth, conf: q.IncludeConfidence, pose: q.IncludePose, sky: q.IncludeSky}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
