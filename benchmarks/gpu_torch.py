#!/usr/bin/env python3
"""gpu_torch.py -- the official DA3 PyTorch network timed on a GPU, for
da3-go's GPU figures (scripts/validate_gpu.sh runs it beside `da3-go bench`).

The network is the official depth-anything-3 package's DepthAnything3Net
(tests/oracle/da3_common.py builds it as the oracles do: the package installed
with --no-deps, its export and pose-alignment modules stubbed), with seeded
random weights; weights do not change the time. Input: S views of W×H pixels
(already the processed size, as `da3-go bench -pixels` or a W×H image at
-process-res max(W, H)). Modes: f32 (TF32 off: the products in f32, as
ggml-cuda's f32 path), f16 (torch.autocast float16, the usual way to run it
in half precision). Prints one JSON line per (mode, views): median and min
ms of the forward (CUDA-synchronised), and the peak CUDA memory allocated.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "oracle"))

import torch  # noqa: E402

import da3_common as dc  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="base", choices=["tiny", "small", "base"])
    ap.add_argument("--width", type=int, default=504)
    ap.add_argument("--height", type=int, default=336)
    ap.add_argument("--views", default="1", help="comma list of view counts")
    ap.add_argument("--modes", default="f32,f16")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    wrapper = dc.build_wrapper(args.config)
    dc.init_random_weights(wrapper.model, 0)
    net = wrapper.model.eval().to(args.device)
    dev = torch.device(args.device)
    for mode in args.modes.split(","):
        for views in [int(v) for v in args.views.split(",")]:
            g = torch.Generator().manual_seed(1)
            x = torch.randn((1, views, 3, args.height, args.width), generator=g).to(dev)
            cuda = dev.type == "cuda"
            sync = torch.cuda.synchronize if cuda else (lambda: None)
            sync()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated() if cuda else 0

            def once():
                with torch.no_grad(), torch.autocast(dev.type, dtype=torch.float16 if cuda else torch.bfloat16, enabled=(mode != "f32")):
                    out = net(x)
                sync()
                return out

            once()  # warm-up (cuDNN/cuBLAS plans)
            once()
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                once()
                times.append((time.perf_counter() - t0) * 1000)
            peak = torch.cuda.max_memory_allocated() - base if cuda else 0
            print(json.dumps({"engine": "pytorch", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(dev) if cuda else "cpu",
                              "config": args.config, "mode": mode, "views": views,
                              "width": args.width, "height": args.height,
                              "median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
                              "peak_alloc_mib": round(peak / 2**20, 1),
                              "weights_mib": round(sum(p.numel() * p.element_size() for p in net.parameters()) / 2**20, 1)}),
                  flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DA3_LOG_LEVEL", "WARN")
    main()
