#!/usr/bin/env python3
"""ONNX Runtime side of `make bench-compare` (driven by benchmarks/compare.py; one process per measurement).

    python3 benchmarks/onnx_bench.py export --model da3-base --ckpt DIR --pixels x.npy --out m.onnx
    python3 benchmarks/onnx_bench.py run --onnx m.onnx --pixels x.npy --repeat 3 --threads 2

`export` builds the official PyTorch model exactly as torch_bench.py does (same checkpoint, float32), exports it
with torch.onnx (the dynamo exporter, static shapes: the shape of the .npy input), then runs the ONNX file with
ONNX Runtime on the same input and compares every output with PyTorch (max|d|, max|d| / max|ref|, correlation);
it refuses to keep an export whose relative error exceeds 1e-3. The check is written next to the model as
<out>.check.json.

Outputs exported are what da3-go computes: DA3 depth, confidence, extrinsics and intrinsics (the auxiliary ray
branch of the DualDPT head, which da3-go does not run, is dropped from the graph by the exporter); DA2 the
relative depth (transformers' DepthAnythingForDepthEstimation.predicted_depth, "da2-*-hf", or the original
code, "da2-*").

DA3's RoPE code is not exportable as is: RotaryPositionEmbedding2D.forward sizes its cos/sin table with the
data-dependent `int(positions.max()) + 1`, and PositionGetter uses torch.cartesian_prod. Both are replaced here,
for the export only, by value-preserving equivalents: the table is sized from the (static) token count, which
bounds every position (each row of the table depends only on its own position, so the rows used are the same
numbers), and the grid is built with torch.meshgrid(indexing="ij"), which lists the same (y, x) pairs in the
same order. The package's files are not modified.

`run` opens the file with the CPU execution provider, all graph optimizations (ORT_ENABLE_ALL),
intra_op_num_threads = T and inter_op_num_threads = 1, runs one warm-up and N timed runs, and prints one JSON
line with the fields torch_bench.py prints (load_ms = file to ready session, including ORT's graph
optimizations; first_ms; runs_ms; peak_rss_mib = VmHWM); --out writes the first output (the depth) of the last
run as float32 .npy (views, H, W) for compare.py's accuracy columns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_bench  # noqa: E402  (status_mib, load: the same networks as the PyTorch column)


def patch_da3_rope() -> None:
    """Value-preserving, export-friendly replacements for the two DA3 RoPE functions (see the module doc)."""
    import torch
    from depth_anything_3.model.dinov2.layers import rope

    def position_getter_call(self, batch_size, height, width, device):
        if (height, width) not in self.position_cache:
            ys, xs = torch.meshgrid(torch.arange(height, device=device), torch.arange(width, device=device),
                                    indexing="ij")
            self.position_cache[height, width] = torch.stack([ys.reshape(-1), xs.reshape(-1)], dim=-1)
        cached = self.position_cache[height, width]
        return cached.view(1, height * width, 2).expand(batch_size, -1, -1).clone()

    def rope_forward(self, tokens, positions):
        assert tokens.size(-1) % 2 == 0, "Feature dimension must be even"
        assert positions.ndim == 3 and positions.shape[-1] == 2
        feature_dim = tokens.size(-1) // 2
        # Upstream: int(positions.max()) + 1. Positions are patch coordinates (+1 for the patch tokens when
        # special tokens precede them), so they are below the token count + 1.
        table = positions.shape[1] + 1
        cos_comp, sin_comp = self._compute_frequency_components(feature_dim, table, tokens.device, tokens.dtype)
        vertical, horizontal = tokens.chunk(2, dim=-1)
        vertical = self._apply_1d_rope(vertical, positions[..., 0], cos_comp, sin_comp)
        horizontal = self._apply_1d_rope(horizontal, positions[..., 1], cos_comp, sin_comp)
        return torch.cat((vertical, horizontal), dim=-1)

    rope.PositionGetter.__call__ = position_getter_call
    rope.RotaryPositionEmbedding2D.forward = rope_forward


DA3_OUTPUTS = ["depth", "depth_conf", "extrinsics", "intrinsics"]


def build(kind: str, ckpt: Path):
    """The network of torch_bench.py as an nn.Module returning a tuple of the outputs da3-go computes."""
    import torch

    net, _, fwd = torch_bench.load(kind, ckpt)
    if kind.startswith("da3"):

        class DA3(torch.nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                out = self.net(x)
                return tuple(out[k] for k in DA3_OUTPUTS)

        return DA3(net).eval(), DA3_OUTPUTS

    class DA2(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return (fwd(x),)

    return DA2(net).eval(), ["depth"]


def stats(ref, got) -> dict:
    import numpy as np

    r = ref.astype(np.float64).ravel()
    g = got.astype(np.float64).ravel()
    d = np.abs(r - g)
    corr = float(np.corrcoef(r, g)[0, 1]) if r.size > 1 and r.std() > 0 and g.std() > 0 else float(np.array_equal(r, g))
    mx = float(np.abs(r).max()) if r.size else 0.0
    return {"max_abs": float(d.max()), "mean_abs": float(d.mean()), "max_ref": mx,
            "rel": float(d.max() / mx) if mx > 0 else float(d.max()), "corr": corr}


def session(path: str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def pixels(path: str, kind: str):
    import numpy as np

    x = np.load(path).astype(np.float32)
    if kind.startswith("da3") and x.ndim == 4:
        x = x[None]
    return np.ascontiguousarray(x)


def export(args) -> int:
    import numpy as np
    import onnx
    import torch

    torch.set_num_threads(args.threads)
    x = pixels(args.pixels, args.model)
    mod, names = build(args.model, Path(args.ckpt))
    xt = torch.from_numpy(x)
    t0 = time.perf_counter()
    with torch.inference_mode():
        ref = [t.float().numpy() for t in mod(xt)]
    torch_ms = (time.perf_counter() - t0) * 1000
    if args.model.startswith("da3"):
        patch_da3_rope()
        with torch.inference_mode():
            patched = [t.float().numpy() for t in mod(xt)]
        for n, a, b in zip(names, ref, patched):
            if not np.array_equal(a, b):
                raise SystemExit(f"the RoPE replacements changed {n} (max|d| {np.abs(a - b).max():.3g})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.onnx")
    t0 = time.perf_counter()
    with torch.no_grad():
        prog = torch.onnx.export(mod, (xt,), dynamo=True, input_names=["pixels"], output_names=names,
                                 opset_version=args.opset, optimize=True)
    prog.save(str(tmp), external_data=False)  # one file: every model here is under protobuf's 2 GiB limit
    export_s = time.perf_counter() - t0
    onnx.checker.check_model(str(tmp))
    sess = session(str(tmp), args.threads)
    got = sess.run(names, {"pixels": x})
    checks = {n: stats(r, g) for n, r, g in zip(names, ref, got)}
    worst = max(c["rel"] for c in checks.values())
    rep = {"model": args.model, "shape": list(x.shape), "torch": torch.__version__, "opset": args.opset,
           "onnxruntime": __import__("onnxruntime").__version__, "export_s": export_s, "torch_ms": torch_ms,
           "checks": checks, "worst_rel": worst}
    for n, c in checks.items():
        print(f"{args.model} {n}: max|d| {c['max_abs']:.3g} (rel {c['rel']:.3g}), mean|d| {c['mean_abs']:.3g}, "
              f"corr {c['corr']:.8f}", file=sys.stderr)
    if not np.isfinite(worst) or worst > args.max_rel:
        tmp.unlink()
        raise SystemExit(f"{args.model}: ONNX Runtime differs from PyTorch by {worst:.3g} of max|ref| "
                         f"(limit {args.max_rel}); export not kept")
    tmp.replace(out)
    Path(str(out) + ".check.json").write_text(json.dumps(rep, indent=1))
    print(json.dumps(rep))
    return 0


def run(args) -> int:
    import numpy as np
    import onnxruntime as ort

    model = Path(args.onnx)
    kind = json.loads(Path(str(model) + ".check.json").read_text())["model"]
    x = pixels(args.pixels, kind)
    rss_before = torch_bench.status_mib("VmRSS")
    t0 = time.perf_counter()
    sess = session(str(model), args.threads)
    load_s = time.perf_counter() - t0
    rss_load = torch_bench.status_mib("VmRSS")
    feed = {sess.get_inputs()[0].name: x}
    times = []
    for _ in range(args.repeat + 1):
        t0 = time.perf_counter()
        out = sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1000)
    if args.out:
        torch_bench.save_depth(args.out, out[0])
    del out
    rep = {
        "impl": "onnxruntime", "model": kind, "onnxruntime": ort.__version__, "threads": args.threads,
        "shape": list(x.shape), "load_ms": load_s * 1000, "first_ms": times[0], "runs_ms": times[1:],
        "median_ms": float(np.median(times[1:])), "rss_before_load_mib": rss_before, "load_rss_mib": rss_load,
        "peak_rss_mib": torch_bench.status_mib("VmHWM"),
    }
    print(json.dumps(rep))
    return 0


def main() -> int:
    os.environ.setdefault("DA3_LOG_LEVEL", "WARN")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--model", required=True, help="da3-small, da3-base, da2-vits or da2-vits-hf")
    e.add_argument("--ckpt", required=True, help="oracle output directory")
    e.add_argument("--pixels", required=True, help="the input (its shape is the exported, static shape)")
    e.add_argument("--out", required=True)
    e.add_argument("--opset", type=int, default=18)
    e.add_argument("--threads", type=int, default=os.cpu_count())
    e.add_argument("--max-rel", type=float, default=1e-3, help="largest accepted max|d| / max|ref| of any output")
    r = sub.add_parser("run")
    r.add_argument("--onnx", required=True)
    r.add_argument("--pixels", required=True)
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--threads", type=int, default=os.cpu_count())
    r.add_argument("--out", help="write the depth of the last run here (.npy)")
    args = ap.parse_args()
    return export(args) if args.cmd == "export" else run(args)


if __name__ == "__main__":
    sys.exit(main())
