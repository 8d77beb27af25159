"""da3go.Model: a loaded model and its runs, numpy in and numpy out."""
from __future__ import annotations

import ctypes as C
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import Error

try:  # Pillow is optional: PIL images are accepted when it is installed.
    from PIL import Image as _PILImage
except ImportError:  # pragma: no cover
    _PILImage = None

#: An image: a file path (decoded by the library), a PIL image, or an HxWx3 uint8 array.
ImageLike = Union[str, os.PathLike, np.ndarray, Any]

#: da3go_view.unit values.
UNITS = ("relative", "disparity", "focal_normalised", "metres")

#: Formats of Model.export.
EXPORT_FORMATS = ("glb", "ply", "npz", "mini_npz", "colmap", "colmap_tracks", "gs_ply", "gs_video", "mesh_ply", "mesh_glb", "mesh_points")


@dataclass
class Result:
    """One view's outputs.

    depth: float32 HxW (at the image size, or the processed size with
    processed_size=True); conf and sky: float32 HxW or None where the model
    has no such output; unit: "relative", "disparity", "focal_normalised" or
    "metres"; camera: None, or a dict with "extrinsics" (3x4 world-to-camera
    [R|t], OpenCV axes), "intrinsics" (3x3, pixels of the processed image) and
    "intrinsics_original" (3x3, pixels of the input image), float64 arrays
    (with camera_model, mapped back: the lens's pinhole part; depth, conf and
    sky are NaN where the pinhole view does not reach);
    processed_size: the network input's (width, height).
    """

    depth: np.ndarray
    conf: Optional[np.ndarray]
    sky: Optional[np.ndarray]
    unit: str
    camera: Optional[Dict[str, np.ndarray]]
    processed_size: Tuple[int, int]


def _is_path(image: Any) -> bool:
    return isinstance(image, (str, os.PathLike))


def as_rgb(image: ImageLike) -> np.ndarray:
    """image as a C-contiguous HxWx3 uint8 array. A path is decoded with Pillow
    (the calls that take paths directly use the library's decoder instead)."""
    if _is_path(image):
        if _PILImage is None:
            raise Error(f"{image}: decoding an image path here needs Pillow")
        with _PILImage.open(image) as im:
            return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))
    if _PILImage is not None and isinstance(image, _PILImage.Image):
        return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise Error(f"an image array must be HxWx3 uint8, got {image.shape} {image.dtype}")
        if image.shape[0] == 0 or image.shape[1] == 0:
            raise Error(f"an image array must not be empty, got {image.shape}")
        return np.ascontiguousarray(image)
    raise Error(f"not an image: {type(image).__name__} (a path, a PIL image or an HxWx3 uint8 array)")


class _Options:
    """da3go_options of one call, holding the arrays it points to."""

    def __init__(self, n: int, *, process_res: int = 0, processed_size: bool = False,
                 method: Optional[str] = None, ref_view: Optional[str] = None, independent: bool = False,
                 ray_pose: bool = False, ray_seed: int = 0,
                 extrinsics: Optional[np.ndarray] = None, intrinsics: Optional[np.ndarray] = None,
                 camera_model: Optional[str] = None, camera_params: Optional[Sequence[float]] = None,
                 keep_undistorted: bool = False, undistort_balance: float = 0.0,
                 undistort_fov: float = 0.0) -> None:
        self.struct = _lib.Options(
            process_res=int(process_res), processed_size=int(bool(processed_size)),
            method=method.encode() if method else None, ref_view=ref_view.encode() if ref_view else None,
            independent=int(bool(independent)), ray_pose=int(bool(ray_pose)), ray_seed=int(ray_seed),
            camera_model=camera_model.encode() if camera_model else None,
            keep_undistorted=int(bool(keep_undistorted)), undistort_balance=float(undistort_balance),
            undistort_fov=float(undistort_fov))
        if camera_params is not None:
            self.params = np.ascontiguousarray(camera_params, dtype=np.float64).ravel()
            if camera_model:
                # The library reads as many parameters as the model takes: check the count here.
                want, err = C.c_int(), C.c_void_p()
                _lib.check(_lib.lib().da3go_camera_model_params(camera_model.encode(), C.byref(want), C.byref(err)), err)
                if self.params.size != want.value:
                    raise Error(f"camera_params: camera model {camera_model} takes {want.value} parameters, "
                                f"got {self.params.size}")
            if not self.params.size:  # never NULL: the library refuses parameters without a model
                self.params = np.zeros(1)
            self.struct.camera_params = self.params.ctypes.data_as(C.POINTER(C.c_double))
        if (extrinsics is None) != (intrinsics is None):
            raise Error("given cameras need both extrinsics (Nx3x4) and intrinsics (Nx4: fx, fy, cx, cy)")
        if extrinsics is not None:
            self.ext = np.ascontiguousarray(extrinsics, dtype=np.float64)
            self.ixt = np.ascontiguousarray(intrinsics, dtype=np.float64)
            if self.ext.shape != (n, 3, 4) or self.ixt.shape != (n, 4):
                raise Error(f"given cameras for {n} images need extrinsics {n}x3x4 and intrinsics {n}x4, "
                            f"got {self.ext.shape} and {self.ixt.shape}")
            self.struct.given_extrinsics = self.ext.ctypes.data_as(C.POINTER(C.c_double))
            self.struct.given_intrinsics = self.ixt.ctypes.data_as(C.POINTER(C.c_double))

    def ref(self) -> Any:
        return C.byref(self.struct)


