#!/usr/bin/env python3
"""Runs pycolmap's bundle adjustment on a COLMAP sparse model (da3-go's export with tracks) and checks
that it can refine it: the model loads, its tracks have two or more observations, and the mean
reprojection error falls. Prints the figures; exits non-zero when a check fails.

    python scripts/colmap_ba.py MODEL_DIR [--min-drop 0.2]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pycolmap


def reprojection_errors(rec: "pycolmap.Reconstruction") -> np.ndarray:
    """Every observation's reprojection error in pixels."""
    errs = []
    for image in rec.images.values():
        cam = rec.cameras[image.camera_id]
        world_to_cam = image.cam_from_world() if callable(image.cam_from_world) else image.cam_from_world
        for p2d in image.points2D:
            if not p2d.has_point3D():
                continue
            xyz = rec.points3D[p2d.point3D_id].xyz
            uv = cam.img_from_cam(world_to_cam * xyz)
            errs.append(float(np.linalg.norm(np.asarray(uv).ravel()[:2] - np.asarray(p2d.xy))))
    return np.asarray(errs)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--min-drop", type=float, default=0.2, help="the mean error must fall by this fraction")
    args = ap.parse_args(argv)
    rec = pycolmap.Reconstruction(args.model)
    tracks = np.asarray([p.track.length() for p in rec.points3D.values()])
    before = reprojection_errors(rec)
    opts = pycolmap.BundleAdjustmentOptions()
    pycolmap.bundle_adjustment(rec, opts)
    after = reprojection_errors(rec)
    print(f"{len(rec.images)} images, {len(tracks)} points, mean track length {tracks.mean():.2f}; "
          f"reprojection error mean {before.mean():.3f} -> {after.mean():.3f} px, "
          f"median {np.median(before):.3f} -> {np.median(after):.3f} px")
    ok = True
    if tracks.size == 0 or tracks.min() < 2:
        print("FAIL: points observed by fewer than two images", file=sys.stderr)
        ok = False
    if not after.mean() < (1 - args.min_drop) * before.mean():
        print(f"FAIL: bundle adjustment did not lower the error by {args.min_drop:.0%}", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
