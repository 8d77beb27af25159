// Command capi is da3-go's C ABI, built as a shared library:
//
//	go build -buildmode=c-shared -o libda3go.so ./capi    (make capi: bin/libda3go.so, bin/libda3go.h)
//
// It offers what the C++ engine's da_capi offers (load a model, depth, dense
// depth + confidence + cameras, poses, point clouds of one or several views,
// scene exports) with these rules:
//
//   - a model is an opaque handle (da3go_model, an integer, never a pointer:
//     C holds no Go pointer); a freed or unknown handle is an error, not a
//     crash;
//   - every function that can fail returns 0 on success and -1 on failure,
//     and stores an error message in *err (when err is not NULL) that the
//     caller frees with da3go_free_string;
//   - OWNERSHIP: every buffer, string and view array returned belongs to the
//     caller, who frees each exactly once with the matching function:
//     buffers (depth maps, points, colours) with da3go_free_buffer, strings
//     (error messages, da3go_info_json) with da3go_free_string, the views of
//     da3go_run with da3go_free_views (which frees their maps too: never
//     free a view's depth, conf or sky yourself; the same for the views of
//     the batched calls da3go_depth_batch and da3go_run_scenes). Do not use free(): the
//     library records every block it hands out, and its free functions
//     ignore (with a warning on the library's log) a pointer that is not
//     live — freed already, never returned, or of another kind — and free
//     the number of views da3go_run returned whatever count is passed, where
//     free() would corrupt the heap;
//   - the library never keeps a pointer the caller passed in.
//
// Batches cost one call: da3go_depth_batch runs n same-size images in memory
// as independent images (the model's batched graph, which may differ from n
// single calls in the last float bits), da3go_run_scenes several scenes of
// images in memory; both return one view array of every image in input order.
//
// A handle may be used from several threads; runs on one model are
// serialised. A panic inside the library is returned as an error.
package main

