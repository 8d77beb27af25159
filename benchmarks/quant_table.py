#!/usr/bin/env python3
"""Accuracy and size table of `da3-go quantize` (the README's quantization table).

For each model (oracle random weights converted to GGUF) and each type, quantizes with the default
plan and with -pure, runs `quantize -check IMAGE` (depth and pose-encoding correlation with the f32
model), times loading with `da3-go bench`, and prints a Markdown table.

    python3 benchmarks/quant_table.py [--image IMG] [--da3 DIR] [--da2 DIR] [--bin bin/da3-go]

DIR are oracle outputs (tests/oracle/out/da3-small, tests/oracle/out/da2-vits; see tests/oracle).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TYPES = ["f16", "q8_0", "q6_k", "q5_k", "q4_k", "q5_0", "q4_0"]


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def load_ms(bin_, model):
    out = json.loads(run(bin_, "bench", "-quiet", "-json", "-repeat", "1", "-model", model))
    return out["load_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="../shared/data/nyu/rgb_00000.jpg")
    ap.add_argument("--da3", default="tests/oracle/out/da3-small")
    ap.add_argument("--da2", default="tests/oracle/out/da2-vits/model.pth")
    ap.add_argument("--bin", default="bin/da3-go")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="quant_table.")
    rows = []
    for label, src in [("DA3-SMALL", a.da3), ("DA2-Small", a.da2)]:
        f32 = os.path.join(tmp, label + "-f32.gguf")
        run(a.bin, "convert", "-quiet", src, f32)
        size32 = os.path.getsize(f32)
        rows.append((label, "f32", "", size32 / 2**20, 1.0, load_ms(a.bin, f32), "1", "0", "1" if label.startswith("DA3") else "—"))
        for typ in TYPES:
            plans = [("default", [])] + ([("-pure", ["-pure"])] if typ not in ("f16",) else [])
            for plan, flags in plans:
                q = os.path.join(tmp, f"{label}-{typ}{flags and '-pure' or ''}.gguf")
                out = run(a.bin, "quantize", "-type", typ, *flags, "-check", a.image, f32, q)
                m = re.search(r"depth correlation ([0-9.]+), max\|d\| \S+ \(([0-9.e+-]+)% of", out)
                p = re.search(r"pose encoding \(t, q, fov\) correlation ([0-9.]+)", out)
                size = os.path.getsize(q)
                rows.append((label, typ, plan, size / 2**20, size / size32, load_ms(a.bin, q),
                             m.group(1), f"{float(m.group(2)):.2g}%", p.group(1) if p else "—"))
                os.remove(q)
                print(f"{label} {typ} {plan}: corr {m.group(1)}", file=sys.stderr)
        os.remove(f32)
    print("| model | type | plan | size MiB | of f32 | load ms | depth corr | max\\|d\\| (% of max) | pose-enc corr |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.2f} | {r[5]:.0f} | {r[6]} | {r[7]} | {r[8]} |")


if __name__ == "__main__":
    main()
