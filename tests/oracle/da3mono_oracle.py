#!/usr/bin/env python3
"""Depth Anything 3 mono/metric reference oracle (DPT head + sky head): seeded random weights, official
checkpoint layout, per-stage dumps and the sky fill of `DepthAnything3Net._process_mono_sky_estimation`.

    python3 tests/oracle/da3mono_oracle.py --config tiny-mono  --out tests/fixtures/da3-tiny-mono
    python3 tests/oracle/da3mono_oracle.py --config mono-large --out tests/oracle/out/da3mono-large
    python3 tests/oracle/da3mono_oracle.py --config metric-large --out tests/oracle/out/da3metric-large

Writes DIR/model.safetensors + DIR/config.json (as DepthAnything3.save_pretrained writes them) and
DIR/one/images/view0.png, DIR/one/ref.safetensors, DIR/one/meta.json.
Tensor names, shapes and layouts: tests/oracle/FORMATS.md (section "DA3 mono/metric").
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import da3_common as dc  # noqa: E402
import da3_oracle as d3o  # noqa: E402  (image helpers and preprocessing; its main() is not run)

FORMAT = "da3mono-oracle-v1"
SKY_THRESHOLD = 0.3  # compute_sky_mask: non-sky = sky < 0.3
SKY_QUANTILE = 0.99
MAX_EXACT = 100_000  # above this many non-sky pixels upstream samples with torch.randint

# Hyper-parameters of the committed tiny mono fixture, written verbatim into config.json under "arch".
# Backbone: DinoVisionTransformer arguments (all blocks local, no RoPE, no q/k-norm, no camera token,
# cat_token False, as da3mono-large.yaml). Head: every DPT argument that shapes the computation
# (values = the DPT defaults that da3mono-large.yaml relies on, except the sizes).
TINY_MONO_ARCH = {
    "backbone": {
        "embed_dim": 32,
        "depth": 6,
        "num_heads": 2,
        "mlp_ratio": 4,
        "ffn_layer": "mlp",
        "patch_size": 14,
        "img_size": 98,  # pos_embed grid 7x7 (50 rows)
        "out_layers": [1, 2, 4, 5],
        "alt_start": -1,
        "qknorm_start": -1,
        "rope_start": -1,
        "rope_freq": 100,
        "cat_token": False,
        "interpolate_offset": 0.1,
        "interpolate_antialias": False,
        "init_values": 1.0,
    },
    "head": {
        "dim_in": 32,
        "patch_size": 14,
        "output_dim": 1,
        "activation": "exp",
        "conf_activation": "expp1",
        "features": 8,
        "out_channels": [8, 16, 24, 32],
        "pos_embed": False,
        "down_ratio": 1,
        "use_sky_head": True,
        "sky_activation": "relu",
        "use_ln_for_heads": False,
        "norm_type": "idt",
    },
}

CONFIGS = {
    "tiny-mono": {"model_name": "da3mono-tiny", "process_res": 70},
    "mono-large": {"model_name": "da3mono-large", "process_res": 504},
    "metric-large": {"model_name": "da3metric-large", "process_res": 504},
}
METHOD = "upper_bound_resize"

# Tiny case image: portrait (the any-view tiny fixture is landscape), 45x61 -> 56x70 processed (grid 5x4:
# odd ph, so the stride-2 reassemble conv rounds up).
TINY_IMAGE_WH = (45, 61)
TINY_IMAGE_SEED = 500
# Large configs: the image is processed at 504; KITTI (1242x375 -> 504x154 = 77 616 pixels) keeps the
# non-sky count below 100 000, so the upstream quantile is exact (no randint sampling).
LARGE_DEFAULT_IMAGE = d3o.DATA / "kitti/0000000005.png"


# ----------------------------------------------------------------------------------------------
# Network construction (package classes; the tiny backbone is da3_common.TinyDinoV2)
# ----------------------------------------------------------------------------------------------


def tiny_mono_yaml_dict(arch: dict) -> dict:
    """The da3mono-large.yaml schema for the tiny model (backbone class = TinyDinoV2)."""
    obj = lambda path, name: {"path": path, "name": name, "args": "as_params"}  # noqa: E731
    return {
        "__object__": obj("depth_anything_3.model.da3", "DepthAnything3Net"),
        "net": {"__object__": obj("da3_common", "TinyDinoV2"), **arch["backbone"]},
        "head": {"__object__": obj("depth_anything_3.model.dpt", "DPT"), **arch["head"]},
    }


def register_tiny_mono() -> str:
    """Registers the tiny mono yaml as model name 'da3mono-tiny'."""
    return dc.register_model(CONFIGS["tiny-mono"]["model_name"], tiny_mono_yaml_dict(TINY_MONO_ARCH))


def build_wrapper(config: str):
    if config == "tiny-mono":
        register_tiny_mono()
        return dc.new_wrapper(CONFIGS[config]["model_name"], TINY_MONO_ARCH)
    return dc.new_wrapper(CONFIGS[config]["model_name"])


# ----------------------------------------------------------------------------------------------
# Weights: the DA3 recipe (da3_common.init_random_weights) with a mono calibration of the outputs
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def init_mono_weights(net, seed: int, calib_x: torch.Tensor) -> dict:
    """da3_common.init_random_weights draws every parameter and ends with calibrate_output_convs(net, g),
    which is any-view specific (aux ray head). For the duration of the call that last step is replaced by
    calibrate_mono_output_convs, so the generator stream and the recipe of FORMATS DA3.3 are unchanged."""
    info = {}
    orig = dc.calibrate_output_convs
    dc.calibrate_output_convs = lambda n, g: info.update(calibrate_mono_output_convs(n, g, calib_x))
    try:
        dc.init_random_weights(net, seed)
    finally:
        dc.calibrate_output_convs = orig
    if not info:
        raise RuntimeError("init_random_weights did not call the output calibration")
    return info


@torch.no_grad()
def calibrate_mono_output_convs(net, g: torch.Generator, x: torch.Tensor, depth_std: float = 0.5,
                                sky_std: float = 1.0, sky_frac: tuple = (0.25, 0.35)) -> dict:
    """Rescales the last 1x1 convs of the depth and sky outputs, using their inputs on the calibration
    input x (1, 1, 3, H, W):
    - depth (`output_conv2.2`): W ← W·depth_std/std(W·x), b ← −mean(W·x) + N(0, 0.05²) (as DA3.3);
    - sky (`sky_output_conv2.2`): W ← W·sky_std/std(W·x); the bias puts the threshold 0.3 in the middle of
      the widest gap between consecutive sorted logits whose upper fraction lies in sky_frac, so that
      25–35 % of the calibration pixels are sky (sky ≥ 0.3) with the largest possible margin to 0.3."""
    sc = net.head.scratch
    convs = {"depth": sc.output_conv2[-1], "sky": sc.sky_output_conv2[-1]}
    inputs = {}
    handles = [c.register_forward_pre_hook(lambda m, a, k=k: inputs.__setitem__(k, a[0].clone()))
               for k, c in convs.items()]
    try:
        net(x)
    finally:
        for h in handles:
            h.remove()

    def project(k):
        feat = inputs[k].permute(1, 0, 2, 3).reshape(inputs[k].shape[1], -1)  # (Cin, pixels)
        return convs[k].weight[:, :, 0, 0] @ feat  # (1, pixels)

    conv = convs["depth"]
    z = project("depth")
    scale = depth_std / z.std(dim=1).clamp_min(1e-6)
    conv.weight.mul_(scale[:, None, None, None])
    conv.bias.copy_(-(z.mean(dim=1) * scale) + torch.randn(conv.bias.shape, generator=g) * 0.05)

    conv = convs["sky"]
    z = project("sky")[0]
    conv.weight.mul_(sky_std / z.std().clamp_min(1e-6))
    z = torch.sort(project("sky")[0].double(), descending=True).values
    n = z.numel()
    lo, hi = int(np.ceil(sky_frac[0] * n)), int(np.floor(sky_frac[1] * n))
    gaps = z[lo - 1 : hi - 1] - z[lo:hi]  # gap below the k-th largest, k = lo..hi-1
    j = int(torch.argmax(gaps))
    k = lo + j  # pixels with logit >= threshold: the k largest
    mid = float(z[k - 1] + z[k]) / 2
    conv.bias.fill_(SKY_THRESHOLD - mid)
    return {"calib_sky_pixels": k, "calib_pixels": n, "calib_sky_fraction": k / n,
            "calib_sky_margin": float(gaps[j]) / 2, "sky_bias": float(conv.bias[0])}


# ----------------------------------------------------------------------------------------------
# Capture of intermediates (hooks on the package's own modules; no re-implementation)
# ----------------------------------------------------------------------------------------------


class MonoCapture:
    """Records intermediates of one `DepthAnything3Net.forward` call of a DPT (+ sky) network."""

    def __init__(self, net, blocks: bool):
        self.net = net
        self.vit = net.backbone.pretrained
        self.blocks = blocks
        self.t: dict[str, torch.Tensor] = {}
        self.handles = []

    def _set(self, name):
        return lambda m, a, y: self.t.__setitem__(name, y.detach().clone())

    def __enter__(self):
        vit, head, sc = self.vit, self.net.head, self.net.head.scratch
        orig_prepare = type(vit).prepare_tokens_with_masks

        def prepare(x, *a, **k):
            out = orig_prepare(vit, x, *a, **k)  # (B, S, 1+Np, C)
            self.t["embed"] = out[0].detach().clone()
            return out

        vit.prepare_tokens_with_masks = prepare
        if self.blocks:  # all blocks are local: output (B*S, 1+Np, C)
            for i, blk in enumerate(vit.blocks):
                self.handles.append(blk.register_forward_hook(self._set(f"block.{i}")))

        def backbone_out(m, a, y):
            feats, _aux = y
            for k, (f, _cls) in enumerate(feats):
                self.t[f"feat.{k}"] = f[0].detach().clone()

        self.handles.append(self.net.backbone.register_forward_hook(backbone_out))
        for k in range(4):
            self.handles.append(head.resize_layers[k].register_forward_hook(self._set(f"reassemble.{k}")))
            self.handles.append(getattr(sc, f"layer{k + 1}_rn").register_forward_hook(self._set(f"rn.{k}")))
        for k in range(1, 5):
            self.handles.append(getattr(sc, f"refinenet{k}").register_forward_hook(self._set(f"fusion.{k}")))
        self.handles.append(sc.output_conv1.register_forward_hook(self._set("out1")))
        self.handles.append(
            sc.output_conv2.register_forward_pre_hook(lambda m, a: self.t.__setitem__("out1_up", a[0].clone()))
        )
        self.handles.append(
            sc.sky_output_conv2.register_forward_pre_hook(
                lambda m, a: self.t.__setitem__("sky_in", a[0].clone())
            )
        )
        self.handles.append(sc.output_conv2.register_forward_hook(self._set("logits")))
        self.handles.append(sc.sky_output_conv2.register_forward_hook(self._set("sky_logits")))

        def head_out(m, a, y):
            self.t["depth_raw"] = y["depth"][0].detach().clone()
            self.t["sky"] = y["sky"][0].detach().clone()

        self.handles.append(head.register_forward_hook(head_out))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        del self.vit.prepare_tokens_with_masks
        return False


def sky_fill(depth_raw: torch.Tensor, sky: torch.Tensor) -> dict:
    """`_process_mono_sky_estimation` with the exact quantile (no sampling), for checking and meta.json."""
    nonsky = sky < SKY_THRESHOLD
    n_ns, n_sky = int(nonsky.sum()), int((~nonsky).sum())
    out = {"nonsky_pixels": n_ns, "sky_pixels": n_sky, "applied": n_ns > 10 and n_sky > 10}
    if n_ns > 0:
        out["quantile_exact"] = torch.quantile(depth_raw[nonsky], SKY_QUANTILE)
    if out["applied"]:
        d = depth_raw.clone()
        d[~nonsky] = out["quantile_exact"]
        out["depth"] = d
    else:
        out["depth"] = depth_raw.clone()
    return out


# ----------------------------------------------------------------------------------------------
# Running the case
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def run_case(net, x: torch.Tensor, seed: int, blocks: bool):
    torch.manual_seed(seed)  # only used by the randint sampling of more than 100 000 non-sky pixels
    with MonoCapture(net, blocks) as cap:
        out = net(x)
    t = cap.t
    t["depth"] = out["depth"][0].detach().clone()
    t["input"] = x.clone()
    if not torch.equal(t.pop("sky_in"), t["out1_up"]):
        raise RuntimeError("depth and sky heads were given different inputs")
    torch.manual_seed(seed)
    plain = net(x)
    for k in ("depth", "sky"):
        if not torch.equal(plain[k][0], t[k]):
            raise RuntimeError(f"hooked and plain forward differ in {k}")

    # The package's own outputs against their definitions (all exact: same float32 ops).
    if not torch.equal(t["depth_raw"], torch.exp(t["logits"][:, 0])):
        raise RuntimeError("depth_raw != exp(logits)")
    if not torch.equal(t["sky"], torch.relu(t["sky_logits"][:, 0])):
        raise RuntimeError("sky != relu(sky_logits)")
    fill = sky_fill(t["depth_raw"], t["sky"])
    nonsky = t["sky"] < SKY_THRESHOLD
    n_ns = fill["nonsky_pixels"]
    fill_used = None
    if fill["applied"]:
        vals = t["depth"][~nonsky]
        fill_used = vals[0]
        if not torch.all(vals == fill_used):
            raise RuntimeError("sky region of depth is not a single fill value")
        if not torch.equal(t["depth"][nonsky], t["depth_raw"][nonsky]):
            raise RuntimeError("non-sky depth changed by the sky fill")
        if n_ns <= MAX_EXACT and not (torch.equal(fill["depth"], t["depth"]) and fill_used == fill["quantile_exact"]):
            raise RuntimeError("sky fill differs from the exact-quantile re-computation")
    elif not torch.equal(t["depth"], t["depth_raw"]):
        raise RuntimeError("depth changed although the sky fill does not apply")

    t = {k: v.float().contiguous() for k, v in t.items()}
    for k, v in t.items():
        if not torch.isfinite(v).all():
            raise RuntimeError(f"non-finite values in {k}")
    sky = t["sky"]
    margin = float((sky - SKY_THRESHOLD).abs().min())
    stats = {
        "num_pixels": int(sky.numel()),
        "sky_threshold": SKY_THRESHOLD,
        "nonsky_pixels": n_ns,
        "sky_pixels": fill["sky_pixels"],
        "sky_fraction": fill["sky_pixels"] / sky.numel(),
        "sky_threshold_margin": margin,  # min |sky - 0.3|: a numeric error below this cannot flip a pixel
        "prediction_sky_pixels": int((sky >= 0.5).sum()),  # Prediction.sky = sky >= 0.5
        "sky_fill_applied": fill["applied"],
        "quantile": SKY_QUANTILE,
        "quantile_sampled": fill["applied"] and n_ns > MAX_EXACT,
        "quantile_value": None if fill_used is None else float(fill_used),  # what upstream wrote into the sky
        "quantile_exact": None if "quantile_exact" not in fill else float(fill["quantile_exact"]),
        "torch_manual_seed": seed,
    }
    return t, stats


def write_images(case_dir: Path, arr: np.ndarray) -> str:
    return d3o.write_images(case_dir, [arr])[0]


def summarize(t: dict, s: dict) -> str:
    d, r = t["depth"], t["depth_raw"]
    return (f"depth_raw [{r.min():.3g}, {r.max():.3g}]; sky {s['sky_pixels']}/{s['num_pixels']} "
            f"({100 * s['sky_fraction']:.1f}%), margin {s['sky_threshold_margin']:.2e}, fill "
            f"{s['quantile_value']}; depth [{d.min():.3g}, {d.max():.3g}]")


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # same reproducibility guard as da3_oracle.py
        os.execve(sys.executable, sys.orig_argv, {**os.environ, "PYTHONHASHSEED": "0"})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=list(CONFIGS), required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image", type=Path, help="large configs: image to run (default kitti/0000000005.png); "
                    "the sky bias is calibrated on it, so the weights depend on it")
    ap.add_argument("--no-blocks", action="store_true", help="do not dump per-block outputs block.i")
    args = ap.parse_args()
    cfg = CONFIGS[args.config]
    tiny = args.config == "tiny-mono"
    if tiny and args.image:
        ap.error("--image is for the large configs (the tiny image is synthetic)")

    t0 = time.time()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    case_dir = out / "one"
    pres = cfg["process_res"]
    if tiny:
        arr, source = d3o.synthetic_image(*TINY_IMAGE_WH, TINY_IMAGE_SEED), None
    else:
        src = args.image or LARGE_DEFAULT_IMAGE
        arr, source = np.asarray(Image.open(src).convert("RGB")), str(src)
    path = write_images(case_dir, arr)
    dc.setup_imports()
    x = d3o.preprocess([path], pres)
    wrapper = build_wrapper(args.config)
    calib = init_mono_weights(wrapper.model.eval(), args.seed, x)
    calib["image"] = "the case image (one/images/view0.png): the calibration input is the network input"
    wrapper.save_pretrained(str(out))
    (out / "README.md").unlink(missing_ok=True)  # model card written by the mixin; not needed
    dc.canonicalize_safetensors_header(out / "model.safetensors")

    # Reload through the package's own loader so that the files alone determine the reference.
    from depth_anything_3.api import DepthAnything3

    loaded = DepthAnything3.from_pretrained(str(out), strict=True)
    ref_sd, new_sd = wrapper.model.state_dict(), loaded.model.state_dict()
    assert ref_sd.keys() == new_sd.keys() and all(torch.equal(ref_sd[k], new_sd[k]) for k in ref_sd)
    net = loaded.model.eval()
    del wrapper
    n_params = dc.param_count(net)
    print(f"[{args.config}] {n_params:,} parameters, checkpoint written and reloaded; calibration "
          f"{calib['calib_sky_pixels']}/{calib['calib_pixels']} sky, margin {calib['calib_sky_margin']:.2e} "
          f"({time.time() - t0:.1f}s)")

    tc = time.time()
    t, stats = run_case(net, x, args.seed, blocks=not args.no_blocks)
    # The weights were calibrated on this very input: both regions must be there, 20-40 % sky.
    if not (stats["sky_fill_applied"] and 0.2 <= stats["sky_fraction"] <= 0.4):
        raise RuntimeError(f"sky map does not have the calibrated sky/non-sky split: {stats}")
    if tiny and not (stats["num_pixels"] < MAX_EXACT and stats["sky_threshold_margin"] > 1e-4):
        raise RuntimeError(f"tiny sky map: want < {MAX_EXACT} pixels and a margin > 1e-4 to 0.3: {stats}")
    if stats["quantile_sampled"]:
        print(f"  note: {stats['nonsky_pixels']} non-sky pixels > {MAX_EXACT}: upstream sampled the quantile "
              f"(torch.manual_seed({args.seed})); exact value {stats['quantile_exact']}")
    from safetensors.torch import save_file

    save_file(t, str(case_dir / "ref.safetensors"), metadata={"format": FORMAT})
    H, W = int(x.shape[-2]), int(x.shape[-1])
    meta = {
        "format": FORMAT,
        "config": args.config,
        "model_name": cfg["model_name"],
        "case": "one",
        "seed": args.seed,
        "parameters": n_params,
        "process_res": pres,
        "process_res_method": METHOD,
        "num_views": 1,
        "images": [str(Path(path).relative_to(out))],
        "image_sources": None if source is None else [source],
        "orig_sizes_wh": [list(Image.open(path).size)],
        "processed_hw": [H, W],
        "patch_grid_hw": [H // 14, W // 14],
        **stats,
        "calibration": calib,
        "metric_scaling": "not applied (standalone network has no intrinsics; see FORMATS DA3M.6)",
        "tensors": {k: list(v.shape) for k, v in sorted(t.items())},
        "torch": torch.__version__,
        "depth_anything_3": "0.1.1",
        "stubbed_modules": dc.STUBBED_MODULES,
    }
    dc.write_json(case_dir / "meta.json", meta)
    print(f"  one: HxW={H}x{W} {summarize(t, stats)} ({time.time() - tc:.1f}s)")
    print(f"[{args.config}] done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
