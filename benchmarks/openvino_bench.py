#!/usr/bin/env python3
"""OpenVINO side of `make bench-compare` (driven by benchmarks/compare.py; one process per measurement).

    python3 benchmarks/openvino_bench.py quantize --onnx m.onnx --pixels x.npy --out m.int8.xml
    python3 benchmarks/openvino_bench.py run --model m.onnx|m.int8.xml --pixels x.npy --precision f32|bf16
                                         [--repeat 3] [--threads 2] [--out depth.npy]

`run` reads the model with OpenVINO (the ONNX export of onnx_bench.py as is, or the int8 IR of `quantize`) and
compiles it for the CPU plugin with

    INFERENCE_NUM_THREADS = T, PERFORMANCE_HINT = LATENCY, NUM_STREAMS = 1,
    INFERENCE_PRECISION_HINT = f32 or bf16

(no model cache: load_ms = read_model + compile_model, every time), then runs one warm-up and N timed
inferences on one infer request and prints one JSON line with the fields torch_bench.py prints (load_ms,
first_ms, runs_ms, peak_rss_mib = VmHWM) plus the precision the compiled model reports (a CPU without bf16
support runs f32 whatever the hint says: "precision" shows what ran). --out writes the first output (the
depth) of the last run as float32 .npy (views, H, W) for compare.py's accuracy columns.

`quantize` is NNCF post-training quantization of the ONNX export read by OpenVINO:
nncf.quantize(model, nncf.Dataset([x]), model_type=nncf.ModelType.TRANSFORMER, subset_size=1), the calibration
set being the benchmark's one input. The result is saved as OpenVINO IR (weights not compressed to f16) with a
<out>.json note (versions, time taken); compare.py keeps it next to the ONNX export and quantizes again only when
the export is newer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_bench  # noqa: E402  (status_mib)

PRECISIONS = ("f32", "bf16")


def compile_config(threads: int, precision: str) -> dict:
    """The CPU plugin's configuration for one measurement (property names as OpenVINO spells them)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: want one of {', '.join(PRECISIONS)}")
    if threads < 1:
        raise ValueError(f"threads {threads}: want at least 1")
    return {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
            "INFERENCE_PRECISION_HINT": precision}


def type_name(t) -> str:
    """OpenVINO's short name of an element type ("f32", "bf16"); str() of anything else."""
    return t.get_type_name() if hasattr(t, "get_type_name") else str(t)


def load_pixels(path: str, ninputs_rank: int):
    """The .npy input shaped for the model's input rank (DA3 exports take (1, S, 3, H, W), DA2 (1, 3, H, W))."""
    import numpy as np

    x = np.load(path).astype(np.float32)
    while x.ndim < ninputs_rank:
        x = x[None]
    return np.ascontiguousarray(x)


def quantize(args) -> int:
    import nncf
    import openvino as ov

    core = ov.Core()
    model = core.read_model(args.onnx)
    x = load_pixels(args.pixels, model.inputs[0].get_partial_shape().rank.get_length())
    t0 = time.perf_counter()
    q = nncf.quantize(model, nncf.Dataset([x]), model_type=nncf.ModelType.TRANSFORMER, subset_size=1)
    quant_s = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.xml")
    ov.save_model(q, str(tmp), compress_to_fp16=False)
    tmp.with_suffix(".bin").replace(out.with_suffix(".bin"))
    tmp.replace(out)
    rep = {"onnx": str(args.onnx), "openvino": ov.__version__, "nncf": nncf.__version__, "quantize_s": quant_s,
           "model_type": "TRANSFORMER", "subset_size": 1, "shape": list(x.shape)}
    Path(str(out) + ".json").write_text(json.dumps(rep, indent=1))
    print(json.dumps(rep))
    return 0


def run(args) -> int:
    import numpy as np
    import openvino as ov

    core = ov.Core()
    rss_before = torch_bench.status_mib("VmRSS")
    t0 = time.perf_counter()
    model = core.read_model(args.model)
    compiled = core.compile_model(model, "CPU", compile_config(args.threads, args.precision))
    load_s = time.perf_counter() - t0
    rss_load = torch_bench.status_mib("VmRSS")
    x = load_pixels(args.pixels, model.inputs[0].get_partial_shape().rank.get_length())
    req = compiled.create_infer_request()
    times = []
    for _ in range(args.repeat + 1):
        t0 = time.perf_counter()
        req.infer({0: x})
        times.append((time.perf_counter() - t0) * 1000)
    if args.out:
        depth = np.array(req.get_output_tensor(0).data, dtype=np.float32)
        np.save(args.out, depth.reshape(-1, *depth.shape[-2:]))
    rep = {
        "impl": "openvino", "openvino": ov.__version__, "threads": args.threads, "shape": list(x.shape),
        "precision_hint": args.precision, "precision": type_name(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "num_streams": int(compiled.get_property("NUM_STREAMS")),
        "inference_num_threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
        "load_ms": load_s * 1000, "first_ms": times[0], "runs_ms": times[1:],
        "median_ms": float(np.median(times[1:])), "rss_before_load_mib": rss_before, "load_rss_mib": rss_load,
        "peak_rss_mib": torch_bench.status_mib("VmHWM"),
    }
    print(json.dumps(rep))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize")
    q.add_argument("--onnx", required=True, help="the ONNX export (onnx_bench.py export)")
    q.add_argument("--pixels", required=True, help="the calibration input (the benchmark's input)")
    q.add_argument("--out", required=True, help="OpenVINO IR .xml to write (its .bin beside it)")
    r = sub.add_parser("run")
    r.add_argument("--model", required=True, help="ONNX export or OpenVINO IR .xml")
    r.add_argument("--pixels", required=True)
    r.add_argument("--precision", choices=PRECISIONS, default="f32", help="INFERENCE_PRECISION_HINT")
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--threads", type=int, default=os.cpu_count())
    r.add_argument("--out", help="write the depth of the last run here (.npy)")
    args = ap.parse_args()
    return quantize(args) if args.cmd == "quantize" else run(args)


if __name__ == "__main__":
    sys.exit(main())