/*
#include <stdint.h>
#include <stdlib.h>

// An opaque model handle; 0 is never a valid handle.
typedef uintptr_t da3go_model;

// Input strings are const char *: the library reads them during the call only.
typedef const char da3go_cchar;

// Options of da3go_load_with; a zero field takes its default.
typedef struct {
	const char *model;        // a GGUF file, or a published name (da3-go models lists them)
	const char *metric_model; // NULL, or the metric half of a nested pair (file or published name)
	const char *device;       // NULL or "": $DA3_DEVICE, else the best device
	int threads;              // 0: every core
	const char *precision;    // NULL or "f32" (default), "bf16" or "int8": the CPU products' precision
	int narrow_convs;         // 0: the model's choice (narrow for DA3's any-view models under int8c, else the strided ones in bf16); > 0, with bf16 or int8: the convolutions too; < 0: f32
	const char *cache_dir;    // NULL or "": $DA3_CACHE_DIR, else the user's cache folder
	int no_download;          // non-zero: a published name must be in the cache already
} da3go_load_options;

// Options of a run; pass NULL for the model's defaults.
typedef struct {
	int process_res;        // processed resolution; 0: the model's default (504 DA3, 518 DA2)
	int processed_size;     // non-zero: maps at the processed size instead of the image size
	const char *method;     // NULL or upper_bound_resize, lower_bound_resize, upper_bound_crop, lower_bound_crop
	const char *ref_view;   // NULL or saddle_balanced, first, middle (three or more views)
	int independent;        // non-zero: run each image alone instead of as views of one scene
	int ray_pose;           // non-zero: cameras from the auxiliary ray head (files converted with -with-aux)
	uint64_t ray_seed;      // seed of the ray solver's RANSAC
	// Known cameras, one per image, or NULL: 12 doubles per image (world-to-camera [R|t], 3x4 row-major,
	// OpenCV axes) and 4 per image (fx, fy, cx, cy in pixels of the original image). The DA3 any-view
	// model is conditioned on them; the results are in their frame and scale.
	const double *given_extrinsics;
	const double *given_intrinsics;
	// ABI 4. Images from a distorted or fisheye lens: camera_model is NULL (pinhole images) or a COLMAP
	// camera model name as da3-go depth -camera-model takes it (opencv, full_opencv, fisheye =
	// opencv_fisheye, simple_radial, radial, ..., any case), camera_params its parameters in COLMAP's
	// order, in pixels of the input images, as many as the model takes (opencv and fisheye 8, full_opencv
	// 12, ...). Each image is undistorted to a pinhole view for the model, and the maps (NaN where a
	// pixel's ray leaves the view), the cameras (the lens's pinhole part as intrinsics) and the exports
	// (points along the lens's rays, COLMAP cameras with the lens's model) are mapped back to the input
	// image's pixels, unless keep_undistorted is non-zero. Not with given cameras.
	const char *camera_model;
	const double *camera_params;
	int keep_undistorted;
	double undistort_balance; // 0: the pinhole view filled with the image (its rim cut off), 1: all of it shown, or between
	double undistort_fov;     // the pinhole view's largest field of view, degrees; 0: 150
} da3go_options;

// One view's outputs. The array da3go_run returns, with every map in it, is
// freed by one da3go_free_views(views, n) call: never free the maps alone.
typedef struct {
	int width, height;                     // of the maps
	int processed_width, processed_height; // network input
	float *depth;                          // width*height, row-major
	float *conf;                           // width*height, or NULL (models without confidence)
	float *sky;                            // width*height, or NULL (models without sky)
	int unit;                              // DA3GO_UNIT_*
	int has_camera;                        // the camera fields are set
	double extrinsics[12];                 // world-to-camera [R|t], 3x4 row-major, OpenCV axes
	double intrinsics[9];                  // 3x3 row-major, pixels of the processed image
	double intrinsics_original[9];         // 3x3 row-major, pixels of the input image
} da3go_view;

// Units of depth.
enum {
	DA3GO_UNIT_RELATIVE = 0,         // depth up to scale (DA3 any-view and mono)
	DA3GO_UNIT_DISPARITY = 1,        // DA2 relative: inverse depth up to scale and shift, larger = nearer
	DA3GO_UNIT_FOCAL_NORMALISED = 2, // DA3 metric-large: metres = focal * depth / 300
	DA3GO_UNIT_METRES = 3            // metric models, nested pairs
};
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/gsvideo"
	"github.com/da3-go/da3-go/internal/atomicfile"
	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/lensopt"
	"github.com/da3-go/da3-go/lens"
	"github.com/da3-go/da3-go/model"
	"github.com/da3-go/da3-go/model/gs"
)

// abiVersion changes whenever a declaration of the header does.
const abiVersion = 4

func main() {} // required by -buildmode=c-shared

// handles maps da3go_model values to models. Handles are counted up and
// never reused, so a stale handle is always an error.
var handles = struct {
	sync.Mutex
	next uint64
	m    map[uint64]scene
}{m: map[uint64]scene{}}

func lookup(h C.da3go_model) (scene, error) {
	handles.Lock()
	defer handles.Unlock()
	s, ok := handles.m[uint64(h)]
	if !ok {
		return scene{}, fmt.Errorf("invalid model handle %d (freed, or never returned by da3go_load)", uint64(h))
	}
	return s, nil
}

// guard runs f, turning an error or a panic into -1 and *err.
func guard(err **C.char, f func() error) (status C.int) {
	defer func() {
		if r := recover(); r != nil {
			status = fail(err, fmt.Errorf("internal error: %v", r))
		}
	}()
	if e := f(); e != nil {
		return fail(err, e)
	}
	if err != nil {
		*err = nil
	}
	return 0
}

func fail(err **C.char, e error) C.int {
	if err != nil {
		*err = cString(e.Error())
	}
	return -1
}

//export da3go_abi_version
func da3go_abi_version() C.int { return abiVersion }

// da3go_camera_model_params stores in *n the number of parameters camera_model takes (the length
// of da3go_options.camera_params; ABI 4), or fails for a model the library does not know.
//
//export da3go_camera_model_params
func da3go_camera_model_params(cameraModel *C.da3go_cchar, n *C.int, err **C.char) C.int {
	return guard(err, func() error {
		if cameraModel == nil || n == nil {
			return errors.New("da3go_camera_model_params: camera_model and n must not be NULL")
		}
		m, e := lens.ParseModel(goString(cameraModel))
		if e != nil {
			return fmt.Errorf("camera_model: %w", e)
		}
		*n = C.int(m.NumParams())
		return nil
	})
}

//export da3go_load
func da3go_load(path, metricPath, device *C.da3go_cchar, threads C.int, out *C.da3go_model, err **C.char) C.int {
	return guard(err, func() error {
		if path == nil || out == nil {
			return errors.New("da3go_load: path and out must not be NULL")
		}
		*out = 0
		var mp, dev string
		if metricPath != nil {
			mp = goString(metricPath)
		}
		if device != nil {
			dev = goString(device)
		}
		s, e := loadWith(loadOptions{model: goString(path), metricModel: mp, device: dev, threads: int(threads),
			files: true})
		if e != nil {
			return e
		}
		*out = register(s)
		return nil
	})
}

//export da3go_load_with
func da3go_load_with(opt *C.da3go_load_options, out *C.da3go_model, err **C.char) C.int {
	return guard(err, func() error {
		if opt == nil || opt.model == nil || out == nil {
			return errors.New("da3go_load_with: opt, opt->model and out must not be NULL")
		}
		*out = 0
		lo := loadOptions{model: goString(opt.model), threads: int(opt.threads), narrowConvs: convsOf(int(opt.narrow_convs)),
			noDownload: opt.no_download != 0}
		lo.metricModel, lo.device = optString(opt.metric_model), optString(opt.device)
		lo.precision, lo.cacheDir = optString(opt.precision), optString(opt.cache_dir)
		s, e := loadWith(lo)
		if e != nil {
			return e
		}
		*out = register(s)
		return nil
	})
}

// optString is p's string, "" for NULL.
func optString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// register stores s under a new handle.
func register(s scene) C.da3go_model {
	handles.Lock()
	defer handles.Unlock()
	handles.next++
	handles.m[handles.next] = s
	return C.da3go_model(handles.next)
}

//export da3go_free
func da3go_free(h C.da3go_model, err **C.char) C.int {
	return guard(err, func() error {
		handles.Lock()
		s, ok := handles.m[uint64(h)]
		delete(handles.m, uint64(h))
		handles.Unlock()
		if !ok {
			return fmt.Errorf("invalid model handle %d (freed, or never returned by da3go_load)", uint64(h))
		}
		return s.Close()
	})
}

//export da3go_info_json
func da3go_info_json(h C.da3go_model, out **C.char, err **C.char) C.int {
	return guard(err, func() error {
		s, e := lookup(h)
		if e != nil {
			return e
		}
		if out == nil {
			return errors.New("da3go_info_json: out must not be NULL")
		}
		b, e := json.Marshal(info(s))
		if e != nil {
			return e
		}
		*out = cString(string(b))
		return nil
	})
}

//export da3go_depth
func da3go_depth(h C.da3go_model, imagePath *C.da3go_cchar, opt *C.da3go_options, outDepth **C.float, outW, outH *C.int, err **C.char) C.int {
	return guard(err, func() error {
		if imagePath == nil {
			return errors.New("da3go_depth: image_path must not be NULL")
		}
		img, e := imgio.Decode(goString(imagePath))
		if e != nil {
			return e
		}
		return depthOf(h, img, opt, outDepth, outW, outH)
	})
}

//export da3go_depth_rgb
func da3go_depth_rgb(h C.da3go_model, rgb *C.uchar, w, ht C.int, opt *C.da3go_options, outDepth **C.float, outW, outH *C.int, err **C.char) C.int {
	return guard(err, func() error {
		if rgb == nil || w <= 0 || ht <= 0 {
			return fmt.Errorf("da3go_depth_rgb: need RGB pixels and a positive size, got %dx%d", int(w), int(ht))
		}
		if e := checkSize(int(w), int(ht)); e != nil {
			return e
		}
		pix := C.GoBytes(unsafe.Pointer(rgb), w*ht*3) // a copy: nothing of the caller's is kept
		return depthOf(h, rgbImage(pix, int(w), int(ht)), opt, outDepth, outW, outH)
	})
}

// prepare looks up the model and converts the options of a call on n images.
func prepare(h C.da3go_model, opt *C.da3go_options, n int) (scene, runOptions, error) {
	s, err := lookup(h)
	if err != nil {
		return scene{}, runOptions{}, err
	}
	o, err := options(opt, n)
	return s, o, err
}

func depthOf(h C.da3go_model, img image.Image, opt *C.da3go_options, outDepth **C.float, outW, outH *C.int) error {
	if outDepth == nil || outW == nil || outH == nil {
		return errors.New("out_depth, out_w and out_h must not be NULL")
	}
	s, o, e := prepare(h, opt, 1)
	if e != nil {
		return e
	}
	res, back, e := s.run([]image.Image{img}, o)
	if e == nil {
		e = mapBack(res, back)
	}
	if e != nil {
		return e
	}
	r := res[0]
	*outDepth = floats(r.Depth)
	*outW, *outH = C.int(r.Width), C.int(r.Height)
	return nil
}

//export da3go_run
func da3go_run(h C.da3go_model, imagePaths **C.da3go_cchar, n C.int, opt *C.da3go_options, outViews **C.da3go_view, err **C.char) C.int {
	return guard(err, func() error {
		if outViews == nil {
			return errors.New("da3go_run: out_views must not be NULL")
		}
		imgs, e := decodeAll(imagePaths, n)
		if e != nil {
			return e
		}
		s, o, e := prepare(h, opt, len(imgs))
		if e != nil {
			return e
		}
		res, back, e := s.run(imgs, o)
		if e == nil {
			e = mapBack(res, back)
		}
		if e != nil {
			return e
		}
		*outViews = newViews(res)
		return nil
	})
}

// maxImages bounds the images of one call.
const maxImages = 1024

//export da3go_depth_batch
func da3go_depth_batch(h C.da3go_model, rgb *C.uchar, n, w, ht C.int, opt *C.da3go_options, outViews **C.da3go_view, outN *C.int, err **C.char) C.int {
	return guard(err, func() error {
		if outViews == nil || outN == nil {
			return errors.New("da3go_depth_batch: out_views and out_n must not be NULL")
		}
		*outViews, *outN = nil, 0
		if rgb == nil || n <= 0 || n > maxImages {
			return fmt.Errorf("da3go_depth_batch: need RGB pixels of 1 to %d images, got %d", maxImages, int(n))
		}
		if w <= 0 || ht <= 0 {
			return fmt.Errorf("da3go_depth_batch: need a positive size, got %dx%d", int(w), int(ht))
		}
		if e := checkSize(int(w), int(ht)); e != nil {
			return fmt.Errorf("da3go_depth_batch: %w", e)
		}
		per := 3 * int(w) * int(ht)
		pix := unsafe.Slice((*byte)(unsafe.Pointer(rgb)), int(n)*per)
		imgs := make([]image.Image, n)
		for i := range imgs {
			imgs[i] = rgbImage(pix[i*per:(i+1)*per], int(w), int(ht)) // a copy: nothing of the caller's is kept
		}
		s, o, e := prepare(h, opt, len(imgs))
		if e != nil {
			return e
		}
		res, back, e := s.batch(imgs, o)
		if e == nil {
			e = mapBack(res, back)
		}
		if e != nil {
			return e
		}
		*outViews, *outN = newViews(res), C.int(len(res))
		return nil
	})
}

//export da3go_run_scenes
func da3go_run_scenes(h C.da3go_model, rgbs **C.uchar, ws, hs, counts *C.int, nscenes C.int, opt *C.da3go_options,
	outViews **C.da3go_view, outN *C.int, err **C.char) C.int {
	return guard(err, func() error {
		if outViews == nil || outN == nil {
			return errors.New("da3go_run_scenes: out_views and out_n must not be NULL")
		}
		*outViews, *outN = nil, 0
		if rgbs == nil || ws == nil || hs == nil || counts == nil {
			return errors.New("da3go_run_scenes: rgbs, ws, hs and counts must not be NULL")
		}
		sizes, e := sceneCounts(unsafe.Slice((*int32)(unsafe.Pointer(counts)), max(int(nscenes), 0)), int(nscenes))
		if e != nil {
			return e
		}
		total := 0
		for _, c := range sizes {
			total += c
		}
		imgs, e := rgbImages(unsafe.Slice(rgbs, total), unsafe.Slice((*int32)(unsafe.Pointer(ws)), total),
			unsafe.Slice((*int32)(unsafe.Pointer(hs)), total))
		if e != nil {
			return e
		}
		s, o, e := prepare(h, opt, total)
		if e != nil {
			return e
		}
		res, e := s.runScenes(imgs, sizes, o)
		if e != nil {
			return e
		}
		*outViews, *outN = newViews(res), C.int(len(res))
		return nil
	})
}

// rgbImages copies the interleaved RGB images rgbs[i] of ws[i]×hs[i] pixels.
func rgbImages(rgbs []*C.uchar, ws, hs []int32) ([]image.Image, error) {
	imgs := make([]image.Image, len(rgbs))
	for i, p := range rgbs {
		w, h := int(ws[i]), int(hs[i])
		if p == nil || w <= 0 || h <= 0 {
			return nil, fmt.Errorf("da3go_run_scenes: image %d: need RGB pixels and a positive size, got %dx%d", i, w, h)
		}
		if err := checkSize(w, h); err != nil {
			return nil, fmt.Errorf("da3go_run_scenes: image %d: %w", i, err)
		}
		imgs[i] = rgbImage(unsafe.Slice((*byte)(unsafe.Pointer(p)), 3*w*h), w, h)
	}
	return imgs, nil
}

// newViews copies results into a calloc'd, tracked array of views.
func newViews(res []model.Result) *C.da3go_view {
	views := (*C.da3go_view)(C.calloc(C.size_t(max(len(res), 1)), C.size_t(unsafe.Sizeof(C.da3go_view{}))))
	track(unsafe.Pointer(views), block{kind: blockViews, n: len(res)})
	out := unsafe.Slice(views, len(res))
	for i, r := range res {
		v := &out[i]
		v.width, v.height = C.int(r.Width), C.int(r.Height)
		v.processed_width, v.processed_height = C.int(r.ProcessedWidth), C.int(r.ProcessedHeight)
		v.depth, v.conf, v.sky = floats(r.Depth), floats(r.Conf), floats(r.Sky)
		v.unit = C.int(r.Unit)
		if c := r.Camera; c != nil {
			v.has_camera = 1
			for row := range 3 {
				for col := range 4 {
					v.extrinsics[4*row+col] = C.double(c.Extrinsics[row][col])
				}
				for col := range 3 {
					v.intrinsics[3*row+col] = C.double(c.Intrinsics[row][col])
					v.intrinsics_original[3*row+col] = C.double(c.IntrinsicsOriginal[row][col])
				}
			}
		}
	}
	return views
}

// da3go_free_views frees an array of views from da3go_run. The array's
// length is the one da3go_run returned, whatever n says: a different n is
// logged as a warning; an array that is not live (freed already, or not from
// da3go_run) is left alone with a warning.
//
//export da3go_free_views
func da3go_free_views(views *C.da3go_view, n C.int) {
	if views == nil {
		return
	}
	b, ok := untrack(unsafe.Pointer(views), blockViews)
	if !ok {
		logger.Warn("da3go_free_views: pointer ignored, not a live view array of this library", "pointer", uintptr(unsafe.Pointer(views)), "it is", liveKind(unsafe.Pointer(views)))
		return
	}
	if int(n) != b.n {
		logger.Warn("da3go_free_views: wrong count, freeing the views da3go_run returned", "count", int(n), "views", b.n)
	}
	for _, v := range unsafe.Slice(views, b.n) {
		freeTracked("da3go_free_views", unsafe.Pointer(v.depth), blockBuffer)
		freeTracked("da3go_free_views", unsafe.Pointer(v.conf), blockBuffer)
		freeTracked("da3go_free_views", unsafe.Pointer(v.sky), blockBuffer)
	}
	C.free(unsafe.Pointer(views))
}

//export da3go_points
func da3go_points(h C.da3go_model, imagePaths **C.da3go_cchar, n C.int, opt *C.da3go_options, confThresh C.double,
	outN *C.int, outXYZ **C.float, outRGB **C.uchar, err **C.char) C.int {
	return guard(err, func() error {
		if err := checkConfThresh(float64(confThresh)); err != nil {
			return err
		}
		if outN == nil || outXYZ == nil || outRGB == nil {
			return errors.New("da3go_points: out_n, out_xyz and out_rgb must not be NULL")
		}
		res, back, e := sceneResults(h, imagePaths, n, opt, "")
		if e != nil {
			return e
		}
		views, e := sceneViews(res, back)
		if e != nil {
			return e
		}
		pc, e := export.NewPointCloud(views, pointOptions(float64(confThresh)))
		if e != nil {
			return e
		}
		*outN = C.int(pc.Len())
		*outXYZ = floats(pc.Points)
		*outRGB = (*C.uchar)(bytesC(pc.Colors))
		return nil
	})
}

//export da3go_export
func da3go_export(h C.da3go_model, imagePaths **C.da3go_cchar, n C.int, opt *C.da3go_options, format, outPath *C.da3go_cchar, err **C.char) C.int {
	return guard(err, func() error {
		if format == nil || outPath == nil {
			return errors.New("da3go_export: format and out_path must not be NULL")
		}
		f := goString(format)
		if !slices.Contains([]string{"glb", "ply", "npz", "mini_npz", "colmap", "colmap_tracks", "gs_ply", "gs_video", "mesh_ply", "mesh_glb", "mesh_points"}, f) {
			return fmt.Errorf("unknown export format %q (glb, ply, npz, mini_npz, colmap, colmap_tracks, gs_ply, gs_video, mesh_ply, mesh_glb, mesh_points)", f)
		}
		if f == "gs_video" {
			if opt != nil && opt.given_extrinsics != nil {
				return errors.New("the gs_video export with given cameras: the 3D Gaussians are in the network's frame, not the given cameras'")
			}
			if _, e := gsvideo.FindFFmpeg(""); e != nil {
				return e
			}
		}
		out := goString(outPath)
		var inputs []string
		if imagePaths != nil && n > 0 && n <= 1024 {
			for _, p := range unsafe.Slice(imagePaths, int(n)) {
				if p != nil {
					inputs = append(inputs, goString(p))
				}
			}
		}
		if e := checkExport(f, out, inputs); e != nil {
			return e
		}
		res, back, e := sceneResults(h, imagePaths, n, opt, f)
		if e != nil {
			return e
		}
		return writeExport(f, out, res, back)
	})
}

// da3go_free_buffer frees a buffer the library returned; NULL, a buffer freed
// already and a pointer the library did not return are ignored with a
// warning.
//
//export da3go_free_buffer
func da3go_free_buffer(p unsafe.Pointer) { freeTracked("da3go_free_buffer", p, blockBuffer) }

// da3go_free_string frees a string the library returned (an error message,
// da3go_info_json's document), with the checks of da3go_free_buffer.
//
//export da3go_free_string
func da3go_free_string(s *C.char) { freeTracked("da3go_free_string", unsafe.Pointer(s), blockString) }

// options converts the C options (NULL: defaults) of a call on n images.
func options(o *C.da3go_options, n int) (runOptions, error) {
	var r runOptions
	if o == nil {
		return r, nil
	}
	r.opt.ProcessRes = int(o.process_res)
	if r.opt.ProcessRes < 0 || r.opt.ProcessRes > 4096 {
		return r, fmt.Errorf("process_res %d out of range (0..4096)", r.opt.ProcessRes)
	}
	r.opt.ProcessedSize = o.processed_size != 0
	r.independent = o.independent != 0
	if o.method != nil {
		m, err := model.ParseResizeMethod(C.GoString(o.method))
		if err != nil {
			return r, err
		}
		r.opt.Method = m
	}
	if o.ref_view != nil {
		switch rv := model.RefView(C.GoString(o.ref_view)); rv {
		case model.RefSaddleBalanced, model.RefFirst, model.RefMiddle:
			r.opt.RefView = rv
		default:
			return r, fmt.Errorf("unknown ref_view %q (saddle_balanced, first, middle)", rv)
		}
	}
	r.opt.RayPose, r.opt.RaySeed = o.ray_pose != 0, uint64(o.ray_seed)
	switch {
	case o.given_extrinsics == nil && o.given_intrinsics == nil:
	case o.given_extrinsics == nil || o.given_intrinsics == nil:
		return r, errors.New("given cameras need both given_extrinsics and given_intrinsics")
	default:
		ext := unsafe.Slice((*float64)(unsafe.Pointer(o.given_extrinsics)), 12*n)
		ixt := unsafe.Slice((*float64)(unsafe.Pointer(o.given_intrinsics)), 4*n)
		for i := range n {
			var e [3][4]float64
			for j := range 12 {
				e[j/4][j%4] = ext[12*i+j]
			}
			k := ixt[4*i : 4*i+4]
			r.opt.Extrinsics = append(r.opt.Extrinsics, e)
			r.opt.ViewIntrinsics = append(r.opt.ViewIntrinsics, model.Intrinsics{Fx: k[0], Fy: k[1], Cx: k[2], Cy: k[3]})
		}
	}
	lo := lensopt.Options{Keep: o.keep_undistorted != 0, Balance: float64(o.undistort_balance), FOV: float64(o.undistort_fov)}
	if o.camera_model != nil {
		lo.Model = C.GoString(o.camera_model)
	}
	if o.camera_params != nil {
		// As many as the model takes; an unknown model reads none and is refused by setLens.
		n := 0
		if m, err := lens.ParseModel(lo.Model); err == nil {
			n = m.NumParams()
		}
		lo.Params = slices.Clone(unsafe.Slice((*float64)(unsafe.Pointer(o.camera_params)), n))
	}
	return r, r.setLens(lo)
}

// decodeAll decodes n image files named by a C array of strings.
func decodeAll(paths **C.da3go_cchar, n C.int) ([]image.Image, error) {
	if paths == nil || n <= 0 || n > 1024 {
		return nil, fmt.Errorf("need 1 to 1024 image paths, got %d", int(n))
	}
	imgs := make([]image.Image, n)
	for i, p := range unsafe.Slice(paths, int(n)) {
		if p == nil {
			return nil, fmt.Errorf("image path %d is NULL", i)
		}
		var err error
		if imgs[i], err = imgio.Decode(goString(p)); err != nil {
			return nil, err
		}
	}
	return imgs, nil
}

// sceneResults runs the images at the processed size for the export format
// ("" for a point cloud); back as scene.run's.
func sceneResults(h C.da3go_model, paths **C.da3go_cchar, n C.int, opt *C.da3go_options, format string) ([]model.Result, []*lens.Undistorter, error) {
	imgs, err := decodeAll(paths, n)
	if err != nil {
		return nil, nil, err
	}
	s, o, err := prepare(h, opt, len(imgs))
	if err != nil {
		return nil, nil, err
	}
	if err := o.lensOpt.CheckExport(format); err != nil {
		return nil, nil, err
	}
	o.opt.ProcessedSize, o.opt.Gaussians = true, format == "gs_ply" || format == "gs_video"
	return s.run(imgs, o)
}

func goString(p *C.da3go_cchar) string { return C.GoString((*C.char)(unsafe.Pointer(p))) }

// floats copies data into a malloc'd C array; nil stays NULL.
func floats(data []float32) *C.float {
	if data == nil {
		return nil
	}
	return (*C.float)(bytesC(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), 4*len(data))))
}

// bytesC copies b into malloc'd, tracked memory (at least one byte, so never
// NULL), which the caller frees with da3go_free_buffer.
func bytesC(b []byte) unsafe.Pointer {
	p := C.malloc(C.size_t(max(len(b), 1)))
	track(p, block{kind: blockBuffer})
	copy(unsafe.Slice((*byte)(p), len(b)), b)
	return p
}

// checkExport applies the output rules (atomicfile.Check: never an input image, only a regular file
// replaced, a name that fits) to the files da3go_export writes, before anything runs.
func checkExport(format, out string, inputs []string) error {
	files := []string{out}
	if format == "colmap" || format == "colmap_tracks" {
		files = nil
		for _, name := range []string{"cameras.bin", "images.bin", "points3D.bin"} {
			files = append(files, filepath.Join(out, name))
		}
	}
	for _, f := range files {
		if err := atomicfile.Check(f, inputs...); err != nil {
			return err
		}
	}
	return nil
}

// writeExport writes one scene file (glb, ply, npz, mini_npz, gs_ply, gs_video, mesh_ply, mesh_glb, mesh_points)
// or a COLMAP model (colmap: out is a directory, created if needed); the views are mapped back to the
// input images' pixels where back has an undistorter.
func writeExport(format, out string, res []model.Result, back []*lens.Undistorter) error {
	if format == "gs_video" {
		return writeGaussianVideo(out, res)
	}
	if format == "gs_ply" {
		parts := make([]*gs.Gaussians, len(res))
		for i := range res {
			parts[i] = res[i].Gaussians
		}
		var buf bytes.Buffer
		if err := gs.WritePLY(&buf, gs.Concat(parts...)); err != nil {
			return err
		}
		return imgio.WriteFileAtomic(out, buf.Bytes())
	}
	views, err := sceneViews(res, back)
	if err != nil {
		return err
	}
	switch format {
	case "glb", "ply":
		pc, err := export.NewPointCloud(views, export.DefaultOptions())
		if err != nil {
			return err
		}
		if format == "glb" {
			return export.WriteGLB(out, pc, views, export.DefaultGLBOptions())
		}
		return export.WritePLY(out, pc.Subsample(1_000_000, 0))
	case "npz", "mini_npz":
		return export.WriteNPZ(out, views, format == "mini_npz")
	case "mesh_ply", "mesh_glb", "mesh_points":
		m, _, err := export.NewMesh(export.ViewSlice(views), export.MeshOptions{Points: export.DefaultOptions()})
		if err != nil {
			return err
		}
		switch format {
		case "mesh_glb":
			return export.WriteMeshGLB(out, m, views, export.DefaultGLBOptions())
		case "mesh_points":
			return export.WritePLY(out, export.MeshCloud(m))
		}
		return export.WriteMeshPLY(out, m)
	case "colmap", "colmap_tracks":
		pc, err := export.NewPointCloud(views, export.COLMAPOptions())
		if err != nil {
			return err
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if format == "colmap_tracks" {
			return export.WriteCOLMAPTracks(out, pc, views, false, export.TrackOptions{})
		}
		return export.WriteCOLMAP(out, pc, views, false)
	}
	panic("unreachable: da3go_export checks the format")
}

// checkConfThresh refuses a confidence threshold that selects nothing
// meaningful: NaN (every comparison false), ±Inf, or negative (0 means the
// official selection).
func checkConfThresh(t float64) error {
	if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return fmt.Errorf("da3go_points: conf_thresh %v must be a finite number ≥ 0 (0: the official selection)", t)
	}
	return nil
}

// pointOptions: thresh > 0 keeps the pixels with confidence ≥ thresh
// (clamped to the confidence's range); otherwise the official exporter's
// selection.
func pointOptions(thresh float64) export.Options {
	o := export.DefaultOptions()
	if thresh > 0 {
		o.ConfThreshold, o.ConfPercentile, o.EnsurePercentile = thresh, 0, 100
	}
	return o
}

// writeGaussianVideo writes the gs_video export with upstream's defaults
// (package gsvideo) as an MP4 file at out.
func writeGaussianVideo(out string, res []model.Result) error {
	parts := make([]*gs.Gaussians, len(res))
	cams := make([]gsvideo.Camera, len(res))
	for i := range res {
		if res[i].Gaussians == nil || res[i].Camera == nil {
			return fmt.Errorf("gs_video: view %d has no Gaussians or no camera", i)
		}
		parts[i] = res[i].Gaussians
		cams[i] = gsvideo.Camera{Extrinsics: res[i].Camera.Extrinsics, Intrinsics: res[i].Camera.Intrinsics}
	}
	v, err := gsvideo.New(gs.Concat(parts...), cams, gsvideo.Options{})
	if err != nil {
		return err
	}
	w, h := v.Size()
	return gsvideo.EncodeMP4(context.Background(), out, w, h, gsvideo.EncodeOptions{}, func(pipe io.Writer) error {
		return v.WriteRaw(context.Background(), pipe, nil)
	})
}
