"""Shared helpers for the Depth Anything 3 oracle (see tests/oracle/FORMATS.md, DA3 section).

The reference is the official `depth-anything-3==0.1.1` PyTorch code, called directly in float32.
The package is installed with --no-deps, so a few of its imports are satisfied here:

* `torchvision` (only `transforms.ToTensor/Normalize/CenterCrop`, used by `InputProcessor`): when it
  is not installed, a shim with line-by-line copies of the torchvision 0.24 code paths is registered.
* `depth_anything_3.utils.export` (pycolmap, trimesh, moviepy, gsplat ...) and
  `depth_anything_3.utils.pose_align` (evo) are imported by `api.py` but only used by
  `DepthAnything3.inference()`; they are replaced by dummy modules whose functions raise.

Everything else (DepthAnything3 + PyTorchModelHubMixin, the yaml configs, DinoV2, DualDPT, CameraDec,
InputProcessor, reference-view selection) is the package's own code.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import types
import warnings
from pathlib import Path

os.environ.setdefault("DA3_LOG_LEVEL", "WARN")  # the package logs INFO lines on every forward
warnings.filterwarnings("ignore", message="register_new_resolver")  # omegaconf deprecation in cfg.py

import numpy as np
import torch
import torch.nn as nn

# ----------------------------------------------------------------------------------------------
# Import shims
# ----------------------------------------------------------------------------------------------

STUBBED_MODULES: list[str] = []


def _raise_stub(name):
    def f(*args, **kwargs):
        raise RuntimeError(f"{name} is stubbed out by tests/oracle/da3_common.py")

    return f


def _install_torchvision_shim() -> None:
    """Registers `torchvision.transforms` with exact copies of the three transforms DA3 uses."""

    class ToTensor:  # torchvision.transforms.functional.to_tensor, PIL path
        def __call__(self, pic):
            nptype = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
            img = torch.from_numpy(np.array(pic, nptype, copy=True))
            if pic.mode == "1":
                img = 255 * img
            img = img.view(pic.size[1], pic.size[0], len(pic.getbands()))
            img = img.permute((2, 0, 1)).contiguous()
            if isinstance(img, torch.ByteTensor):
                return img.to(dtype=torch.get_default_dtype()).div(255)
            return img

    class Normalize:  # torchvision.transforms._functional_tensor.normalize, inplace=False
        def __init__(self, mean, std, inplace=False):
            self.mean, self.std, self.inplace = mean, std, inplace

        def __call__(self, tensor):
            if not self.inplace:
                tensor = tensor.clone()
            mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
            std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
            if mean.ndim == 1:
                mean = mean.view(-1, 1, 1)
            if std.ndim == 1:
                std = std.view(-1, 1, 1)
            return tensor.sub_(mean).div_(std)

    class CenterCrop:  # torchvision.transforms.functional.center_crop, tensor path, no padding
        def __init__(self, size):
            self.size = (size, size) if isinstance(size, int) else tuple(size)

        def __call__(self, img):
            h, w = img.shape[-2:]
            ch, cw = self.size
            if ch > h or cw > w:
                raise ValueError("torchvision shim: padding center crop not implemented")
            top = int(round((h - ch) / 2.0))
            left = int(round((w - cw) / 2.0))
            return img[..., top : top + ch, left : left + cw]

    tv = types.ModuleType("torchvision")
    tr = types.ModuleType("torchvision.transforms")
    tr.ToTensor, tr.Normalize, tr.CenterCrop = ToTensor, Normalize, CenterCrop
    tv.transforms = tr
    tv.__da3_oracle_shim__ = True
    sys.modules["torchvision"] = tv
    sys.modules["torchvision.transforms"] = tr
    STUBBED_MODULES.append("torchvision.transforms (exact shim of ToTensor/Normalize/CenterCrop)")


def setup_imports() -> None:
    """Makes `import depth_anything_3.api` work with the --no-deps install. Idempotent."""
    if getattr(setup_imports, "done", False):
        return
    try:
        import torchvision.transforms  # noqa: F401
    except ImportError:
        _install_torchvision_shim()

    export = types.ModuleType("depth_anything_3.utils.export")
    export.export = _raise_stub("depth_anything_3.utils.export.export")
    sys.modules["depth_anything_3.utils.export"] = export
    STUBBED_MODULES.append("depth_anything_3.utils.export (pycolmap/trimesh/moviepy/gsplat)")

    pose_align = types.ModuleType("depth_anything_3.utils.pose_align")
    pose_align.align_poses_umeyama = _raise_stub("align_poses_umeyama")
    # imported by model/gs_adapter.py (DA3-GIANT's Gaussian head); used only with infer_gs and GT poses
    pose_align.batch_align_poses_umeyama = _raise_stub("batch_align_poses_umeyama")
    sys.modules["depth_anything_3.utils.pose_align"] = pose_align
    STUBBED_MODULES.append("depth_anything_3.utils.pose_align (evo)")
    setup_imports.done = True


def package_dir() -> Path:
    import depth_anything_3.model  # regular package; its parent is the namespace dir

    return Path(depth_anything_3.model.__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------
# Tiny configuration
# ----------------------------------------------------------------------------------------------

# Hyper-parameters of the committed tiny fixture. Written verbatim into config.json under "arch".
TINY_ARCH = {
    "backbone": {
        "embed_dim": 32,
        "depth": 8,
        "num_heads": 2,
        "mlp_ratio": 4,
        "ffn_layer": "mlp",
        "patch_size": 14,
        "img_size": 98,  # pos_embed grid 7x7 (50 rows)
        "out_layers": [1, 3, 5, 7],
        "alt_start": 2,
        "qknorm_start": 2,
        "rope_start": 2,
        "rope_freq": 100,
        "cat_token": True,
        "interpolate_offset": 0.1,
        "interpolate_antialias": False,
        "init_values": 1.0,
    },
    "head": {
        "dim_in": 64,
        "output_dim": 2,
        "features": 8,
        "out_channels": [8, 16, 24, 32],
    },
    "cam_dec": {"dim_in": 64},
    "cam_enc": {"dim_out": 32, "trunk_depth": 1, "num_heads": 2},
}


class TinyDinoV2(nn.Module):
    """Same as depth_anything_3.model.dinov2.dinov2.DinoV2 (attributes, `pretrained` child, forward)
    but with the DinoVisionTransformer hyper-parameters given explicitly instead of by name."""

    def __init__(
        self,
        embed_dim,
        depth,
        num_heads,
        mlp_ratio,
        ffn_layer,
        patch_size,
        img_size,
        out_layers,
        alt_start,
        qknorm_start,
        rope_start,
        rope_freq,
        cat_token,
        interpolate_offset,
        interpolate_antialias,
        init_values,
    ):
        super().__init__()
        from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer

        self.name = "tiny"
        self.out_layers = list(out_layers)
        self.alt_start = alt_start
        self.qknorm_start = qknorm_start
        self.rope_start = rope_start
        self.cat_token = cat_token
        self.pretrained = DinoVisionTransformer(
            img_size=img_size,
            patch_size=patch_size,
            embed_dim=embed_dim,
            depth=depth,
            num_heads=num_heads,
            mlp_ratio=mlp_ratio,
            ffn_layer=ffn_layer,
            alt_start=alt_start,
            qknorm_start=qknorm_start,
            rope_start=rope_start,
            rope_freq=rope_freq,
            cat_token=cat_token,
            interpolate_offset=interpolate_offset,
            interpolate_antialias=interpolate_antialias,
            init_values=init_values,
        )

    def forward(self, x, **kwargs):
        return self.pretrained.get_intermediate_layers(x, self.out_layers, **kwargs)


def tiny_yaml_dict(arch: dict) -> dict:
    """The da3-*.yaml schema for the tiny model (backbone class = TinyDinoV2)."""
    obj = lambda path, name: {"path": path, "name": name, "args": "as_params"}  # noqa: E731
    return {
        "__object__": obj("depth_anything_3.model.da3", "DepthAnything3Net"),
        "net": {"__object__": obj("da3_common", "TinyDinoV2"), **arch["backbone"]},
        "head": {"__object__": obj("depth_anything_3.model.dualdpt", "DualDPT"), **arch["head"]},
        "cam_enc": {"__object__": obj("depth_anything_3.model.cam_enc", "CameraEnc"), **arch["cam_enc"]},
        "cam_dec": {"__object__": obj("depth_anything_3.model.cam_dec", "CameraDec"), **arch["cam_dec"]},
    }


def register_model(name: str, yaml: dict) -> str:
    """Writes a network yaml (the package's configs/*.yaml schema) to a temp dir and registers it in the
    package's MODEL_REGISTRY as `name`, once; the backbone class `da3_common.TinyDinoV2` is importable."""
    from omegaconf import OmegaConf

    setup_imports()
    from depth_anything_3.registry import MODEL_REGISTRY

    if name not in MODEL_REGISTRY:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `da3_common.TinyDinoV2`
        d = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        path = d / f"{name}.yaml"
        OmegaConf.save(OmegaConf.create(yaml), path)
        MODEL_REGISTRY[name] = str(path)
    return MODEL_REGISTRY[name]


def new_wrapper(name: str, arch: dict | None = None):
    """The official `DepthAnything3` wrapper for a registered model name; `arch` (test configurations)
    lands in config.json via PyTorchModelHubMixin (DepthAnything3 ignores extra kwargs)."""
    setup_imports()
    from depth_anything_3.api import DepthAnything3

    if arch is None:
        return DepthAnything3(model_name=name)
    return DepthAnything3(model_name=name, arch=arch)


def register_tiny() -> str:
    """Registers the tiny yaml as model name 'da3-tiny'."""
    return register_model("da3-tiny", tiny_yaml_dict(TINY_ARCH))


MODEL_NAMES = {"tiny": "da3-tiny", "small": "da3-small", "base": "da3-base"}


def build_wrapper(config: str):
    """Returns the official `DepthAnything3` wrapper (nn.Module + PyTorchModelHubMixin), random weights
    not yet initialised. The network itself is `wrapper.model` (DepthAnything3Net)."""
    if config == "tiny":
        register_tiny()
        return new_wrapper(MODEL_NAMES[config], TINY_ARCH)
    return new_wrapper(MODEL_NAMES[config])


# ----------------------------------------------------------------------------------------------
# Seeded random weights
# ----------------------------------------------------------------------------------------------


@torch.no_grad()
def init_random_weights(net: nn.Module, seed: int) -> None:
    """Deterministic random weights that keep activations O(1) (see FORMATS.md for the recipe)."""
    from depth_anything_3.model.cam_dec import CameraDec
    from depth_anything_3.model.dinov2.layers.layer_scale import LayerScale

    g = torch.Generator().manual_seed(seed)

    def normal_(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=g) * std + mean)

    def uniform_(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=g) * (hi - lo) + lo)

    cam_dec_heads = set()
    for m in net.modules():
        if isinstance(m, CameraDec):
            cam_dec_heads.update({id(m.fc_t), id(m.fc_qvec), id(m.fc_fov[0])})

    seen = set()
    for name, m in net.named_modules():  # named_modules order is deterministic
        if id(m) in seen:
            continue
        seen.add(id(m))
        if isinstance(m, nn.Linear):
            gain = 0.1 if id(m) in cam_dec_heads else 1.0
            normal_(m.weight, gain / math.sqrt(m.in_features))
            if m.bias is not None:
                normal_(m.bias, 0.05)
        elif isinstance(m, nn.Conv2d):
            fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
            normal_(m.weight, 1.0 / math.sqrt(fan_in))
            if m.bias is not None:
                normal_(m.bias, 0.05)
        elif isinstance(m, nn.ConvTranspose2d):
            # every output pixel of a kernel==stride transposed conv sees in_channels inputs
            normal_(m.weight, 1.0 / math.sqrt(m.in_channels))
            if m.bias is not None:
                normal_(m.bias, 0.05)
        elif isinstance(m, nn.LayerNorm):
            normal_(m.weight, 0.1, 1.0)
            normal_(m.bias, 0.1)
        elif isinstance(m, LayerScale):
            uniform_(m.gamma, 0.1, 1.0)

    vit = net.backbone.pretrained
    normal_(vit.cls_token, 0.1)
    normal_(vit.pos_embed, 0.1)
    if hasattr(vit, "camera_token"):
        normal_(vit.camera_token, 0.1)

    # Camera decoder: quaternion near identity (xyzw), fov near 1 rad so ReLU(fov) > 0.
    if net.cam_dec is not None:
        normal_(net.cam_dec.fc_qvec.bias, 0.1)
        net.cam_dec.fc_qvec.bias[3] += 1.0
        normal_(net.cam_dec.fc_fov[0].bias, 0.1, 1.0)
        normal_(net.cam_dec.fc_t.bias, 0.1)

    calibrate_output_convs(net, g)