def _take_views(views: Any, n: int) -> List[Result]:
    """Copies n views of the library into Results, then frees them (da3go_free_views)."""
    try:
        out = []
        for i in range(n):
            v = views[i]
            shape = (v.height, v.width)

            def arr(p: Any) -> Optional[np.ndarray]:
                return np.ctypeslib.as_array(p, shape).copy() if p else None

            camera = None
            if v.has_camera:
                camera = {
                    "extrinsics": np.array(v.extrinsics[:], dtype=np.float64).reshape(3, 4),
                    "intrinsics": np.array(v.intrinsics[:], dtype=np.float64).reshape(3, 3),
                    "intrinsics_original": np.array(v.intrinsics_original[:], dtype=np.float64).reshape(3, 3),
                }
            unit = UNITS[v.unit] if 0 <= v.unit < len(UNITS) else f"unit{v.unit}"
            out.append(Result(arr(v.depth), arr(v.conf), arr(v.sky), unit, camera,
                              (v.processed_width, v.processed_height)))
        return out
    finally:
        _lib.lib().da3go_free_views(views, n)


def _paths(images: Sequence[Any]) -> Any:
    """A C array of the file names."""
    return (C.c_char_p * len(images))(*[os.fsencode(p) for p in images])


class Model:
    """A da3-go model: a GGUF file or a published name (``da3-go models`` lists
    them; with metric_path, the nested any-view + metric pair).

    Use it as a context manager, or call close(). Runs on one model are
    serialised by the library; a Model may be shared between threads, and the
    GIL is released while the library computes.

    Every run takes these keyword options: process_res (0: the model's
    default), processed_size (maps at the network's size), method (resize
    method), ref_view (saddle_balanced, first, middle), ray_pose, ray_seed,
    and given cameras: extrinsics (Nx3x4 world-to-camera) with intrinsics
    (Nx4: fx, fy, cx, cy in pixels of the original images).

    Images from a distorted or fisheye lens: camera_model (COLMAP's name as
    ``da3-go depth -camera-model`` takes it: "opencv", "full_opencv",
    "fisheye" = "opencv_fisheye", ...) and camera_params (its parameters in
    COLMAP's order, pixels of the input images). Each image is undistorted to
    a pinhole view for the model and the outputs are mapped back to the input
    image's pixels: maps at its size with NaN where a pixel's ray leaves the
    pinhole view, cameras with the lens's pinhole part, points and exports
    along the lens's rays, COLMAP with the lens's model; keep_undistorted=True
    keeps everything in the pinhole views. undistort_balance (0: the view
    filled, 1: all of the image) and undistort_fov (degrees, 0: 150) choose
    the view.
    """

    def __init__(self, path_or_name: Union[str, os.PathLike], *,
                 metric_path: Optional[Union[str, os.PathLike]] = None, device: str = "auto", threads: int = 0,
                 precision: str = "f32", narrow_convs: Optional[bool] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None, download: bool = True) -> None:
        """Loads the model.

        path_or_name: a GGUF file, or a published name such as "da3-small",
        found in the cache (cache_dir, else $DA3_CACHE_DIR, else the user's
        cache folder) and downloaded there first when missing, unless
        download=False. metric_path: the metric half of a nested pair (file
        or name). device: "auto" ($DA3_DEVICE, else the best device), "cpu",
        "cuda0", "vulkan0", ... threads: 0 for every core. precision: "f32",
        "bf16" (AVX512_BF16 CPUs), "int8" (AVX512_VNNI CPUs) or "int8c" (AVX512_VNNI
        or AVX2 CPUs; one int8 scale per output channel), the precision of the
        CPU products;
        narrow_convs: True, with bf16 or int8, the convolutions too; False
        keeps them f32; None lets the model choose (narrow for DA3's
        any-view models under int8c, else the heads' stride-2 resize only, in
        bf16). Raises Error with the library's message when the model cannot be
        loaded.
        """
        lib = _lib.lib()
        self._handle = _lib.Handle(0)
        opt = _lib.LoadOptions(
            model=os.fsencode(path_or_name),
            metric_model=os.fsencode(metric_path) if metric_path is not None else None,
            device=None if device in ("", "auto") else device.encode(),
            threads=int(threads),
            precision=precision.encode(),
            narrow_convs=0 if narrow_convs is None else (1 if narrow_convs else -1),
            cache_dir=os.fsencode(cache_dir) if cache_dir is not None else None,
            no_download=int(not download),
        )
        err = C.c_void_p()
        _lib.check(lib.da3go_load_with(C.byref(opt), C.byref(self._handle), C.byref(err)), err)

    # Lifetime.

    def close(self) -> None:
        """Frees the model (waits for runs in flight); calling it again does nothing."""
        h, self._handle = self._handle, _lib.Handle(0)
        if h.value:
            err = C.c_void_p()
            _lib.check(_lib.lib().da3go_free(h, C.byref(err)), err)

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return not self._handle.value

    def _h(self) -> Any:
        if not self._handle.value:
            raise Error("the model is closed")
        return self._handle

    @property
    def info(self) -> Dict[str, Any]:
        """The model's description (da3go_info_json): name, arch, metric, camera, confidence, ..."""
        out, err = C.c_void_p(), C.c_void_p()
        lib = _lib.lib()
        _lib.check(lib.da3go_info_json(self._h(), C.byref(out), C.byref(err)), err)
        try:
            return json.loads(C.string_at(out.value).decode())
        finally:
            lib.da3go_free_string(out)

    # Runs.

    def depth(self, image: ImageLike, **options: Any) -> Result:
        """One image's outputs. A path is decoded by the library."""
        return self._run_alone([image], options)[0]

    def depth_batch(self, images: Sequence[ImageLike], **options: Any) -> List[Result]:
        """Each image alone, in the model's batched graph: one library call per image size
        (paths are decoded with Pillow). Results are in input order; they may differ from
        depth()'s in the last float bits (the batch sums in another order)."""
        arrays = [as_rgb(im) for im in images]
        if not arrays:
            raise Error("depth_batch: no images")
        ext, ixt = options.pop("extrinsics", None), options.pop("intrinsics", None)
        groups: Dict[Tuple[int, int], List[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.shape[:2], []).append(i)
        out: List[Optional[Result]] = [None] * len(arrays)
        lib = _lib.lib()
        for (h, w), idx in groups.items():
            stack = np.ascontiguousarray(np.stack([arrays[i] for i in idx]))
            cams = {}
            if ext is not None or ixt is not None:
                cams = {"extrinsics": None if ext is None else np.asarray(ext)[idx],
                        "intrinsics": None if ixt is None else np.asarray(ixt)[idx]}
            opt = _Options(len(idx), **options, **cams)
            views, n, err = C.POINTER(_lib.View)(), C.c_int(), C.c_void_p()
            _lib.check(lib.da3go_depth_batch(self._h(), stack.ctypes.data_as(C.POINTER(C.c_uint8)), len(idx), w, h,
                                             opt.ref(), C.byref(views), C.byref(n), C.byref(err)), err)
            for i, r in zip(idx, _take_views(views, n.value)):
                out[i] = r
        return out  # type: ignore[return-value]

    def scene(self, images: Sequence[ImageLike], **options: Any) -> List[Result]:
        """The images as views of one scene (multi-view depth and cameras). Paths are decoded
        by the library when every image is a path, with Pillow otherwise."""
        images = list(images)
        if images and all(_is_path(im) for im in images):
            return self._run_paths(images, _Options(len(images), **options))
        return self.scenes([images], **options)[0]

    def scenes(self, scenes: Sequence[Sequence[ImageLike]], **options: Any) -> List[List[Result]]:
        """Several scenes in one library call; each scene's results in a list."""
        scenes = [[as_rgb(im) for im in s] for s in scenes]
        flat = [a for s in scenes for a in s]
        counts = [len(s) for s in scenes]
        results = self._run_arrays(flat, counts, _Options(len(flat), **options))
        out, start = [], 0
        for c in counts:
            out.append(results[start:start + c])
            start += c
        return out

    def points(self, images: Sequence[Union[str, os.PathLike]], conf_thresh: float = 0.0,
               **options: Any) -> Tuple[np.ndarray, np.ndarray]:
        """The scene's coloured point cloud (world frame): (xyz float32 Nx3, rgb uint8 Nx3).
        conf_thresh 0: the official selection; otherwise the pixels with confidence ≥ it."""
        paths = _paths(images)
        opt = _Options(len(images), **options)
        n, xyz, rgb, err = C.c_int(), C.POINTER(C.c_float)(), C.POINTER(C.c_uint8)(), C.c_void_p()
        lib = _lib.lib()
        _lib.check(lib.da3go_points(self._h(), paths, len(images), opt.ref(), float(conf_thresh), C.byref(n),
                                    C.byref(xyz), C.byref(rgb), C.byref(err)), err)
        try:
            k = n.value
            return (np.ctypeslib.as_array(xyz, (k, 3)).copy() if k else np.zeros((0, 3), np.float32),
                    np.ctypeslib.as_array(rgb, (k, 3)).copy() if k else np.zeros((0, 3), np.uint8))
        finally:
            lib.da3go_free_buffer(xyz)
            lib.da3go_free_buffer(rgb)

    def export(self, images: Sequence[ImageLike], format: str, path: Union[str, os.PathLike],
               **options: Any) -> Path:
        """Writes the scene as da3-go reconstruct does: format glb, ply, npz, mini_npz, colmap or
        colmap_tracks (path is a directory), gs_ply, gs_video (MP4, needs ffmpeg), mesh_ply or
        mesh_glb (the views' depth fused into one mesh), mesh_points (its vertices as a point
        cloud). Arrays and PIL images are written to temporary PNG
        files first (lossless). Returns path."""
        images = list(images)
        with tempfile.TemporaryDirectory(prefix="da3go-") as tmp:
            files = []
            for i, im in enumerate(images):
                if _is_path(im):
                    files.append(im)
                    continue
                if _PILImage is None:
                    raise Error("export of in-memory images needs Pillow (or pass image paths)")
                f = os.path.join(tmp, f"view{i}.png")
                _PILImage.fromarray(as_rgb(im)).save(f)
                files.append(f)
            opt = _Options(len(files), **options)
            err = C.c_void_p()
            _lib.check(_lib.lib().da3go_export(self._h(), _paths(files), len(files), opt.ref(), format.encode(),
                                               os.fsencode(path), C.byref(err)), err)
        return Path(path)

    # The calls.

    def _run_alone(self, images: List[ImageLike], options: Dict[str, Any]) -> List[Result]:
        opt = _Options(len(images), independent=True, **options)
        if all(_is_path(im) for im in images):
            return self._run_paths(images, opt)
        return self._run_arrays([as_rgb(im) for im in images], [len(images)], opt)

    def _run_paths(self, paths: List[Any], opt: _Options) -> List[Result]:
        if not paths:
            raise Error("no images")
        views, err = C.POINTER(_lib.View)(), C.c_void_p()
        _lib.check(_lib.lib().da3go_run(self._h(), _paths(paths), len(paths), opt.ref(), C.byref(views),
                                        C.byref(err)), err)
        return _take_views(views, len(paths))

    def _run_arrays(self, arrays: List[np.ndarray], counts: List[int], opt: _Options) -> List[Result]:
        """da3go_run_scenes: consecutive groups of counts[k] arrays, each a scene."""
        if not arrays:
            raise Error("no images")
        k = len(arrays)
        ptrs = (C.POINTER(C.c_uint8) * k)(*[a.ctypes.data_as(C.POINTER(C.c_uint8)) for a in arrays])
        ws = (C.c_int * k)(*[a.shape[1] for a in arrays])
        hs = (C.c_int * k)(*[a.shape[0] for a in arrays])
        cs = (C.c_int * len(counts))(*counts)
        views, n, err = C.POINTER(_lib.View)(), C.c_int(), C.c_void_p()
        _lib.check(_lib.lib().da3go_run_scenes(self._h(), ptrs, ws, hs, cs, len(counts), opt.ref(), C.byref(views),
                                               C.byref(n), C.byref(err)), err)
        return _take_views(views, n.value)
