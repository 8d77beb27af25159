"""Access to the ORIGINAL Depth Anything V2 model code (the `depth_anything_v2` package of
jkp-depth-anything-v2 0.1.1, a packaging of github.com/DepthAnything/Depth-Anything-V2 `depth_anything_v2/`).

Used only to cross-check the transformers reference: the converted original state dict must load strictly and
give the same intermediates. The upstream `dpt.py` imports `torchvision.transforms.Compose` for its
preprocessing; torchvision is not installed here, so a 6-line Compose stand-in is placed in sys.modules for the
duration of the import and removed afterwards (transformers probes torchvision with importlib and must not see
the stand-in).
"""

import sys
import types
from functools import partial

import torch.nn as nn
import torch.nn.functional as F


def _import():
    stub_installed = False
    try:
        import torchvision.transforms  # noqa: F401
    except ImportError:
        tv = types.ModuleType("torchvision")
        tr = types.ModuleType("torchvision.transforms")

        class Compose:
            def __init__(self, transforms):
                self.transforms = transforms

            def __call__(self, x):
                for t in self.transforms:
                    x = t(x)
                return x

        tr.Compose = Compose
        tv.transforms = tr
        sys.modules["torchvision"] = tv
        sys.modules["torchvision.transforms"] = tr
        stub_installed = True
    try:
        import depth_anything_v2.dpt as dpt
        import depth_anything_v2.dinov2 as dinov2
        import depth_anything_v2.dinov2_layers as layers
    finally:
        if stub_installed:
            del sys.modules["torchvision.transforms"]
            del sys.modules["torchvision"]
    return dpt, dinov2, layers


_dpt, _dinov2, _layers = _import()


def build(name, embed_dim, depth, heads, out_layers, features, out_channels, img_size, max_depth):
    """Builds the original DepthAnythingV2 network.

    vits/vitb/vitl use the upstream constructor unchanged; any other name gets a DinoVisionTransformer with the
    same arguments upstream's DINOv2() passes (init_values 1.0, mlp FFN, no chunks, no registers,
    interpolate_antialias False, interpolate_offset 0.1) at the given size. max_depth > 0 turns the head into the
    metric_depth/ variant (output_conv2[3] = Sigmoid, output multiplied by max_depth, no final F.relu).
    """
    if name in ("vits", "vitb", "vitl"):
        net = _dpt.DepthAnythingV2(encoder=name, features=features, out_channels=list(out_channels))
    else:
        net = _dpt.DepthAnythingV2(encoder="vits", features=features, out_channels=list(out_channels))
        net.pretrained = _dinov2.DinoVisionTransformer(
            img_size=img_size, patch_size=14, embed_dim=embed_dim, depth=depth, num_heads=heads, mlp_ratio=4,
            block_fn=partial(_layers.NestedTensorBlock, attn_class=_layers.MemEffAttention),
            init_values=1.0, ffn_layer="mlp", block_chunks=0, num_register_tokens=0,
            interpolate_antialias=False, interpolate_offset=0.1)
        net.depth_head = _dpt.DPTHead(embed_dim, features, False, out_channels=list(out_channels))
        net.encoder = name
        net.intermediate_layer_idx = dict(net.intermediate_layer_idx)
        net.intermediate_layer_idx[name] = list(out_layers)
    if net.intermediate_layer_idx[net.encoder] != list(out_layers):
        raise ValueError(f"{name}: upstream out layers {net.intermediate_layer_idx[net.encoder]} != {out_layers}")
    net.max_depth = float(max_depth)
    if max_depth > 0:
        net.depth_head.scratch.output_conv2[3] = nn.Sigmoid()
    return net.eval()


def forward(net, x):
    """Upstream forward: DepthAnythingV2.forward (relative) or metric_depth's forward (metric)."""
    if net.max_depth <= 0:
        return net(x)
    patch_h, patch_w = x.shape[-2] // 14, x.shape[-1] // 14
    feats = net.pretrained.get_intermediate_layers(x, net.intermediate_layer_idx[net.encoder], return_class_token=True)
    depth = net.depth_head(feats, patch_h, patch_w) * net.max_depth
    return depth.squeeze(1)


def image2tensor(bgr, input_size):
    """Upstream DepthAnythingV2.image2tensor (CPU): returns ((1,3,H,W) tensor, (h, w))."""
    image, hw = _dpt.DepthAnythingV2.image2tensor(None, bgr, input_size)
    return image.cpu(), hw


def resize_back(depth, hw):
    """Upstream infer_image's final step: bilinear align_corners=True resize of (1,H,W) to (h,w)."""
    return F.interpolate(depth[:, None], hw, mode="bilinear", align_corners=True)[0, 0]


def capture(net):
    """Registers hooks that record the upstream intermediates under the oracle's names. Returns (dict, handles)."""
    rec = {}
    handles = []

    def put(name):
        def hook(_m, _i, out):
            rec[name] = out.detach().clone()
        return hook

    def put_tokens(_m, _i, out):
        rec["embed"] = out.detach().clone()

    # prepare_tokens_with_masks is a method, not a module: wrap it.
    orig_prepare = net.pretrained.prepare_tokens_with_masks

    def prepare(x, masks=None):
        out = orig_prepare(x, masks)
        put_tokens(None, None, out)
        return out

    net.pretrained.prepare_tokens_with_masks = prepare
    orig_gil = net.pretrained.get_intermediate_layers

    def gil(*args, **kwargs):
        out = orig_gil(*args, **kwargs)
        for k, (tokens, _cls) in enumerate(out):
            rec[f"feat.{k}"] = tokens.detach().clone()
        return out

    net.pretrained.get_intermediate_layers = gil
    head = net.depth_head
    for k in range(4):
        handles.append(head.resize_layers[k].register_forward_hook(put(f"reassemble.{k}")))
        handles.append(getattr(head.scratch, f"layer{k + 1}_rn").register_forward_hook(put(f"rn.{k}")))
        handles.append(getattr(head.scratch, f"refinenet{k + 1}").register_forward_hook(put(f"fusion.{k + 1}")))
    handles.append(head.scratch.output_conv1.register_forward_hook(put("out1")))
    # output_conv2[3] is ReLU(inplace=True) in the relative head: clone at conv time.
    handles.append(head.scratch.output_conv2[2].register_forward_hook(put("logit")))
    return rec, handles
