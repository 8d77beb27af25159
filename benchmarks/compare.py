#!/usr/bin/env python3
"""da3-go against PyTorch, ONNX Runtime, OpenVINO and (optionally) the C++ engine, side by side on one machine in
one run (`make bench-compare`).

    python3 benchmarks/compare.py [--threads T] [--rounds 3] [--repeat 3] [--only main|sweeps] [--quick]
                                  [--models da3-base,...] [--variants f32,bf16,...] [--ov-modes f32,bf16,int8]
                                  [--process-res R] [--cpp PATH] [--json PATH]

All engines run the same network on the same float32 input tensor:

* weights: the oracle's seeded random checkpoints (tests/oracle/out/{da3-base,da3-small,da2-vits}; generated
  with the oracle scripts when missing), converted to GGUF with `da3-go convert` and quantized with
  `da3-go quantize` (q8_0, q4_k) into benchmarks/out/models/;
* input: a synthetic image preprocessed once by the reference code (DA3: the package's InputProcessor at
  process_res 504 on a 640x427 image -> 504x336, one or four views; DA2: 518 on a 640x640 image -> 518x518),
  saved as .npy and fed to `torch_bench.py run`, `onnx_bench.py run` and `da3-go bench -pixels` (network only: no
  image decoding, resizing or output resize);
* ONNX Runtime: the same PyTorch model exported with torch.onnx for that input's shape (benchmarks/onnx_bench.py;
  each export is checked against PyTorch before it is timed), CPU execution provider, all graph optimizations,
  intra-op threads = T;
* OpenVINO (benchmarks/openvino_bench.py): the same ONNX export read by the CPU plugin with
  INFERENCE_NUM_THREADS = T, PERFORMANCE_HINT = LATENCY, NUM_STREAMS = 1 and INFERENCE_PRECISION_HINT f32 or bf16
  (modes "f32", "bf16"); "int8" is NNCF post-training quantization of that export (nncf.quantize, model_type
  TRANSFORMER, the benchmark's input as the one calibration sample; cached as <export>.int8.xml beside it) run with
  the bf16 hint ("int8 f32": the f32 hint). load_ms = read_model + compile_model (no model cache);
* the C++ engine depth-anything.cpp (optional column, when --cpp, $DA3_CPP_CLI or benchmarks/out/cpp/da3-cli
  exists; benchmarks/build_cpp.sh builds it): the same f32 GGUF file, from the PNG image (its timings include
  decoding and preprocessing);
* da3-go configurations (GO_CONFIGS): f32, q8_0, q4_k files; -precision bf16 / int8 (int8 also on a q8_0 file
  quantized with -pure: every matrix q8_0) / int8c (the f32 file requantized at load, one scale per output
  channel; paired with OpenVINO's int8); DA3_KERNELS=avx2 (the AVX2
  variant of the kernels on this CPU: f32 and int8c, the latter with vpdpbusd where the CPU has it and with
  DA3_AVX2_INT8=vpmaddubsw as every AVX2 CPU runs it). Those the binary does not offer are skipped;
* threads: torch.set_num_threads(T), ONNX Runtime intra_op_num_threads, `--threads T`, `-threads T`;
* every measurement is a fresh process (load time = checkpoint file to ready model, the file read once before
  so that it is in the page cache for every engine alike; peak RSS = VmHWM of that
  process), with one warm-up run excluded from the median, and the engines alternate within each round
  (the order flips between rounds) so that load from other users of a shared machine hits them alike;
* each measurement waits (up to --quiet-wait s) for the machine to be mostly idle, and records the CPU share
  other processes took while it ran ("busy" column): ratios from busy rows are noise, not performance;
* accuracy: every engine writes the depth of its last run (.npy, benchmarks/out/depth/); each is compared with the
  PyTorch f32 depth of the same input (DA3: the package's; DA2: the original code's, which the ONNX export runs;
  see MODELS "ref"): Pearson correlation over all pixels and max|d| / max|ref| (the C++ engine, which starts from
  the PNG with its own preprocessing, has none).

PyTorch references: DA3 = the official depth-anything-3 package (SDPA attention; its forward also runs the
auxiliary ray branch, which da3-go and the ONNX export skip); DA2 = transformers' DepthAnythingForDepthEstimation
(the oracle's reference; faster here than the original code, which is measured too and reported as "torch-orig").
The DA2 ONNX export is of the original code.

Prints the CPU model and ISA extensions, the table (ms, ratios against each engine, load ms, peak RSS MiB), a
table of every engine and mode with its time, load, peak RSS and accuracy, the OpenVINO ratios per precision, the
target checks of the performance goals, and writes benchmarks/out/compare.json, --json (the tables without the
raw measurements) and benchmarks/out/compare.png (copied to docs/bench.png on a full run).
--quick (a smoke test of the whole pipeline, not a measurement): DA3-SMALL at process_res 280, da3-go f32, bf16,
int8 and every OpenVINO mode, one round of one run, no waiting for a quiet machine. The sweeps time DA3-BASE f32 against PyTorch over the processed resolution (long
side 280..1008) and the view count (1..8).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
TORCH_BENCH = ROOT / "benchmarks" / "torch_bench.py"
ONNX_BENCH = ROOT / "benchmarks" / "onnx_bench.py"
OV_BENCH = ROOT / "benchmarks" / "openvino_bench.py"
ORACLE = ROOT / "tests" / "oracle"
sys.path.insert(0, str(ORACLE))
sys.path.insert(0, str(ROOT / "benchmarks"))

# "ref" names the PyTorch column whose depth the accuracy columns compare with (default "torch"). DA2: the original
# code, the network the ONNX export (so ONNX Runtime and OpenVINO) runs; transformers' port agrees with it to 2e-6
# of max on the 518x518 grid but not at other sizes (0.99901 correlation at 280x280).
MODELS = {
    "da3-base": dict(label="DA3-BASE", family="da3", ckpt="tests/oracle/out/da3-base", src="", views=1,
                     torch={"torch": "da3-base"}, onnx="da3-base",
                     gen=["tests/oracle/da3_oracle.py", "--config", "base", "--cases", "one", "--no-blocks"]),
    "da3-small": dict(label="DA3-SMALL", family="da3", ckpt="tests/oracle/out/da3-small", src="", views=1,
                      torch={"torch": "da3-small"}, onnx="da3-small",
                      gen=["tests/oracle/da3_oracle.py", "--config", "small", "--cases", "one", "--no-blocks"]),
    "da2-vits": dict(label="DA2-Small", family="da2", ckpt="tests/oracle/out/da2-vits", src="model.pth", views=1,
                     torch={"torch": "da2-vits-hf", "torch-orig": "da2-vits"}, onnx="da2-vits", ref="torch-orig",
                     gen=["tests/oracle/da2_oracle.py", "--config", "vits"]),
    "da3-base-4v": dict(label="DA3-BASE 4 views", family="da3", ckpt="tests/oracle/out/da3-base", src="", views=4,
                        torch={"torch": "da3-base"}, onnx="da3-base", weights="da3-base",
                        gen=["tests/oracle/da3_oracle.py", "--config", "base", "--cases", "one", "--no-blocks"]),
    "da3-small-4v": dict(label="DA3-SMALL 4 views", family="da3", ckpt="tests/oracle/out/da3-small", src="", views=4,
                         torch={"torch": "da3-small"}, onnx="da3-small", weights="da3-small",
                         gen=["tests/oracle/da3_oracle.py", "--config", "small", "--cases", "one", "--no-blocks"]),
}
# da3-go configurations: the weight file (f32 or quantized GGUF), extra flags and environment. "needs" names a
# feature of the binary (see binary_features); configurations the binary lacks are skipped with a note.
GO_CONFIGS = {
    "f32": dict(weights="f32", precision="f32"),
    "q8_0": dict(weights="q8_0"),
    "q4_k": dict(weights="q4_k"),
    "bf16": dict(weights="f32", args=["-precision", "bf16"], needs="precision", precision="bf16"),
    "int8": dict(weights="q8_0", args=["-precision", "int8"], needs="precision", precision="int8"),
    # int8 on a q8_0 file quantized with -pure (every matrix q8_0; the default keeps the first quarter of the
    # blocks f16, which int8 mode multiplies in bf16)
    "int8 pure": dict(weights="q8_0-pure", args=["-precision", "int8"], needs="precision", precision="int8"),
    "f32 avx2": dict(weights="f32", env={"DA3_KERNELS": "avx2"}, needs="kernels"),
    # int8 with one scale per output channel, requantized at load from the q8_0 file (the file a deployer
    # downloads; from the f32 file: the same speed, a higher peak RSS, and depth closer to f32 by ~1e-4)
    "int8c": dict(weights="q8_0", args=["-precision", "int8c"], needs="precision", precision="int8"),
    # the same in the AVX2 kernels, beside "f32 avx2" (like it, not paired with OpenVINO): with 256-bit vpdpbusd
    # where the CPU has AVX-VNNI or AVX512_VNNI (the attention in int8 too), and in the form any AVX2 CPU runs
    # (vpmaddubsw, the attention in f32)
    "int8c avx2": dict(weights="q8_0", args=["-precision", "int8c"], env={"DA3_KERNELS": "avx2"}, needs="precision"),
    "int8c avx2 vpmaddubsw": dict(weights="q8_0", args=["-precision", "int8c"],
                                  env={"DA3_KERNELS": "avx2", "DA3_AVX2_INT8": "vpmaddubsw"}, needs="precision"),
}
# Configurations timed per model by default (--variants overrides for every model).
MODEL_CONFIGS = {
    "da3-base": ["f32", "q8_0", "q4_k", "bf16", "int8", "int8 pure", "int8c", "f32 avx2", "int8c avx2",
                 "int8c avx2 vpmaddubsw"],
    "da3-small": ["f32", "q8_0", "bf16", "int8", "int8c"],
    "da2-vits": ["f32", "q8_0", "bf16", "int8", "int8c", "f32 avx2", "int8c avx2", "int8c avx2 vpmaddubsw"],
    "da3-base-4v": ["f32", "bf16", "int8", "int8c"],
    "da3-small-4v": ["f32"],
}
# OpenVINO modes: the model read (the ONNX export, or its NNCF int8 IR) and INFERENCE_PRECISION_HINT; "precision"
# pairs a mode with the da3-go configurations of the same precision (GO_CONFIGS) in the ratio table.
OV_MODES = {
    "f32": dict(model="onnx", hint="f32", precision="f32"),
    "bf16": dict(model="onnx", hint="bf16", precision="bf16"),
    "int8": dict(model="int8", hint="bf16", precision="int8"),
    "int8 f32": dict(model="int8", hint="f32", precision=None),
}
DEFAULT_OV_MODES = ["f32", "bf16", "int8"]
# (model family) -> (synthetic image size, processed resolution)
INPUTS = {"da3": ((640, 427), 504), "da2": ((640, 640), 518)}
SWEEP_RES = [280, 392, 504, 756, 1008]
SWEEP_VIEWS = [1, 2, 4, 8]

# The performance targets: (model, da3-go configuration, quantity, bound). Quantities: speedup (PyTorch ms / da3-go ms),
# ort_speedup (ONNX Runtime f32 ms / da3-go ms), rss_ratio (da3-go peak RSS / PyTorch's), cpp_rss_ratio (da3-go
# peak RSS / the C++ engine's; only where that column was measured).
TARGETS = [
    ("da3-base", "f32", "ort_speedup", 1.1),
    ("da3-base", "f32", "speedup", 1.6),
    ("da3-base", "bf16", "ort_speedup", 1.8),
    ("da3-base", "int8", "ort_speedup", 2.2),
    ("da3-base", "int8 pure", "ort_speedup", 2.2),
    ("da3-base", "f32 avx2", "speedup", 1.3),
    ("da3-base-4v", "f32", "speedup", 1.8),
    ("*", "*", "rss_ratio", 0.5),
    ("*", "f32", "cpp_rss_ratio", 1.0),
    ("*", "f32", "ort_speedup", 1.2),
]
# The targets against OpenVINO at the same precision (ov_ratios): (model, precision, quantity, bound).
# speedup = OpenVINO ms / da3-go ms; rss_ratio = da3-go peak RSS / OpenVINO's; start_ratio = da3-go
# (load + first run) / OpenVINO's; corr_margin = da3-go's depth correlation with PyTorch f32 minus OpenVINO's.
OV_TARGETS = [
    ("*", "*", "speedup", 1.2),
    ("*", "*", "rss_ratio", 1.0),
    ("*", "*", "start_ratio", 0.1),
    ("*", "int8", "corr_margin", 0.0),
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


def warm(*paths: Path) -> None:
    """Reads the files (a directory: the files in it; an OpenVINO .xml: its .bin too) once, so that a
    measurement's load time is the engine's and not the disk's: a machine that reclaims idle page cache
    (this one does) otherwise hands the first process of a round a cold file (da3-go's DA3-BASE load:
    31 s cold, 0.3 s warm)."""
    for p in paths:
        p = Path(p)
        files = [f for f in sorted(p.rglob("*")) if f.is_file()] if p.is_dir() else [p]
        if p.suffix == ".xml":
            files.append(p.with_suffix(".bin"))
        for f in files:
            if f.is_file():
                with open(f, "rb") as fh:
                    while fh.read(1 << 24):
                        pass


def timed(cmd: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """Runs one measurement process and reports how busy the machine was with other work meanwhile
    (foreign_cpu: CPU time of other processes / (wall x CPUs)) and the process's own peak RSS (maxrss_mib, from
    wait4, for engines that do not report it)."""
    idle = wait_quiet()
    b0, t0 = cpu_times()
    c0, w0 = children_cpu(), time.time()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **(env or {})})
    streams = {}
    readers = [threading.Thread(target=lambda k=k, f=f: streams.__setitem__(k, f.read()))
               for k, f in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    _, status, ru = os.wait4(p.pid, 0)  # reaped here (not by Popen) to get this child's own rusage
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    b1, t1 = cpu_times()
    c1, w1 = children_cpu(), time.time()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{streams['err'][-3000:]}")
    foreign = max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0)) if t1 > t0 else 0.0
    r = subprocess.CompletedProcess(cmd, p.returncode, streams["out"], streams["err"])
    return r, {"idle_before": idle, "foreign_cpu": foreign, "wall_s": w1 - w0, "loadavg": loadavg(),
               "maxrss_mib": ru.ru_maxrss / 1024}


# ------------------------------------------------------------------------------------------------------------
# Setup: dependencies, checkpoints, GGUF files, inputs


def ensure_deps() -> None:
    r = subprocess.run([sys.executable, "-c", "import matplotlib, onnx, onnxruntime, onnxscript, openvino, nncf"],
                       capture_output=True)
    if r.returncode != 0:
        log("installing the benchmark's Python packages (benchmarks/setup.sh)")
        subprocess.run(["bash", str(ROOT / "benchmarks" / "setup.sh")], check=True)
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
    name = m.get("weights", name)
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
        typ, _, pure = variant.partition("-")
        sh([bin_, "quantize", "-quiet", "-type", typ] + (["-pure"] if pure == "pure" else []) + [str(f32), str(q)])
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


def input_images(family: str, views: int) -> list[Path]:
    """The synthetic views as PNG files (written once)."""
    from PIL import Image

    (w, h), _ = INPUTS[family]
    inputs = OUT / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    paths = []
    for v in range(views):
        p = inputs / f"{family}-{w}x{h}-view{v}.png"
        if not p.exists():
            Image.fromarray(synthetic(w, h, v), "RGB").save(p)
        paths.append(p)
    return paths


def ensure_input(family: str, process_res: int, views: int = 1) -> Path:
    inputs = OUT / "inputs"
    out = inputs / f"{family}-{process_res}-{views}v.npy"
    if out.exists():
        return out
    paths = [str(p) for p in input_images(family, views)]
    sh([sys.executable, str(TORCH_BENCH), "prep", "--model", family, "--images", ",".join(paths),
        "--process-res", str(process_res), "--out", str(out)])
    return out


# ------------------------------------------------------------------------------------------------------------
# One measurement = one fresh process


def out_args(flag: str, out: Path | None) -> list[str]:
    """The flag that makes a measuring process write its depth to out (none when out is None)."""
    if out is None:
        return []
    out.parent.mkdir(parents=True, exist_ok=True)
    return [flag, str(out)]


def measure_torch(model: str, ckpt: Path, pixels: Path, repeat: int, threads: int, out: Path | None = None) -> dict:
    warm(ckpt)
    r, env = timed([sys.executable, str(TORCH_BENCH), "run", "--model", model, "--ckpt", str(ckpt), "--pixels",
                    str(pixels), "--repeat", str(repeat), "--threads", str(threads), *out_args("--out", out)])
    return {**last_json(r.stdout), **env}


def ensure_onnx(name: str, pixels: Path, threads: int) -> Path:
    """The ONNX export of the model for the shape of pixels, checked against PyTorch (onnx_bench.py export)."""
    m = MODELS[name]
    ck = ensure_checkpoint(name)
    out = OUT / "onnx" / f"{m['onnx']}-{pixels.stem}.onnx"
    src = ck / (m["src"] or "model.safetensors")
    if not out.exists() or out.stat().st_mtime < max(src.stat().st_mtime, pixels.stat().st_mtime):
        log(f"exporting {m['onnx']} for {pixels.name} to ONNX and checking it against PyTorch")
        r = sh([sys.executable, str(ONNX_BENCH), "export", "--model", m["onnx"], "--ckpt", str(ck), "--pixels",
                str(pixels), "--out", str(out), "--threads", str(threads)])
        chk = last_json(r.stdout)
        for k, c in chk["checks"].items():
            log(f"  {k}: ONNX Runtime vs PyTorch max|d| {c['max_abs']:.3g} ({c['rel']:.2g} of max|ref|), "
                f"corr {c['corr']:.8f}")
    return out


def measure_ort(onnx: Path, pixels: Path, repeat: int, threads: int, out: Path | None = None) -> dict:
    warm(onnx)
    r, env = timed([sys.executable, str(ONNX_BENCH), "run", "--onnx", str(onnx), "--pixels", str(pixels),
                    "--repeat", str(repeat), "--threads", str(threads), *out_args("--out", out)])
    return {**last_json(r.stdout), **env}


def ensure_ov_int8(onnx: Path, pixels: Path) -> Path:
    """The NNCF int8 quantization of the ONNX export as OpenVINO IR, next to it (made once per export)."""
    xml = onnx.with_suffix(".int8.xml")
    if not xml.exists() or not xml.with_suffix(".bin").exists() or xml.stat().st_mtime < onnx.stat().st_mtime:
        log(f"quantizing {onnx.name} to int8 with NNCF (once per export)")
        r = sh([sys.executable, str(OV_BENCH), "quantize", "--onnx", str(onnx), "--pixels", str(pixels),
                "--out", str(xml)])
        log(f"  quantized in {last_json(r.stdout)['quantize_s']:.0f} s: {xml.name}")
    return xml


def measure_ov(model: Path, pixels: Path, hint: str, repeat: int, threads: int, out: Path | None = None) -> dict:
    warm(model)
    r, env = timed([sys.executable, str(OV_BENCH), "run", "--model", str(model), "--pixels", str(pixels),
                    "--precision", hint, "--repeat", str(repeat), "--threads", str(threads), *out_args("--out", out)])
    return {**last_json(r.stdout), **env}


def measure_go(bin_: str, gguf: Path, pixels: Path, repeat: int, threads: int, args: list[str] | None = None,
               env: dict | None = None, out: Path | None = None) -> dict:
    warm(gguf)
    r, e = timed([bin_, "bench", "-json", "-quiet", "-device", "cpu", "-model", str(gguf), "-pixels", str(pixels),
                  "-repeat", str(repeat), "-threads", str(threads), *(args or []), *out_args("-save-depth", out)],
                 env=env)
    return {**last_json(r.stdout), "impl": "da3-go", **e}


def measure_cpp(cli: str, gguf: Path, images: list[Path], repeat: int, threads: int, pose: bool = True) -> dict:
    """The C++ engine (depth-anything.cpp's da3-cli). One view: its bench mode (load once, `repeat` timed runs
    of depth + pose from the image file, preprocessing included). Several views: one multi-view run per
    process (no bench mode there), so its time is the process's wall time (load and output writing included)."""
    warm(gguf)
    with tempfile.TemporaryDirectory() as tmp:
        if len(images) == 1:
            # DA2 models have no camera head: no --pose for them.
            extra = ["--pose", str(Path(tmp) / "pose.json")] if pose else []
            r, e = timed([cli, "depth", "--model", str(gguf), "--input", str(images[0]), *extra,
                          "--threads", str(threads), "--repeat", str(repeat + 1)])
            m = re.search(r"load=([0-9.]+)ms infer=([0-9.]+)ms/iter.*min=([0-9.]+)", r.stdout)
            if not m:
                raise RuntimeError(f"unexpected da3-cli output: {r.stdout[-500:]!r}")
            load, med, mn = map(float, m.groups())
            runs = [med]  # the CLI prints its median and min only
        else:
            cmd = [cli, "depth", "--model", str(gguf), "--threads", str(threads), "--out-prefix", str(Path(tmp) / "v")]
            for im in images:
                cmd += ["--input", str(im)]
            r, e = timed(cmd)
            load, runs = 0.0, [e["wall_s"] * 1000]
            mn = runs[0]
    return {"impl": "cpp", "load_ms": load, "first_ms": runs[0], "runs_ms": runs, "min_ms": mn,
            "peak_rss_mib": e["maxrss_mib"], "shape": [], **e}


