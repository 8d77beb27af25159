#!/usr/bin/env python3
r"""Depth Anything V2 reference oracle: seeded random weights, reference tensors for the Go parity tests.

    python3 tests/oracle/da2_oracle.py --config tiny --out tests/fixtures/da2-tiny
    python3 tests/oracle/da2_oracle.py --config tiny --metric 20 --weights-from tests/fixtures/da2-tiny \
        --tensors input,logit,depth,depth_orig --out tests/fixtures/da2-tiny-metric
    python3 tests/oracle/da2_oracle.py --config vits --out tests/oracle/out/da2-vits \
        --image ../shared/data/nyu/rgb_00000.jpg

The reference network is transformers' DepthAnythingForDepthEstimation (4.57.6) with one correction: its
Dinov2 position-embedding interpolation is replaced by the original DINOv2/DA2 one (scale factors with
interpolate_offset 0.1, antialias False, 37x37 shortcut), which defines the published models' numerics.
The original DA2 code (da2_upstream.py) is run on the converted state dict as an independent cross-check;
every intermediate must agree. See README.md and FORMATS.md.
"""

import argparse
import hashlib
import math
import os
import sys
import time

import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import da2_keys  # noqa: E402

import transformers  # noqa: E402
from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config  # noqa: E402
from transformers.models.dinov2 import modeling_dinov2  # noqa: E402

import da2_upstream  # noqa: E402  (after transformers: it briefly stubs torchvision)

PATCH = 14
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
LN_EPS = 1e-6
INTERPOLATE_OFFSET = 0.1

# pos_grid: side of the stored position-embedding grid (img_size / 14).
# tiny: grid 6 and input_size 84 on a 160x120 image -> processed 84x112, patch grid 6x8 (non-square; rows equal to
# the stored grid but still resampled with the 0.1 offset, columns upsampled), like 37x49 for a 640x480 photo.
CONFIGS = {
    "tiny": dict(embed_dim=32, depth=4, heads=2, mlp_ratio=4, out_layers=[0, 1, 2, 3], features=8,
                 out_channels=[8, 16, 32, 32], pos_grid=6, input_size=84, synth_size=(160, 120)),
    "vits": dict(embed_dim=384, depth=12, heads=6, mlp_ratio=4, out_layers=[2, 5, 8, 11], features=64,
                 out_channels=[48, 96, 192, 384], pos_grid=37, input_size=518, synth_size=(640, 480)),
    "vitb": dict(embed_dim=768, depth=12, heads=12, mlp_ratio=4, out_layers=[2, 5, 8, 11], features=128,
                 out_channels=[96, 192, 384, 768], pos_grid=37, input_size=518, synth_size=(640, 480)),
    "vitl": dict(embed_dim=1024, depth=24, heads=16, mlp_ratio=4, out_layers=[4, 11, 17, 23], features=256,
                 out_channels=[256, 512, 1024, 1024], pos_grid=37, input_size=518, synth_size=(640, 480)),
}

REF_ORDER = (["input", "embed"] + [f"feat.{k}" for k in range(4)] + [f"reassemble.{k}" for k in range(4)]
             + [f"rn.{k}" for k in range(4)] + ["fusion.4", "fusion.3", "fusion.2", "fusion.1"]
             + ["out1", "logit", "depth", "depth_orig"])


# ---------------------------------------------------------------------------------------------------------
# Position-embedding interpolation: original DINOv2 (DA2 depth_anything_v2/dinov2.py) semantics.

_HF_INTERPOLATE = modeling_dinov2.Dinov2Embeddings.interpolate_pos_encoding


