#!/usr/bin/env python3
"""Helpers of scripts/validate_gpu.sh. Needs only Python 3 and numpy.

  spec SRC.safetensors OUT.json     describe a checkpoint: per tensor its dtype,
                                    shape, mean and standard deviation (small
                                    tensors verbatim), plus the file's metadata
  synth SPEC.json OUT.safetensors   write a checkpoint with that layout and
                                    seeded normal values of those statistics
  depth REF.npy GOT.npy [...]       depth parity of pairs (correlation, max|d|)
  pose REF.json GOT.json            pose parity (extrinsics, intrinsics)
  bench A.json B.json               print the two timings side by side

The random-weight checkpoints of tests/oracle (tests/oracle/da3_common.py
init_random_weights) draw every tensor from a normal law with its own mean
and standard deviation, so a spec reproduces their statistics in kilobytes: a
GPU machine without the oracle's Python environment or network regenerates
models of the same size and behaviour. CPU and GPU then run the same GGUF.
"""
import json
import struct
import sys
import zlib

import numpy as np

# Parity thresholds.
DEPTH_MIN_CORR = 0.99999
DEPTH_MAX_REL = 1e-3     # max|d| / max|ref|
POSE_MAX_ABS = 1e-3      # extrinsics, absolute
INTR_MAX_REL = 1e-3      # intrinsics (pixels), relative to max|ref|

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
          "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
VERBATIM = 16  # tensors of at most this many elements are copied exactly


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        if n > 100 << 20:
            raise SystemExit(f"{path}: header of {n} bytes is not a safetensors header")
        return json.loads(f.read(n)), 8 + n


def tensor_f32(mm, base, info):
    b, e = info["data_offsets"]
    raw = mm[base + b:base + e]
    if info["dtype"] == "BF16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if info["dtype"] not in DTYPES:
        raise SystemExit(f"dtype {info['dtype']} not supported")
    return raw.view(DTYPES[info["dtype"]])


def cmd_spec(src, out):
    header, base = read_header(src)
    meta = header.pop("__metadata__", None)
    mm = np.memmap(src, dtype=np.uint8, mode="r")
    tensors = {}
    for name in sorted(header):
        info = header[name]
        x = tensor_f32(mm, base, info)
        t = {"dtype": info["dtype"], "shape": info["shape"]}
        if x.size <= VERBATIM or not np.issubdtype(x.dtype, np.floating):
            t["values"] = x.astype(np.float64).tolist()
        else:
            x64 = x.astype(np.float64)
            t["mean"] = float(x64.mean())
            t["std"] = float(x64.std())
        tensors[name] = t
    with open(out, "w") as f:
        json.dump({"format": "da3-validate-spec-v1", "source": src, "metadata": meta, "tensors": tensors}, f)
    print(f"spec: {len(tensors)} tensors of {src} -> {out}")


def cmd_synth(spec_path, out, seed=0):
    spec = json.load(open(spec_path))
    if spec.get("format") != "da3-validate-spec-v1":
        raise SystemExit(f"{spec_path}: not a da3-validate spec")
    names = sorted(spec["tensors"])
    header, off = {}, 0
    for name in names:
        t = spec["tensors"][name]
        if t["dtype"] not in DTYPES or t["dtype"] == "BOOL":
            raise SystemExit(f"{name}: dtype {t['dtype']} not supported")
        n = int(np.prod(t["shape"], dtype=np.int64)) * np.dtype(DTYPES[t["dtype"]]).itemsize
        header[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [off, off + n]}
        off += n
    if spec.get("metadata"):
        header["__metadata__"] = spec["metadata"]
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name in names:
            t = spec["tensors"][name]
            dt = DTYPES[t["dtype"]]
            if "values" in t:
                x = np.asarray(t["values"], dtype=np.float64).reshape(t["shape"])
            else:
                rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
                x = rng.standard_normal(t["shape"], dtype=np.float32) * np.float32(t["std"]) + np.float32(t["mean"])
            f.write(np.ascontiguousarray(x, dtype=dt).tobytes())
    print(f"synth: {len(names)} tensors, {off / 2**20:.1f} MiB -> {out}")