def binary_features(bin_: str) -> set[str]:
    """What the da3-go binary offers beyond f32: "precision" (-precision), "kernels" (DA3_KERNELS) and
    "save-depth" (bench -save-depth, for the accuracy columns)."""
    feats = set()
    h = subprocess.run([bin_, "bench", "-h"], capture_output=True, text=True)
    if "-precision" in h.stdout + h.stderr:
        feats.add("precision")
    if "-save-depth" in h.stdout + h.stderr:
        feats.add("save-depth")
    if "DA3_KERNELS" in bin_version(bin_) or "kernels" in bin_version(bin_).lower():
        feats.add("kernels")
    return feats


def cpp_cli(arg: str | None) -> str | None:
    """The C++ engine's CLI: --cpp, $DA3_CPP_CLI or benchmarks/out/cpp/da3-cli (benchmarks/build_cpp.sh)."""
    for c in (arg, os.environ.get("DA3_CPP_CLI"), str(OUT / "cpp" / "da3-cli")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(Path(c).resolve())
    return None


def pool(reps: list[dict]) -> dict:
    """Pools the timed runs of several processes; load, first run and RSS are medians over processes."""
    runs = sorted(x for r in reps for x in r["runs_ms"])
    p90 = runs[max(0, -(-9 * len(runs) // 10) - 1)]
    return {
        "median_ms": statistics.median(runs), "p90_ms": p90, "runs": len(runs),
        "min_ms": min(r.get("min_ms", min(r["runs_ms"])) for r in reps),
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


def depth_file(name: str, pixels: Path, job: str) -> Path:
    """Where a measurement of job (a key of run_main's jobs) writes its depth."""
    return OUT / "depth" / f"{name}-{pixels.stem}" / (re.sub(r"[^A-Za-z0-9_.-]+", "_", job) + ".npy")


def accuracy(ref, got) -> dict:
    """Depth of one engine against the reference's: Pearson correlation over all pixels (and views), max|d| and
    max|d| / max|ref| ("rel"), mean|d|. Shapes must match: a different size is a different computation. Output with
    NaN or infinities has no figures, only "nonfinite": True."""
    import numpy as np

    r = np.asarray(ref, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if r.shape != g.shape:
        raise ValueError(f"depth shape {list(g.shape)} differs from the reference's {list(r.shape)}")
    r, g = r.ravel(), g.ravel()
    if not np.all(np.isfinite(g)):
        return {"corr": None, "max_abs": None, "mean_abs": None, "rel": None, "max_ref": float(np.abs(r).max()),
                "nonfinite": True}
    d = np.abs(r - g)
    if r.std() > 0 and g.std() > 0:
        corr = float(np.corrcoef(r, g)[0, 1])
    else:
        corr = float(np.array_equal(r, g))
    mx = float(np.abs(r).max()) if r.size else 0.0
    return {"corr": corr, "max_abs": float(d.max()), "mean_abs": float(d.mean()), "max_ref": mx,
            "rel": float(d.max() / mx) if mx > 0 else float(d.max())}


def job_accuracy(files: dict, ref_job: str) -> dict:
    """job -> accuracy of its depth file against ref_job's (None where a job wrote none)."""
    import numpy as np

    ref_path = files.get(ref_job)
    if ref_path is None or not ref_path.exists():
        return {}
    ref = np.load(ref_path)
    out = {}
    for job, path in files.items():
        if path is None or not path.exists():
            out[job] = None
            continue
        try:
            out[job] = accuracy(ref, np.load(path))
        except ValueError as e:
            log(f"  {job}: no accuracy: {e}")
            out[job] = None
    return out


def engine_rows(name: str, size: str, labels: dict, pooled: dict, acc: dict, ref: str = "torch") -> list[dict]:
    """One row per job of a model: engine, mode, its pooled timings, load, peak RSS, busy share and accuracy
    against the reference job ref (labels: job -> (engine, mode); vs_torch = PyTorch ms / this ms)."""
    m = MODELS[name]
    t = pooled.get("torch")
    rows = []
    for job, (engine, mode) in labels.items():
        p = pooled[job]
        a = acc.get(job)
        rows.append({
            "model": name, "label": m["label"], "size": size, "views": m["views"], "engine": engine, "mode": mode,
            "job": job, "reference": job == ref, "median_ms": p["median_ms"], "min_ms": p["min_ms"],
            "p90_ms": p["p90_ms"], "runs": p["runs"], "load_ms": p["load_ms"], "first_ms": p["first_ms"],
            "peak_rss_mib": p["peak_rss_mib"], "foreign_cpu": p["foreign_cpu"],
            "vs_torch": t["median_ms"] / p["median_ms"] if t else None,
            "precision": p.get("precision"),
            "corr": a["corr"] if a else None, "rel": a["rel"] if a else None,
            "max_abs": a["max_abs"] if a else None, "mean_abs": a["mean_abs"] if a else None,
            "nonfinite": bool(a and a.get("nonfinite")),
        })
    return rows


def ov_ratios(engines: list[dict]) -> list[dict]:
    """Per model and precision, each da3-go configuration against the OpenVINO mode of the same precision
    (GO_CONFIGS/OV_MODES "precision"): ms, load, peak RSS and accuracy side by side; speedup = OpenVINO ms /
    da3-go ms (> 1: da3-go faster), rss_ratio = da3-go peak RSS / OpenVINO's."""
    out = []
    for model in dict.fromkeys(e["model"] for e in engines):
        rows = [e for e in engines if e["model"] == model]
        ov = {e["mode"]: e for e in rows if e["engine"] == "OpenVINO"}
        for g in (e for e in rows if e["engine"] == "da3-go"):
            prec = GO_CONFIGS.get(g["mode"], {}).get("precision")
            o = next((ov[k] for k, v in OV_MODES.items() if prec and v["precision"] == prec and k in ov), None)
            if o is None:
                continue
            out.append({
                "model": model, "label": g["label"], "size": g["size"], "precision": prec, "go": g["mode"],
                "ov": o["mode"], "go_ms": g["median_ms"], "ov_ms": o["median_ms"],
                "speedup": o["median_ms"] / g["median_ms"], "speedup_min": o["min_ms"] / g["min_ms"],
                "go_load_ms": g["load_ms"], "ov_load_ms": o["load_ms"],
                "go_rss_mib": g["peak_rss_mib"], "ov_rss_mib": o["peak_rss_mib"],
                "rss_ratio": g["peak_rss_mib"] / o["peak_rss_mib"],
                "start_ratio": (g["load_ms"] + g["first_ms"]) / (o["load_ms"] + o["first_ms"]),
                "corr_margin": g["corr"] - o["corr"] if g["corr"] is not None and o["corr"] is not None else None,
                "go_corr": g["corr"], "ov_corr": o["corr"], "go_rel": g["rel"], "ov_rel": o["rel"],
                "go_nonfinite": g.get("nonfinite", False), "ov_nonfinite": o.get("nonfinite", False),
                "foreign_cpu": max(g["foreign_cpu"], o["foreign_cpu"]),
            })
    return out


def run_main(bin_: str, models: list[str], variants: list[str] | None, rounds: int, repeat: int, threads: int,
             cpp: str | None, ov_modes: list[str] | None = None,
             process_res: int | None = None) -> tuple[list[dict], list[dict]]:
    """Per model: PyTorch, ONNX Runtime, each OpenVINO mode, the C++ engine (when cpp is set) and each da3-go
    configuration, one fresh process each, interleaved over rounds. Returns the rows of the da3-go table (one per
    da3-go configuration and, for DA2, one more for f32 against the original DA2 code) and the engine rows (one
    per engine and mode, with accuracy against the PyTorch f32 depth)."""
    feats = binary_features(bin_)
    ov_modes = DEFAULT_OV_MODES if ov_modes is None else ov_modes
    rows, engines = [], []
    for name in models:
        m = MODELS[name]
        _, res = INPUTS[m["family"]]
        res = process_res or res
        ck = ensure_checkpoint(name)
        px = ensure_input(m["family"], res, m["views"])
        jobs, labels, files = {}, {}, {}
        for tag, tmodel in m["torch"].items():
            f = files[tag] = depth_file(name, px, tag)
            jobs[tag] = (lambda tm=tmodel, f=f: measure_torch(tm, ck, px, repeat, threads, f))
            labels[tag] = ("PyTorch", "f32" + ("" if tag == "torch" else f" ({tag.removeprefix('torch-')})"))
        onnx = ensure_onnx(name, px, threads)
        f = files["onnxruntime"] = depth_file(name, px, "onnxruntime")
        jobs["onnxruntime"] = lambda f=f: measure_ort(onnx, px, repeat, threads, f)
        labels["onnxruntime"] = ("ONNX Runtime", "f32")
        for mode in ov_modes:
            ov = OV_MODES[mode]
            model = ensure_ov_int8(onnx, px) if ov["model"] == "int8" else onnx
            key = f"openvino {mode}"
            f = files[key] = depth_file(name, px, key)
            jobs[key] = (lambda model=model, hint=ov["hint"], f=f: measure_ov(model, px, hint, repeat, threads, f))
            labels[key] = ("OpenVINO", mode)
        if cpp and m["family"] in ("da3", "da2") and process_res is None:
            g = ensure_gguf(bin_, name, "f32")
            ims = input_images(m["family"], m["views"])
            jobs["cpp"] = (lambda g=g, ims=ims, pose=m["family"] == "da3": measure_cpp(cpp, g, ims, repeat, threads, pose))
            labels["cpp"] = ("C++ engine", "f32 (from the PNG)")
        configs = []
        for c in variants or MODEL_CONFIGS[name]:
            cfg = GO_CONFIGS[c]
            if cfg.get("needs") and cfg["needs"] not in feats:
                log(f"{m['label']}: skipping da3-go {c} (this binary has no {cfg['needs']} option)")
                continue
            g = ensure_gguf(bin_, name, cfg["weights"])
            key = f"da3-go {c}"
            f = files[key] = depth_file(name, px, key) if "save-depth" in feats else None
            jobs[key] = (lambda g=g, cfg=cfg, f=f: measure_go(bin_, g, px, repeat, threads, cfg.get("args"),
                                                              cfg.get("env"), f))
            labels[key] = ("da3-go", c)
            configs.append(c)
        for f in files.values():
            if f is not None and f.exists():
                f.unlink()  # a file left from an earlier run must not stand in for this one's
        log(f"{m['label']}: {rounds} interleaved rounds of {', '.join(jobs)}")
        res_ = interleave(jobs, rounds)
        shape = res_[next(iter(m["torch"]))]["raw"][0]["shape"]
        size = f"{shape[-1]}x{shape[-2]}"
        ref = m.get("ref", "torch")
        acc = job_accuracy(files, ref)
        # OpenVINO reports the precision its compiled model runs at (pool keeps timings only)
        pooled = {k: {**v["pooled"], "precision": v["raw"][-1].get("precision")} for k, v in res_.items()}
        engines += engine_rows(name, size, labels, pooled, acc, ref)
        ort = res_["onnxruntime"]["pooled"]
        cp = res_["cpp"]["pooled"] if "cpp" in res_ else None
        for tag in m["torch"]:
            t = res_[tag]["pooled"]
            for c in configs:
                if tag != "torch" and c != "f32":
                    continue
                g = res_[f"da3-go {c}"]["pooled"]
                row = {
                    "model": name, "label": m["label"], "variant": c, "baseline": tag, "size": size,
                    "views": m["views"], "torch": t, "ort": ort, "cpp": cp, "go": g,
                    "speedup": t["median_ms"] / g["median_ms"],
                    "speedup_min": t["min_ms"] / g["min_ms"],
                    "ort_speedup": ort["median_ms"] / g["median_ms"],
                    "ort_speedup_min": ort["min_ms"] / g["min_ms"],
                    "load_speedup": t["load_ms"] / g["load_ms"],
                    "rss_ratio": g["peak_rss_mib"] / t["peak_rss_mib"],
                    "ort_rss_ratio": g["peak_rss_mib"] / ort["peak_rss_mib"],
                    "accuracy": acc.get(f"da3-go {c}"),
                    "raw": {"torch": res_[tag]["raw"], "ort": res_["onnxruntime"]["raw"],
                            "go": res_[f"da3-go {c}"]["raw"]},
                }
                if cp:
                    row["cpp_speedup"] = cp["median_ms"] / g["median_ms"]
                    row["cpp_rss_ratio"] = g["peak_rss_mib"] / cp["peak_rss_mib"]
                    row["raw"]["cpp"] = res_["cpp"]["raw"]
                rows.append(row)
    return rows, engines


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
    cpp = any(r.get("cpp") for r in rows)
    hdr = ["model", "da3-go", "size", "torch ms", "ORT ms"] + (["C++ ms"] if cpp else []) + [
        "da3-go ms", "vs torch", "vs ORT"] + (["vs C++"] if cpp else []) + [
        "(min) torch", "(min) ORT", "torch load", "da3-go load", "torch RSS", "ORT RSS"] + (
        ["C++ RSS"] if cpp else []) + ["da3-go RSS", "RSS/torch"] + (["RSS/C++"] if cpp else []) + ["busy"]
    lines = [hdr]
    for r in rows:
        base = "" if r["baseline"] == "torch" else f" vs {r['baseline']}"
        c = r.get("cpp")
        busy = max(r["torch"]["foreign_cpu"], r["ort"]["foreign_cpu"], r["go"]["foreign_cpu"],
                   c["foreign_cpu"] if c else 0)
        lines.append([r["label"], r["variant"] + base, r["size"], f"{r['torch']['median_ms']:.0f}",
                      f"{r['ort']['median_ms']:.0f}"] + ([f"{c['median_ms']:.0f}" if c else "-"] if cpp else []) + [
                      f"{r['go']['median_ms']:.0f}", f"{r['speedup']:.2f}x", f"{r['ort_speedup']:.2f}x"] + (
                      [f"{r['cpp_speedup']:.2f}x" if c else "-"] if cpp else []) + [
                      f"{r['speedup_min']:.2f}x", f"{r['ort_speedup_min']:.2f}x",
                      f"{r['torch']['load_ms']:.0f}", f"{r['go']['load_ms']:.0f}",
                      f"{r['torch']['peak_rss_mib']:.0f}", f"{r['ort']['peak_rss_mib']:.0f}"] + (
                      [f"{c['peak_rss_mib']:.0f}" if c else "-"] if cpp else []) + [
                      f"{r['go']['peak_rss_mib']:.0f}", f"{r['rss_ratio']:.2f}"] + (
                      [f"{r['cpp_rss_ratio']:.2f}" if c else "-"] if cpp else []) + [f"{100 * busy:.0f}%"])
    return fmt_cols(lines)


def fmt_cols(lines: list[list[str]], left: int = 2) -> str:
    """Aligned columns: the first `left` left-aligned, the others right-aligned."""
    w = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) if i < left else c.rjust(w[i]) for i, c in enumerate(l)).rstrip()
                     for l in lines)


def fmt_acc(corr: float | None, rel: float | None, ref: bool = False, nonfinite: bool = False) -> tuple[str, str]:
    """Correlation and max|d| / max|ref| as table cells: "ref" for the reference itself, "NaN/inf" for output that
    is not finite, "-" where unmeasured."""
    if ref:
        return "ref", "ref"
    if nonfinite:
        return "NaN/inf", "NaN/inf"
    if corr is None or rel is None:
        return "-", "-"
    return f"{corr:.6f}", f"{rel:.2e}"


def engine_mode(e: dict) -> str:
    """The mode cell: OpenVINO's hint, with the precision it ran when that differs (a CPU without bf16)."""
    mode = e["mode"]
    hint = OV_MODES.get(mode, {}).get("hint") if e["engine"] == "OpenVINO" else None
    ran = e.get("precision")
    if hint and ran and ran != hint:
        mode += f" (ran {ran})"
    return mode


def engine_table(engines: list[dict]) -> str:
    """Every engine and mode: time, load, peak RSS and accuracy against the PyTorch f32 depth in one row."""
    lines = [["model", "size", "engine", "mode", "ms", "(min)", "vs torch", "load ms", "RSS MiB", "depth corr",
              "max|d|/max|ref|", "busy"]]
    for e in engines:
        corr, rel = fmt_acc(e["corr"], e["rel"], e.get("reference", e["job"] == "torch"), e.get("nonfinite", False))
        lines.append([e["label"], e["size"], e["engine"], engine_mode(e), f"{e['median_ms']:.0f}",
                      f"{e['min_ms']:.0f}", f"{e['vs_torch']:.2f}x" if e["vs_torch"] else "-",
                      f"{e['load_ms']:.0f}", f"{e['peak_rss_mib']:.0f}", corr, rel, f"{100 * e['foreign_cpu']:.0f}%"])
    return fmt_cols(lines, left=4)


def ov_table(ratios: list[dict]) -> str:
    """da3-go against OpenVINO at the same precision (vs OV = OpenVINO ms / da3-go ms)."""
    lines = [["model", "precision", "da3-go", "OpenVINO", "da3-go ms", "OV ms", "vs OV", "(min)", "load da3-go/OV",
              "RSS da3-go/OV", "corr da3-go / OV", "max|d|/max|ref| da3-go / OV", "busy"]]
    for r in ratios:
        gc, gr = fmt_acc(r["go_corr"], r["go_rel"], nonfinite=r.get("go_nonfinite", False))
        oc, orel = fmt_acc(r["ov_corr"], r["ov_rel"], nonfinite=r.get("ov_nonfinite", False))
        lines.append([r["label"], r["precision"], r["go"], r["ov"], f"{r['go_ms']:.0f}", f"{r['ov_ms']:.0f}",
                      f"{r['speedup']:.2f}x", f"{r['speedup_min']:.2f}x",
                      f"{r['go_load_ms']:.0f} / {r['ov_load_ms']:.0f}",
                      f"{r['go_rss_mib']:.0f} / {r['ov_rss_mib']:.0f}", f"{gc} / {oc}", f"{gr} / {orel}",
                      f"{100 * r['foreign_cpu']:.0f}%"])
    return fmt_cols(lines, left=4)


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
    """Evaluates TARGETS on the rows against PyTorch ("*" matches every model or configuration; a wildcard
    target is reported once per matching row)."""
    out = []
    for model, variant, qty, bound in TARGETS:
        for r in rows:
            if r["baseline"] != "torch" or model not in ("*", r["model"]) or variant not in ("*", r["variant"]):
                continue
            if qty not in r:
                continue
            v = r[qty]
            ok = v <= bound if qty.endswith("rss_ratio") else v >= bound
            out.append({"model": r["model"], "variant": r["variant"], "quantity": qty, "value": v, "bound": bound,
                        "pass": ok})
    return out


def check_ov_targets(ratios: list[dict]) -> list[dict]:
    """Evaluates OV_TARGETS on the da3-go / OpenVINO pairs (ov_ratios), in check_targets' form (variant: the
    da3-go configuration); a quantity a pair lacks (no accuracy measured) is left out."""
    out = []
    for model, prec, qty, bound in OV_TARGETS:
        for r in ratios:
            if model not in ("*", r["model"]) or prec not in ("*", r["precision"]) or r.get(qty) is None:
                continue
            v = r[qty]
            ok = v <= bound if qty.endswith("_ratio") else v >= bound if qty != "corr_margin" else v > bound
            out.append({"model": r["model"], "variant": f"{r['go']} vs OpenVINO {r['ov']}", "quantity": qty,
                        "value": v, "bound": bound, "pass": ok})
    return out


def plot(rows: list[dict], sweeps: dict | None, path: Path, env: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = 2 if sweeps else 1
    fig, axes = plt.subplots(n, 2, figsize=(12, 4.2 * n), squeeze=False)
    main = [r for r in rows if r["baseline"] == "torch"]
    labels = [f"{r['label']} {r['variant']}" for r in main]
    x = range(len(main))
    ax = axes[0][0]
    ax.bar([i - 0.2 for i in x], [r["speedup"] for r in main], 0.4, color="#4472c4", label="vs PyTorch f32")
    ax.bar([i + 0.2 for i in x], [r["ort_speedup"] for r in main], 0.4, color="#ed7d31", label="vs ONNX Runtime f32")
    ax.axhline(1.0, color="k", lw=0.8)
    for i, r in enumerate(main):
        ax.text(i - 0.2, r["speedup"], f"{r['speedup']:.2f}", ha="center", va="bottom", fontsize=6)
        ax.text(i + 0.2, r["ort_speedup"], f"{r['ort_speedup']:.2f}", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(list(x), labels, fontsize=7, rotation=35, ha="right")
    ax.set_ylabel("da3-go speedup (x)")
    ax.set_title(f"per-image time, {env['threads']} threads (higher is better)")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    ax.bar([i - 0.3 for i in x], [r["torch"]["peak_rss_mib"] for r in main], 0.2, label="PyTorch f32", color="#a5a5a5")
    ax.bar([i - 0.1 for i in x], [r["ort"]["peak_rss_mib"] for r in main], 0.2, label="ONNX Runtime f32",
           color="#ed7d31")
    if any(r.get("cpp") for r in main):
        ax.bar([i + 0.1 for i in x], [r["cpp"]["peak_rss_mib"] if r.get("cpp") else 0 for r in main], 0.2,
               label="C++ engine f32", color="#70ad47")
    ax.bar([i + 0.3 for i in x], [r["go"]["peak_rss_mib"] for r in main], 0.2, label="da3-go", color="#4472c4")
    ax.set_xticks(list(x), labels, fontsize=7, rotation=35, ha="right")
    ax.set_ylabel("peak RSS (MiB)")
    ax.legend(fontsize=7)
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
    fig.suptitle(f"da3-go vs PyTorch and ONNX Runtime (same weights, same input, PyTorch f32) on {env['cpu']}, "
                 f"git {env['git']}, {env['started'][:10]}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# The ISA extensions that decide which kernels run (da3-go's, ggml's, MKL/oneDNN's in PyTorch, MLAS in ONNX Runtime).
ISA = ["sse4_2", "avx", "f16c", "fma", "avx2", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
       "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2"]


def cpu_info() -> dict:
    """CPU model (name, family, model, stepping) and the ISA extensions of ISA it has, from /proc/cpuinfo."""
    info = {"name": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "isa": []}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip()
    info["name"] = fields.get("model name", info["name"])
    for k in ("cpu family", "model", "stepping"):
        if k in fields:
            info[k.replace("cpu ", "")] = fields[k]
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    info["isa"] = [f for f in ISA if f in flags]
    return info


def cpu_name() -> str:
    c = cpu_info()
    fam = f", family {c['family']} model {c['model']}" if "family" in c else ""
    return f"{c['name']}{fam} ({c['cpus']} CPUs)"


ENGINE_PACKAGES = ["torch", "onnxruntime", "openvino", "nncf"]


def engine_versions() -> dict:
    """The installed version of each of ENGINE_PACKAGES (those that import)."""
    code = ("import importlib, json\nv = {}\nfor n in %r:\n    try:\n        v[n] = importlib.import_module(n).__version__\n"
            "    except Exception:\n        pass\nprint(json.dumps(v))" % ENGINE_PACKAGES)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {}


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
    engines, ratios = result.get("engines") or [], result.get("ov_ratios") or []
    v = env.get("versions", {})
    print(f"CPU: {env['cpu']}")
    if env.get("isa"):
        print(f"ISA: {' '.join(env['isa'])}")
    print(f"da3-go vs PyTorch {v.get('torch', '?')}, ONNX Runtime {v.get('onnxruntime', '?')} and OpenVINO "
          f"{v.get('openvino', '?')} (NNCF {v.get('nncf', '?')}): {env['threads']} threads, "
          f"{env['rounds']} interleaved rounds x {env['repeat']} runs, git {env['git']}, {env['started']}"
          + (" [--quick: a smoke test, not a measurement]" if env.get("quick") else ""))
    print(f"da3-go: {env['bin_version']}")
    if env.get("cpp"):
        print(f"C++ engine: {env['cpp']} (time per image includes its image decoding and preprocessing; "
              f"several views: process wall time)")
    print("vs torch / vs ORT / vs C++ = that engine's ms / da3-go ms (per image, median of the pooled runs; (min): "
          "of the fastest runs); all baselines f32;\nRSS in MiB (peak per process); RSS/torch = da3-go peak RSS / "
          "PyTorch's; busy = CPU share taken by other users of the machine during the measurements (worst side)\n")
    if rows:
        print(table(rows))
    if engines:
        print("\nevery engine and mode (ms per image, median; vs torch = PyTorch f32 ms / that ms; load ms = file to "
              "ready model, OpenVINO: read_model + compile_model;\nRSS = peak per process; depth corr and "
              "max|d|/max|ref| against the PyTorch f32 depth of the same input, the row marked ref):\n")
        print(engine_table(engines))
    if ratios:
        print("\nda3-go against OpenVINO at the same precision (vs OV = OpenVINO ms / da3-go ms, > 1: da3-go faster; "
              "OpenVINO int8 = NNCF int8 run with the bf16 hint):\n")
        print(ov_table(ratios))
    if sweeps:
        print(f"\nresolution sweep ({MODELS[sweeps['model']]['label']} f32, 1 view):")
        print(sweep_table(sweeps["resolution"], "res"))
        print(growth(sweeps["resolution"], "torch") + "\n" + growth(sweeps["resolution"], "go"))
        print(f"\nview sweep ({MODELS[sweeps['model']]['label']} f32 at 504):")
        print(sweep_table(sweeps["views"], "views"))
        print(growth(sweeps["views"], "torch") + "\n" + growth(sweeps["views"], "go"))
    if targets:
        print("\nperformance targets:")
        for t in targets:
            op = "<=" if t["quantity"].endswith("_ratio") else ">" if t["quantity"] == "corr_margin" else ">="
            val = f"{t['value']:.2e}" if t["quantity"] == "corr_margin" else f"{t['value']:.2f}"
            print(f"  {'PASS' if t['pass'] else 'FAIL'}  {t['model']} {t['variant']} {t['quantity']} "
                  f"{val} (want {op} {t['bound']})")
    if rows:
        png = OUT / "compare.png"
        plot(rows, sweeps, png, env)
        print(f"\nwrote {OUT / 'compare.json'}{', ' + env['json'] if env.get('json') else ''} and {png}")
        if full:
            (ROOT / "docs").mkdir(exist_ok=True)
            shutil.copyfile(png, ROOT / "docs" / "bench.png")
            print(f"copied the plot to {ROOT / 'docs' / 'bench.png'}")
    print(f"load average {env['loadavg_start']:.1f} at the start, {env['loadavg_end']:.1f} at the end; "
          f"{env['wall_s'] / 60:.1f} min")


def tables_json(result: dict) -> dict:
    """The --json document: the environment and the tables (da3-go rows, every engine and mode, the OpenVINO
    ratios, the sweeps and the targets) without the per-process raw measurements."""
    rows = [{k: v for k, v in r.items() if k != "raw"} for r in result["rows"]]
    return {"env": result["env"], "rows": rows, "engines": result.get("engines") or [],
            "ov_ratios": result.get("ov_ratios") or [], "sweeps": result.get("sweeps"),
            "targets": result.get("targets") or []}


def quick_defaults(args: argparse.Namespace) -> None:
    """--quick: DA3-SMALL at process_res 280, da3-go f32/bf16/int8, every default OpenVINO mode, one round of one
    run, main table only, no waiting for a quiet machine and no retries (options given explicitly stay)."""
    args.models = args.models or "da3-small"
    args.variants = args.variants or "f32,bf16,int8"
    args.rounds, args.repeat, args.only = 1, 1, "main"
    args.process_res = args.process_res or 280
    args.quiet_idle = 0.0 if args.quiet_idle is None else args.quiet_idle
    args.retries = 0 if args.retries is None else args.retries


def parse_list(s: str | None, allowed: dict, what: str) -> list[str] | None:
    """A comma list of keys of allowed ("none": empty); None stays None (the defaults)."""
    if s is None:
        return None
    if s.strip().lower() == "none":
        return []
    items = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)}: want {', '.join(allowed)}")
    return items


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "bin" / "da3-go"), help="da3-go binary (make build)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per model (one process each)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per process after one warm-up")
    ap.add_argument("--models", help="comma list from " + ", ".join(MODELS) + " (default: all)")
    ap.add_argument("--variants", help="da3-go configurations for every model (default: MODEL_CONFIGS), from "
                                       + ", ".join(GO_CONFIGS))
    ap.add_argument("--ov-modes", help="OpenVINO modes (default: " + ",".join(DEFAULT_OV_MODES) + "), from "
                                       + ", ".join(OV_MODES) + ", or none")
    ap.add_argument("--process-res", type=int,
                    help="processed resolution for every model (default: DA3 504 -> 504x336, DA2 518 -> 518x518)")
    ap.add_argument("--json", help="also write the tables (without the raw measurements) as JSON to this path")
    ap.add_argument("--cpp", help="the C++ engine's da3-cli (default: $DA3_CPP_CLI or benchmarks/out/cpp/da3-cli "
                                  "when present; see benchmarks/build_cpp.sh)")
    ap.add_argument("--only", choices=["main", "sweeps"])
    ap.add_argument("--sweep-model", default="da3-base")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test of the whole pipeline: da3-small at process_res 280, da3-go f32/bf16/int8 and the "
                         "OpenVINO modes, one round of one run, no sweeps, no waiting for a quiet machine")
    ap.add_argument("--quiet-idle", type=float,
                    help="before each measurement wait until this fraction of the CPUs is idle (0 = never wait; "
                         f"default {QUIET['idle']}, --quick 0)")
    ap.add_argument("--quiet-wait", type=float, default=QUIET["max_wait"], help="longest such wait, seconds")
    ap.add_argument("--retries", type=int,
                    help="measure again (keeping the quietest) when other work took more than 10%% of the CPUs "
                         f"(default {QUIET['retries']}, --quick 0)")
    ap.add_argument("--rev", help="source revision of --bin for the report (default: this checkout's HEAD, right for "
                                  "make bench-compare, which builds bin/da3-go from the checkout first)")
    ap.add_argument("--replot", action="store_true",
                    help="measure nothing: print the report of benchmarks/out/compare.json and redraw its plot")
    args = ap.parse_args()
    if args.quick:
        quick_defaults(args)
    args.models = args.models or ",".join(MODELS)
    QUIET["idle"] = QUIET["idle"] if args.quiet_idle is None else args.quiet_idle
    QUIET["retries"] = QUIET["retries"] if args.retries is None else args.retries
    QUIET["max_wait"] = args.quiet_wait
    models = parse_list(args.models, MODELS, "model")
    variants = parse_list(args.variants, GO_CONFIGS, "da3-go configuration")
    ov_modes = parse_list(args.ov_modes, OV_MODES, "OpenVINO mode")
    if args.replot:
        result = json.loads((OUT / "compare.json").read_text())
        report(result, result["env"].get("full", False))
        if args.json:
            Path(args.json).write_text(json.dumps(tables_json(result), indent=1))
        return 0
    cpp = cpp_cli(args.cpp)
    bin_ = str(Path(args.bin).resolve())
    if not Path(bin_).exists():
        raise SystemExit(f"{bin_} not found: run `make build` first")
    OUT.mkdir(parents=True, exist_ok=True)
    ensure_deps()
    t0 = time.time()
    full = (not args.quick and args.only is None and set(models) == set(MODELS) and args.process_res is None
            and variants is None)
    env = {"cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "repeat": args.repeat,
           "quick": args.quick, "process_res": args.process_res, "json": args.json,
           "git": args.rev or git_rev(), "bin_version": bin_version(bin_), "python": platform.python_version(), "loadavg_start": loadavg(),
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "full": full, "isa": cpu_info()["isa"],
           "cpu_info": cpu_info(), "versions": engine_versions(), "cpp": cpp}
    rows, engines, sweeps = [], [], None
    if args.only != "sweeps":
        rows, engines = run_main(bin_, models, variants, args.rounds, args.repeat, args.threads, cpp, ov_modes,
                                 args.process_res)
    if args.only != "main":
        sweeps = run_sweeps(bin_, args.sweep_model, args.threads, args.repeat)
    env["loadavg_end"], env["wall_s"] = loadavg(), time.time() - t0
    ratios = ov_ratios(engines)
    result = {"env": env, "rows": rows, "engines": engines, "ov_ratios": ratios, "sweeps": sweeps,
              "targets": check_targets(rows) + check_ov_targets(ratios)}
    (OUT / "compare.json").write_text(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(tables_json(result), indent=1))
    report(result, full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
