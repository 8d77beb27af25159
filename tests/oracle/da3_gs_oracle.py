#!/usr/bin/env python3
"""Depth Anything 3 3D-Gaussian oracle: a tiny DA3-GIANT-like network (SwiGLU backbone, DualDPT with the
aux head, cam_dec, cam_enc, GSDPT + GaussianAdapter) from the official package, seeded random weights,
per-stage dumps of the GS head and the adapter, and the package's gs_ply file.

    python3 tests/oracle/da3_gs_oracle.py --out tests/fixtures/da3-tiny-gs

Writes OUT/model.safetensors + OUT/config.json (save_pretrained, re-read strictly) and per case
OUT/<case>/{images/, ref.safetensors, meta.json} (tensor names: FORMATS.md, "DA3 Gaussians"):

  one         one view (61x45 -> 42x56): infer_gs=True; also OUT/one/gs.ply written by the package's
              save_gaussian_ply with export_to_gs_ply's arguments
  three-cam   three views (28x42) with given cameras: inference()'s pose-conditioned path with
              infer_gs=True (GaussianAdapter aligns its poses to the given ones by Umeyama)
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import da3_common as dc  # noqa: E402
import da3_oracle as do  # noqa: E402
import da3_pose_oracle as po  # noqa: E402

FORMAT = "da3-gs-oracle-v1"
MODEL_NAME = "da3-tiny-gs"

# DA3-GIANT's structure at tiny widths: SwiGLU FFN (as vitg's swiglufused), the giant GS head and
# adapter settings (configs/da3-giant.yaml), everything else as da3_common.TINY_ARCH.
TINY_GS_ARCH = {
    "backbone": {**dc.TINY_ARCH["backbone"], "ffn_layer": "swiglufused"},
    "head": dict(dc.TINY_ARCH["head"]),
    "cam_dec": dict(dc.TINY_ARCH["cam_dec"]),
    "cam_enc": dict(dc.TINY_ARCH["cam_enc"]),
    "gs_head": {"dim_in": 64, "output_dim": 38, "features": 16, "out_channels": [8, 16, 24, 32]},
    "gs_adapter": {"sh_degree": 2, "pred_color": False, "pred_offset_depth": True, "pred_offset_xy": True,
                   "gaussian_scale_min": 1e-5, "gaussian_scale_max": 30.0},
}

SIZES = {"one": [(61, 45)], "three-cam": [(50, 33), (36, 24), (44, 30)]}
PROCESS_RES = {"one": 56, "three-cam": 42}


def register() -> None:
    y = dc.tiny_yaml_dict(TINY_GS_ARCH)
    obj = lambda path, name: {"path": path, "name": name, "args": "as_params"}  # noqa: E731
    y["gs_head"] = {"__object__": obj("depth_anything_3.model.gsdpt", "GSDPT"), **TINY_GS_ARCH["gs_head"]}
    y["gs_adapter"] = {"__object__": obj("depth_anything_3.model.gs_adapter", "GaussianAdapter"),
                       **TINY_GS_ARCH["gs_adapter"]}
    dc.register_model(MODEL_NAME, y)


@torch.no_grad()
def calibrate_gs_output(net, g):
    """Rescales the GS head's last 1x1 conv per output channel on a fixed noise image so that the raw
    Gaussian parameters have sane ranges: offsets 0.3, scale logits 1, quaternion 1, SH 0.5, depth offset
    0.01 (keeps depth + offset > 0), opacity logit 1.5 (std); means removed, N(0, 0.05²)·std added."""
    conv = net.gs_head.scratch.output_conv2[-1]
    target = torch.tensor([0.3] * 2 + [1.0] * 3 + [1.0] * 4 + [0.5] * 27 + [0.01] + [1.5])
    inp = {}
    h = conv.register_forward_pre_hook(lambda m, a: inp.__setitem__("x", a[0].clone()))
    x = torch.randn((1, 1, 3, 112, 140), generator=g)
    net(x, infer_gs=True)
    h.remove()
    feat = inp["x"].permute(1, 0, 2, 3).reshape(inp["x"].shape[1], -1)
    z = conv.weight[:, :, 0, 0] @ feat
    scale = target / z.std(dim=1).clamp_min(1e-6)
    conv.weight.mul_(scale[:, None, None, None])
    conv.bias.copy_(-(z.mean(dim=1) * scale) + torch.randn(conv.bias.shape, generator=g) * 0.05 * target)


class GSCapture:
    def __init__(self, net):
        self.net, self.t, self.lists, self.handles = net, {}, {}, []

    def add(self, name, y):
        self.lists.setdefault(name, []).append(y.detach().clone())

    def __enter__(self):
        gs, sc = self.net.gs_head, self.net.gs_head.scratch
        seq = lambda name: (lambda m, a, y: self.add(name, y))  # noqa: E731
        for k in range(4):
            self.handles.append(gs.resize_layers[k].register_forward_hook(seq(f"gs.reassemble.{k}")))
            self.handles.append(getattr(sc, f"layer{k + 1}_rn").register_forward_hook(seq(f"gs.rn.{k}")))
        for k in range(1, 5):
            self.handles.append(getattr(sc, f"refinenet{k}").register_forward_hook(seq(f"gs.fusion.{k}")))
        self.handles.append(sc.output_conv1.register_forward_hook(seq("gs.out1")))
        self.handles.append(gs.images_merger.register_forward_hook(seq("gs.merger")))
        self.handles.append(sc.output_conv2.register_forward_pre_hook(lambda m, a: self.add("gs.out2_in", a[0])))
        self.handles.append(sc.output_conv2.register_forward_hook(seq("gs.logits")))
        import depth_anything_3.model.gs_adapter as ga

        self.ga, self.saved_align = ga, ga.batch_align_poses_umeyama

        def align(ref, est):
            r, t, s = self.saved_align(ref, est)
            self.t["gs.align_scale_raw"] = s.detach().clone()
            return r, t, s

        ga.batch_align_poses_umeyama = align

        def backbone_out(m, a, y):
            feats, _ = y
            for k, (f, cam) in enumerate(feats):
                self.t[f"feat.{k}"] = f[0].detach().clone()

        self.handles.append(self.net.backbone.register_forward_hook(backbone_out))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.ga.batch_align_poses_umeyama = self.saved_align
        return False

    def tensors(self):
        out = dict(self.t)
        for k, v in self.lists.items():
            out[k] = torch.cat(v, 0)
        return out


def gaussians_tensors(gs):
    return {
        "gs.means": gs.means[0].clone(),
        "gs.scales": gs.scales[0].clone(),
        "gs.rotations": gs.rotations[0].clone(),
        "gs.harmonics": gs.harmonics[0].clone(),
        "gs.opacities": gs.opacities[0].clone(),
    }


@torch.no_grad()
def run_one(wrapper, paths, process_res, out_dir):
    from depth_anything_3.utils.gsply_helpers import save_gaussian_ply

    net = wrapper.model
    x = do.preprocess(paths, process_res)
    with GSCapture(net) as cap:
        out = net(x, infer_gs=True)
    t = cap.tensors()
    plain = net(x, infer_gs=True)
    if not torch.equal(plain.gaussians.means, out.gaussians.means):
        raise RuntimeError("hooked and plain forward differ")
    t.update(gaussians_tensors(out.gaussians))
    t.update({"input": x.clone(), "depth": out["depth"][0].clone(), "conf": out["depth_conf"][0].clone(),
              "extrinsics": out["extrinsics"][0].clone(), "intrinsics": out["intrinsics"][0].clone()})
    # export_to_gs_ply(prediction, dir): prediction.depth is the (N, H, W) depth (OutputProcessor).
    ply = out_dir / "gs.ply"
    save_gaussian_ply(gaussians=out.gaussians, save_path=str(ply), ctx_depth=out["depth"][0].unsqueeze(-1),
                      shift_and_scale=False, save_sh_dc_only=True, gs_views_interval=1, inv_opacity=True,
                      prune_by_depth_percent=0.9, prune_border_gs=True, match_3dgs_mcmc_dev=False)
    return t, {"ply_bytes": ply.stat().st_size}


@torch.no_grad()
def run_three_cam(wrapper, paths, process_res, seed):
    """DepthAnything3.inference(image, extrinsics, intrinsics, infer_gs=True) up to the Prediction, step by
    step in float32 without autocast (as po.run_cam)."""
    from PIL import Image
    from depth_anything_3.utils.io.input_processor import InputProcessor

    net = wrapper.model
    sizes = [Image.open(p).size for p in paths]
    ext_user, ixt_user = po.synthetic_cameras(sizes, seed)
    x, ext_t, ixt_t = InputProcessor()(paths, ext_user.copy(), ixt_user.copy(), process_res=process_res,
                                       process_res_method=do.METHOD, num_workers=1)
    x = x[None]
    ex_t, in_t = ext_t[None].float(), ixt_t[None].float()
    ex_norm = wrapper._normalize_extrinsics(ex_t.clone())
    with GSCapture(net) as cap, po.CamEncCapture(net) as cc:
        out = net(x, ex_norm, in_t, infer_gs=True)
    t = cap.tensors()
    t.update({k: v for k, v in cc.t.items() if k.startswith("cam_enc.") or k in ("pose_enc",)})
    t.update(gaussians_tensors(out.gaussians))
    scale, how = po.umeyama_scale(out["extrinsics"][0].numpy(), ex_t[0].numpy(), False)
    t.update({
        "input": x.clone(), "cam.ext_in": ex_t[0].clone(), "cam.ixt_in": in_t[0].clone(),
        "cam.ext_norm": ex_norm[0].clone(), "depth_raw": out["depth"][0].clone(),
        "pred_extrinsics": out["extrinsics"][0].clone(), "pred_intrinsics": out["intrinsics"][0].clone(),
        "align_scale": torch.tensor([scale]).float(),
        "depth": torch.from_numpy((out["depth"][0].numpy() / scale).astype(np.float32)),
    })
    return t, {"align": how, "align_scale_f64": scale, "gs_align_scale_raw": float(t["gs.align_scale_raw"][0]),
               "cam_ext_user": ext_user.tolist(), "cam_ixt_user": ixt_user.tolist()}


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, sys.orig_argv, {**os.environ, "PYTHONHASHSEED": "0"})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="one,three-cam")
    args = ap.parse_args()
    t0 = time.time()
    dc.setup_imports()
    sys.modules.pop("depth_anything_3.utils.pose_align", None)
    dc.STUBBED_MODULES[:] = [s for s in dc.STUBBED_MODULES if "pose_align" not in s]
    import depth_anything_3.utils.pose_align  # noqa: F401  (evo)
    import e3nn  # noqa: F401  (rotate_sh)

    register()
    from depth_anything_3.api import DepthAnything3

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    src = dc.new_wrapper(MODEL_NAME, copy.deepcopy(TINY_GS_ARCH))
    dc.init_random_weights(src.model, args.seed)
    calibrate_gs_output(src.model, torch.Generator().manual_seed(args.seed + 5))
    src.save_pretrained(str(out))
    (out / "README.md").unlink(missing_ok=True)
    dc.canonicalize_safetensors_header(out / "model.safetensors")
    wrapper = DepthAnything3.from_pretrained(str(out), strict=True)
    a, b = src.model.state_dict(), wrapper.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    wrapper.model.eval()
    print(f"[tiny-gs] {dc.param_count(wrapper.model):,} parameters ({time.time() - t0:.1f}s)")

    for ci, case in enumerate(args.cases.split(",")):
        tc = time.time()
        arrays = [do.synthetic_image(w, h, 900 + 31 * ci + i) for i, (w, h) in enumerate(SIZES[case])]
        paths = do.write_images(out / case, arrays)
        if case == "one":
            t, extra = run_one(wrapper, paths, PROCESS_RES[case], out / case)
        else:
            t, extra = run_three_cam(wrapper, paths, PROCESS_RES[case], args.seed + 3)
        t = {k: v.float().contiguous() for k, v in t.items()}
        for k, v in t.items():
            if not torch.isfinite(v).all():
                raise RuntimeError(f"{case}: non-finite values in {k}")
        d = t["depth_raw"] if "depth_raw" in t else t["depth"]
        g = d.reshape(-1) + t["gs.logits"].permute(0, 2, 3, 1)[..., 36].reshape(-1)
        if (g <= 0).any():
            raise RuntimeError(f"{case}: depth + offset <= 0 for {(g <= 0).sum()} Gaussians (log of a negative scale)")
        from safetensors.torch import save_file

        save_file(t, str(out / case / "ref.safetensors"), metadata={"format": FORMAT})
        meta = {"format": FORMAT, "config": "tiny-gs", "model_name": MODEL_NAME, "case": case, "seed": args.seed,
                "process_res": PROCESS_RES[case], "process_res_method": do.METHOD, "num_views": len(paths),
                "images": [os.path.relpath(p, out) for p in paths], "processed_hw": list(t["input"].shape[-2:]),
                **extra, "tensors": {k: list(v.shape) for k, v in sorted(t.items())}, "torch": torch.__version__,
                "depth_anything_3": "0.1.1", "stubbed_modules": dc.STUBBED_MODULES}
        dc.write_json(out / case / "meta.json", meta)
        size = (out / case / "ref.safetensors").stat().st_size
        print(f"  {case}: {size / 1e6:.2f} MB, {extra} ({time.time() - tc:.1f}s)")
    print(f"[tiny-gs] done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
