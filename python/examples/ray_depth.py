#!/usr/bin/env python3
"""Depth of every image of a folder on a Ray cluster, one .npy per image; or, with --scenes, one
multi-view scene per sub-folder (depth and cameras in the scene's frame, one .npz per image).

    python ray_depth.py photos/ out/ --model da3-small --address auto --concurrency 4 --threads 2
    python ray_depth.py scans/ out/ --model da3-base --scenes          # scans/<scene>/<view>.jpg

Outputs are keyed by the image's path (da3go.ray.output_path) and written atomically; a rerun runs
only the images without an output, so a failed or interrupted job is finished by running it again.
--address local starts a Ray instance in this process (one machine); "auto" joins a running cluster.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"}


def images_under(folder: Path) -> List[Path]:
    """The image files below folder, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTS)


def write_scene_npz(batch: Dict[str, np.ndarray], out_dir: str) -> Dict[str, np.ndarray]:
    """Writes depth (and cameras, confidence where present) of each row to its .npz, atomically."""
    import da3go.ray as dr

    files = []
    for i, path in enumerate(batch["path"]):
        dst = dr.output_path(out_dir, str(path)).with_suffix(".npz")
        tmp = dst.with_name(dst.name + ".tmp")
        arrays = {k: np.asarray(batch[k][i]) for k in ("depth", "conf", "extrinsics", "intrinsics") if k in batch}
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, dst)
        files.append(str(dst))
    return {"path": batch["path"], "file": np.asarray(files)}


def run_scenes(paths: List[Path], root: Path, args: argparse.Namespace) -> int:
    """One multi-view scene per sub-folder of root."""
    import ray
    import da3go.ray as dr

    rows = [{"scene": str(p.parent.relative_to(root)), "path": str(p)} for p in paths]
    done = {r["scene"] for r in rows if dr.output_path(args.out, r["path"]).with_suffix(".npz").exists()}
    rows = [r for r in rows if r["scene"] not in done]  # a scene is rerun whole or not at all
    if not rows:
        return 0
    kwargs = {"model": args.model, "device": args.device, "threads": args.threads, "precision": args.precision}
    ds = ray.data.from_items(rows).groupby("scene").map_groups(
        dr.ScenePredictor, fn_constructor_kwargs=kwargs, concurrency=args.concurrency, num_cpus=args.threads,
        batch_format="numpy")
    ds = ds.map_batches(write_scene_npz, fn_kwargs={"out_dir": args.out}, batch_format="numpy", num_cpus=0)
    return sum(1 for _ in ds.iter_rows())


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images", type=Path, help="folder of images (searched recursively)")
    ap.add_argument("out", help="output folder")
    ap.add_argument("--model", required=True, help="a GGUF file or a published name (da3-go models)")
    ap.add_argument("--address", default="local", help='Ray cluster: "local" (start one here), "auto", or host:port')
    ap.add_argument("--concurrency", type=int, default=1, help="model actors (each loads the model once)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (and Ray CPUs) per actor")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="f32", choices=("f32", "bf16", "int8", "int8c"))
    ap.add_argument("--scenes", action="store_true", help="each sub-folder is one multi-view scene")
    args = ap.parse_args(argv)

    import ray
    import da3go.ray as dr

    paths = images_under(args.images)
    if not paths:
        print(f"ray_depth: no images under {args.images}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    ray.init(address=None if args.address == "local" else args.address, logging_level="ERROR")
    try:
        if args.scenes:
            n = run_scenes(paths, args.images, args)
        else:
            n = len(dr.depth_job(paths, args.model, args.out, concurrency=args.concurrency, threads=args.threads,
                                 batch_size=args.batch_size, device=args.device, precision=args.precision))
    finally:
        ray.shutdown()
    print(f"ray_depth: {n} of {len(paths)} images written to {args.out} (the others were done already)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
