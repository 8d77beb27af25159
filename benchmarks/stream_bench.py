#!/usr/bin/env python3
"""Whole-scene vs streamed reconstruction: frames per second and peak RSS (the README's streaming table).

For each frame count, runs `da3-go reconstruct` on that many frames as one scene and streamed (-stream),
interleaved (whole, stream, whole, stream, ...) so that both see the same machine load, each run in its
own process: wall time (model load, decoding, inference, merge and writing included) and the process's
peak RSS (ru_maxrss from wait4). Frames are synthetic 640×480 PNGs (a pattern sliding across the image;
timing does not depend on the content). Prints a Markdown table and writes benchmarks/out/stream.json.

    python3 benchmarks/stream_bench.py --model M.gguf [--frames 16,64,256] [--whole-max 256]
        [--threads 2] [--window 0] [--overlap 0] [--rounds 1] [--bin bin/da3-go]

The model is DA3-SMALL with the oracle's random weights (tests/oracle: da3_oracle.py --config small, then
`da3-go convert`; or, without the oracle's Python environment, drawn again from its spec:
`DA3_SPEC_GGUF=/tmp/da3-small.gguf go test ./cmd/da3-go -run TestWriteSpecModel`), or the tiny fixture
(`da3-go convert tests/fixtures/da3-tiny da3-tiny.gguf`); --window 0 lets da3-go choose the window from
the memory available. --whole-max 0 runs only the streamed runs.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image


def frames(dir_, n, w=640, h=480):
    os.makedirs(dir_, exist_ok=True)
    x = np.arange(w)[None, :]
    y = np.arange(h)[:, None]
    for i in range(n):
        p = os.path.join(dir_, f"{i:05d}.png")
        if os.path.exists(p):
            continue
        u = (x + 4 * i) / w
        img = np.stack([128 + 100 * np.sin(7 * u + 0 * y), 128 + 100 * np.cos(5 * y / h + u), 40 * ((x // 16 + y // 16) % 4) + 0 * u], 2)
        Image.fromarray(img.astype(np.uint8)).save(p, compress_level=1)


def timed(args, timeout):
    """Runs args; returns (wall seconds, peak RSS bytes, stderr) or raises on failure."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            return None, None, "timeout"
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    err = p.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {status}\n{err}")
    return wall, ru.ru_maxrss * 1024, err


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        name = fields.get("Model name", "").strip()
        fam, mod = fields.get("CPU family", "").strip(), fields.get("Model", "").strip()
        if name:
            return f"{name} (family {fam} model {mod})" if fam else name
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--frames", default="16,64,256")
    ap.add_argument("--whole-max", type=int, default=256, help="largest frame count run as one scene")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--overlap", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=3 * 3600)
    ap.add_argument("--bin", default="bin/da3-go")
    ap.add_argument("--out", default="benchmarks/out/stream.json")
    a = ap.parse_args()
    counts = [int(n) for n in a.frames.split(",")]
    tmp = tempfile.mkdtemp(prefix="stream_bench.")
    rows = []
    for n in counts:
        src = os.path.join(tmp, f"frames{n}")
        frames(src, n)
        for r in range(a.rounds):
            for mode in ("whole", "stream"):
                if mode == "whole" and n > a.whole_max:
                    continue
                out = os.path.join(tmp, f"out-{mode}-{n}-{r}")
                args = [a.bin, "reconstruct", "-model", a.model, "-threads", str(a.threads), "-format", "glb", "-o", out]
                if mode == "stream":
                    args += ["-stream", "-window", str(a.window), "-overlap", str(a.overlap)]
                else:
                    args += ["-no-stream"]
                l0 = load()
                wall, rss, err = timed(args + [src], a.timeout)
                l1 = load()
                line = next((l for l in err.splitlines() if "streaming" in l or "running" in l), "")
                row = {"frames": n, "mode": mode, "round": r, "wall_s": wall, "fps": n / wall if wall else None,
                       "peak_rss_mib": rss / 2**20 if rss else None, "load_before": l0, "load_after": l1, "log": line.strip()}
                if wall is None:
                    row["error"] = err
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                subprocess.run(["rm", "-rf", out])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    doc = {"cpu": cpu_name(), "cores": os.cpu_count(), "threads": a.threads, "model": os.path.basename(a.model), "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"CPU: {doc['cpu']}, {doc['cores']} cores, -threads {a.threads}")
    print("| frames | mode | fps | s/frame | wall s | peak RSS MiB | load (1 min) |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["wall_s"] is None:
            print(f"| {r['frames']} | {r['mode']} | — | — | > {a.timeout:.0f} | — | {r['load_before']:.0f} |")
            continue
        print(f"| {r['frames']} | {r['mode']} | {r['fps']:.3f} | {r['wall_s'] / r['frames']:.3f} | {r['wall_s']:.0f} | {r['peak_rss_mib']:.0f} | "
              f"{r['load_before']:.1f}–{r['load_after']:.1f} |")


if __name__ == "__main__":
    main()
