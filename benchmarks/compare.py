#!/usr/bin/env python3
"""da3-go against the PyTorch reference, side by side on one machine in one run (`make bench-compare`).

    python3 benchmarks/compare.py [--threads T] [--rounds 3] [--repeat 3] [--only main|sweeps] [--quick]

Both engines run the same network on the same float32 input tensor:

* weights: the oracle's seeded random checkpoints (tests/oracle/out/{da3-base,da3-small,da2-vits}; generated
  with the oracle scripts when missing), converted to GGUF with `da3-go convert` and quantized with
  `da3-go quantize` (q8_0, q4_k) into benchmarks/out/models/;
* input: a synthetic image preprocessed once by the reference code (DA3: the package's InputProcessor at
  process_res 504 on a 640x427 image -> 504x336; DA2: 518 on a 640x640 image -> 518x518), saved as .npy and fed
  to `torch_bench.py run` and to `da3-go bench -pixels` (network only: no image decoding, resizing or output
  resize on either side);
* threads: torch.set_num_threads(T) and `-threads T`;
* every measurement is a fresh process (load time = checkpoint file to ready model, peak RSS = VmHWM of that
  process), with one warm-up run excluded from the median, and the two engines alternate within each round
  (the order flips between rounds) so that load from other users of a shared machine hits both alike;
* each measurement waits (up to --quiet-wait s) for the machine to be mostly idle, and records the CPU share
  other processes took while it ran ("busy" column): ratios from busy rows are noise, not performance.

PyTorch references: DA3 = the official depth-anything-3 package (SDPA attention); DA2 = transformers'
DepthAnythingForDepthEstimation (the oracle's reference; faster here than the original code, which is measured
too and reported as "torch-orig").

Prints the table (ms, ratio, load ms, peak RSS MB), the target checks of issue 6, and writes
benchmarks/out/compare.json and benchmarks/out/compare.png (copied to docs/bench.png on a full run). The sweeps
time DA3-BASE f32 over the processed resolution (long side 280..1008) and the view count (1..8).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
TORCH_BENCH = ROOT / "benchmarks" / "torch_bench.py"
ORACLE = ROOT / "tests" / "oracle"
sys.path.insert(0, str(ORACLE))

MODELS = {
    "da3-base": dict(label="DA3-BASE", family="da3", ckpt="tests/oracle/out/da3-base", src="",
                     torch={"torch": "da3-base"},
                     gen=["tests/oracle/da3_oracle.py", "--config", "base", "--cases", "one", "--no-blocks"]),
    "da3-small": dict(label="DA3-SMALL", family="da3", ckpt="tests/oracle/out/da3-small", src="",
                      torch={"torch": "da3-small"},
                      gen=["tests/oracle/da3_oracle.py", "--config", "small", "--cases", "one", "--no-blocks"]),
    "da2-vits": dict(label="DA2-Small", family="da2", ckpt="tests/oracle/out/da2-vits", src="model.pth",
                     torch={"torch": "da2-vits-hf", "torch-orig": "da2-vits"},
                     gen=["tests/oracle/da2_oracle.py", "--config", "vits"]),
}
VARIANTS = ["f32", "q8_0", "q4_k"]
# (model family) -> (synthetic image size, processed resolution)
INPUTS = {"da3": ((640, 427), 504), "da2": ((640, 640), 518)}
SWEEP_RES = [280, 392, 504, 756, 1008]
SWEEP_VIEWS = [1, 2, 4, 8]

# Issue 6 targets: (model, variant, quantity, bound)
TARGETS = [
    ("da3-base", "f32", "speedup", 1.5),
    ("da3-base", "q8_0", "speedup", 1.8),
    ("da3-base", "f32", "load_speedup", 5.0),
    ("da3-base", "f32", "rss_ratio", 0.5),
    ("da2-vits", "f32", "speedup", 1.5),
]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def last_json(stdout: str) -> dict:
    try:
        return json.loads(stdout)  # da3-go -json: one indented document
    except json.JSONDecodeError:
        pass
    for line in reversed(stdout.strip().splitlines()):  # torch_bench: the last line
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON in output: {stdout[-500:]!r}")


def loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0


def cpu_times() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat. Niced processes count as busy:
    with autogroup scheduling (the Linux default for sessions) nice does not make another session's work yield."""
    try:
        f = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    f = (f + [0.0] * 8)[:8]  # user nice system idle iowait irq softirq steal
    idle = f[3] + f[4]
    return (sum(f) - idle) / hz, sum(f) / hz