@torch.no_grad()
def calibrate_output_convs(net: nn.Module, g: torch.Generator, target_std: float = 0.5) -> None:
    """Rescales the final 1x1 convs of the depth and ray outputs so that every logit channel has
    mean ≈ 0 and std ≈ target_std on a fixed noise image (depth = exp(logit) stays in a sane range).

    Per output channel o: W_o ← W_o · target_std / std(W_o·x), b_o ← −mean(W_o·x) + N(0, 0.05²), with x the
    conv's input recorded on a (1, 1, 3, 112, 140) N(0, 1) image."""
    sc = net.head.scratch
    convs = [sc.output_conv2[-1], sc.output_conv2_aux[-1][-1]]
    inputs = {}
    handles = [
        c.register_forward_pre_hook(lambda m, a, i=i: inputs.__setitem__(i, a[0].clone()))
        for i, c in enumerate(convs)
    ]
    x = torch.randn((1, 1, 3, 112, 140), generator=g)
    net(x)
    for h in handles:
        h.remove()
    for i, conv in enumerate(convs):
        feat = inputs[i].permute(1, 0, 2, 3).reshape(inputs[i].shape[1], -1)  # (Cin, pixels)
        w = conv.weight[:, :, 0, 0]
        z = w @ feat  # (Cout, pixels)
        scale = target_std / z.std(dim=1).clamp_min(1e-6)
        conv.weight.mul_(scale[:, None, None, None])
        conv.bias.copy_(-(z.mean(dim=1) * scale) + torch.randn(conv.bias.shape, generator=g) * 0.05)


def canonicalize_safetensors_header(path: Path) -> None:
    """Sorts the `__metadata__` map of a safetensors header in place.

    safetensors' Rust writer emits the metadata map (here: aliases of tied tensors written by
    `save_model`) in random HashMap order; sorting makes regenerated files byte-identical. Same
    length, same tensors, same offsets."""
    raw = bytearray(Path(path).read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"), object_pairs_hook=dict)
    if "__metadata__" not in header:
        return
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    rest = {k: v for k, v in header.items() if k != "__metadata__"}
    text = json.dumps({"__metadata__": header["__metadata__"], **rest}, separators=(",", ":")).encode()
    if len(text) > n:
        raise RuntimeError(f"{path}: canonical header longer than the original")
    raw[8 : 8 + n] = text + b" " * (n - len(text))
    Path(path).write_bytes(bytes(raw))


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
