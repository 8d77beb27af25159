#!/usr/bin/env python3
"""Small JPEG fixtures for internal/jpeg, with libjpeg-turbo's decode of each stored beside it as PNG.

Writes internal/jpeg/testdata/:
  <name>.jpg       a JPEG of one kind (sampling, baseline/progressive, restart markers, grey, RGB, size, encoder)
  <name>.png       cv2.imread(<name>.jpg, IMREAD_COLOR | IMREAD_IGNORE_ORIENTATION) as 8-bit RGB
  exif_o<k>.jpg    Exif orientation k = 1..8 (written by PIL)
  exif_o<k>.png    cv2.imread(exif_o<k>.jpg) with its default orientation handling, as RGB
  manifest.json    per file: what it is, and how PIL's decode (Image.open(...).convert("RGB"), and for
                   the Exif files ImageOps.exif_transpose) compares with cv2's; library versions.
  shared.json      for each JPEG of the shared test data (../shared/data, read in place, never copied):
                   the SHA-256 of cv2's RGB decode (HWC bytes), so tests can check it without a copy.

The script fails if PIL and cv2 disagree anywhere, so the committed PNGs are the decode of both reference
pipelines. Output is deterministic for given cv2/Pillow versions.

    python3 tests/oracle/jpeg_fixtures.py [--out internal/jpeg/testdata]
"""
import argparse
import glob
import hashlib
import io
import json
import os

import cv2
import numpy as np
import PIL
import PIL.features
from PIL import Image, ImageOps

SAMPLING = {
    "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
    "420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
    "440": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_440,
    "411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411,
}


