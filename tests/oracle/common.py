"""Small helpers shared by the oracle scripts (DA2 and DA3).

Keep this module small and append-only: other oracle scripts import it, so never change the meaning of an
existing function; add new ones at the end.
"""

import json
import os

import numpy as np
import torch
from safetensors.torch import save_file


def repo_root():
    """Absolute path of the repository root (two levels above this file)."""
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def save_ref(path, tensors, metadata=None):
    """Writes tensors as float32, contiguous, in insertion order, to a safetensors file.

    The file stores each tensor with its torch shape (C order). metadata is an optional dict of str -> str.
    """
    out = {}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            t = torch.from_numpy(np.asarray(t))
        out[name] = t.detach().to(device="cpu", dtype=torch.float32).contiguous().clone()
    save_file(out, path, metadata=metadata)


def write_json(path, obj):
    """Writes obj as indented JSON with a trailing newline."""
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def tensor_stats(t):
    """min, max, mean, std of a tensor as Python floats (float64 reduction)."""
    d = t.detach().double()
    return {
        "min": float(d.min()),
        "max": float(d.max()),
        "mean": float(d.mean()),
        "std": float(d.std()) if d.numel() > 1 else 0.0,
    }


def synthetic_image(width, height):
    """Deterministic RGB uint8 image (height, width, 3) with gradients and hard-edged shapes.

    Pure numpy arithmetic (no RNG, no drawing library), so it is identical on every platform.
    """
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u = x / max(width - 1, 1)
    v = y / max(height - 1, 1)
    r = 40 + 180 * u
    g = 30 + 170 * v
    b = 128 + 90 * np.sin(2 * np.pi * (1.5 * u + 0.75 * v))
    img = np.stack([r, g, b], axis=-1)
    # bright disk, left of centre
    cx, cy, rad = 0.32 * width, 0.45 * height, 0.22 * min(width, height)
    disk = (x - cx) ** 2 + (y - cy) ** 2 <= rad**2
    img[disk] = (235, 220, 60)
    # dark rectangle, lower right
    rect = (x >= 0.58 * width) & (x < 0.88 * width) & (y >= 0.55 * height) & (y < 0.85 * height)
    img[rect] = (25, 35, 90)
    # triangle, upper right (half-plane tests)
    tri = (y >= 0.08 * height) & (y < 0.42 * height) & (np.abs(x - 0.75 * width) <= (y - 0.08 * height) * 0.6)
    img[tri] = (200, 40, 50)
    # thin vertical stripes band at the bottom
    band = (y >= 0.9 * height) & ((x.astype(np.int64) // 3) % 2 == 0)
    img[band] = img[band] * 0.4
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def dir_size(path):
    """Total size in bytes of the regular files below path."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total
