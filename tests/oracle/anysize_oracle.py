#!/usr/bin/env python3
"""End-to-end references at image sizes whose two axes scale differently, from JPEG files.

    python3 tests/oracle/anysize_oracle.py --out tests/fixtures/anysize                       # committed
    python3 tests/oracle/anysize_oracle.py --out tests/oracle/out/anysize-full \\
        --da3-model tests/oracle/out/da3-small --da2-model tests/oracle/out/da2-vits \\
        --process-res 504 --input-size 518                                                     # on demand

Each image goes through the official pipelines exactly as a user's file would:
  * Depth Anything 3: `InputProcessor([path], process_res, process_res_method)` (PIL `Image.open`, the
    package's cv2 resizes) for every process_res_method, then `DepthAnything3Net.forward`;
  * Depth Anything V2: the original code's `cv2.imread(path)` + `DepthAnythingV2.image2tensor` + forward.
The images are synthetic JPEGs written here by cv2 (624x464, 1000x333, 333x1000, 1920x1080 and a
15-pixel-wide strip), the NYU JPEG and a KITTI frame of the shared test data (read in place, never
copied; KITTI frames exist only as PNG) and internal/jpeg's Exif-orientation-6 JPEG (cv2.imread turns
it upright, PIL does not).

The committed fixture reuses the weights of tests/fixtures/da3-tiny and da2-tiny at a small processing
resolution (70), where the rounding of each side to a multiple of 14 still differs per axis, and stores
per case the depth (and for DA3 confidence, extrinsics, intrinsics) at the processed size and, for DA3,
the official processed 8-bit image as PNG (rgb/). Formats: meta.json lists the cases; da3.safetensors
holds `<case>/<method>/{depth,conf,extrinsics,intrinsics}`, da2.safetensors `<case>/depth`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import da2_oracle  # noqa: E402  (imports transformers: before da3_common installs its torchvision shim)
import da2_upstream  # noqa: E402
import da3_common as dc  # noqa: E402

REPO = HERE.parent.parent
METHODS = ["upper_bound_resize", "lower_bound_resize", "upper_bound_crop", "lower_bound_crop"]
SIZES = [(624, 464), (1000, 333), (333, 1000), (1920, 1080), (15, 45)]
SHARED = ["nyu/rgb_00000.jpg", "kitti/0000000005.png"]
EXIF = "internal/jpeg/testdata/exif_o6.jpg"


def find_shared(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    d = HERE
    while d != d.parent:
        d = d.parent
        if (d / "shared" / "data" / "manifest.json").exists():
            return d / "shared" / "data"
    return None


def write_jpeg(path: Path, w: int, h: int):
    rgb = common.synthetic_image(w, h)
    ok = cv2.imwrite(str(path), np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 88])
    assert ok, path
    a = cv2.imread(str(path), cv2.IMREAD_COLOR)[:, :, ::-1]
    b = np.asarray(Image.open(path).convert("RGB"))
    assert np.array_equal(a, b), f"{path}: cv2 and PIL decode differently"


def images(out: Path, shared: Path | None) -> list[tuple[str, str, Path]]:
    """(case name, reference in meta.json, file) for every input image."""
    (out / "images").mkdir(parents=True, exist_ok=True)
    cases = []
    for w, h in SIZES:
        name = f"{w}x{h}"
        p = out / "images" / f"{name}.jpg"
        write_jpeg(p, w, h)
        cases.append((name, f"images/{name}.jpg", p))
    for rel in SHARED:
        if shared is None or not (shared / rel).exists():
            print(f"  {rel}: shared data not found, case skipped")
            continue
        cases.append((rel.replace("/", "_").rsplit(".", 1)[0], f"shared:{rel}", shared / rel))
    cases.append(("exif_o6", f"repo:{EXIF}", REPO / EXIF))
    return cases


# ----------------------------------------------------------------------------------------------------


def load_da3(model_dir: Path):
    dc.setup_imports()
    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg.get("model_name") == "da3-tiny":
        dc.register_tiny()
    from depth_anything_3.api import DepthAnything3

    return DepthAnything3.from_pretrained(str(model_dir), strict=True).model.eval(), cfg.get("model_name")


def processed_image(proc, path: Path, res: int, method: str):
    """The processed 8-bit image, by the same steps as InputProcessor._process_one."""
    img = proc._resize_image(proc._load_image(str(path)), res, method)
    return (proc._make_divisible_by_resize if method.endswith("resize") else proc._make_divisible_by_crop)(img, 14)


@torch.no_grad()
def run_da3(net, path: Path, res: int, method: str):
    from depth_anything_3.utils.io.input_processor import InputProcessor

    proc = InputProcessor()
    x, _, _ = proc([str(path)], process_res=res, process_res_method=method, num_workers=1)
    img = processed_image(proc, path, res, method)
    if not torch.equal(proc._normalize_image(img), x[0]):
        raise AssertionError(f"{path} {method}: processed image does not reproduce the input tensor")
    return forward_da3(net, x), np.asarray(img)


@torch.no_grad()
def forward_da3(net, x):
    out = net(x[None])
    t = {"depth": out["depth"][0, 0], "conf": out["depth_conf"][0, 0],
         "extrinsics": out["extrinsics"][0, 0], "intrinsics": out["intrinsics"][0, 0]}
    for k, v in t.items():
        if not torch.isfinite(v).all():
            raise RuntimeError(f"non-finite {k}")
    return t


# OpenCV's x86-64 wheels run 8-bit INTER_CUBIC through Intel IPP, which picks its code by the CPU's features
# and decides values on (or within a float32 ulp of) a .5 tie by each variant's own operation order: the
# official processed image is not the same on every CPU. OPENCV_IPP selects a variant (read once, when cv2
# starts), so each runs in a process of its own; only the variants this CPU can execute are measured.
IPP_VARIANTS = {"sse42": "sse4_2", "avx2": "avx2", "avx512": "avx512f"}


def ipp_variants() -> list[str]:
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return []
    return [v for v, f in IPP_VARIANTS.items() if f in flags]


def dump_processed(spec: Path, dump: Path) -> int:
    """--ipp-dump: the processed images of the cases listed in spec, under this process's OPENCV_IPP."""
    dc.setup_imports()
    from depth_anything_3.utils.io.input_processor import InputProcessor

    job = json.loads(spec.read_text())
    proc = InputProcessor()
    arrays = {f"{c}/{m}": np.asarray(processed_image(proc, Path(p), job["res"], m))
              for c, p in job["images"] for m in METHODS}
    np.savez(dump, **arrays)
    return 0


