"""da3-go from Python through its C ABI, with ctypes only.

    make capi
    python3 capi/example.py bin/libda3go.so da3-small.gguf photo.jpg

Prints the depth map's size and statistics (go test ./capi runs it).
"""
import ctypes as C
import sys


class Options(C.Structure):  # da3go_options
    _fields_ = [("process_res", C.c_int), ("processed_size", C.c_int),
                ("method", C.c_char_p), ("ref_view", C.c_char_p), ("independent", C.c_int),
                ("ray_pose", C.c_int), ("ray_seed", C.c_uint64),
                ("given_extrinsics", C.POINTER(C.c_double)), ("given_intrinsics", C.POINTER(C.c_double)),
                # ABI 4: the lens of distorted and fisheye images
                ("camera_model", C.c_char_p), ("camera_params", C.POINTER(C.c_double)), ("keep_undistorted", C.c_int),
                ("undistort_balance", C.c_double), ("undistort_fov", C.c_double)]


lib = C.CDLL(sys.argv[1])
if lib.da3go_abi_version() != 4:  # Options above is version 4's da3go_options
    raise RuntimeError(f"libda3go has C ABI version {lib.da3go_abi_version()}, this example needs 4")
lib.da3go_load.argtypes = [C.c_char_p, C.c_char_p, C.c_char_p, C.c_int, C.POINTER(C.c_size_t), C.POINTER(C.c_void_p)]
lib.da3go_depth.argtypes = [C.c_size_t, C.c_char_p, C.POINTER(Options), C.POINTER(C.POINTER(C.c_float)),
                            C.POINTER(C.c_int), C.POINTER(C.c_int), C.POINTER(C.c_void_p)]
lib.da3go_free.argtypes = [C.c_size_t, C.POINTER(C.c_void_p)]
lib.da3go_free_buffer.argtypes = [C.c_void_p]
lib.da3go_free_string.argtypes = [C.c_void_p]


def check(status, err):
    """Raises the library's error message (an owned C string) when status is -1."""
    if status != 0:
        msg = C.string_at(err.value).decode()
        lib.da3go_free_string(err)
        raise RuntimeError(msg)


err = C.c_void_p()
model = C.c_size_t()
check(lib.da3go_load(sys.argv[2].encode(), None, b"cpu", 1, C.byref(model), C.byref(err)), err)
try:
    opt = Options(process_res=int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    depth, w, h = C.POINTER(C.c_float)(), C.c_int(), C.c_int()
    check(lib.da3go_depth(model, sys.argv[3].encode(), C.byref(opt), C.byref(depth), C.byref(w), C.byref(h), C.byref(err)), err)
    values = depth[: w.value * h.value]  # a Python copy; or numpy.ctypeslib.as_array(depth, (h.value, w.value))
    lib.da3go_free_buffer(depth)
    print(f"depth {w.value}x{h.value} min {min(values):.6f} max {max(values):.6f} mean {sum(values) / len(values):.6f}")
finally:
    lib.da3go_free(model, None)