def synth(w, h, seed):
    """RGB test pattern: smooth gradients, saturated patches with hard edges, noise, black and white."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([
        127 + 120 * np.sin(x / max(w, 1) * 5.1 + 0.3),
        127 + 120 * np.cos(y / max(h, 1) * 4.3 + x / max(w, 1)),
        127 + 120 * np.sin((x + y) / max(w + h, 1) * 7.7),
    ], axis=-1)
    # Saturated patches (large chroma steps make the IDCT overshoot and exercise clamping).
    colours = [(255, 0, 0), (0, 0, 255), (0, 255, 0), (255, 255, 0), (0, 0, 0), (255, 255, 255), (255, 0, 255)]
    for i, c in enumerate(colours):
        x0, y0 = int(rng.integers(0, max(w - 2, 1))), int(rng.integers(0, max(h - 2, 1)))
        img[y0:y0 + max(h // 5, 1), x0:x0 + max(w // 6, 1)] = c
    # Noise over the right half.
    img[:, w // 2:] += rng.normal(0, 25, size=img[:, w // 2:].shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def cv2_encode(rgb, params):
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]) if rgb.ndim == 3 else rgb, params)
    assert ok
    return buf.tobytes()


def pil_encode(rgb, **kw):
    b = io.BytesIO()
    Image.fromarray(rgb).save(b, "JPEG", **kw)
    return b.getvalue()


def cv2_decode(path, orient):
    flags = cv2.IMREAD_COLOR if orient else cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
    return cv2.imread(path, flags)[:, :, ::-1]


def pil_decode(path, orient):
    im = Image.open(path)
    if orient:
        im = ImageOps.exif_transpose(im)
    return np.asarray(im.convert("RGB"))


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "internal", "jpeg", "testdata"))
    ap.add_argument("--data", default=None, help="shared test data (default: the first shared/data found "
                    "walking up from this script)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    cases = []  # (name, jpeg bytes, description)
    W, H = 61, 45  # neither side a multiple of 8 or 16
    img = synth(W, H, 1)
    for s, f in SAMPLING.items():
        for prog in (0, 1):
            kind = "progressive" if prog else "baseline"
            data = cv2_encode(img, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, f,
                                    cv2.IMWRITE_JPEG_PROGRESSIVE, prog])
            cases.append((f"{kind}_{s}", data, f"cv2 {kind} 4:{s[1]}:{s[2]} q90 {W}x{H}"))
    for s in ("420", "422", "444"):
        data = cv2_encode(img, [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING[s],
                                cv2.IMWRITE_JPEG_RST_INTERVAL, 3])
        cases.append((f"restart_{s}", data, f"cv2 baseline 4:{s[1]}:{s[2]} restart interval 3 MCUs"))
    data = cv2_encode(img, [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_PROGRESSIVE, 1,
                            cv2.IMWRITE_JPEG_RST_INTERVAL, 2])
    cases.append(("restart_progressive_420", data, "cv2 progressive 4:2:0 restart interval 2"))
    grey = cv2.cvtColor(img[:, :, ::-1], cv2.COLOR_BGR2GRAY)
    cases.append(("grey_baseline", cv2_encode(grey, [cv2.IMWRITE_JPEG_QUALITY, 90]), "cv2 greyscale baseline"))
    cases.append(("grey_progressive", cv2_encode(grey, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
                  "cv2 greyscale progressive"))
    cases.append(("grey_restart", cv2_encode(grey, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_RST_INTERVAL, 5]),
                  "cv2 greyscale restart interval 5"))
    # Quality extremes: heavy quantization overshoots most; q100 keeps the most AC detail.
    for q in (5, 100):
        data = cv2_encode(img, [cv2.IMWRITE_JPEG_QUALITY, q, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING["420"]])
        cases.append((f"quality{q}_420", data, f"cv2 baseline 4:2:0 q{q}"))
    # Edge cases of the upsamplers: narrow and short images (chroma at most 2 wide is box-upsampled).
    for (w, h) in ((1, 1), (2, 7), (3, 5), (4, 9), (5, 3), (15, 40), (17, 1), (40, 15)):
        small = synth(w, h, 2 + w * 100 + h)
        for s in ("420", "422", "440"):
            data = cv2_encode(small, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING[s]])
            cases.append((f"size{w}x{h}_{s}", data, f"cv2 baseline 4:{s[1]}:{s[2]} {w}x{h}"))
    # Pillow's encoder (optimized Huffman tables, its own progression), and an Adobe RGB JPEG.
    cases.append(("pil_420_optimize", pil_encode(img, quality=80, optimize=True), "PIL 4:2:0 optimized Huffman"))
    cases.append(("pil_progressive_422", pil_encode(img, quality=75, progressive=True, subsampling=1),
                  "PIL progressive 4:2:2"))
    cases.append(("pil_rgb", pil_encode(img, quality=90, keep_rgb=True, subsampling=0), "PIL RGB (Adobe transform 0)"))
    cases.append(("pil_restart_rows", pil_encode(img, quality=90, restart_marker_rows=1), "PIL 4:2:0 restart every MCU row"))

    manifest = {
        "generator": "tests/oracle/jpeg_fixtures.py",
        "cv2": cv2.__version__,
        "cv2_libjpeg_turbo": [l.split("(ver")[1].strip(" )") for l in cv2.getBuildInformation().splitlines()
                              if l.strip().startswith("JPEG:")][0],
        "pillow": PIL.__version__,
        "pillow_libjpeg_turbo": PIL.features.version_feature("libjpeg_turbo"),
        "files": [],
    }
    for name, data, desc in cases:
        p = os.path.join(args.out, name + ".jpg")
        with open(p, "wb") as f:
            f.write(data)
        a, b = cv2_decode(p, False), pil_decode(p, False)
        diff = int(np.abs(a.astype(int) - b).max())
        if diff:
            raise SystemExit(f"{name}: PIL and cv2 decodes differ by up to {diff}")
        cv2.imwrite(os.path.join(args.out, name + ".png"), np.ascontiguousarray(a[:, :, ::-1]))
        im = Image.open(p)
        manifest["files"].append({
            "name": name, "what": desc, "size": list(im.size), "pil_mode": im.mode,
            "progressive": bool(im.info.get("progressive", False)),
            "sampling": [[l[1], l[2]] for l in im.layer],
            "pil_equals_cv2": True,
        })

    # Exif orientation 1..8 on a non-square image.
    small = synth(24, 16, 7)
    for k in range(1, 9):
        ex = Image.Exif()
        ex[0x0112] = k
        name = f"exif_o{k}"
        p = os.path.join(args.out, name + ".jpg")
        with open(p, "wb") as f:
            f.write(pil_encode(small, quality=90, exif=ex.tobytes()))
        a, b = cv2_decode(p, True), pil_decode(p, True)
        if a.shape != b.shape or np.abs(a.astype(int) - b).max():
            raise SystemExit(f"{name}: cv2.imread orientation and PIL exif_transpose differ")
        if np.abs(cv2_decode(p, False).astype(int) - pil_decode(p, False)).max():
            raise SystemExit(f"{name}: unoriented decodes differ")
        cv2.imwrite(os.path.join(args.out, name + ".png"), np.ascontiguousarray(a[:, :, ::-1]))
        manifest["files"].append({
            "name": name, "what": f"PIL 4:2:0 with Exif orientation {k}; PNG is cv2.imread with orientation",
            "size": [24, 16], "orientation": k, "pil_equals_cv2": True,
        })

    # A CMYK JPEG (Adobe, inverted): the two references convert it to RGB differently, so it has no PNG;
    # internal/jpeg hands it to image/jpeg.
    cmyk = Image.fromarray(img).convert("CMYK")
    p = os.path.join(args.out, "cmyk.jpg")
    cmyk.save(p, "JPEG", quality=90)
    d = int(np.abs(cv2_decode(p, False).astype(int) - pil_decode(p, False)).max())
    manifest["cmyk"] = {"name": "cmyk", "what": "PIL CMYK (Adobe); no reference PNG",
                        "cv2_vs_pil_max_diff": d}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    data = args.data
    if data is None:
        d = here
        while d != os.path.dirname(d) and data is None:
            d = os.path.dirname(d)
            if os.path.exists(os.path.join(d, "shared", "data", "manifest.json")):
                data = os.path.join(d, "shared", "data")
    if data:
        shared = {}
        for p in sorted(glob.glob(os.path.join(data, "**", "*.jpg"), recursive=True)):
            a, b = cv2_decode(p, False), pil_decode(p, False)
            if np.abs(a.astype(int) - b).max():
                raise SystemExit(f"{p}: PIL and cv2 decodes differ")
            im = Image.open(p)
            shared[os.path.relpath(p, data)] = {
                "size": list(im.size), "progressive": bool(im.info.get("progressive", False)),
                "sampling": [[l[1], l[2]] for l in im.layer], "pil_equals_cv2": True,
                "rgb_sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(),
            }
        with open(os.path.join(args.out, "shared.json"), "w") as f:
            json.dump(shared, f, indent=1)
            f.write("\n")
        print(f"{len(shared)} shared JPEGs hashed from {data}")
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"{len(manifest['files'])} fixtures, {total / 1024:.0f} KiB in {args.out}")


if __name__ == "__main__":
    main()
