"""da3go: Depth Anything 3 / V2 on ggml from Python, numpy in and numpy out.

    import da3go
    with da3go.Model("da3-small.gguf") as m:
        r = m.depth("photo.jpg")        # a path, a PIL image or an HxWx3 uint8 array
        print(r.depth.shape, r.unit)    # float32 HxW

The package loads libda3go.so (da3-go's C ABI) bundled in it, else the file
named by $DA3GO_LIB. Library errors are raised as da3go.Error. Calls release
the GIL while the model runs, so other threads go on.
"""
from ._lib import ABI_VERSION, Error, library_path
from .model import EXPORT_FORMATS, UNITS, Model, Result, as_rgb

__all__ = ["ABI_VERSION", "EXPORT_FORMATS", "UNITS", "Error", "Model", "Result", "as_rgb", "library_path"]
__version__ = "0.1.0"