def interpolate_pos_encoding_da2(self, embeddings, height, width):
    """DA2's DinoVisionTransformer.interpolate_pos_encoding, on transformers' Dinov2Embeddings.

    transformers 4.57.6 calls F.interpolate(size=(H/14, W/14)), i.e. source coordinate (dst+0.5)*M/n - 0.5.
    The original passes scale_factor=((H/14+0.1)/M, (W/14+0.1)/M), so torch uses (dst+0.5)/s - 0.5 with that s.
    Both keep the shortcut (unchanged table when the token count matches and H == W).
    """
    num_patches = embeddings.shape[1] - 1
    num_positions = self.position_embeddings.shape[1] - 1
    if num_patches == num_positions and height == width:
        return self.position_embeddings
    pos = self.position_embeddings.float()
    cls_pos = pos[:, :1]
    patch_pos = pos[:, 1:]
    dim = embeddings.shape[-1]
    h0 = height // self.patch_size + INTERPOLATE_OFFSET
    w0 = width // self.patch_size + INTERPOLATE_OFFSET
    sqrt_n = math.sqrt(num_positions)
    m = int(sqrt_n)
    patch_pos = F.interpolate(patch_pos.reshape(1, m, m, dim).permute(0, 3, 1, 2),
                              scale_factor=(float(h0) / sqrt_n, float(w0) / sqrt_n), mode="bicubic", antialias=False)
    if patch_pos.shape[-2:] != (int(h0), int(w0)):
        raise AssertionError(f"pos-embed interpolation gave {tuple(patch_pos.shape[-2:])}, want {(int(h0), int(w0))}")
    patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, -1, dim)
    return torch.cat((cls_pos, patch_pos), dim=1).to(embeddings.dtype)


def use_da2_interpolation(on):
    modeling_dinov2.Dinov2Embeddings.interpolate_pos_encoding = interpolate_pos_encoding_da2 if on else _HF_INTERPOLATE


# ---------------------------------------------------------------------------------------------------------
# Model construction and seeded weights.

def hf_config(cfg, max_depth):
    backbone = Dinov2Config(
        image_size=cfg["pos_grid"] * PATCH, patch_size=PATCH, num_channels=3, hidden_size=cfg["embed_dim"],
        num_hidden_layers=cfg["depth"], num_attention_heads=cfg["heads"], mlp_ratio=cfg["mlp_ratio"],
        hidden_act="gelu", layer_norm_eps=LN_EPS, qkv_bias=True, layerscale_value=1.0, use_swiglu_ffn=False,
        out_indices=[i + 1 for i in cfg["out_layers"]], apply_layernorm=True, reshape_hidden_states=False)
    return DepthAnythingConfig(
        backbone_config=backbone, patch_size=PATCH, reassemble_hidden_size=cfg["embed_dim"],
        reassemble_factors=[4, 2, 1, 0.5], neck_hidden_sizes=list(cfg["out_channels"]),
        fusion_hidden_size=cfg["features"], head_in_index=-1, head_hidden_size=32,
        depth_estimation_type="metric" if max_depth > 0 else "relative",
        max_depth=max_depth if max_depth > 0 else None)


