#!/usr/bin/env python3
"""Writes export/testdata/numpy.json: numpy.percentile, numpy.round and the official visualize_depth on
small seeded float32 arrays, the reference for numpy.go and depthvis.go."""
import json
import os

import numpy as np
from depth_anything_3.utils.visualize import visualize_depth

rng = np.random.default_rng(12)
cases = []
for n in [1, 2, 3, 7, 10, 11, 100, 1001]:
    x = (rng.uniform(0.5, 3, n) ** 3).astype(np.float32)
    qs = [0.0, 2.0, 5.0, 40.0, 50.0, 90.0, 95.0, 98.0, 100.0, 37.5]
    cases.append({"data": x.tolist(), "q": qs, "p": [float(np.percentile(x, q)) for q in qs],
                  "p64": [float(np.percentile(x.astype(np.float64), q)) for q in qs]})
x = (rng.uniform(-3, 300, 200)).astype(np.float32)
rounds = {"data": x.tolist(), "out": {str(d): np.round(x, d).tolist() for d in [2, 6, 8]}}
vis = []
for name, depth in [
    ("random", rng.uniform(0.5, 10, (6, 8)).astype(np.float32)),
    ("with_invalid", np.where(rng.uniform(size=(6, 8)) < 0.2, 0, rng.uniform(0.5, 10, (6, 8))).astype(np.float32)),
    ("flat", np.full((5, 4), 2.0, np.float32)),
    ("few_valid", np.where(np.arange(20).reshape(4, 5) < 5, 1.5, -1).astype(np.float32)),
]:
    vis.append({"name": name, "w": depth.shape[1], "h": depth.shape[0], "depth": depth.ravel().tolist(),
                "rgb": visualize_depth(depth).reshape(-1).tolist()})
out = {"percentile": cases, "round": rounds, "depth_vis": vis}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "numpy.json"), "w") as f:
    json.dump(out, f)