def children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# Measurements wait for `idle` of the CPUs to be free (at most max_wait s) and are repeated (at most `retries`
# times, keeping the quietest) when other processes took more than `busy` of the CPUs while they ran.
QUIET = {"idle": 0.85, "max_wait": 120.0, "busy": 0.10, "retries": 2}


def wait_quiet() -> float:
    """Waits (at most QUIET["max_wait"] s) until other users leave QUIET["idle"] of the CPUs idle over one second;
    returns the idle fraction seen last."""
    deadline = time.time() + QUIET["max_wait"]
    while True:
        b0, t0 = cpu_times()
        time.sleep(1.0)
        b1, t1 = cpu_times()
        idle = 1 - (b1 - b0) / (t1 - t0) if t1 > t0 else 1.0
        if idle >= QUIET["idle"] or time.time() >= deadline:
            return idle


def timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, dict]:
    """Runs one measurement process and reports how busy the machine was with other work meanwhile
    (foreign_cpu: CPU time of other processes / (wall x CPUs))."""
    idle = wait_quiet()
    b0, t0 = cpu_times()
    c0, w0 = children_cpu(), time.time()
    r = sh(cmd)
    b1, t1 = cpu_times()
    c1, w1 = children_cpu(), time.time()
    foreign = max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0)) if t1 > t0 else 0.0
    return r, {"idle_before": idle, "foreign_cpu": foreign, "wall_s": w1 - w0, "loadavg": loadavg()}


# ------------------------------------------------------------------------------------------------------------
# Setup: dependencies, checkpoints, GGUF files, inputs