def init_weights(model, seed):
    """Overwrites every parameter with seeded values scaled so activations stay O(1).

    Linear/conv weights N(0, 1/fan_in) (fan_in of one output; IC for the stride==kernel ConvTranspose2d), so that
    q.k logits are O(1) and attention is far from uniform; biases N(0, 0.05^2); LayerNorm weights U(0.9, 1.1),
    biases N(0, 0.05^2); LayerScale U(0.1, 1.0); cls token N(0, 1); position table = smooth per-channel
    sinusoids (amplitude 0.5) + N(0, 0.1^2) so its interpolation is meaningful; mask token zeros.
    """
    g = torch.Generator().manual_seed(seed)

    def randn(shape, std):
        return torch.randn(shape, generator=g) * std

    def rand(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=g)

    count = 0
    with torch.no_grad():
        for mname, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                full = f"{mname}.{pname}"
                if isinstance(mod, nn.LayerNorm):
                    v = rand(p.shape, 0.9, 1.1) if pname == "weight" else randn(p.shape, 0.05)
                elif isinstance(mod, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
                    if pname == "bias":
                        v = randn(p.shape, 0.05)
                    elif isinstance(mod, nn.ConvTranspose2d):
                        if mod.stride != mod.kernel_size:
                            raise ValueError(f"{full}: unexpected ConvTranspose2d geometry")
                        v = randn(p.shape, 1.0 / math.sqrt(p.shape[0]))
                    else:
                        v = randn(p.shape, 1.0 / math.sqrt(p[0].numel()))
                elif pname == "lambda1":
                    v = rand(p.shape, 0.1, 1.0)
                elif pname == "cls_token":
                    v = randn(p.shape, 1.0)
                elif pname == "mask_token":
                    v = torch.zeros(p.shape)
                elif pname == "position_embeddings":
                    n, dim = p.shape[1], p.shape[2]
                    m = int(math.isqrt(n - 1))
                    yy, xx = torch.meshgrid(torch.arange(m, dtype=torch.float64) / m,
                                            torch.arange(m, dtype=torch.float64) / m, indexing="ij")
                    fy = rand((dim,), 0.5, 3.0).double()
                    fx = rand((dim,), 0.5, 3.0).double()
                    ph = rand((dim,), 0.0, 2 * math.pi).double()
                    grid = 0.5 * torch.sin(2 * math.pi * (fy * yy[..., None] + fx * xx[..., None]) + ph)
                    v = torch.cat([randn((1, dim), 0.5), grid.reshape(m * m, dim).float()], dim=0)[None]
                    v = v + randn(p.shape, 0.1)
                else:
                    raise ValueError(f"no init rule for parameter {full} ({type(mod).__name__})")
                p.copy_(v.to(p.dtype))
                count += 1
    n_params = sum(1 for _ in model.parameters())
    if count != n_params:
        raise AssertionError(f"initialised {count} of {n_params} parameters")


LOGIT_POSITIVE_FRACTION = 0.65


def calibrate_logit_bias(model, x):
    """Sets head.conv3.bias so that LOGIT_POSITIVE_FRACTION of the logits on this input are positive.

    With random weights the logit's offset is arbitrary (seed 0 gave 9% positive on the tiny image), which would
    leave the relative depth mostly clipped to zero by the final ReLU. The shift is one scalar, computed from the
    oracle's own input before any reference tensor is recorded; the relative and metric runs of one
    config/seed/image therefore have identical weights.
    """
    logits = []
    handle = model.head.conv3.register_forward_hook(lambda _m, _i, out: logits.append(out.detach().clone()))
    with torch.no_grad():
        model(pixel_values=x)
        handle.remove()
        raw = logits[0] - model.head.conv3.bias.view(1, -1, 1, 1)
        shift = torch.quantile(raw.flatten().double(), 1.0 - LOGIT_POSITIVE_FRACTION).float()
        model.head.conv3.bias.copy_(-shift.view(1))
    return float(model.head.conv3.bias[0])


# ---------------------------------------------------------------------------------------------------------
# Preprocessing (upstream `image2tensor`), written out; checked bit-exact against the upstream image2tensor.

def da2_target_size(h, w, input_size):
    """Upstream Resize(keep_aspect_ratio, ensure_multiple_of=14, lower_bound).get_size -> (new_h, new_w)."""
    scale_h, scale_w = input_size / h, input_size / w
    if scale_w > scale_h:
        scale_h = scale_w
    else:
        scale_w = scale_h

    def constrain(x):
        y = int(np.round(x / PATCH) * PATCH)
        if y < input_size:
            y = int(np.ceil(x / PATCH) * PATCH)
        return y

    return constrain(scale_h * h), constrain(scale_w * w)


def preprocess(bgr, input_size):
    h, w = bgr.shape[:2]
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB) / 255.0  # float64
    nh, nw = da2_target_size(h, w, input_size)
    rgb = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_CUBIC)
    rgb = (rgb - np.array(MEAN)) / np.array(STD)
    chw = np.ascontiguousarray(np.transpose(rgb, (2, 0, 1))).astype(np.float32)
    return torch.from_numpy(chw)[None], (h, w)


