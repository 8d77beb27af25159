#!/usr/bin/env python3
"""Renders a da3-go GLB (points and camera frusta, glTF axes) to a PNG, offscreen, with numpy and Pillow:
a pinhole view from a virtual camera turned about the scene's vertical axis, points splatted far to near.

Usage: render.py SCENE.glb OUT.png [--yaw 35] [--pitch 15] [--size 900x600] [--dist 1.0]
"""
import argparse
import math

import numpy as np
import trimesh
from PIL import Image, ImageDraw


def rotation(yaw, pitch):
    y, p = math.radians(yaw), math.radians(pitch)
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    return rx @ ry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("glb")
    ap.add_argument("out")
    ap.add_argument("--yaw", type=float, default=35)
    ap.add_argument("--pitch", type=float, default=15)
    ap.add_argument("--size", default="900x600")
    ap.add_argument("--dist", type=float, default=1.0, help="camera distance as a multiple of the scene size")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))

    scene = trimesh.load(args.glb, force="scene")
    pts, cols, lines = None, None, []
    for name, g in scene.geometry.items():
        if isinstance(g, trimesh.PointCloud):
            pts, cols = np.asarray(g.vertices, np.float64), np.asarray(g.colors)[:, :3]
        elif isinstance(g, trimesh.path.Path3D):
            col = tuple(int(c) for c in np.asarray(g.colors)[0][:3]) if g.colors is not None else (255, 0, 0)
            for e in g.entities:
                seg = g.vertices[e.points]
                lines += [(seg[i], seg[i + 1], col) for i in range(len(seg) - 1)]
    lo, hi = np.percentile(pts, 2, axis=0), np.percentile(pts, 98, axis=0)
    size = float(np.linalg.norm(hi - lo))
    r = rotation(args.yaw, args.pitch)
    # glTF camera looks down −z: put the virtual camera at distance d on +z of the rotated frame.
    d = args.dist * size + (hi[2] - lo[2]) / 2

    def project(p):
        q = (r @ (p - (lo + hi) / 2).T).T
        z = d - q[:, 2]
        f = 0.9 * w
        return np.stack([w / 2 + f * q[:, 0] / z, h / 2 - f * q[:, 1] / z], -1), z

    uv, z = project(pts)
    order = np.argsort(-z)  # far first
    img = np.full((h, w, 3), 255, np.uint8)
    zbuf = np.full((h, w), np.inf)
    for k in order:
        x, y = int(uv[k, 0]), int(uv[k, 1])
        for dy in (0, 1):
            for dx in (0, 1):
                if 0 <= x + dx < w and 0 <= y + dy < h and z[k] < zbuf[y + dy, x + dx]:
                    zbuf[y + dy, x + dx] = z[k]
                    img[y + dy, x + dx] = cols[k]
    im = Image.fromarray(img)
    draw = ImageDraw.Draw(im)
    for a, b, col in lines:
        (pa, pb), _ = project(np.array([a, b]))
        draw.line([tuple(pa), tuple(pb)], fill=col, width=2)
    # Crop to the drawing with a margin.
    ys, xs = np.nonzero(np.any(np.asarray(im) != 255, axis=-1))
    m = 12
    im = im.crop((max(0, xs.min() - m), max(0, ys.min() - m), min(w, xs.max() + m), min(h, ys.max() + m)))
    im.save(args.out, optimize=True)


if __name__ == "__main__":
    main()