def load_npy(path):
    x = np.load(path).astype(np.float64).ravel()
    if not np.all(np.isfinite(x)):
        raise SystemExit(f"{path}: non-finite values")
    return x


def cmd_depth(pairs):
    ref = np.concatenate([load_npy(a) for a, _ in pairs])
    got = np.concatenate([load_npy(b) for _, b in pairs])
    if ref.shape != got.shape:
        print(f"depth: FAIL shapes differ {ref.shape} vs {got.shape}")
        return 1
    d = np.abs(ref - got)
    mref = float(np.abs(ref).max())
    corr = float(np.corrcoef(ref, got)[0, 1]) if ref.std() > 0 and got.std() > 0 else float("nan")
    rel = float(d.max()) / mref if mref > 0 else float("inf")
    ok = corr >= DEPTH_MIN_CORR and rel <= DEPTH_MAX_REL
    print(f"depth: {'PASS' if ok else 'FAIL'} corr={corr:.8f} (>= {DEPTH_MIN_CORR}) "
          f"max|d|={d.max():.3e} max|ref|={mref:.3e} ratio={rel:.3e} (<= {DEPTH_MAX_REL}) "
          f"mean|d|={d.mean():.3e} n={ref.size} ref_std={ref.std():.3e}")
    return 0 if ok else 1


def cmd_pose(a, b):
    ra, rb = json.load(open(a)), json.load(open(b))
    va, vb = ra["views"], rb["views"]
    if len(va) != len(vb):
        print(f"pose: FAIL {len(va)} vs {len(vb)} views")
        return 1
    ext_a = np.array([v["extrinsics"] for v in va], dtype=np.float64)
    ext_b = np.array([v["extrinsics"] for v in vb], dtype=np.float64)
    int_a = np.array([v["intrinsics"] for v in va], dtype=np.float64)
    int_b = np.array([v["intrinsics"] for v in vb], dtype=np.float64)
    dext = float(np.abs(ext_a - ext_b).max())
    dint = float(np.abs(int_a - int_b).max()) / max(float(np.abs(int_a).max()), 1e-30)
    ok = dext <= POSE_MAX_ABS and dint <= INTR_MAX_REL and np.all(np.isfinite(ext_b))
    print(f"pose: {'PASS' if ok else 'FAIL'} extrinsics max|d|={dext:.3e} (<= {POSE_MAX_ABS}) "
          f"intrinsics max|d|/max|ref|={dint:.3e} (<= {INTR_MAX_REL}) views={len(va)}")
    return 0 if ok else 1


def cmd_bench(a, b):
    ra, rb = json.load(open(a)), json.load(open(b))
    speed = ra["median_ms"] / rb["median_ms"] if rb["median_ms"] > 0 else float("nan")
    for r in (ra, rb):
        bufs = ", ".join(f"{k} {v:.0f} MiB" for k, v in sorted((r.get("compute_buffers_mib") or {}).items()))
        print(f"  {r['device']:>8}: load {r['load_ms']:.0f} ms, first {r['first_ms']:.1f} ms, median {r['median_ms']:.1f} ms "
              f"(min {r['min_ms']:.1f}, p90 {r['p90_ms']:.1f}) over {len(r['runs_ms'])} runs, {r['views']} view(s) "
              f"{r['processed_width']}x{r['processed_height']}, splits {r['splits']}, buffers: {bufs}")
    print(f"  speed-up {rb['device']} over {ra['device']}: {speed:.2f}x")
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "spec" and len(args) == 2:
        cmd_spec(*args)
        return 0
    if cmd == "synth" and len(args) in (2, 3):
        cmd_synth(args[0], args[1], int(args[2]) if len(args) == 3 else 0)
        return 0
    if cmd == "depth" and len(args) >= 2 and len(args) % 2 == 0:
        return cmd_depth(list(zip(args[0::2], args[1::2])))
    if cmd == "pose" and len(args) == 2:
        return cmd_pose(*args)
    if cmd == "bench" and len(args) == 2:
        return cmd_bench(*args)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
