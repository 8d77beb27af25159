#!/usr/bin/env python3
"""Generate the OpenCV / PyTorch expectations for internal/imgproc tests.

Run from anywhere:  python3 internal/imgproc/testdata/gen.py
Needs numpy, opencv-python(-headless) and torch. Writes, next to this file:
  resize.json       manifest: cv2 version, every case with its expected output hash (and data offsets)
  ipp_u8.bin.gz     int8 diffs  cv2-default (IPP) output  minus  cv2 IPP-disabled output, per ipp case
  float_ref.bin     float32 little-endian reference outputs for the tolerance cases (CHW order)

Sources are not stored: both sides generate them with the stateless hash in `noise_u8` (see helpers_test.go).
Each case is [sw, sh, dw, dh, cn, seed, hash] (+ [offset, count] into the blob when data is stored).
Output hashes are the first 16 hex digits of SHA-256 over the output bytes: uint8 HWC for 8-bit cases,
CHW little-endian float32/float64 for float cases.
"""
import gzip
import hashlib
import json
import os
import sys

import cv2
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def noise_u8(seed, n):
    """n bytes: top byte of mix64(seed*0x9E3779B97F4A7C15 + i*0xD1B54A32D192ED03)."""
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + i * np.uint64(0xD1B54A32D192ED03)
    return (mix64(z) >> np.uint64(56)).astype(np.uint8)


def src_u8(seed, w, h, cn):
    return noise_u8(seed, w * h * cn).reshape(h, w, cn)


def h16(b):
    return hashlib.sha256(b).hexdigest()[:16]


def resize(img, w, h, interp, ipp):
    cv2.ipp.setUseIPP(ipp)
    out = cv2.resize(img, (w, h), interpolation=interp)
    cv2.ipp.setUseIPP(True)
    return out.reshape(h, w, -1)


def size_pairs(rng):
    """(sw, sh, dw, dh) pairs: tiny, integer scales, random, realistic."""
    pairs = set()
    tiny = [1, 2, 3, 4, 5, 7]
    for sw in tiny:
        for dw in [1, 2, 3, 5, 8, 13]:
            sh = tiny[(sw + dw) % len(tiny)]
            dh = [1, 2, 4, 6, 9][(sw * 3 + dw) % 5]
            pairs.add((sw, sh, dw, dh))
    for k in [2, 3, 4, 5]:  # integer up- and downscales (area fast path for downscales)
        for (w, h) in [(4, 6), (7, 5), (13, 9), (16, 16)]:
            pairs.add((w * k, h * k, w, h))
            pairs.add((w, h, w * k, h * k))
        pairs.add((6 * k, 5 * k, 6, 5 * k))  # integer on one axis only
    for _ in range(100):
        sw, sh = (int(v) for v in rng.integers(1, 64, 2))
        dw, dh = (int(v) for v in rng.integers(1, 128, 2))
        pairs.add((sw, sh, dw, dh))
    pairs |= {(640, 427, 504, 336), (97, 65, 504, 338), (504, 291, 504, 294), (300, 200, 504, 336),
              (1920, 1080, 504, 284), (504, 284, 504, 280), (33, 17, 84, 43), (2000, 10, 504, 3)}
    return sorted(p for p in pairs if p[:2] != p[2:])


