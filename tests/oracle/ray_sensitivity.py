#!/usr/bin/env python3
"""How far the official ray -> pose solver's poses move when its input rays move by float32-sized amounts.

    python3 tests/oracle/ray_sensitivity.py CASE_DIR [--threads 1]

CASE_DIR is a ray case written by da3_pose_oracle.py (e.g. $DA3_ORACLE_OUT/pose-da3-small/ray-four). The
package's own rays and confidences are fed to DepthAnything3Net._process_ray_pose_estimation (seeded as the
oracle seeds it), unchanged and with relative Gaussian noise of 1e-7 ... 1e-5 (three draws each); printed:
the largest change of the extrinsics and of the intrinsics (relative to their largest value). On the
full-size DA3-SMALL four-view case: 9.4e-5 / 9.3e-5 at 1e-7, 3.1e-4 / 2.8e-4 at 1e-6, which is why the
end-to-end ray-pose test bounds the poses by the solver's own movement under one rounding.
"""
import argparse
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import da3_pose_oracle as po  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d = load_file(str(Path(a.case) / "ref.safetensors"))
    ray, conf = d["ray"][None], d["ray_conf"][None]
    H, W = d["input"].shape[-2:]

    def solve(r, c):
        torch.manual_seed(0)
        e, k = po.ray_pose_outputs(r.clone(), c.clone(), H, W)
        return e[0].double(), k[0].double()

    E0, K0 = solve(ray, conf)
    print("unperturbed vs the oracle's poses: extrinsics %.2e, intrinsics %.2e" %
          ((E0 - d["extrinsics"].double()).abs().max(), (K0 - d["intrinsics"].double()).abs().max()))
    g = torch.Generator().manual_seed(123)
    for eps in [1e-7, 1e-6, 1e-5]:
        we = wk = 0.0
        for _ in range(3):
            E, K = solve(ray * (1 + eps * torch.randn(ray.shape, generator=g)),
                         conf * (1 + eps * torch.randn(conf.shape, generator=g)))
            we = max(we, (E - E0).abs().max().item())
            wk = max(wk, ((K - K0).abs().max() / K0.abs().max()).item())
        print("relative noise %.0e: extrinsics max|d| %.2e, intrinsics max|d| %.2e of max" % (eps, we, wk))


if __name__ == "__main__":
    main()