# ---------------------------------------------------------------------------------------------------------
# Running the reference with hooks.

def capture_hf(model):
    rec = {}
    handles = []

    def put(name):
        def hook(_m, _i, out):
            rec[name] = out.detach().clone()
        return hook

    def put_feats(_m, _i, out):
        for k, t in enumerate(out.feature_maps):
            rec[f"feat.{k}"] = t[:, 1:].detach().clone()

    handles.append(model.backbone.embeddings.register_forward_hook(put("embed")))
    handles.append(model.backbone.register_forward_hook(put_feats))
    for k in range(4):
        handles.append(model.neck.reassemble_stage.layers[k].register_forward_hook(put(f"reassemble.{k}")))
        handles.append(model.neck.convs[k].register_forward_hook(put(f"rn.{k}")))
        # fusion_stage.layers[j] is the original refinenet(4-j): path_4 .. path_1
        handles.append(model.neck.fusion_stage.layers[k].register_forward_hook(put(f"fusion.{4 - k}")))
    handles.append(model.head.conv1.register_forward_hook(put("out1")))
    handles.append(model.head.conv3.register_forward_hook(put("logit")))
    return rec, handles


def resize_back(depth, hw):
    return F.interpolate(depth[:, None], hw, mode="bilinear", align_corners=True)[0, 0]


def run_hf(model, x, hw):
    rec, handles = capture_hf(model)
    with torch.no_grad():
        depth = model(pixel_values=x).predicted_depth
        rec["depth"] = depth.clone()
        rec["depth_orig"] = resize_back(depth, hw)
    for h in handles:
        h.remove()
    rec["input"] = x.clone()
    return rec


def run_upstream(net, x, hw):
    rec, handles = da2_upstream.capture(net)
    with torch.no_grad():
        depth = da2_upstream.forward(net, x)
        rec["depth"] = depth.clone()
        rec["depth_orig"] = da2_upstream.resize_back(depth, hw)
    for h in handles:
        h.remove()
    return rec


def max_rel_diff(a, b):
    """max|a-b| / max(1, max|b|)."""
    return float((a.double() - b.double()).abs().max() / max(1.0, float(b.double().abs().max())))


# ---------------------------------------------------------------------------------------------------------

