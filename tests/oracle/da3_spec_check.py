#!/usr/bin/env python3
"""Checks a DA3 oracle directory against the upstream formulas written out in numpy (FORMATS.md), nothing else.

    python3 tests/oracle/da3_spec_check.py tests/fixtures/da3-tiny

Independent of the depth_anything_3 package: it reads model.safetensors + config.json + ref.safetensors and
re-derives, from formulas written out here after the upstream functions (`prepare_tokens_with_masks`,
`interpolate_pos_encoding`, the reference-view strategies, `DualDPT` reassemble and
`_apply_activation_single`, `pose_encoding_to_extri_intri`), the tensors a Go implementation computes first: token
preparation (patch embed, cls, bicubic pos-embed interpolation), reference-view choice, camera-token
injection, the cat_token features, head LayerNorm, reassemble stage 2 (projection + UV), output activations
and the pose decoding. Exits non-zero on any mismatch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

TOL = 2e-5


def ln(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def cubic_weights(t, a=-0.75):
    def k(x):
        x = abs(x)
        if x < 1:
            return (a + 2) * x**3 - (a + 3) * x**2 + 1
        if x < 2:
            return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
        return 0.0

    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


def bicubic_matrix(n_in, n_out, scale):
    """Rows: output index; torch bicubic, align_corners=False, given scale factor, clamped borders."""
    m = np.zeros((n_out, n_in))
    for d in range(n_out):
        src = (d + 0.5) / scale - 0.5
        i0 = int(np.floor(src))
        for k, w in zip(range(i0 - 1, i0 + 3), cubic_weights(src - i0)):
            m[d, min(max(k, 0), n_in - 1)] += w
    return m


def uv(c, h, w, aspect):
    diag = (aspect**2 + 1) ** 0.5
    sx, sy = aspect / diag, 1 / diag
    xs = np.linspace(-sx * (w - 1) / w, sx * (w - 1) / w, w) if w > 1 else np.array([-sx * (w - 1) / w])
    ys = np.linspace(-sy * (h - 1) / h, sy * (h - 1) / h, h) if h > 1 else np.array([-sy * (h - 1) / h])
    q = c // 4
    om = 1.0 / 100 ** (np.arange(q) / q)
    X = xs[None, :, None] * om  # (1, w, q)
    Y = ys[:, None, None] * om  # (h, 1, q)
    X = np.broadcast_to(X, (h, w, q))
    Y = np.broadcast_to(Y, (h, w, q))
    e = np.concatenate([np.sin(X), np.cos(X), np.sin(Y), np.cos(Y)], -1)  # (h, w, c)
    return e.transpose(2, 0, 1)


def quat_to_mat(q):
    i, j, k, r = q
    s = 2.0 / (q * q).sum()
    return np.array([
        [1 - s * (j * j + k * k), s * (i * j - k * r), s * (i * k + j * r)],
        [s * (i * j + k * r), 1 - s * (i * i + k * k), s * (j * k - i * r)],
        [s * (i * k - j * r), s * (j * k + i * r), 1 - s * (i * i + j * j)],
    ])


def arch_of(cfg):
    if "arch" in cfg:
        return cfg["arch"]
    table = {
        "da3-small": (384, 6, [5, 7, 9, 11], 4, 64, [48, 96, 192, 384]),
        "da3-base": (768, 12, [5, 7, 9, 11], 4, 128, [96, 192, 384, 768]),
    }
    c, h, out, alt, f, oc = table[cfg["model_name"]]
    return {
        "backbone": {"embed_dim": c, "num_heads": h, "out_layers": out, "alt_start": alt, "img_size": 518,
                     "patch_size": 14},
        "head": {"features": f, "out_channels": oc},
    }


def main(d: Path) -> int:
    cfg = json.loads((d / "config.json").read_text())
    arch = arch_of(cfg)
    W = {k.removeprefix("model."): v.astype(np.float64) for k, v in load_file(str(d / "model.safetensors")).items()}
    bb, hd = arch["backbone"], arch["head"]
    C, P = bb["embed_dim"], bb["patch_size"]
    M = bb["img_size"] // P
    alt = bb["alt_start"]
    failures = []

    def check(name, got, want, tol=TOL):
        err = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))
        scale = max(1.0, float(np.max(np.abs(want))))
        ok = err <= tol * scale
        print(f"  {'ok ' if ok else 'BAD'} {name:28s} max|d| = {err:.2e}")
        if not ok:
            failures.append(name)

    for case in sorted(p.name for p in d.iterdir() if (p / "ref.safetensors").exists()):
        print(case)
        R = {k: v.astype(np.float64) for k, v in load_file(str(d / case / "ref.safetensors")).items()}
        x = R["input"][0]
        S, _, H, Wd = x.shape
        ph, pw = H // P, Wd // P
        # 3.1 token preparation
        pe = W["backbone.pretrained.patch_embed.proj.weight"].reshape(C, -1)
        patches = x.reshape(S, 3, ph, P, pw, P).transpose(0, 2, 4, 1, 3, 5).reshape(S, ph * pw, -1)
        tok = patches @ pe.T + W["backbone.pretrained.patch_embed.proj.bias"]
        grid = W["backbone.pretrained.pos_embed"][0, 1:].reshape(M, M, C)
        if ph * pw == M * M and H == Wd:
            pos = grid.reshape(-1, C)
        else:
            my, mx = bicubic_matrix(M, ph, (ph + 0.1) / M), bicubic_matrix(M, pw, (pw + 0.1) / M)
            pos = np.einsum("ya,xb,abc->yxc", my, mx, grid).reshape(-1, C)
        cls = W["backbone.pretrained.cls_token"][0, 0] + W["backbone.pretrained.pos_embed"][0, 0]
        embed = np.concatenate([np.broadcast_to(cls, (S, 1, C)), tok + pos], 1)
        check("embed", embed, R["embed"])
        # 3.5 reference view from the input of block alt_start-1
        b = 0
        if S >= 3:
            c0 = R[f"block.{alt - 2}"][:, 0] if alt >= 2 else R["embed"][:, 0]
            n = np.linalg.norm(c0, axis=-1)
            ch = c0 / n[:, None]
            sim = ((ch @ ch.T) - np.eye(S)).sum(-1) / (S - 1)
            var = ch.var(-1, ddof=1)
            nrm = lambda m: (m - m.min()) / (m.max() - m.min() + 1e-8)  # noqa: E731
            b = int(np.argmin(np.abs(nrm(sim) - 0.5) + np.abs(nrm(n) - 0.5) + np.abs(nrm(var) - 0.5)))
        check("ref_view", [b], R["ref_view"], 0)
        order = [b] + [i for i in range(S) if i != b]
        check("view_order", order, R["view_order"], 0)
        # 3.4 camera token injection (processing order)
        cam = W["backbone.pretrained.camera_token"][0]
        want = np.stack([cam[0]] + [cam[1]] * (S - 1))
        check("after_cam_token[:,0]", R["after_cam_token"][:, 0], want, 0)
        check("after_cam_token[:,1:]", R["after_cam_token"][:, 1:], R[f"block.{alt - 1}"][:, 1:], 0)
        # 3.6 features: [local_x, LN(x)] restored to original order
        inv = np.argsort(order)
        last_local = {}
        loc = None
        for i in range(len([k for k in R if k.startswith("block.")])):
            if i < alt or i % 2 == 0:
                loc = R[f"block.{i}"]
            last_local[i] = loc
        for k, li in enumerate(bb["out_layers"]):
            xo, lo = R[f"block.{li}"][inv], last_local[li][inv]
            f = np.concatenate([lo, ln(xo, W["backbone.pretrained.norm.weight"], W["backbone.pretrained.norm.bias"], 1e-5)], -1)
            check(f"feat.{k}", f[:, 1:], R[f"feat.{k}"])
            check(f"cam_tok.{k}", np.concatenate([lo[:, 0], xo[:, 0]], -1), R[f"cam_tok.{k}"])
            check(f"head.ln.{k}", ln(R[f"feat.{k}"], W["head.norm.weight"], W["head.norm.bias"], 1e-5), R[f"head.ln.{k}"])
        # 4.2 reassemble stage 2 (identity resize): 1x1 projection + 0.1 UV
        t = R["head.ln.2"].reshape(S, ph, pw, -1)
        proj = np.einsum("syxd,od->soyx", t, W["head.projects.2.weight"][:, :, 0, 0]) + W["head.projects.2.bias"][:, None, None]
        proj += 0.1 * uv(hd["out_channels"][2], ph, pw, Wd / H)
        check("reassemble.2", proj, R["reassemble.2"])
        # 4.4 output activations
        check("depth", np.exp(R["logits"][:, 0]), R["depth"], 1e-5)
        check("conf", np.exp(R["logits"][:, 1]) + 1, R["conf"], 1e-5)
        up_uv = 0.1 * uv(hd["features"] // 2, H, Wd, Wd / H)
        # out1_up - UV must be a bilinear (align_corners) upsampling of out1: check a corner pixel
        check("out1_up corner", (R["out1_up"] - up_uv)[:, :, 0, 0], R["out1"][:, :, 0, 0])
        # 7.2 pose decoding
        for s in range(S):
            p = R["pose_enc"][s]
            Rm = quat_to_mat(p[3:7])
            ext = np.concatenate([Rm.T, -(Rm.T @ p[:3])[:, None]], 1)
            fy = (H / 2) / max(np.tan(p[7] / 2), 1e-6)
            fx = (Wd / 2) / max(np.tan(p[8] / 2), 1e-6)
            K = np.array([[fx, 0, Wd / 2], [0, fy, H / 2], [0, 0, 1]])
            check(f"extrinsics[{s}]", ext, R["extrinsics"][s], 1e-5)
            check(f"intrinsics[{s}]", K, R["intrinsics"][s], 1e-5)
    if failures:
        print("FAILED:", ", ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/da3-tiny")))