def ensure_deps() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("installing matplotlib (pip)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], check=True)
    r = subprocess.run([sys.executable, "-c", "import importlib.util as u, torch, numpy, cv2, transformers; "
                        "assert u.find_spec('depth_anything_v2') and u.find_spec('depth_anything_3')"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("the PyTorch reference is not installed: run `bash tests/oracle/setup.sh` (make oracle)\n"
                         + r.stderr[-1000:])


def ensure_checkpoint(name: str) -> Path:
    m = MODELS[name]
    ck = ROOT / m["ckpt"]
    need = ck / ("model.pth" if m["family"] == "da2" else "model.safetensors")
    if not need.exists():
        log(f"generating the {name} reference checkpoint with the oracle (once)")
        sh([sys.executable, *m["gen"], "--out", str(ck)])
    return ck


def ensure_gguf(bin_: str, name: str, variant: str) -> Path:
    m = MODELS[name]
    ck = ensure_checkpoint(name)
    models = OUT / "models"
    models.mkdir(parents=True, exist_ok=True)
    f32 = models / f"{name}-f32.gguf"
    src = ck / m["src"] if m["src"] else ck
    src_file = ck / m["src"] if m["src"] else ck / "model.safetensors"
    if not f32.exists() or f32.stat().st_mtime < src_file.stat().st_mtime:
        log(f"converting {name} to {f32.name}")
        sh([bin_, "convert", str(src), str(f32)])
    if variant == "f32":
        return f32
    q = models / f"{name}-{variant}.gguf"
    if not q.exists() or q.stat().st_mtime < f32.stat().st_mtime:
        log(f"quantizing {f32.name} to {variant}")
        sh([bin_, "quantize", "-quiet", "-type", variant, str(f32), str(q)])
    return q


def synthetic(w: int, h: int, view: int):
    """The oracle's deterministic synthetic image; views differ by a roll and a channel rotation."""
    import numpy as np
    import common

    img = common.synthetic_image(w, h)
    if view:
        img = np.roll(img, shift=view * w // 7, axis=1)
        img = np.roll(img, shift=view % 3, axis=2)
    return np.ascontiguousarray(img)


def ensure_input(family: str, process_res: int, views: int = 1) -> Path:
    from PIL import Image

    (w, h), _ = INPUTS[family]
    inputs = OUT / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    out = inputs / f"{family}-{process_res}-{views}v.npy"
    if out.exists():
        return out
    paths = []
    for v in range(views):
        p = inputs / f"{family}-{w}x{h}-view{v}.png"
        Image.fromarray(synthetic(w, h, v), "RGB").save(p)
        paths.append(str(p))
    sh([sys.executable, str(TORCH_BENCH), "prep", "--model", family, "--images", ",".join(paths),
        "--process-res", str(process_res), "--out", str(out)])
    return out


# ------------------------------------------------------------------------------------------------------------
# One measurement = one fresh process


def measure_torch(model: str, ckpt: Path, pixels: Path, repeat: int, threads: int) -> dict:
    r, env = timed([sys.executable, str(TORCH_BENCH), "run", "--model", model, "--ckpt", str(ckpt), "--pixels",
                    str(pixels), "--repeat", str(repeat), "--threads", str(threads)])
    return {**last_json(r.stdout), **env}


def measure_go(bin_: str, gguf: Path, pixels: Path, repeat: int, threads: int) -> dict:
    r, env = timed([bin_, "bench", "-json", "-quiet", "-device", "cpu", "-model", str(gguf), "-pixels", str(pixels),
                    "-repeat", str(repeat), "-threads", str(threads)])
    return {**last_json(r.stdout), "impl": "da3-go", **env}


def pool(reps: list[dict]) -> dict:
    """Pools the timed runs of several processes; load, first run and RSS are medians over processes."""
    runs = sorted(x for r in reps for x in r["runs_ms"])
    p90 = runs[max(0, -(-9 * len(runs) // 10) - 1)]
    return {
        "median_ms": statistics.median(runs), "p90_ms": p90, "min_ms": runs[0], "runs": len(runs),
        "load_ms": statistics.median(r["load_ms"] for r in reps),
        "first_ms": statistics.median(r["first_ms"] for r in reps),
        "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in reps),
        "loadavg": statistics.mean(r["loadavg"] for r in reps),
        "foreign_cpu": statistics.mean(r["foreign_cpu"] for r in reps),
    }


def interleave(jobs: dict, rounds: int) -> dict:
    """jobs: key -> zero-arg measuring function. Runs every job once per round, the order reversed on odd
    rounds, and returns key -> {"pooled": ..., "raw": [...]}."""
    raw = {k: [] for k in jobs}
    keys = list(jobs)
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            t0 = time.time()
            rep = jobs[k]()
            for _ in range(QUIET["retries"]):
                if rep["foreign_cpu"] <= QUIET["busy"]:
                    break
                log(f"  round {r + 1}/{rounds} {k}: other work took {100 * rep['foreign_cpu']:.0f}% of the CPUs; "
                    f"measuring again")
                again = jobs[k]()
                rep = again if again["foreign_cpu"] < rep["foreign_cpu"] else rep
            raw[k].append(rep)
            log(f"  round {r + 1}/{rounds} {k}: median {statistics.median(rep['runs_ms']):.0f} ms, "
                f"min {min(rep['runs_ms']):.0f} ms, load {rep['load_ms']:.0f} ms, peak RSS {rep['peak_rss_mib']:.0f} MiB "
                f"({time.time() - t0:.0f} s; other work {100 * rep['foreign_cpu']:.0f}% of the CPUs)")
    return {k: {"pooled": pool(v), "raw": v} for k, v in raw.items()}


# ------------------------------------------------------------------------------------------------------------
# Main comparison and sweeps


def run_main(bin_: str, models: list[str], variants: list[str], rounds: int, repeat: int, threads: int) -> list[dict]:
    rows = []
    for name in models:
        m = MODELS[name]
        _, res = INPUTS[m["family"]]
        ck = ensure_checkpoint(name)
        px = ensure_input(m["family"], res)
        jobs = {}
        for tag, tmodel in m["torch"].items():
            jobs[tag] = (lambda tm=tmodel: measure_torch(tm, ck, px, repeat, threads))
        for v in variants:
            g = ensure_gguf(bin_, name, v)
            jobs[f"da3-go {v}"] = (lambda g=g: measure_go(bin_, g, px, repeat, threads))
        log(f"{m['label']}: {rounds} interleaved rounds of {', '.join(jobs)}")
        res_ = interleave(jobs, rounds)
        shape = res_[next(iter(m["torch"]))]["raw"][0]["shape"]
        size = f"{shape[-1]}x{shape[-2]}"
        for tag in m["torch"]:
            t = res_[tag]["pooled"]
            for v in variants:
                if tag != "torch" and v != "f32":
                    continue
                g = res_[f"da3-go {v}"]["pooled"]
                rows.append({
                    "model": name, "label": m["label"], "variant": v, "baseline": tag, "size": size,
                    "torch": t, "go": g,
                    "speedup": t["median_ms"] / g["median_ms"],
                    "speedup_min": t["min_ms"] / g["min_ms"],
                    "load_speedup": t["load_ms"] / g["load_ms"],
                    "rss_ratio": g["peak_rss_mib"] / t["peak_rss_mib"],
                    "raw": {"torch": res_[tag]["raw"], "go": res_[f"da3-go {v}"]["raw"]},
                })
    return rows


def run_sweeps(bin_: str, name: str, threads: int, repeat: int) -> dict:
    m = MODELS[name]
    ck = ensure_checkpoint(name)
    g = ensure_gguf(bin_, name, "f32")
    out = {"model": name, "resolution": [], "views": []}
    points = [("resolution", r, 1) for r in SWEEP_RES] + [("views", 504, v) for v in SWEEP_VIEWS if v != 1]
    for i, (kind, res, views) in enumerate(points):
        px = ensure_input(m["family"], res, views)
        big = res >= 756 or views >= 4
        rep = max(1, repeat - 1) if big else repeat
        jobs = {"torch": lambda px=px, rep=rep: measure_torch(m["torch"]["torch"], ck, px, rep, threads),
                "da3-go": lambda px=px, rep=rep: measure_go(bin_, g, px, rep, threads)}
        if i % 2:
            jobs = dict(reversed(list(jobs.items())))
        log(f"sweep {kind}: process_res {res}, {views} view(s)")
        r = interleave(jobs, 1)
        shape = r["torch"]["raw"][0]["shape"]
        pt = {"process_res": res, "views": views, "size": f"{shape[-1]}x{shape[-2]}",
              "tokens": views * (shape[-1] // 14) * (shape[-2] // 14),
              "torch": r["torch"]["pooled"], "go": r["da3-go"]["pooled"],
              "go_compute_buffers_mib": r["da3-go"]["raw"][0].get("compute_buffers_mib")}
        pt["speedup"] = pt["torch"]["median_ms"] / pt["go"]["median_ms"]
        pt["speedup_min"] = pt["torch"]["min_ms"] / pt["go"]["min_ms"]
        out["resolution" if kind == "resolution" else "views"].append(pt)
    one = next((p for p in out["resolution"] if p["process_res"] == 504), None)
    if one:
        out["views"].insert(0, one)
    return out


# ------------------------------------------------------------------------------------------------------------
# Report


def table(rows: list[dict]) -> str:
    hdr = ["model", "variant", "size", "torch ms", "da3-go ms", "speedup", "(min)", "torch load", "da3-go load",
           "load x", "torch RSS MB", "da3-go RSS MB", "RSS ratio", "busy"]
    lines = [hdr]
    for r in rows:
        base = "" if r["baseline"] == "torch" else f" vs {r['baseline']}"
        lines.append([r["label"], r["variant"] + base, r["size"], f"{r['torch']['median_ms']:.0f}",
                      f"{r['go']['median_ms']:.0f}", f"{r['speedup']:.2f}x", f"{r['speedup_min']:.2f}x",
                      f"{r['torch']['load_ms']:.0f}", f"{r['go']['load_ms']:.0f}", f"{r['load_speedup']:.1f}x",
                      f"{r['torch']['peak_rss_mib']:.0f}", f"{r['go']['peak_rss_mib']:.0f}", f"{r['rss_ratio']:.2f}",
                      f"{100 * max(r['torch']['foreign_cpu'], r['go']['foreign_cpu']):.0f}%"])
    return fmt_cols(lines)


def fmt_cols(lines: list[list[str]]) -> str:
    w = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(l)) for l in lines)


def sweep_table(points: list[dict], key: str) -> str:
    lines = [[key, "size", "tokens", "torch ms", "da3-go ms", "speedup", "(min)", "torch RSS MB", "da3-go RSS MB", "busy"]]
    for p in points:
        lines.append([str(p["process_res"] if key == "res" else p["views"]), p["size"], str(p["tokens"]),
                      f"{p['torch']['median_ms']:.0f}", f"{p['go']['median_ms']:.0f}", f"{p['speedup']:.2f}x",
                      f"{p['speedup_min']:.2f}x", f"{p['torch']['peak_rss_mib']:.0f}", f"{p['go']['peak_rss_mib']:.0f}",
                      f"{100 * max(p['torch']['foreign_cpu'], p['go']['foreign_cpu']):.0f}%"])
    return fmt_cols(lines)


def growth(points: list[dict], side: str) -> str:
    if len(points) < 2:
        return ""
    a, b = points[0], points[-1]
    return (f"{side}: x{b['tokens'] / a['tokens']:.1f} tokens -> time x{b[side]['median_ms'] / a[side]['median_ms']:.1f}, "
            f"peak RSS x{b[side]['peak_rss_mib'] / a[side]['peak_rss_mib']:.1f}")


def check_targets(rows: list[dict]) -> list[dict]:
    out = []
    for model, variant, qty, bound in TARGETS:
        r = next((r for r in rows if r["model"] == model and r["variant"] == variant and r["baseline"] == "torch"), None)
        if r is None:
            continue
        v = r[qty]
        ok = v <= bound if qty == "rss_ratio" else v >= bound
        out.append({"model": model, "variant": variant, "quantity": qty, "value": v, "bound": bound, "pass": ok})
    return out


def plot(rows: list[dict], sweeps: dict | None, path: Path, env: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = 2 if sweeps else 1
    fig, axes = plt.subplots(n, 2, figsize=(12, 4.2 * n), squeeze=False)
    main = [r for r in rows if r["baseline"] == "torch"]
    labels = [f"{r['label']} {r['variant']}" for r in main]
    colors = {"f32": "#4472c4", "q8_0": "#ed7d31", "q4_k": "#70ad47"}
    ax = axes[0][0]
    ax.bar(range(len(main)), [r["speedup"] for r in main], color=[colors[r["variant"]] for r in main])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(1.5, color="gray", ls="--", lw=0.8, label="target 1.5x (f32)")
    ax.axhline(1.8, color="gray", ls=":", lw=0.8, label="target 1.8x (q8_0)")
    for i, r in enumerate(main):
        ax.text(i, r["speedup"], f"{r['speedup']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(main)), labels, fontsize=7, rotation=35, ha="right")
    ax.set_ylabel("speedup over PyTorch f32 (x)")
    ax.set_title(f"per-image time, {env['threads']} threads (higher is better)")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    x = range(len(main))
    ax.bar([i - 0.2 for i in x], [r["torch"]["peak_rss_mib"] for r in main], 0.4, label="PyTorch f32", color="#a5a5a5")
    ax.bar([i + 0.2 for i in x], [r["go"]["peak_rss_mib"] for r in main], 0.4, label="da3-go",
           color=[colors[r["variant"]] for r in main])
    ax.set_xticks(list(x), labels, fontsize=7, rotation=35, ha="right")
    ax.set_ylabel("peak RSS (MiB)")
    ax.set_title("peak resident memory per process (lower is better)")
    ax.legend(fontsize=7)
    if sweeps:
        for ax, key, xl in [(axes[1][0], "resolution", "processed size (tokens)"), (axes[1][1], "views", "views")]:
            pts = sweeps[key]
            xs = [p["tokens"] if key == "resolution" else p["views"] for p in pts]
            ax.plot(xs, [p["torch"]["median_ms"] for p in pts], "o-", color="#7f7f7f", label="PyTorch ms")
            ax.plot(xs, [p["go"]["median_ms"] for p in pts], "o-", color="#4472c4", label="da3-go ms")
            for xx, p in zip(xs, pts):
                ax.annotate(p["size"] if key == "resolution" else f"{p['speedup']:.2f}x", (xx, p["go"]["median_ms"]),
                            fontsize=7, textcoords="offset points", xytext=(0, -12), ha="center")
            ax.set_xlabel(xl)
            ax.set_ylabel("ms per run (median)")
            ax2 = ax.twinx()
            ax2.plot(xs, [p["torch"]["peak_rss_mib"] for p in pts], "s--", color="#7f7f7f", alpha=0.6, label="PyTorch RSS")
            ax2.plot(xs, [p["go"]["peak_rss_mib"] for p in pts], "s--", color="#4472c4", alpha=0.6, label="da3-go RSS")
            ax2.set_ylabel("peak RSS (MiB)")
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
            ax.set_title(f"{MODELS[sweeps['model']]['label']} f32: " + ("resolution sweep" if key == "resolution" else "views at 504x336"))
    fig.suptitle(f"da3-go vs PyTorch (same weights, same input, PyTorch f32) on {env['cpu']}, "
                 f"git {env['git']}, {env['started'][:10]}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} CPUs)"


def bin_version(bin_: str) -> str:
    r = subprocess.run([bin_, "version"], capture_output=True, text=True)
    return " | ".join(r.stdout.strip().splitlines())


def git_rev() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return r.stdout.strip() + ("+dirty" if dirty else "")


def report(result: dict, full: bool) -> None:
    """Prints the table, sweeps and target checks; writes the plot (copied to docs/bench.png when full)."""
    env, rows, sweeps, targets = result["env"], result["rows"], result["sweeps"], result["targets"]
    print(f"da3-go vs PyTorch: {env['cpu']}, {env['threads']} threads, {env['rounds']} interleaved rounds x "
          f"{env['repeat']} runs, git {env['git']}")
    print("speedup = torch ms / da3-go ms (per image, median of the pooled runs; (min): of the fastest runs); "
          "load x = torch load / da3-go load;\nRSS ratio = da3-go peak RSS / torch peak RSS; busy = CPU share "
          "taken by other users of the machine during the measurements (worst side)\n")
    if rows:
        print(table(rows))
    if sweeps:
        print(f"\nresolution sweep ({MODELS[sweeps['model']]['label']} f32, 1 view):")
        print(sweep_table(sweeps["resolution"], "res"))
        print(growth(sweeps["resolution"], "torch") + "\n" + growth(sweeps["resolution"], "go"))
        print(f"\nview sweep ({MODELS[sweeps['model']]['label']} f32 at 504):")
        print(sweep_table(sweeps["views"], "views"))
        print(growth(sweeps["views"], "torch") + "\n" + growth(sweeps["views"], "go"))
    if targets:
        print("\nissue 6 targets:")
        for t in targets:
            op = "<=" if t["quantity"] == "rss_ratio" else ">="
            print(f"  {'PASS' if t['pass'] else 'FAIL'}  {t['model']} {t['variant']} {t['quantity']} "
                  f"{t['value']:.2f} (want {op} {t['bound']})")
    if rows:
        png = OUT / "compare.png"
        plot(rows, sweeps, png, env)
        print(f"\nwrote {OUT / 'compare.json'} and {png}")
        if full:
            (ROOT / "docs").mkdir(exist_ok=True)
            shutil.copyfile(png, ROOT / "docs" / "bench.png")
            print(f"copied the plot to {ROOT / 'docs' / 'bench.png'}")
    print(f"load average {env['loadavg_start']:.1f} at the start, {env['loadavg_end']:.1f} at the end; "
          f"{env['wall_s'] / 60:.1f} min")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "bin" / "da3-go"), help="da3-go binary (make build)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per model (one process each)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per process after one warm-up")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--only", choices=["main", "sweeps"])
    ap.add_argument("--sweep-model", default="da3-base")
    ap.add_argument("--quick", action="store_true", help="smoke test: da3-small f32, one round, one run, no sweeps")
    ap.add_argument("--quiet-idle", type=float, default=QUIET["idle"],
                    help="before each measurement wait until this fraction of the CPUs is idle (0 = never wait)")
    ap.add_argument("--quiet-wait", type=float, default=QUIET["max_wait"], help="longest such wait, seconds")
    ap.add_argument("--retries", type=int, default=QUIET["retries"],
                    help="measure again (keeping the quietest) when other work took more than 10%% of the CPUs")
    ap.add_argument("--rev", help="source revision of --bin for the report (default: this checkout's HEAD, right for "
                                  "make bench-compare, which builds bin/da3-go from the checkout first)")
    ap.add_argument("--replot", action="store_true",
                    help="measure nothing: print the report of benchmarks/out/compare.json and redraw its plot")
    args = ap.parse_args()
    QUIET["idle"], QUIET["max_wait"], QUIET["retries"] = args.quiet_idle, args.quiet_wait, args.retries
    if args.replot:
        result = json.loads((OUT / "compare.json").read_text())
        report(result, result["env"].get("full", False))
        return 0
    if args.quick:
        args.models, args.variants, args.rounds, args.repeat, args.only = "da3-small", "f32", 1, 1, "main"
    bin_ = str(Path(args.bin).resolve())
    if not Path(bin_).exists():
        raise SystemExit(f"{bin_} not found: run `make build` first")
    OUT.mkdir(parents=True, exist_ok=True)
    ensure_deps()
    t0 = time.time()
    full = not args.quick and args.only is None and set(args.models.split(",")) == set(MODELS)
    env = {"cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "repeat": args.repeat,
           "git": args.rev or git_rev(), "bin_version": bin_version(bin_), "python": platform.python_version(), "loadavg_start": loadavg(),
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "full": full}
    rows, sweeps = [], None
    if args.only != "sweeps":
        rows = run_main(bin_, args.models.split(","), args.variants.split(","), args.rounds, args.repeat, args.threads)
    if args.only != "main":
        sweeps = run_sweeps(bin_, args.sweep_model, args.threads, args.repeat)
    env["loadavg_end"], env["wall_s"] = loadavg(), time.time() - t0
    result = {"env": env, "rows": rows, "sweeps": sweeps, "targets": check_targets(rows)}
    (OUT / "compare.json").write_text(json.dumps(result, indent=1))
    report(result, full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