def expected_shapes(cfg, H, W, h, w):
    ph, pw = H // PATCH, W // PATCH
    C, f, oc = cfg["embed_dim"], cfg["features"], cfg["out_channels"]
    s = {"input": (1, 3, H, W), "embed": (1, 1 + ph * pw, C)}
    for k in range(4):
        s[f"feat.{k}"] = (1, ph * pw, C)
    s["reassemble.0"] = (1, oc[0], 4 * ph, 4 * pw)
    s["reassemble.1"] = (1, oc[1], 2 * ph, 2 * pw)
    s["reassemble.2"] = (1, oc[2], ph, pw)
    s["reassemble.3"] = (1, oc[3], (ph + 1) // 2, (pw + 1) // 2)
    for k in range(4):
        s[f"rn.{k}"] = (1, f) + s[f"reassemble.{k}"][2:]
    s["fusion.4"] = (1, f, ph, pw)
    s["fusion.3"] = (1, f, 2 * ph, 2 * pw)
    s["fusion.2"] = (1, f, 4 * ph, 4 * pw)
    s["fusion.1"] = (1, f, 8 * ph, 8 * pw)
    s["out1"] = (1, f // 2, 8 * ph, 8 * pw)
    s["logit"] = (1, 1, H, W)
    s["depth"] = (1, H, W)
    s["depth_orig"] = (h, w)
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--metric", type=float, default=0.0, metavar="MAX_DEPTH",
                    help="metric head (sigmoid * MAX_DEPTH); default relative")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--image", help="image file read in place (default: synthetic image written as image.png)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input-size", type=int, help="override the config's DA2 input_size")
    ap.add_argument("--synth", metavar="WxH", help="size of the synthetic image (default: the config's)")
    ap.add_argument("--weights-from", metavar="DIR",
                    help="instead of writing model.pth and hf/model.safetensors, make them relative symlinks to "
                         "DIR's (checked to hold the same weights; weights depend only on --config and --seed)")
    ap.add_argument("--tensors", help="comma-separated subset of the reference tensors to write (default all)")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    torch.set_grad_enabled(False)
    cfg = dict(CONFIGS[args.config])
    if args.input_size:
        cfg["input_size"] = args.input_size
    if args.synth:
        try:
            sw, sh = (int(v) for v in args.synth.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--synth {args.synth}: want WxH")
        cfg["synth_size"] = (sw, sh)
    names = REF_ORDER
    if args.tensors:
        names = [n for n in REF_ORDER if n in args.tensors.split(",")]
        unknown = set(args.tensors.split(",")) - set(REF_ORDER)
        if unknown:
            raise SystemExit(f"--tensors: unknown names {sorted(unknown)}")
    max_depth = float(args.metric)
    os.makedirs(args.out, exist_ok=True)
    timings = {}

    # image
    if args.image:
        bgr = cv2.imread(args.image, cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f"cannot read image {args.image}")
        image_ref = args.image
    else:
        sw, sh = cfg["synth_size"]
        bgr = np.ascontiguousarray(common.synthetic_image(sw, sh)[..., ::-1])
        image_ref = "image.png"
        if not cv2.imwrite(os.path.join(args.out, "image.png"), bgr):
            raise SystemExit("cannot write image.png")
        if not np.array_equal(cv2.imread(os.path.join(args.out, "image.png"), cv2.IMREAD_COLOR), bgr):
            raise AssertionError("image.png does not round-trip")

    x, hw = preprocess(bgr, cfg["input_size"])
    x_up, hw_up = da2_upstream.image2tensor(bgr, cfg["input_size"])
    if hw != hw_up or x.shape != x_up.shape or not torch.equal(x, x_up):
        raise AssertionError("preprocess differs from upstream image2tensor")
    H, W = x.shape[2], x.shape[3]
    ph, pw = H // PATCH, W // PATCH

    # reference model
    t = time.perf_counter()
    use_da2_interpolation(True)
    model = DepthAnythingForDepthEstimation(hf_config(cfg, max_depth)).eval()
    init_weights(model, args.seed)
    # calibrate on the config's own synthetic image and input size, so the weights depend on (config, seed) only
    base = CONFIGS[args.config]
    calib_bgr = np.ascontiguousarray(common.synthetic_image(*base["synth_size"])[..., ::-1])
    calibrated_bias = calibrate_logit_bias(model, preprocess(calib_bgr, base["input_size"])[0])
    timings["build_s"] = time.perf_counter() - t

    t = time.perf_counter()
    ref = run_hf(model, x, hw)
    timings["forward_s"] = time.perf_counter() - t

    # how far transformers' own interpolation is from the original (reported, not used)
    use_da2_interpolation(False)
    unpatched = run_hf(model, x, hw)
    use_da2_interpolation(True)
    hf_unpatched = {k: float((unpatched[k] - ref[k]).abs().max()) for k in ("embed", "feat.3", "depth")}

    # original state dict
    orig_sd = da2_keys.hf_to_original(model.state_dict(), cfg["depth"])
    want = da2_keys.expected_original_shapes(cfg["embed_dim"], cfg["depth"], cfg["features"], cfg["out_channels"],
                                            cfg["pos_grid"], cfg["mlp_ratio"])
    if list(orig_sd.keys()) != list(want.keys()):
        raise AssertionError("original key list differs from the expected list")
    for k, shp in want.items():
        if tuple(orig_sd[k].shape) != shp:
            raise AssertionError(f"{k}: shape {tuple(orig_sd[k].shape)}, want {shp}")

    # cross-check with the original code
    upstream = {}
    t = time.perf_counter()
    net = da2_upstream.build(args.config, cfg["embed_dim"], cfg["depth"], cfg["heads"], cfg["out_layers"],
                             cfg["features"], cfg["out_channels"], cfg["pos_grid"] * PATCH, max_depth)
    net.load_state_dict(orig_sd, strict=True)
    up = run_upstream(net, x, hw)
    for name in REF_ORDER:
        if name == "input":
            continue
        if up[name].shape != ref[name].shape:
            raise AssertionError(f"upstream {name} shape {tuple(up[name].shape)} != {tuple(ref[name].shape)}")
        upstream[name] = max_rel_diff(ref[name], up[name])
    timings["upstream_s"] = time.perf_counter() - t
    worst = max(upstream.values())
    if worst > 1e-4:
        raise AssertionError(f"transformers vs original DA2 code: max rel diff {worst:.3g} "
                             f"({max(upstream, key=upstream.get)})")
    # model.pth is the upstream module's own state_dict(): same keys/order/values as orig_sd, plus the
    # `_metadata` attribute (per-module versions) that torch.save(model.state_dict()) always pickles.
    pth_sd = net.state_dict()
    if list(pth_sd.keys()) != list(orig_sd.keys()):
        raise AssertionError("upstream state_dict key order differs from da2_keys.original_key_order")
    for k, v in pth_sd.items():
        if not torch.equal(v, orig_sd[k]) or v.storage_offset() != 0 or not v.is_contiguous():
            raise AssertionError(f"upstream state_dict tensor {k} differs or is a view")
    del net

    # write files
    t = time.perf_counter()
    hf_dir = os.path.join(args.out, "hf")
    pth_path = os.path.join(args.out, "model.pth")
    st_path = os.path.join(hf_dir, "model.safetensors")
    for p in (pth_path, st_path):  # never write through a link left by an earlier --weights-from run
        if os.path.islink(p):
            os.unlink(p)
    if args.weights_from:
        os.makedirs(hf_dir, exist_ok=True)
        link_weights(args.weights_from, pth_path, st_path, orig_sd, model)
        model.config.architectures = [type(model).__name__]  # as model.save_pretrained would write
        model.config.dtype = "float32"
        model.config.save_pretrained(hf_dir)
    else:
        model.save_pretrained(hf_dir, safe_serialization=True)
        torch.save(pth_sd, pth_path)
    tensors = {name: ref[name] for name in names}
    # one metadata key only: safetensors writes several in random order, and the file should be reproducible
    common.save_ref(os.path.join(args.out, "ref.safetensors"), tensors, metadata={"format": "pt"})
    timings["write_s"] = time.perf_counter() - t

    depth = ref["depth"]
    depth_stats = common.tensor_stats(depth)
    depth_stats["positive_fraction"] = float((depth > 0).double().mean())
    logit_stats = common.tensor_stats(ref["logit"])
    logit_stats["positive_fraction"] = float((ref["logit"] > 0).double().mean())

    cmd = f"python3 tests/oracle/da2_oracle.py --config {args.config}"
    if max_depth > 0:
        cmd += f" --metric {args.metric:g}"
    if args.seed:
        cmd += f" --seed {args.seed}"
    if args.input_size:
        cmd += f" --input-size {args.input_size}"
    if args.synth:
        cmd += f" --synth {args.synth}"
    if args.weights_from:
        cmd += f" --weights-from {args.weights_from}"
    if args.tensors:
        cmd += f" --tensors {','.join(names)}"
    if args.image:
        cmd += f" --image {args.image}"
    cmd += f" --out {args.out}"

    meta = {
        "family": "depth-anything-v2",
        "config": args.config,
        "embed_dim": cfg["embed_dim"],
        "depth": cfg["depth"],
        "heads": cfg["heads"],
        "head_dim": cfg["embed_dim"] // cfg["heads"],
        "mlp_ratio": cfg["mlp_ratio"],
        "out_layers": cfg["out_layers"],
        "hf_out_indices": [i + 1 for i in cfg["out_layers"]],
        "features": cfg["features"],
        "out_channels": cfg["out_channels"],
        "patch_size": PATCH,
        "pos_grid": cfg["pos_grid"],
        "img_size": cfg["pos_grid"] * PATCH,
        "input_size": cfg["input_size"],
        "max_depth": max_depth,
        "activation": "sigmoid" if max_depth > 0 else "relu",
        "ln_eps": LN_EPS,
        "interpolate_offset": INTERPOLATE_OFFSET,
        "mean": list(MEAN),
        "std": list(STD),
        "processed_h": H,
        "processed_w": W,
        "patch_h": ph,
        "patch_w": pw,
        "orig_h": hw[0],
        "orig_w": hw[1],
        "seed": args.seed,
        "calibrated_logit_bias": calibrated_bias,
        "image": image_ref,
        "weights": {"original": "model.pth", "hf": "hf/model.safetensors",
                    "linked_from": os.path.relpath(args.weights_from, args.out) if args.weights_from else None},
        "tensors": {name: list(tensors[name].shape) for name in names},
        "state_dict_sha256": state_dict_sha256(orig_sd),
        "depth_stats": depth_stats,
        "logit_stats": logit_stats,
        "upstream_max_rel_diff": upstream or None,
        "hf_unpatched_interp_max_abs_diff": hf_unpatched,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "opencv": cv2.__version__},
        "command": cmd,
    }
    common.write_json(os.path.join(args.out, "meta.json"), meta)

    self_check(args, cfg, meta, ref, names, orig_sd, x, hw)
    timings["total_s"] = time.perf_counter() - t_start
    print(f"da2 oracle {args.config}{' metric %g' % max_depth if max_depth > 0 else ''}: "
          f"processed {H}x{W} (grid {ph}x{pw}) from {hw[0]}x{hw[1]}; "
          f"depth [{depth_stats['min']:.4g}, {depth_stats['max']:.4g}] positive {depth_stats['positive_fraction']:.2f}")
    if upstream:
        print(f"  vs original DA2 code: max rel diff {max(upstream.values()):.3g}")
    print("  transformers' own pos-embed interpolation would change: "
          + ", ".join(f"{k} {v:.3g}" for k, v in hf_unpatched.items()))
    print("  timings: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    own = sum(os.lstat(os.path.join(r, n)).st_size for r, _, fs in os.walk(args.out) for n in fs
              if not os.path.islink(os.path.join(r, n)))
    print(f"  wrote {args.out} ({own / 1024:.0f} KiB, symlinks not counted)")
    return 0


def link_weights(src_dir, pth_path, st_path, orig_sd, model):
    """Replaces pth_path and st_path with relative symlinks to src_dir's files after checking their contents."""
    from safetensors.torch import load_file

    src_pth = os.path.join(src_dir, "model.pth")
    src_st = os.path.join(src_dir, "hf", "model.safetensors")
    sd = torch.load(src_pth, map_location="cpu", weights_only=True)
    if state_dict_sha256(sd) != state_dict_sha256(orig_sd):
        raise SystemExit(f"{src_pth} holds other weights (different --config/--seed?)")
    st = load_file(src_st)
    mine = model.state_dict()
    if sorted(st) != sorted(mine) or any(not torch.equal(st[k], mine[k]) for k in st):
        raise SystemExit(f"{src_st} holds other weights")
    for src, dst in ((src_pth, pth_path), (src_st, st_path)):
        if os.path.lexists(dst):
            os.unlink(dst)
        os.symlink(os.path.relpath(os.path.abspath(src), os.path.dirname(os.path.abspath(dst))), dst)


def state_dict_sha256(sd):
    """SHA-256 over the original state dict: for each key in order, the key in UTF-8, a NUL byte, then the
    tensor's float32 little-endian C-order bytes. Equal hashes in two meta.json files mean identical weights."""
    h = hashlib.sha256()
    for k, v in sd.items():
        h.update(k.encode() + b"\0")
        h.update(v.detach().cpu().float().contiguous().numpy().astype("<f4").tobytes())
    return h.hexdigest()


def self_check(args, cfg, meta, ref, names, orig_sd, x, hw):
    """Pytest-free checks on what was written: shapes, finiteness, healthy output, files reload identically."""
    from safetensors.torch import load_file

    H, W = x.shape[2], x.shape[3]
    want = expected_shapes(cfg, H, W, hw[0], hw[1])
    loaded = load_file(os.path.join(args.out, "ref.safetensors"))
    assert sorted(loaded) == sorted(names), sorted(loaded)
    for name in names:
        t, shp = loaded[name], want[name]
        assert tuple(t.shape) == shp, f"{name}: {tuple(t.shape)} != {shp}"
        assert t.dtype == torch.float32, name
        assert torch.isfinite(t).all(), f"{name}: non-finite values"
        assert torch.equal(t, ref[name].float()), f"{name}: file differs from memory"
    assert H % PATCH == 0 and W % PATCH == 0 and min(H, W) >= cfg["input_size"]
    if args.config == "tiny" and not args.image and not args.synth:
        assert (H // PATCH, W // PATCH) != (cfg["pos_grid"], cfg["pos_grid"]) and H != W, \
            "tiny must exercise the pos-embed interpolation on a non-square grid"

    depth, logit = ref["depth"], ref["logit"]
    if meta["max_depth"] > 0:
        assert torch.allclose(depth, torch.sigmoid(logit[:, 0]) * meta["max_depth"], rtol=1e-6, atol=1e-6)
        assert depth.min() > 0 and depth.max() < meta["max_depth"]
    else:
        assert torch.equal(depth, torch.relu(logit[:, 0]))
    pos = meta["logit_stats"]["positive_fraction"]
    assert 0.2 <= pos <= 0.95, f"logit positive fraction {pos:.3f} is not healthy"
    assert float(depth.std()) > 1e-3 * max(1.0, float(depth.abs().max())), "depth is nearly constant"
    assert torch.allclose(ref["depth_orig"], resize_back(depth, hw), atol=1e-6)
    for k in range(4):  # LayerNorm outputs: per-token channel mean = mean(norm bias), std ~ norm weight
        f = ref[f"feat.{k}"]
        assert float(f.mean(-1).abs().max()) < 0.2 and 0.8 < float(f.std(-1).mean()) < 1.2, f"feat.{k} not normalised"
    # the 0.1-offset interpolation must differ from transformers' size= interpolation, except on the shortcut
    if (H // PATCH, W // PATCH) != (cfg["pos_grid"], cfg["pos_grid"]) or H != W:
        assert meta["hf_unpatched_interp_max_abs_diff"]["embed"] > 1e-4
    else:
        assert meta["hf_unpatched_interp_max_abs_diff"]["embed"] == 0.0

    sd = torch.load(os.path.join(args.out, "model.pth"), map_location="cpu", weights_only=True)
    assert list(sd.keys()) == list(orig_sd.keys())
    for k, v in sd.items():
        assert v.dtype == torch.float32 and torch.equal(v, orig_sd[k]), k
        assert v.storage_offset() == 0 and v.is_contiguous(), k
    assert torch.count_nonzero(sd["pretrained.mask_token"]) == 0
    # hf/ (this run's config.json, possibly linked weights) reproduces the depth, metric head included
    re = DepthAnythingForDepthEstimation.from_pretrained(os.path.join(args.out, "hf")).eval()
    assert re.config.depth_estimation_type == ("metric" if meta["max_depth"] > 0 else "relative")
    with torch.no_grad():
        d2 = re(pixel_values=x).predicted_depth
    assert torch.equal(d2, ref["depth"]), "hf/ reload gives a different depth"

if __name__ == "__main__":
    sys.exit(main())