def processed_by_variant(out: Path, cases, res: int) -> dict[str, dict[str, np.ndarray]]:
    spec = out / ".ipp-job.json"
    spec.write_text(json.dumps({"res": res, "images": [(c, str(p)) for c, _, p in cases]}))
    got = {}
    try:
        for v in ipp_variants():
            dump = out / f".ipp-{v}.npz"
            subprocess.run([sys.executable, __file__, "--out", str(out), "--ipp-dump", str(dump), "--ipp-job", str(spec)],
                           env={**os.environ, "OPENCV_IPP": v}, check=True, stdout=subprocess.DEVNULL)
            with np.load(dump) as z:
                got[v] = {k: z[k] for k in z.files}
            dump.unlink()
    finally:
        spec.unlink()
    return got


def rel_maxd(ref: torch.Tensor, other: torch.Tensor) -> float:
    return float((ref - other).abs().max() / ref.abs().max())


def load_da2(model_dir: Path):
    meta = json.loads((model_dir / "meta.json").read_text())
    cfg = da2_oracle.CONFIGS[meta["config"]]
    net = da2_upstream.build(meta["config"], cfg["embed_dim"], cfg["depth"], cfg["heads"], cfg["out_layers"],
                             cfg["features"], cfg["out_channels"], cfg["pos_grid"] * 14, float(meta.get("max_depth", 0)))
    sd = torch.load(str(model_dir / "model.pth"), map_location="cpu", weights_only=True)
    net.load_state_dict(sd, strict=True)
    return net.eval(), meta["config"]