def main():
    rng = np.random.default_rng(20240607)
    pairs = size_pairs(rng)
    cases = {"cubic_u8": [], "area_u8": [], "cubic_u8_ipp": [], "cubic_f32": [], "cubic_f64": [],
             "bilinear": []}
    ipp_blob = bytearray()
    float_blob = bytearray()
    stats = {"ipp_cases": 0, "ipp_values": 0, "ipp_values_differing_from_native": 0}
    for idx, (sw, sh, dw, dh) in enumerate(pairs):
        for cn in (1, 3):
            seed = idx * 2 + cn
            big = sw * sh > 20000 or dw * dh > 20000
            if big and cn == 1:
                continue
            img = src_u8(seed, sw, sh, cn)
            base = [sw, sh, dw, dh, cn, seed]
            native = resize(img, dw, dh, cv2.INTER_CUBIC, ipp=False)
            cases["cubic_u8"].append(base + [h16(native.tobytes())])
            if dw <= sw and dh <= sh:
                area = resize(img, dw, dh, cv2.INTER_AREA, ipp=True)
                if not np.array_equal(area, resize(img, dw, dh, cv2.INTER_AREA, ipp=False)):
                    sys.exit(f"INTER_AREA depends on IPP for {base}")
                cases["area_u8"].append(base + [h16(area.tobytes())])
            if cn == 3 and (dw * dh <= 8000 or (sw, sh, dw, dh) == (300, 200, 504, 336)):
                ipp = resize(img, dw, dh, cv2.INTER_CUBIC, ipp=True)
                diff = (ipp.astype(np.int16) - native.astype(np.int16))
                if np.abs(diff).max() > 127:
                    sys.exit(f"IPP diff too large for {base}")
                d = diff.astype(np.int8).tobytes()
                cases["cubic_u8_ipp"].append(base + [h16(ipp.tobytes()), len(ipp_blob), len(d)])
                ipp_blob += d
                if sw >= 4 and sh >= 4:
                    stats["ipp_cases"] += 1
                    stats["ipp_values"] += diff.size
                    stats["ipp_values_differing_from_native"] += int((diff != 0).sum())
            if not big:
                f32 = img.astype(np.float32) / np.float32(255)
                f64 = img / 255.0
                o32n = resize(f32, dw, dh, cv2.INTER_CUBIC, ipp=False).transpose(2, 0, 1)
                o32i = resize(f32, dw, dh, cv2.INTER_CUBIC, ipp=True).transpose(2, 0, 1)
                o64 = resize(f64, dw, dh, cv2.INTER_CUBIC, ipp=True).transpose(2, 0, 1)
                if not np.array_equal(o64, resize(f64, dw, dh, cv2.INTER_CUBIC, ipp=False).transpose(2, 0, 1)):
                    sys.exit(f"float64 INTER_CUBIC depends on IPP for {base}")
                c = base + [h16(np.ascontiguousarray(o32n).astype("<f4").tobytes())]
                if dw * dh * cn <= 200:  # keep the IPP-default float32 output for the tolerance test
                    c += [len(float_blob), o32i.size]
                    float_blob += np.ascontiguousarray(o32i).astype("<f4").tobytes()
                cases["cubic_f32"].append(c)
                if cn == 3:
                    cases["cubic_f64"].append(base + [h16(np.ascontiguousarray(o64).astype("<f8").tobytes())])
    # torch bilinear align_corners=True on single-channel float32 maps in [0, 10)
    for idx, (sw, sh, dw, dh) in enumerate([(1, 1, 5, 3), (2, 2, 7, 9), (5, 4, 1, 1), (37, 28, 64, 49), (12, 7, 5, 3),
                                            (36, 24, 60, 41), (9, 13, 17, 2), (3, 1, 10, 4)]):
        seed = 100000 + idx
        m = noise_u8(seed, sw * sh).reshape(sh, sw).astype(np.float32) / np.float32(25.5)
        out = torch.nn.functional.interpolate(torch.from_numpy(m)[None, None], size=(dh, dw), mode="bilinear",
                                              align_corners=True)[0, 0].numpy()
        cases["bilinear"].append([sw, sh, dw, dh, 1, seed, "", len(float_blob), out.size])
        float_blob += np.ascontiguousarray(out).astype("<f4").tobytes()

    manifest = {"opencv": cv2.__version__, "torch": torch.__version__, "numpy": np.__version__,
                "stats": stats, "cases": cases}
    with open(os.path.join(HERE, "resize.json"), "w") as f:
        json.dump(manifest, f, separators=(",", ":"))
        f.write("\n")
    with gzip.GzipFile(os.path.join(HERE, "ipp_u8.bin.gz"), "wb", mtime=0) as f:
        f.write(bytes(ipp_blob))
    with open(os.path.join(HERE, "float_ref.bin"), "wb") as f:
        f.write(bytes(float_blob))
    print({k: len(v) for k, v in cases.items()}, stats)


if __name__ == "__main__":
    main()
