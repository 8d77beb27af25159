"""The ctypes declarations of libda3go (capi/capi.go) and the loading of the library.

The library is the libda3go.so bundled next to this package, else the file
named by the environment variable DA3GO_LIB. Calls go through ctypes.CDLL,
which releases the GIL for the duration of each call: other Python threads run
while a model computes.
"""
from __future__ import annotations

import ctypes as C
import os
import threading
from pathlib import Path
from typing import Optional

#: The C ABI version this package is written for (da3go_abi_version).
ABI_VERSION = 4


class Error(RuntimeError):
    """An error of the da3-go library (its message), or of the bindings."""


class LoadOptions(C.Structure):
    """da3go_load_options."""

    _fields_ = [
        ("model", C.c_char_p),
        ("metric_model", C.c_char_p),
        ("device", C.c_char_p),
        ("threads", C.c_int),
        ("precision", C.c_char_p),
        ("narrow_convs", C.c_int),
        ("cache_dir", C.c_char_p),
        ("no_download", C.c_int),
    ]


class Options(C.Structure):
    """da3go_options."""

    _fields_ = [
        ("process_res", C.c_int),
        ("processed_size", C.c_int),
        ("method", C.c_char_p),
        ("ref_view", C.c_char_p),
        ("independent", C.c_int),
        ("ray_pose", C.c_int),
        ("ray_seed", C.c_uint64),
        ("given_extrinsics", C.POINTER(C.c_double)),
        ("given_intrinsics", C.POINTER(C.c_double)),
        # ABI 4: the lens of distorted and fisheye images.
        ("camera_model", C.c_char_p),
        ("camera_params", C.POINTER(C.c_double)),
        ("keep_undistorted", C.c_int),
        ("undistort_balance", C.c_double),
        ("undistort_fov", C.c_double),
    ]


class View(C.Structure):
    """da3go_view: one view's outputs."""

    _fields_ = [
        ("width", C.c_int),
        ("height", C.c_int),
        ("processed_width", C.c_int),
        ("processed_height", C.c_int),
        ("depth", C.POINTER(C.c_float)),
        ("conf", C.POINTER(C.c_float)),
        ("sky", C.POINTER(C.c_float)),
        ("unit", C.c_int),
        ("has_camera", C.c_int),
        ("extrinsics", C.c_double * 12),
        ("intrinsics", C.c_double * 9),
        ("intrinsics_original", C.c_double * 9),
    ]


Handle = C.c_size_t  # da3go_model (uintptr_t)
_int_p = C.POINTER(C.c_int)
_err_p = C.POINTER(C.c_void_p)
_views_p = C.POINTER(C.POINTER(View))
_opt_p = C.POINTER(Options)
_u8_p = C.POINTER(C.c_uint8)

_SIGNATURES = {
    "da3go_abi_version": ([], C.c_int),
    "da3go_camera_model_params": ([C.c_char_p, _int_p, _err_p], C.c_int),
    "da3go_load": ([C.c_char_p, C.c_char_p, C.c_char_p, C.c_int, C.POINTER(Handle), _err_p], C.c_int),
    "da3go_load_with": ([C.POINTER(LoadOptions), C.POINTER(Handle), _err_p], C.c_int),
    "da3go_free": ([Handle, _err_p], C.c_int),
    "da3go_info_json": ([Handle, _err_p, _err_p], C.c_int),
    "da3go_run": ([Handle, C.POINTER(C.c_char_p), C.c_int, _opt_p, _views_p, _err_p], C.c_int),
    "da3go_depth_batch": ([Handle, _u8_p, C.c_int, C.c_int, C.c_int, _opt_p, _views_p, _int_p, _err_p], C.c_int),
    "da3go_run_scenes": (
        [Handle, C.POINTER(_u8_p), _int_p, _int_p, _int_p, C.c_int, _opt_p, _views_p, _int_p, _err_p],
        C.c_int,
    ),
    "da3go_points": (
        [Handle, C.POINTER(C.c_char_p), C.c_int, _opt_p, C.c_double, _int_p,
         C.POINTER(C.POINTER(C.c_float)), C.POINTER(C.POINTER(C.c_uint8)), _err_p],
        C.c_int,
    ),
    "da3go_export": ([Handle, C.POINTER(C.c_char_p), C.c_int, _opt_p, C.c_char_p, C.c_char_p, _err_p], C.c_int),
    "da3go_free_views": ([C.POINTER(View), C.c_int], None),
    "da3go_free_buffer": ([C.c_void_p], None),
    "da3go_free_string": ([C.c_void_p], None),
}

_lock = threading.Lock()
_lib: Optional[C.CDLL] = None


def library_path() -> Path:
    """The library the package loads: the bundled libda3go.so, else $DA3GO_LIB."""
    bundled = Path(__file__).resolve().parent / "libda3go.so"
    if bundled.is_file():
        return bundled
    env = os.environ.get("DA3GO_LIB")
    if env:
        return Path(env)
    raise Error(
        f"libda3go.so not found: not bundled ({bundled}) and DA3GO_LIB is not set "
        "(build it with `make capi` or `make python` in the da3-go repository)"
    )


def lib() -> C.CDLL:
    """The loaded library (loaded once, on first use), with its signatures declared."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                loaded = C.CDLL(str(path))
            except OSError as e:
                raise Error(f"loading {path}: {e}") from e
            for name, (args, res) in _SIGNATURES.items():
                try:
                    fn = getattr(loaded, name)
                except AttributeError as e:
                    raise Error(f"{path} lacks {name}: an older libda3go (rebuild it with make capi)") from e
                fn.argtypes, fn.restype = args, res
            version = loaded.da3go_abi_version()
            if version != ABI_VERSION:
                raise Error(f"{path} has C ABI version {version}, this package needs {ABI_VERSION}")
            _lib = loaded
        return _lib


def check(status: int, err: C.c_void_p) -> None:
    """Raises the library's error (an owned C string, freed here) when status is not 0."""
    if status == 0:
        return
    msg = "unknown error (no message)"
    if err.value:
        msg = C.string_at(err.value).decode("utf-8", "replace")
        lib().da3go_free_string(err)
    raise Error(msg)
