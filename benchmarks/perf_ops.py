#!/usr/bin/env python3
"""Where da3-go's CPU time goes, per ggml op, from a Linux `perf` profile (no rebuild, no eval callback).

    python3 benchmarks/perf_ops.py [--freq 100] -- bin/da3-go bench -model M.gguf -pixels X.npy -threads 1 -repeat 5

Runs the command under `perf record --call-graph dwarf`, then attributes every sample to the innermost
`ggml_compute_forward_<op>` frame of its stack, so the kernels an op calls (tinyBLAS GEMM, expf, erff,
ggml_vec_dot_*, memcpy, kernel page faults) count towards that op. Samples in `ggml_barrier` (threads waiting for
each other between graph nodes) are reported separately, as are Go code, weight upload and page faults. The
command's load and first run are included: use a large -repeat to dilute them (the Go side is well under 1%; see
-cpuprofile for it). -threads 1 gives the cleanest op shares; -threads N adds the barrier share.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

VARIANT = re.compile(r"da3_(gemm|conv2d|winograd|attention)_(avx512|avx2|generic)")
OP = re.compile(r"ggml_compute_forward_([a-z0-9_]+?)(?:_f32|_f16|_non_quantized|_flt|_q_f32|<.*|\.isra.*|\.part.*)?$")


def classify(frames: list[str]) -> str:
    """frames: innermost first."""
    for s in frames:
        if s.startswith("ggml_barrier"):
            return "(barrier: threads waiting between nodes)"
        m = OP.match(s)
        if m:
            return m.group(1)
        if s.startswith("da3_op_"):  # da3-go's own CPU kernels (ggml/kernels), run as custom ops
            return "da3:" + s[len("da3_op_"):].split(".")[0]
        m = VARIANT.match(s)  # a kernel variant (ggml/kernels/variant_*.c), called by da3_op_*
        if m:
            return f"da3:{m.group(1)}"
    for s in frames:
        if "UploadWeights" in s or "tensor_set" in s or "loader." in s:
            return "(weight upload / load)"
        if "graph_compute" in s:
            return "(graph compute, outside ops)"
    for s in frames:
        if s.startswith("github.com/da3-go/"):
            return "(Go: da3-go code)"
        if s.startswith("runtime.") or s.startswith("runtime/"):
            return "(Go runtime)"
    return "(other: " + (frames[0] if frames else "?") + ")"


def aggregate(lines) -> tuple[collections.Counter, int, int]:
    cnt, total, faults = collections.Counter(), 0, 0
    frames: list[str] = []

    def flush():
        nonlocal total, faults
        if frames:
            cnt[classify(frames)] += 1
            total += 1
            faults += any("page_fault" in f for f in frames)

    for line in lines:
        if not line.strip():
            flush()
            frames = []
            continue
        if line[0] not in " \t":
            frames = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            sym = parts[1].rsplit(" (", 1)[0]
            frames.append(re.sub(r"\+0x[0-9a-f]+$", "", sym))
    flush()
    return cnt, total, faults


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--freq", type=int, default=100, help="samples per second per thread")
    ap.add_argument("--data", help="keep perf.data here (default: a temp file)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the command after --")
    data = args.data or os.path.join(tempfile.mkdtemp(prefix="perf-ops-"), "perf.data")
    rec = ["perf", "record", "-q", "-F", str(args.freq), "--call-graph", "dwarf,16384", "-o", data, "--", *cmd]
    r = subprocess.run(rec, stdout=sys.stderr)
    if r.returncode != 0:
        print(f"perf record failed ({r.returncode}); is perf installed and perf_event_paranoid <= 2?", file=sys.stderr)
        return 1
    p = subprocess.Popen(["perf", "script", "-i", data], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    cnt, total, faults = aggregate(p.stdout)
    p.wait()
    if total == 0:
        print("no samples", file=sys.stderr)
        return 1
    in_ops = sum(v for k, v in cnt.items() if not k.startswith("("))
    print(f"{total} samples at {args.freq} Hz ({total / args.freq:.1f} CPU-s); "
          f"{100 * faults / total:.1f}% in page faults (counted inside their op too)")
    print(f"{'share':>7}  {'of ops':>7}  {'CPU-s':>6}  op")
    for k, v in cnt.most_common(args.top):
        of_ops = f"{100 * v / in_ops:6.1f}%" if not k.startswith("(") else ""
        print(f"{100 * v / total:6.1f}%  {of_ops:>7}  {v / args.freq:6.1f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
