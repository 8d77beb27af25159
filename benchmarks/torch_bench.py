#!/usr/bin/env python3
"""PyTorch side of `make bench-compare` (driven by benchmarks/compare.py; one process per measurement).

    python3 benchmarks/torch_bench.py prep --model da3 --images a.png,b.png --process-res 504 --out x.npy
    python3 benchmarks/torch_bench.py run --model da3-base --ckpt DIR --pixels x.npy --repeat 3 --threads 2

`prep` preprocesses images with the reference code (DA3: the package's InputProcessor, upper_bound_resize;
DA2: the oracle's written-out preprocessing, bit-identical to upstream image2tensor) and writes the float32 network
input as .npy: the exact tensor both engines then time.

`run` loads a checkpoint in float32 with torch.set_num_threads(T), runs one warm-up forward and N timed ones
under inference_mode, and prints one JSON line: load_ms (checkpoint file to ready model; the imports are not
counted), first_ms, runs_ms, peak_rss_mib (VmHWM of this process, i.e. Python + torch + model + activations).
--out writes the depth of the last run as float32 .npy (views, H, W): compare.py's accuracy reference.

Networks (the oracle's references, tests/oracle):
  da3-*     the official depth-anything-3 package: DepthAnything3.from_pretrained(DIR).model, forward on
            (1, S, 3, H, W) (backbone, DualDPT head and camera decoder; SDPA attention).
  da2-*     the original Depth-Anything-V2 code (tests/oracle/da2_upstream.py) loading DIR/model.pth.
  da2-*-hf  transformers' DepthAnythingForDepthEstimation from DIR/hf (eager attention: it has no sdpa path).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "oracle"
sys.path.insert(0, str(ORACLE))


def status_mib(field: str) -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prep(args) -> int:
    import numpy as np
    import torch

    paths = args.images.split(",")
    if args.model == "da3":
        import da3_common as dc

        dc.setup_imports()
        from depth_anything_3.utils.io.input_processor import InputProcessor

        x, _, _ = InputProcessor()(paths, process_res=args.process_res, process_res_method="upper_bound_resize",
                                   num_workers=1)
        x = x.unsqueeze(0) if x.dim() == 4 else x  # (1, S, 3, H, W)
    else:
        import cv2

        sys.argv = sys.argv[:1]
        import da2_oracle

        if len(paths) != 1:
            raise SystemExit("DA2 takes one image")
        bgr = cv2.imread(paths[0], cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f"cannot read {paths[0]}")
        x, _ = da2_oracle.preprocess(bgr, args.process_res)  # (1, 3, H, W)
    x = x.to(torch.float32).contiguous().numpy()
    np.save(args.out, x)
    print(json.dumps({"shape": list(x.shape)}))
    return 0


def load(kind: str, ckpt: Path):
    import torch

    if kind.startswith("da3"):
        import da3_common as dc

        dc.setup_imports()
        from depth_anything_3.api import DepthAnything3

        t0 = time.perf_counter()
        net = DepthAnything3.from_pretrained(str(ckpt)).model.eval()
        return net, time.perf_counter() - t0, lambda x: net(x)
    meta = json.loads((ckpt / "meta.json").read_text())
    if kind.endswith("-hf"):
        from transformers import DepthAnythingForDepthEstimation

        t0 = time.perf_counter()
        net = DepthAnythingForDepthEstimation.from_pretrained(str(ckpt / "hf")).eval()
        return net, time.perf_counter() - t0, lambda x: net(pixel_values=x).predicted_depth
    import da2_upstream

    t0 = time.perf_counter()
    net = da2_upstream.build(meta["config"], meta["embed_dim"], meta["depth"], meta["heads"], meta["out_layers"],
                             meta["features"], meta["out_channels"], meta["img_size"], meta["max_depth"])
    sd = torch.load(ckpt / "model.pth", map_location="cpu", weights_only=True)
    net.load_state_dict(sd, strict=True)
    del sd
    return net, time.perf_counter() - t0, lambda x: da2_upstream.forward(net, x)


def save_depth(path: str, depth) -> None:
    """Writes a depth tensor or array as float32 .npy of shape (views, H, W)."""
    import numpy as np

    if hasattr(depth, "detach"):
        depth = depth.detach().float().cpu().numpy()
    d = np.asarray(depth, dtype=np.float32)
    np.save(path, d.reshape(-1, *d.shape[-2:]))


def run(args) -> int:
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    x = torch.from_numpy(np.load(args.pixels)).to(torch.float32)
    if args.model.startswith("da3") and x.dim() == 4:
        x = x.unsqueeze(0)
    rss_before = status_mib("VmRSS")
    net, load_s, fwd = load(args.model, Path(args.ckpt))
    rss_load = status_mib("VmRSS")
    times = []
    with torch.inference_mode():
        for _ in range(args.repeat + 1):
            t0 = time.perf_counter()
            out = fwd(x)
            times.append((time.perf_counter() - t0) * 1000)
    if args.out:
        save_depth(args.out, out["depth"] if isinstance(out, dict) else out)
    del out
    rep = {
        "impl": "torch", "model": args.model, "torch": torch.__version__, "threads": torch.get_num_threads(),
        "shape": list(x.shape), "load_ms": load_s * 1000, "first_ms": times[0], "runs_ms": times[1:],
        "median_ms": float(np.median(times[1:])), "rss_before_load_mib": rss_before, "load_rss_mib": rss_load,
        "peak_rss_mib": status_mib("VmHWM"),
    }
    print(json.dumps(rep))
    return 0


def main() -> int:
    os.environ.setdefault("DA3_LOG_LEVEL", "WARN")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--model", choices=["da3", "da2"], required=True)
    p.add_argument("--images", required=True, help="comma-separated image paths (the views)")
    p.add_argument("--process-res", type=int, required=True)
    p.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", required=True, help="da3-small, da3-base, da2-vits or da2-vits-hf")
    r.add_argument("--ckpt", required=True, help="oracle output directory")
    r.add_argument("--pixels", required=True)
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--threads", type=int, default=os.cpu_count())
    r.add_argument("--out", help="write the depth of the last run here (.npy)")
    args = ap.parse_args()
    return prep(args) if args.cmd == "prep" else run(args)


if __name__ == "__main__":
    sys.exit(main())