@torch.no_grad()
def run_da2(net, path: Path, input_size: int):
    bgr = cv2.imread(str(path))  # the original run.py's read: applies the Exif orientation
    x, _ = da2_upstream.image2tensor(bgr, input_size)
    depth = da2_upstream.forward(net, x)[0]
    if not torch.isfinite(depth).all():
        raise RuntimeError("non-finite depth")
    return depth, tuple(x.shape[-2:])


def rel(p: Path, base: Path) -> str:
    return os.path.relpath(p, base)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--da3-model", type=Path, default=REPO / "tests" / "fixtures" / "da3-tiny")
    ap.add_argument("--da2-model", type=Path, default=REPO / "tests" / "fixtures" / "da2-tiny")
    ap.add_argument("--process-res", type=int, default=70, help="DA3 process_res")
    ap.add_argument("--input-size", type=int, default=70, help="DA2 input_size")
    ap.add_argument("--data", help="shared test data (default: the first shared/data above this script)")
    ap.add_argument("--ipp-dump", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ipp-job", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ipp_dump:
        return dump_processed(args.ipp_job, args.ipp_dump)
    torch.set_grad_enabled(False)
    t0 = time.time()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shared = find_shared(args.data)
    cases = images(out, shared)
    meta = {"format": "anysize-oracle-v1", "images": {n: ref for n, ref, _ in cases}}
    tensors = {}

    net, name = load_da3(args.da3_model)
    meta["da3"] = {"model": rel(args.da3_model.resolve(), out.resolve()), "model_name": name,
                   "process_res": args.process_res, "cases": []}
    (out / "rgb").mkdir(exist_ok=True)
    variants = processed_by_variant(out, cases, args.process_res)
    meta["da3"]["ipp_variants"] = sorted(variants)
    from depth_anything_3.utils.io.input_processor import InputProcessor

    proc = InputProcessor()
    for case, _, path in cases:
        for m in METHODS:
            t, rgb = run_da3(net, path, args.process_res, m)
            for k, v in t.items():
                tensors[f"{case}/{m}/{k}"] = v
            png = out / "rgb" / f"{case}_{m}.png"
            Image.fromarray(rgb).save(png, optimize=True)
            c = {"image": case, "method": m, "processed_hw": list(rgb.shape[:2]), "rgb": rel(png, out)}
            # The reference's own spread: how many values each IPP variant's processed image changes and how
            # far the network's outputs move with it (relative to max|default|).
            spread = {"values": 0, "depth": 0.0, "conf": 0.0}
            for v, imgs in variants.items():
                other = imgs[f"{case}/{m}"]
                n = int((other != rgb).sum())
                if n == 0:
                    continue
                o = forward_da3(net, proc._normalize_image(Image.fromarray(other))[None])
                spread["values"] = max(spread["values"], n)
                spread["depth"] = max(spread["depth"], rel_maxd(t["depth"], o["depth"]))
                spread["conf"] = max(spread["conf"], rel_maxd(t["conf"], o["conf"]))
            c["ipp_spread"] = spread
            meta["da3"]["cases"].append(c)
            print(f"  da3 {case:22s} {m:20s} {rgb.shape[1]}x{rgb.shape[0]}  IPP variants: {spread['values']} values,"
                  f" depth {spread['depth']:.2e}, conf {spread['conf']:.2e}")

    common.save_ref(str(out / "da3.safetensors"), tensors, metadata={"format": "pt"})
    n = len(tensors)
    tensors = {}
    net, config = load_da2(args.da2_model)
    meta["da2"] = {"model": rel(args.da2_model.resolve(), out.resolve()), "config": config,
                   "input_size": args.input_size, "cases": []}
    for case, _, path in cases:
        depth, hw = run_da2(net, path, args.input_size)
        tensors[f"{case}/depth"] = depth
        meta["da2"]["cases"].append({"image": case, "processed_hw": list(hw)})
        print(f"  da2 {case:22s} {hw[1]}x{hw[0]}")

    common.save_ref(str(out / "da2.safetensors"), tensors, metadata={"format": "pt"})
    n += len(tensors)
    meta["torch"] = torch.__version__
    meta["cv2"] = cv2.__version__
    common.write_json(out / "meta.json", meta)
    print(f"{n} tensors, {common.dir_size(out) / 1024:.0f} KiB in {out} ({time.time() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
